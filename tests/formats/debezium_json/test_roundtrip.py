"""debezium-json encoder: its wire output pinned against literal messages shaped like the
Debezium change events of seed ``003_3602ce7387367728.txt`` (envelope, snapshot ``read`` rows
sharing the snapshot position, schema-change topic keyed by ``databaseName``, ``transaction``
block) with the MySQL connector's ``source`` block of the real messages in
``shared/fixtures/debezium-json`` (Flink's ``debezium-data-schema-include.txt``), then decode
round trips with and without the ``schema``/``payload`` envelope and scrambled ingests of
simulator workloads."""

from __future__ import annotations

import base64
import json

from hypothesis import strategies as st

from cdclake import formats
from cdclake.formats.debezium_json import DebeziumJsonEncoder
from cdclake.formats.debezium_json.encoder import FIRST_POS, POS_STEP, wire_value
from cdclake.model import qualified_name
from cdclake.simulate import Workload
from tests.roundtrip import (
    DECODE_EXAMPLES, INGEST_CASES, SEEDS, batched, check_round_trips, comparable, decode_paths, decode_round_trip,
    decode_round_trips, ingest_case, keys_of,
)

FMT = "debezium-json"


def col(name, source_type, spark_type, nullable=True, precision=None, scale=None):
    return {"name": name, "source_type": source_type, "spark_type": spark_type, "precision": precision,
            "scale": scale, "nullable": nullable}


def event(kind="data", op=None, *, database="inventory", schema=None, table="products", before=None, after=None,
          columns=None, primary_key=None, tx_id=None, tx_seq=None, ddl=None, event_time_ms=1589355606100):
    return {
        "format": "simulated", "kind": kind, "op": op, "database": database, "schema": schema, "table": table,
        "before": before, "after": after, "present": None, "primary_key": primary_key, "columns": columns,
        "position": None, "tx_id": tx_id, "tx_seq": tx_seq, "tx_last": None, "tx_size": None, "ddl": ddl,
        "event_time_ms": event_time_ms, "source_record": None,
    }


COLS = [
    col("id", "int", "int", nullable=False),
    col("price", "decimal(10,2)", "decimal(10,2)", precision=10, scale=2),
    col("born", "date", "date"),
    col("at", "datetime(6)", "timestamp"),
    col("raw", "varbinary(8)", "binary"),
    col("ok", "boolean", "boolean"),
    col("name", "varchar(255)", "string"),
]
ROW = {"id": "101", "price": "12.34", "born": "1969-12-31", "at": "1969-12-31 23:59:59.999999", "raw": "AP8=",
       "ok": "true", "name": "scooter"}
# the same row as Debezium writes it: Decimal 1234 = 0x04D2 -> base64 "BNI="; Date -1 day;
# MicroTimestamp -1 µs; bytes base64 as they are
WIRE_ROW = {"id": 101, "price": "BNI=", "born": -1, "at": -1, "raw": "AP8=", "ok": True, "name": "scooter"}
SOURCE = {
    "version": "1.9.7.Final", "connector": "mysql", "name": "cdclake", "ts_ms": 1589355606100, "snapshot": "false",
    "db": "inventory", "sequence": None, "table": "products", "server_id": 223344, "gtid": None,
    "file": "mysql-bin.000001", "pos": FIRST_POS + POS_STEP, "row": 0, "thread": None, "query": None,
}


def records(events, **kw):
    return DebeziumJsonEncoder(**kw).encode(events).records


# ---- pure Python: the wire ----------------------------------------------------------------------


def test_insert_with_the_envelope():
    e = event("data", "c", after=ROW, columns=COLS, primary_key=["id"], tx_id="file=mysql-bin.000001,pos=154", tx_seq=1)
    [(key, value)] = records([e])
    v = json.loads(value)
    assert v["payload"] == {
        "before": None, "after": WIRE_ROW, "source": SOURCE, "op": "c", "ts_ms": 1589355606100,
        "transaction": {"id": "file=mysql-bin.000001,pos=154", "total_order": 1, "data_collection_order": 1},
    }
    envelope = v["schema"]
    assert envelope["name"] == "cdclake.inventory.products.Envelope"
    assert [f["field"] for f in envelope["fields"]] == ["before", "after", "source", "op", "ts_ms", "transaction"]
    assert envelope["fields"][2]["name"] == "io.debezium.connector.mysql.Source"
    assert envelope["fields"][1]["fields"] == [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
         "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "price"},
        {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1, "field": "born"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "at"},
        {"type": "bytes", "optional": True, "field": "raw"},
        {"type": "boolean", "optional": True, "field": "ok"},
        {"type": "string", "optional": True, "field": "name"},
    ]
    assert json.loads(key) == {
        "schema": {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}],
                   "optional": False, "name": "cdclake.inventory.products.Key"},
        "payload": {"id": 101},
    }


def test_without_the_envelope_the_payload_stands_alone():
    e = event("data", "c", after=ROW, columns=COLS, primary_key=["id"])
    [(key, value)] = records([e], with_schema=False)
    assert json.loads(key) == {"id": 101}
    assert json.loads(value) == {"before": None, "after": WIRE_ROW, "source": SOURCE, "op": "c",
                                 "ts_ms": 1589355606100, "transaction": None}


def test_decimal_bytes_are_javas_big_integer_bytes():
    # BigInteger.toByteArray(): minimal two's complement, big-endian
    b64 = lambda bs: base64.b64encode(bytes(bs)).decode()  # noqa: E731
    assert wire_value("0.00", "decimal(10,2)") == b64([0])
    assert wire_value("-0.01", "decimal(10,2)") == b64([0xFF])
    assert wire_value("1.28", "decimal(10,2)") == b64([0x00, 0x80])
    assert wire_value("-1.28", "decimal(10,2)") == b64([0x80])
    assert wire_value("-1.29", "decimal(10,2)") == b64([0xFF, 0x7F])
    assert len(base64.b64decode(wire_value("9" * 28 + "." + "9" * 10, "decimal(38,10)"))) == 16


def test_delete_is_followed_by_a_tombstone_in_its_unit():
    evs = [
        event("data", "d", before=ROW, columns=COLS, primary_key=["id"]),
        event("data", "d", table="log", before={"id": "1"}, columns=COLS[:1], primary_key=None),
    ]
    out = DebeziumJsonEncoder(with_schema=False).encode(evs)
    assert [(k and json.loads(k), v is None) for k, v in out.records] == [
        ({"id": 101}, False), ({"id": 101}, True), (None, False), (None, True)]
    assert out.units == [0, 0, 2, 2]
    assert json.loads(out.records[0][1])["before"] == WIRE_ROW


def test_snapshot_rows_share_the_snapshot_position():
    # seed 003: every read event carries the position read before the snapshot
    # ... and, as Debezium 2.x, each table's last read is marked last_in_data_collection, the
    # snapshot's last one last (RelationalSnapshotChangeEventSource.setSnapshotMarker)
    evs = [event("data", "r", after={**ROW, "id": str(i)}, columns=COLS, primary_key=["id"]) for i in (1, 2, 3)]
    evs.append(event("data", "r", table="log", after={"id": "1"}, columns=COLS[:1], primary_key=None))
    evs.append(event("data", "c", after=ROW, columns=COLS, primary_key=["id"], tx_id="t1", tx_seq=1))
    sources = [json.loads(v)["source"] for _, v in records(evs, with_schema=False)]
    assert [(s["snapshot"], s["file"], s["pos"], s["row"]) for s in sources] == [
        ("true", "mysql-bin.000001", FIRST_POS, 0), ("true", "mysql-bin.000001", FIRST_POS, 0),
        ("last_in_data_collection", "mysql-bin.000001", FIRST_POS, 0), ("last", "mysql-bin.000001", FIRST_POS, 0),
        ("false", "mysql-bin.000001", FIRST_POS + POS_STEP, 0)]


def test_binlog_file_rolls_over():
    evs = [event("data", "c", after={**ROW, "id": str(i)}, columns=COLS, primary_key=["id"]) for i in range(150)]
    sources = [json.loads(v)["source"] for _, v in records(evs, with_schema=False)]
    assert (sources[99]["file"], sources[99]["pos"]) == ("mysql-bin.000001", FIRST_POS + 100 * POS_STEP)
    assert (sources[100]["file"], sources[100]["pos"]) == ("mysql-bin.000002", FIRST_POS + POS_STEP)


def test_schema_change_record():
    # seed 003, schema change topic: key = databaseName, tableChanges = the table after the change
    cols = [col("id", "int", "int", nullable=False), col("amount", "decimal(12,2)", "decimal(12,2)", precision=12, scale=2),
            col("note", "text", "string")]
    e = event("ddl", ddl="ALTER TABLE products MODIFY COLUMN amount DECIMAL(12,2)", columns=cols, primary_key=["id"])
    out = DebeziumJsonEncoder(with_schema=False).encode([e])
    [(key, value)] = out.records
    assert json.loads(key) == {"databaseName": "inventory"}
    assert json.loads(value) == {
        "source": SOURCE, "ts_ms": 1589355606100, "databaseName": "inventory", "schemaName": None,
        "ddl": "ALTER TABLE products MODIFY COLUMN amount DECIMAL(12,2)",
        "tableChanges": [{"type": "ALTER", "id": '"inventory"."products"', "table": {
            "defaultCharsetName": "utf8mb4", "primaryKeyColumnNames": ["id"], "columns": [
                {"name": "id", "jdbcType": 4, "typeName": "INT", "typeExpression": "INT", "charsetName": None,
                 "length": None, "scale": None, "position": 1, "optional": False, "autoIncremented": False, "generated": False},
                {"name": "amount", "jdbcType": 3, "typeName": "DECIMAL", "typeExpression": "DECIMAL", "charsetName": None,
                 "length": 12, "scale": 2, "position": 2, "optional": True, "autoIncremented": False, "generated": False},
                {"name": "note", "jdbcType": 12, "typeName": "TEXT", "typeExpression": "TEXT", "charsetName": "utf8mb4",
                 "length": None, "scale": None, "position": 3, "optional": True, "autoIncremented": False, "generated": False},
            ]}}],
    }
    back = DebeziumJsonEncoder().carried(e)
    assert back["columns"] == [
        col("id", "INT", "int", nullable=False), col("amount", "DECIMAL", "decimal(12,2)", precision=12, scale=2),
        col("note", "TEXT", "string")]
    assert back["primary_key"] == ["id"]


def test_truncate_has_no_images_and_no_key():
    e = event("data", "t", columns=COLS, tx_id="t9", tx_seq=1)
    [(key, value)] = records([e], with_schema=False)
    v = json.loads(value)
    assert key is None and (v["op"], v["before"], v["after"]) == ("t", None, None)


def test_heartbeats_and_transaction_markers_are_dropped_and_counted():
    evs = [event("heartbeat", database=None, table=None), event("tx_begin", database=None, table=None, tx_id="t"),
           event("tx_end", database=None, table=None, tx_id="t")]
    enc = DebeziumJsonEncoder()
    out = enc.encode(evs)
    assert out.records == []
    assert out.dropped == {
        "heartbeat events (Debezium's heartbeat topic has no binlog position)": 1,
        "transaction BEGIN/END markers (on the <prefix>.transaction topic)": 2,
    }
    assert [enc.carried(e) for e in evs] == [None, None, None]


def test_carried_without_the_envelope_infers_types_from_json_values():
    e = event("data", "u", schema="sales", before={**ROW, "name": None}, after={**ROW, "born": None}, columns=COLS,
              primary_key=["id"], tx_id="t", tx_seq=3)
    back = DebeziumJsonEncoder(with_schema=False).carried(e)
    assert back["primary_key"] is None and back["schema"] is None and back["tx_seq"] == 3
    assert {c["name"]: (c["source_type"], c["spark_type"]) for c in back["columns"]} == {
        "id": ("json:integer", "bigint"), "price": ("json:string", "string"), "born": ("json:integer", "bigint"),
        "at": ("json:integer", "bigint"), "raw": ("json:string", "string"), "ok": ("json:boolean", "boolean"),
        "name": ("json:string", "string")}
    assert back["after"] == {"id": "101", "price": "BNI=", "born": None, "at": "-1", "raw": "AP8=", "ok": "true",
                             "name": "scooter"}
    with_schema = DebeziumJsonEncoder().carried(e)
    assert with_schema["after"] == e["after"]
    assert {c["name"]: c["source_type"] for c in with_schema["columns"]}["price"] == "org.apache.kafka.connect.data.Decimal"


def test_registered_with_the_envelope_by_default():
    enc = formats.get_encoder(FMT)
    assert isinstance(enc, DebeziumJsonEncoder) and enc.with_schema


# ---- Spark: decode round trips and ingests -------------------------------------------------------


def round_trip(spark, events, folder, with_schema: bool):
    """decode_round_trip for an encoder built with ``with_schema`` (get_encoder builds the default)."""
    enc = DebeziumJsonEncoder(with_schema=with_schema)
    path = enc.write(enc.encode(events), folder / "all.jsonl")
    decoded, rejects = decode_paths(spark, FMT, [path])
    assert not rejects, [(r.error_code, r.error_message) for r in rejects[:3]]
    carried = [c for c in (enc.carried(e) for e in events) if c is not None]
    return [comparable(e) for e in decoded], [comparable(e) for e in carried]


def test_decode_round_trip_of_a_workload(spark, tmp_path):
    decoded, carried = decode_round_trip(spark, FMT, Workload(7, events=300, rename_tables=True).generate().events, tmp_path)
    assert len(decoded) > 300
    assert any(e["kind"] == "ddl" and e["ddl"].startswith("RENAME TABLE") for e in decoded)  # table renames carried
    assert decoded == carried


def test_decode_round_trip_without_the_envelope(spark, tmp_path):
    decoded, carried = round_trip(spark, Workload(8, events=300).generate().events, tmp_path, with_schema=False)
    assert len(decoded) > 300
    assert decoded == carried


@batched(
    cases=st.lists(
        st.tuples(SEEDS, st.booleans()), min_size=DECODE_EXAMPLES, max_size=DECODE_EXAMPLES, unique_by=lambda c: c[0]
    )
)
def test_decode_round_trip_property(spark, tmp_path_factory, cases):
    # (seed, with_schema) per example: both envelopes decoded in the same job
    examples = [Workload(seed, events=60, tables=3, rename_tables=True).generate().events for seed, _ in cases]
    encoders = [DebeziumJsonEncoder(with_schema=with_schema) for _, with_schema in cases]
    trips = decode_round_trips(spark, FMT, examples, tmp_path_factory.mktemp("dbz-rt"), encoders=encoders)
    check_round_trips([f"seed={s} with_schema={w}" for s, w in cases], trips)


def test_configured_keys_are_these():
    events = Workload(4, events=80).generate().events
    assert keys_of(events, DebeziumJsonEncoder()) == primary_keys(events) != {}


def primary_keys(events: list[dict]) -> dict[str, list[str]]:
    """Keys by the table names the decoder gives (no schema part: the MySQL source block has
    none); the records' Kafka keys do not survive the files the harness writes."""
    enc = DebeziumJsonEncoder()
    out = {}
    for e in events:
        c = enc.carried(e)
        if c is not None and c["table"] and e["primary_key"]:
            out[qualified_name(c["database"], c["schema"], c["table"])] = list(e["primary_key"])
    return out


def test_scrambled_ingest_matches_the_oracle(spark, tmp_path):
    # keys configured (tests.roundtrip.keys_of, the same names as primary_keys above). The
    # applier's semantics over many scrambled workloads: tests/apply/test_properties.py
    ingest_case(spark, FMT, INGEST_CASES[FMT], tmp_path)
