"""canal-json encoder: its wire output pinned against literal messages shaped like the seed's
examples (seed ``001_a1c6319148bc2083.txt``, "Canal Json") and the real open-source Canal
messages in ``shared/fixtures/canal-json``, then decode round trips and scrambled ingests of
simulator workloads (the decoder and the pipeline must give back exactly what
:meth:`CanalJsonEncoder.carried` says)."""

from __future__ import annotations

import json


from cdclake import formats
from cdclake.formats.canal_json import CanalJsonEncoder
from cdclake.formats.canal_json.encoder import mysql_spark_type
from cdclake.simulate import Workload
from tests.roundtrip import INGEST_CASES, check_round_trips, decode_property, decode_round_trip, decode_round_trips, ingest_case

FMT = "canal-json"


def col(name, source_type, spark_type, nullable=True, precision=None, scale=None):
    return {"name": name, "source_type": source_type, "spark_type": spark_type, "precision": precision,
            "scale": scale, "nullable": nullable}


def event(kind="data", op=None, *, database="dbname", schema=None, table="tablename", before=None, after=None,
          columns=None, primary_key=None, tx_id=None, tx_seq=None, ddl=None, event_time_ms=1600161894000):
    return {
        "format": "simulated", "kind": kind, "op": op, "database": database, "schema": schema, "table": table,
        "before": before, "after": after, "present": None, "primary_key": primary_key, "columns": columns,
        "position": None, "tx_id": tx_id, "tx_seq": tx_seq, "tx_last": None, "tx_size": None, "ddl": ddl,
        "event_time_ms": event_time_ms, "source_record": None,
    }


# the seed's table: "mysqlType": {"id": "bigint", "shipping_type": "varchar"} (DTS writes no precision)
SEED_COLS = [col("id", "bigint", "bigint", nullable=False), col("shipping_type", "varchar", "string")]


def messages(events) -> list[dict]:
    return [json.loads(v) for _, v in CanalJsonEncoder().encode(events).records]


# ---- pure Python: the wire ----------------------------------------------------------------------


def test_update_is_data_after_and_old_with_the_changed_columns_only():
    # seed 001, "2022 年 3 月 20 日以降に作成...": data = after image, old = before values; open-source
    # Canal (FORMATS.md, Flink's canal-data.txt) puts only the changed columns in old
    e = event(
        "data", "u", before={"id": "500000287", "shipping_type": "aaa"},
        after={"id": "500000287", "shipping_type": None}, columns=SEED_COLS, primary_key=["id"],
    )
    raw = CanalJsonEncoder().encode([e]).records[0][1].decode("utf-8")
    assert raw == (
        '{"data":[{"id":"500000287","shipping_type":null}],"database":"dbname","es":1600161894000,"id":1,'
        '"isDdl":false,"mysqlType":{"id":"bigint","shipping_type":"varchar"},"old":[{"shipping_type":"aaa"}],'
        '"pkNames":["id"],"sql":"","sqlType":{"id":-5,"shipping_type":12},"table":"tablename",'
        '"ts":1600161894000,"type":"UPDATE"}'
    )


def test_delete_has_the_row_in_data_and_old_null():
    # seed 001: after 2022-03-20 "data の値はデータであり、old の値は NULL"
    e = event("data", "d", before={"id": "500000287", "shipping_type": None}, columns=SEED_COLS, primary_key=["id"],
              event_time_ms=1600161894771)
    assert messages([e]) == [{
        "data": [{"id": "500000287", "shipping_type": None}], "database": "dbname", "es": 1600161894000, "id": 1,
        "isDdl": False, "mysqlType": {"id": "bigint", "shipping_type": "varchar"}, "old": None, "pkNames": ["id"],
        "sql": "", "sqlType": {"id": -5, "shipping_type": 12}, "table": "tablename", "ts": 1600161894771,
        "type": "DELETE",
    }]


def test_ddl_message():
    # seed 001's DDL example ({"database","es","id","isDdl":true,"sql","table","ts","type"}); the
    # type is open-source Canal's verb (ALTER) as in the Paimon fixtures, with the null fields they carry
    e = event("ddl", ddl="ALTER TABLE tablename ADD COLUMN note varchar(10)", columns=SEED_COLS, primary_key=["id"])
    enc = CanalJsonEncoder()
    out = enc.encode([e])
    assert [json.loads(v) for _, v in out.records] == [{
        "data": None, "database": "dbname", "es": 1600161894000, "id": 1, "isDdl": True, "mysqlType": None,
        "old": None, "pkNames": None, "sql": "ALTER TABLE tablename ADD COLUMN note varchar(10)", "sqlType": None,
        "table": "tablename", "ts": 1600161894000, "type": "ALTER",
    }]
    assert out.dropped["column types and keys of DDL and truncate events (written without mysqlType/pkNames)"] == 1
    back = enc.carried(e)
    assert (back["columns"], back["primary_key"], back["ddl"]) == (None, None, e["ddl"])


def test_truncate_is_a_ddl_message_of_type_truncate():
    e = event("data", "t", database="shop", table="customers", columns=SEED_COLS, tx_id="g-1", tx_seq=1)
    [m] = messages([e])
    assert (m["type"], m["isDdl"], m["sql"], m["data"], m["mysqlType"], m["gtid"]) == (
        "TRUNCATE", True, "TRUNCATE TABLE `shop`.`customers`", None, None, "g-1")


def test_rows_of_one_table_op_and_transaction_share_a_message():
    cols = [
        col("id", "int", "int", nullable=False), col("vip", "boolean", "boolean"), col("raw", "varbinary(8)", "binary"),
        col("at", "datetime(3)", "timestamp"), col("price", "decimal(10,2)", "decimal(10,2)"),
    ]
    row = lambda i, vip: {"id": str(i), "vip": vip, "raw": "AP8=", "at": "2024-02-29 12:00:00.123000", "price": "-0.50"}  # noqa: E731
    t = 1704067201234
    evs = [
        event("data", "r", table="t", after=row(1, "true"), columns=cols, primary_key=["id"], event_time_ms=t - 5000),
        event("data", "r", table="t", after=row(2, None), columns=cols, primary_key=["id"], event_time_ms=t - 5000),
        event("heartbeat", database=None, table=None, event_time_ms=t - 10),
        event("data", "c", table="t", after=row(3, "false"), columns=cols, primary_key=["id"], tx_id="x1", tx_seq=1, event_time_ms=t),
        event("data", "c", table="t", after=row(4, "true"), columns=cols, primary_key=["id"], tx_id="x1", tx_seq=2, event_time_ms=t),
        event("data", "d", table="t", before=row(1, "true"), columns=cols, primary_key=["id"], tx_id="x1", tx_seq=3, event_time_ms=t),
        event("data", "c", table="t", after=row(5, "true"), columns=cols, primary_key=["id"], tx_id="x1", tx_seq=4, event_time_ms=t),
        event("data", "c", table="t", after=row(6, "true"), columns=cols, primary_key=["id"], tx_id="x2", tx_seq=1, event_time_ms=t),
    ]
    out = CanalJsonEncoder().encode(evs)
    ms = [json.loads(v) for _, v in out.records]
    assert [(m["type"], len(m["data"]), m.get("gtid"), m["id"]) for m in ms] == [
        ("INIT", 2, None, 1), ("INSERT", 2, "x1", 2), ("DELETE", 1, "x1", 3), ("INSERT", 1, "x1", 4), ("INSERT", 1, "x2", 5)]
    # booleans as tinyint(1) text, bytes as ISO-8859-1 characters, datetime(3) with 3 digits,
    # es the binlog second, ts the full commit time
    assert ms[1]["data"][0] == {"id": "3", "vip": "0", "raw": "\u0000\u00ff", "at": "2024-02-29 12:00:00.123", "price": "-0.50"}
    assert ms[0]["data"][1]["vip"] is None
    assert (ms[1]["es"], ms[1]["ts"]) == (1704067201000, 1704067201234)
    assert ms[1]["sqlType"] == {"id": 4, "vip": -7, "raw": 2004, "at": 93, "price": 3}
    assert out.dropped["heartbeat events (Canal's heartbeats never reach flat messages)"] == 1
    assert out.dropped["transaction sequence numbers and sizes (Canal writes the gtid only)"] == 5


def test_carried_is_what_the_decoder_keeps():
    cols = [col("id", "int", "int", nullable=False), col("n", "tinyint", "tinyint"), col("s", "varchar(20)", "string")]
    e = event("data", "u", schema="sales", before={"id": "1", "n": "5", "s": "a"}, after={"id": "1", "n": "6", "s": "a"},
              columns=cols, primary_key=["id"], tx_id="g", tx_seq=2, event_time_ms=1704067201999)
    back = CanalJsonEncoder().carried(e)
    assert back["schema"] is None and back["tx_seq"] is None and back["tx_id"] == "g"
    assert back["event_time_ms"] == 1704067201000
    assert back["before"] == e["before"] and back["after"] == e["after"]
    assert back["columns"] == [
        col("id", "int", "int", nullable=None), col("n", "tinyint", "int", nullable=None),
        col("s", "varchar(20)", "string", nullable=None, precision=20),
    ]
    assert CanalJsonEncoder().carried(event("heartbeat", database=None, table=None)) is None


def test_mysql_type_mapping_matches_the_decoder_docstring():
    assert [mysql_spark_type(t) for t in ("INTEGER", "int(11) unsigned", "bigint unsigned", "DECIMAL(8, 0)", "decimal",
                                          "FIXED(40,3)", "datetime(6)", "tinyint(1)", "bit(1)", "varbinary(20)", "text")] == [
        "int", "bigint", "decimal(20,0)", "decimal(8,0)", "decimal(38,10)", "string", "timestamp", "int", "boolean",
        "binary", "string"]


def test_registered():
    assert isinstance(formats.get_encoder(FMT), CanalJsonEncoder)


# ---- Spark: decode round trips and ingests -------------------------------------------------------


def test_decode_round_trip_of_a_workload(spark, tmp_path):
    decoded, carried = decode_round_trip(spark, FMT, Workload(7, events=300, rename_tables=True).generate().events, tmp_path)
    assert len(decoded) > 300
    assert any(e["kind"] == "ddl" and e["ddl"].startswith("RENAME TABLE") for e in decoded)  # table renames carried
    assert decoded == carried


@decode_property
def test_decode_round_trip_property(spark, tmp_path_factory, seeds):
    examples = [Workload(seed, events=60, tables=3, rename_tables=True).generate().events for seed in seeds]
    trips = decode_round_trips(spark, FMT, examples, tmp_path_factory.mktemp("canal-rt"))
    check_round_trips([f"seed={s}" for s in seeds], trips)


def test_scrambled_ingest_matches_the_oracle(spark, tmp_path):
    # Canal messages carry the key (pkNames): no primary_keys needed. The applier's semantics
    # over many scrambled workloads: tests/apply/test_properties.py (canal-json shape)
    ingest_case(spark, FMT, INGEST_CASES[FMT], tmp_path)


def test_truncate_delivered_before_the_older_insert(spark, tmp_path):
    """A truncate arriving alone, before its table exists, still removes an older insert
    delivered later (the truncate is remembered in the tombstone table)."""
    from cdclake.formats.encoding import Encoded
    from cdclake.pipeline import IngestConfig, ingest
    from tests.roundtrip import assert_lake_matches, expected_tables

    cols = [col("id", "int", "int", nullable=False), col("v", "varchar(10)", "string")]
    evs = [
        event("data", "c", database="shop", table="t", after={"id": "1", "v": "a"}, columns=cols, primary_key=["id"],
              tx_id="x1", tx_seq=1, event_time_ms=1704067201000),
        event("data", "t", database="shop", table="t", columns=cols, tx_id="x2", tx_seq=1, event_time_ms=1704067202000),
    ]
    enc = CanalJsonEncoder()
    out = enc.encode(evs)
    target = tmp_path / "lake"
    for k, record in enumerate(reversed(out.records)):  # the truncate first, then the insert
        f = enc.write(Encoded(records=[record]), tmp_path / f"b{k}.jsonl")
        assert ingest(spark, IngestConfig(format=FMT, inputs=[str(f)], target=str(target))).rejected == 0
    rows, schemas = expected_tables(enc, evs)
    assert rows == {"shop.t": []}
    assert_lake_matches(spark, target, rows, schemas)
