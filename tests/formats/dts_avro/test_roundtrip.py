"""Round-trip tests of the ``dts-avro`` encoder (:mod:`cdclake.formats.dts_avro.encoder`).

* Wire output for hand-made canonical events, pinned against literal ``Record`` s. Seed
  ``001_a1c6319148bc2083.txt`` has no DTS Avro example (it points to the schema and says DDL is a
  STRING); the records are shaped by that schema (``avsc/``, Alibaba's subscribe demo) and by the
  conventions the decoder documents from Alibaba's SDK.
* decode(encode(events)) == carried(events) over simulator workloads, and scrambled ingests
  through the real pipeline compared with the oracle (:mod:`tests.roundtrip`).
"""

from __future__ import annotations

from delta.tables import DeltaTable

from cdclake.formats.dts_avro import DtsAvroEncoder
from cdclake.formats.dts_avro.encoder import read_container, read_datum
from cdclake.simulate import Workload
from tests.roundtrip import (
    INGEST_CASES, check_round_trips, decode_property, decode_round_trip, decode_round_trips, ingest_case, ingest_scrambled,
)

FMT = "dts-avro"
NS = "com.alibaba.dts.formats.avro."


def col(name, source_type, spark_type, nullable=True):
    """A canonical column (COLUMN_SCHEMA dict)."""
    dec = spark_type.startswith("decimal(")
    p, sc = (int(x) for x in spark_type[8:-1].split(",")) if dec else (None, None)
    return {"name": name, "source_type": source_type, "spark_type": spark_type, "precision": p, "scale": sc, "nullable": nullable}


COLS = [
    col("id", "int", "int", False),
    col("name", "varchar(32)", "string"),
    col("amount", "decimal(10,2)", "decimal(10,2)"),
    col("vip", "boolean", "boolean"),
    col("born", "date", "date"),
    col("at", "datetime(6)", "timestamp"),
    col("memo", "text", "string"),
    col("raw", "varbinary(8)", "binary"),
]
ROW = {"id": "7", "name": "Zoë ☕", "amount": "12.50", "vip": "true", "born": "1969-12-31",
       "at": "1969-12-31 23:59:59.999999", "memo": "line\nbreak", "raw": "AP8="}  # fmt: skip
T = 1700000000123  # ms; DTS keeps seconds


def event(kind="data", op=None, *, before=None, after=None, present=None, columns=COLS, pk=("id",), ddl=None, table="orders",
          schema=None, tx=None):
    """A canonical event (EVENT_SCHEMA fields as a dict) of MySQL table ``shop.orders``."""
    return {
        "format": "simulated", "kind": kind, "op": op, "database": None if kind == "heartbeat" else "shop", "schema": schema,
        "table": None if kind == "heartbeat" else table, "before": before, "after": after, "present": present,
        "primary_key": list(pk) if pk else None, "columns": columns, "position": None,
        "tx_id": tx[0] if tx else None, "tx_seq": tx[1] if tx else None, "tx_last": tx[1] == tx[2] if tx else None,
        "tx_size": tx[2] if tx else None, "ddl": ddl, "event_time_ms": T, "source_record": None,
    }  # fmt: skip


def Int(v, precision=4):
    return (NS + "Integer", {"precision": precision, "value": v})


def Chars(v, charset="utf8mb4"):
    return (NS + "Character", {"charset": charset, "value": v})


def Dt(*parts):
    names = ("year", "month", "day", "hour", "minute", "second", "millis")
    return (NS + "DateTime", {n: (parts[i] if i < len(parts) else None) for i, n in enumerate(names)})


FIELDS = [{"name": "id", "dataTypeNumber": 3}, {"name": "name", "dataTypeNumber": 15}, {"name": "amount", "dataTypeNumber": 246},
          {"name": "vip", "dataTypeNumber": 1}, {"name": "born", "dataTypeNumber": 10}, {"name": "at", "dataTypeNumber": 18},
          {"name": "memo", "dataTypeNumber": 252}, {"name": "raw", "dataTypeNumber": 15}]  # fmt: skip
VALUES = [Int("7"), Chars("Zoë ☕".encode()), (NS + "Decimal", {"value": "12.50", "precision": 10, "scale": 2}), Int("1", 1),
          Dt(1969, 12, 31), Dt(1969, 12, 31, 23, 59, 59, 999999), Chars(b"line\nbreak"), Chars(b"\x00\xff", "binary")]  # fmt: skip


def record(rid, op, *, before=None, after=None, fields=FIELDS, obj="shop.orders", tags=None, txid="tx-1"):
    """A Record as fastavro reads it back (union branches named)."""
    return {
        "version": 1, "id": rid, "sourceTimestamp": 1700000000, "sourcePosition": f"{rid * 100}@1",
        "safeSourcePosition": f"{rid * 100}@1", "sourceTxid": txid, "source": {"sourceType": "MySQL", "version": "8.0.32"},
        "operation": op, "objectName": obj, "processTimestamps": None,
        "tags": {"pk_uk_info": '{"PRIMARY":["id"]}'} if tags is None else tags,
        "fields": fields, "beforeImages": before, "afterImages": after, "bornTimestamp": T,
    }  # fmt: skip


# --- wire output, no Spark -------------------------------------------------------------------


def test_insert_update_delete_records():
    # The Record schema of seed 001's "DTS Avro" (avsc/): fields {name, dataTypeNumber} with MySQL
    # type codes, one union VALUE per field; objectName "db.table"; the key in tags.pk_uk_info.
    new = {**ROW, "amount": None, "vip": "false"}
    events = [
        event(op="c", after=ROW, tx=("tx-1", 1, 3)),
        event(op="u", before=ROW, after=new, tx=("tx-1", 2, 3)),
        event(op="d", before=new, tx=("tx-1", 3, 3)),
    ]
    enc = DtsAvroEncoder()
    out = enc.encode(events)
    assert [k for k, _v in out.records] == [None, None, None]
    new_values = [*VALUES[:2], None, Int("0", 1), *VALUES[4:]]
    assert [read_datum(v) for _k, v in out.records] == [
        record(1, "INSERT", after=VALUES),
        record(2, "UPDATE", before=VALUES, after=new_values),
        record(3, "DELETE", before=new_values),
    ]
    c = enc.carried(events[2])
    # the delete's amount is NULL: a DECIMAL without a value states no type (precision and scale
    # come with a value)
    assert [(x["name"], x["source_type"], x["spark_type"]) for x in c["columns"]] == [
        ("id", "MYSQL_TYPE_INT32", "bigint"), ("name", "MYSQL_TYPE_VARCHAR", "string"),
        ("amount", "MYSQL_TYPE_DECIMAL_NEW", None), ("vip", "MYSQL_TYPE_INT8", "bigint"),
        ("born", "MYSQL_TYPE_DATE", "date"), ("at", "MYSQL_TYPE_DATETIME_NEW", "timestamp"),
        ("memo", "MYSQL_TYPE_BLOB", "string"), ("raw", "MYSQL_TYPE_VARCHAR", "binary"),
    ]  # fmt: skip
    assert c["before"] == {**new, "vip": "0"}
    assert (c["op"], c["after"], c["present"], c["primary_key"], c["tx_id"], c["tx_seq"], c["event_time_ms"]) == (
        "d", None, None, ["id"], "tx-1", None, 1700000000000,
    )
    assert enc.carried(events[0])["columns"][2]["spark_type"] == "decimal(10,2)"
    assert out.dropped == {
        "transaction event numbers and sizes (tx_seq, tx_last, tx_size)": 3,
        "event time below the second (sourceTimestamp is in seconds)": 3,
        "column types: int read back as bigint": 3,
        "column types: boolean read back as bigint": 3,
        "column types: decimal(10,2) not stated by a NULL value": 1,
    }


def test_snapshot_row_partial_image_and_keyless_table():
    cols = COLS[:3]
    snap = event(op="r", after={"id": "1", "name": None, "amount": "0.01"}, columns=cols, pk=None)
    part = event(op="u", before={"id": "1", "amount": "0.01"}, after={"id": "1", "amount": "0.02"}, present=["id", "amount"],
                 columns=cols)  # fmt: skip
    enc = DtsAvroEncoder()
    out = enc.encode([snap, part])
    dec = lambda v: (NS + "Decimal", {"value": v, "precision": 10, "scale": 2})  # noqa: E731
    assert [read_datum(v) for _k, v in out.records] == [
        record(1, "INIT", after=[Int("1"), None, dec("0.01")], fields=FIELDS[:3], tags={}, txid=""),
        # a column the image leaves out is EmptyObject NONE
        record(2, "UPDATE", before=[Int("1"), "NONE", dec("0.01")], after=[Int("1"), "NONE", dec("0.02")], fields=FIELDS[:3], txid=""),
    ]
    c = enc.carried(part)
    assert (c["before"], c["after"], c["present"]) == ({"id": "1", "amount": "0.01"}, {"id": "1", "amount": "0.02"}, ["id", "amount"])
    assert c["columns"][1]["spark_type"] is None  # VARCHAR code without a value: text or bytes?
    assert enc.carried(snap)["primary_key"] is None


def test_ddl_truncate_heartbeat_records():
    # seed 001: "DTS Avro 形式では、DDL 文は STRING 型です" -- the DDL text is the string branch
    ddl = event("ddl", ddl="ALTER TABLE `shop`.`orders` ADD COLUMN `extra_1` INT NULL")
    trunc = event(op="t", tx=("tx-9", 1, 1))
    beat = event("heartbeat", columns=None, pk=None)
    lvl = event(op="c", after={"id": "1"}, columns=[COLS[0]], table="a.b", schema="s")
    enc = DtsAvroEncoder()
    out = enc.encode([ddl, trunc, beat, lvl])
    recs = [read_datum(v) for _k, v in out.records]
    assert recs[:3] == [
        record(1, "DDL", after="ALTER TABLE `shop`.`orders` ADD COLUMN `extra_1` INT NULL", fields=None, tags={}, txid=""),
        # DTS has no truncate operation: the statement arrives as a DDL record
        record(2, "DDL", after="TRUNCATE TABLE `shop`.`orders`", fields=None, tags={}, txid="tx-9"),
        record(3, "HEARTBEAT", fields=None, obj=None, tags={}, txid=""),
    ]
    assert recs[3]["objectName"] == "shop.s.a\\u002Eb"  # db.schema.table, a dot in a name escaped
    assert enc.carried(ddl) == {
        "kind": "ddl", "op": None, "database": "shop", "schema": None, "table": "orders", "before": None, "after": None,
        "present": None, "primary_key": None, "columns": None, "tx_id": None, "tx_seq": None, "tx_last": None,
        "tx_size": None, "ddl": "ALTER TABLE `shop`.`orders` ADD COLUMN `extra_1` INT NULL", "event_time_ms": 1700000000000,
    }  # fmt: skip
    assert enc.carried(trunc) == {
        "kind": "data", "op": "t", "database": "shop", "schema": None, "table": "orders", "before": None, "after": None,
        "present": None, "primary_key": None, "columns": None, "tx_id": "tx-9", "tx_seq": None, "tx_last": None,
        "tx_size": None, "ddl": "TRUNCATE TABLE `shop`.`orders`", "event_time_ms": 1700000000000,
    }  # fmt: skip
    assert enc.carried(beat)["kind"] == "heartbeat" and enc.carried(beat)["table"] is None
    assert out.dropped["column lists of DDL and truncate events (DTS writes the statement only)"] == 2


def test_write_makes_a_container_file_of_the_same_records(tmp_path):
    out = DtsAvroEncoder().encode(Workload(3, events=30, tables=2).generate().events)
    path = DtsAvroEncoder().write(out, tmp_path / "x.avro")
    assert path.read_bytes()[:4] == b"Obj\x01"
    plain = lambda r: {k: v for k, v in r.items() if k not in ("beforeImages", "afterImages")}  # noqa: E731
    assert [plain(r) for r in read_container(path)] == [plain(read_datum(v)) for _k, v in out.records]
    assert len(read_container(path)) == len(out.records) > 30


# --- decode round trips and ingests (Spark) -----------------------------------------------------

def test_round_trip_workload(spark, tmp_path):
    events = Workload(7, events=300, rename_tables=True).generate().events
    decoded, carried = decode_round_trip(spark, FMT, events, tmp_path)
    assert len(decoded) == len(events)
    assert any(e["kind"] == "ddl" and e["ddl"].startswith("RENAME TABLE") for e in decoded)  # table renames carried
    assert decoded == carried


@decode_property
def test_round_trip_property(spark, tmp_path_factory, seeds):
    examples = [Workload(seed, events=60, tables=3, rename_tables=True).generate().events for seed in seeds]
    trips = decode_round_trips(spark, FMT, examples, tmp_path_factory.mktemp("dts"))
    check_round_trips([f"seed={s}" for s in seeds], trips)


def test_ingest_scrambled(spark, tmp_path):
    # DTS records carry the key (tags.pk_uk_info): no primary_keys configuration. Restricted to
    # the columns whose type survives a NULL value (tests.roundtrip.typed_when_null). The
    # applier's semantics over many scrambled workloads: tests/apply/test_properties.py
    ingest_case(spark, FMT, INGEST_CASES[FMT], tmp_path)


# once a strict xfail: a DTS DECIMAL that is NULL in a record has no precision or scale, and the
# decoder typed it decimal(38,10), so the applier widened the column to decimal(38,10) (a
# rewrite, or Delta's type widening, which delta-rs cannot read). Now such a value states no
# type (spark_type null) and the column keeps decimal(10,2), in the batch that creates the table
# (other events type it) and in a later batch where every value of the column is NULL (the
# table's type is kept: TablePlan.untyped)
def test_a_null_decimal_keeps_the_column_type(spark, tmp_path):
    cols = [*COLS[:3], COLS[7]]  # id, name, amount decimal(10,2), raw varbinary(8) (binary)
    a1 = {"id": "1", "name": "a", "amount": "1.50", "raw": "AP8="}
    b1 = {"id": "2", "name": "b", "amount": None, "raw": None}
    events = [
        event(op="c", after=a1, columns=cols, tx=("tx-1", 1, 1)),
        event(op="c", after=b1, columns=cols, tx=("tx-2", 1, 1)),  # states no type for amount, raw
        event(op="u", before=a1, after={**a1, "amount": "2.50"}, columns=cols, tx=("tx-3", 1, 1)),
        event(op="u", before=b1, after={**b1, "name": "c"}, columns=cols, tx=("tx-4", 1, 1)),  # batch 2: all NULL
    ]  # fmt: skip
    decoded_types = [[c["spark_type"] for c in DtsAvroEncoder().carried(e)["columns"]] for e in events]
    assert decoded_types[1] == decoded_types[3] == ["bigint", "string", None, None]
    ingest_scrambled(spark, FMT, events, tmp_path, 0, parts=[[0, 1, 2], [3]], replay_all=False)
    types = dict(spark.read.format("delta").load(str(tmp_path / "lake" / "shop.orders")).dtypes)
    assert (types["amount"], types["raw"]) == ("decimal(10,2)", "binary")
    # no type widening: the table opens in delta-rs
    assert "delta.enableTypeWidening" not in DeltaTable.forPath(spark, str(tmp_path / "lake" / "shop.orders")).detail().first()["properties"]


def test_a_stream_that_ends_inside_a_transaction_shows_none_of_it(spark, tmp_path):
    # BEGIN, the changes and COMMIT of one transaction carry one sourceTxid (issue 50): the
    # changes wait in _cdclake/held until the COMMIT comes, in a later file
    from cdclake.pipeline import IngestConfig, ingest
    from cdclake.status import target_status

    enc = DtsAvroEncoder()
    marker = lambda kind: event(kind=kind, columns=None, pk=None, tx=("7a:42", None, None)) | {"table": None}  # noqa: E731
    rows = [event(op="c", after=dict(ROW, id=str(i)), tx=("7a:42", i, None)) | {"tx_size": None, "tx_last": None} for i in (1, 2)]
    plain = event(op="c", after=dict(ROW, id="9"))  # no transaction: applied as it comes
    first = enc.write(enc.encode([marker("tx_begin"), *rows, plain]), tmp_path / "1.avro")
    second = enc.write(enc.encode([marker("tx_end")]), tmp_path / "2.avro")
    target = tmp_path / "lake"
    s1 = ingest(spark, IngestConfig(FMT, [str(first)], str(target)))
    assert (s1.rejected, s1.held_transactions, s1.held_events) == (0, 1, 3)
    ids = lambda: sorted(r["id"] for r in DeltaTable.forPath(spark, str(target / "shop.orders")).toDF().collect())  # noqa: E731
    assert ids() == [9]
    st = target_status(spark, str(target))
    assert st["held_transactions"] == 1
    [held] = st["held"]
    assert (held["tx_id"], held["tables"], held["changes"], held["size"], held["begun"], held["ended"]) == (
        "7a:42", ["shop.orders"], 2, None, True, False)
    s2 = ingest(spark, IngestConfig(FMT, [str(second)], str(target)))
    assert (s2.rejected, s2.held_transactions) == (0, 0)
    assert ids() == [1, 2, 9]
