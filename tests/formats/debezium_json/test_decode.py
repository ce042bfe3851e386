"""Tests of the ``debezium-json`` decoder on real Debezium messages (origins in
``shared/fixtures/SOURCES.md``) and on messages built in the shapes of the Debezium
documentation where no public file carries the case (Db2 LSNs, transaction topic, base64
Decimals). Expected values are computed by hand; the arithmetic is in the comments."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from tests.conftest import decode_file, fixture_lines, fixture_path

from cdclake.errors import RejectCode

FMT = "debezium-json"
FLINK = "debezium-json/apache-flink"
PAIMON = "debezium-json/apache-paimon"
DBZ = "debezium-json/debezium-debezium/debezium-connector-common/src/test/resources/json"
MEMIISO = "debezium-json/memiiso-debezium-server-iceberg/debezium-server-iceberg-sink/src/test/resources/json"

FLINK_OPS_MYSQL = ["c"] * 9 + ["u", "u", "c", "c", "u", "u", "d"]
FLINK_OPS_PG = ["r"] * 9 + ["u", "u", "c", "c", "u", "u", "d"]


def D(*xs) -> list[Decimal]:  # noqa: N802
    return [Decimal(x) for x in xs]


def one_line(rel: str, tmp_path, name: str | None = None):
    """A pretty-printed single-document fixture rewritten as one JSON line in ``tmp_path``."""
    doc = json.loads(fixture_lines(rel, tmp_path).read_text(encoding="utf-8"))
    out = tmp_path / (name or ("one-" + rel.rsplit("/", 1)[-1]))
    out.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    return out


def lines_file(tmp_path, docs, name="input.txt"):
    """Write messages (dicts or raw strings) one per line."""
    out = tmp_path / name
    out.write_text("\n".join(d if isinstance(d, str) else json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    return out


def decode_raw(spark, records, fmt=FMT, options=None):
    """Decode (key, value) string pairs given as Kafka-like raw records (None = null bytes);
    returns the decoded rows in input order. ``options``: DecodeOptions (default: none set)."""
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.model import RAW_SCHEMA

    rows = [
        (
            None if k is None else k.encode("utf-8"),
            None if v is None else v.encode("utf-8"),
            ("t", 0, i, None, None, i + 1, None),
        )
        for i, (k, v) in enumerate(records)
    ]
    raw = spark.createDataFrame(rows, RAW_SCHEMA)
    decoded = formats.get(fmt).decode(raw, options or DecodeOptions())
    return decoded.orderBy("source_record.line").collect()


def events_of(row):
    return [e.asDict(recursive=True) for e in (row.events or [])]


def test_snapshot_end_follows_a_tables_last_snapshot_row_when_asked(spark):
    # memiiso serde-unnested-order-val-withschema.json: a Debezium 2.7 MySQL read event marked
    # source.snapshot "last_in_data_collection" (the last row of the orders table's snapshot).
    # With DecodeOptions.snapshot_ends it decodes to the row and a snapshot_end event of the same
    # table, position and record; so does "last"; not "true", "incremental", a streamed "c", or
    # any record without the option
    from cdclake.formats.base import DecodeOptions

    doc = json.loads(fixture_path(f"{MEMIISO}/serde-unnested-order-val-withschema.json").read_text(encoding="utf-8"))

    def marked(snapshot, op="r"):
        d = json.loads(json.dumps(doc))
        d["payload"]["source"]["snapshot"], d["payload"]["op"] = snapshot, op
        return (None, json.dumps(d))

    recs = [marked("last_in_data_collection"), marked("last"), marked("true"), marked("incremental"), marked("last", "c")]
    on = decode_raw(spark, recs, options=DecodeOptions(snapshot_ends=True))
    assert [r.error_code for r in on] == [None] * 5
    assert [[(e["kind"], e["op"]) for e in events_of(r)] for r in on] == [
        [("data", "r"), ("snapshot_end", None)], [("data", "r"), ("snapshot_end", None)],
        [("data", "r")], [("data", "r")], [("data", "c")]]
    row_ev, end = events_of(on[0])
    assert (end["database"], end["schema"], end["table"]) == ("inventory", None, "orders")
    assert end["position"] == row_ev["position"] == {"order": D(3, 824, 0, 0), "text": "mysql-bin.000003:824:0"}
    assert end["source_record"] == row_ev["source_record"] and end["event_time_ms"] == row_ev["event_time_ms"]
    assert (end["before"], end["after"], end["columns"], end["tx_id"]) == (None, None, None, None)
    # the same records without the option: one data event each, as before
    off = decode_raw(spark, recs[:1])
    assert [[e["kind"] for e in events_of(r)] for r in off] == [["data"]]


def col_types(event):
    return {c["name"]: c["spark_type"] for c in event["columns"]}


# --------------------------------------------------------------------------------------------
# Apache Flink's test streams (MySQL 1.1.1.Final / PostgreSQL 1.2.1.Final, inventory.products)


def test_flink_mysql_with_and_without_envelope(spark, tmp_path):
    # flink-formats/flink-json/src/test/resources/debezium-data-schema-include.txt (16 records,
    # schema/payload envelope) and -exclude.txt (the 16 payloads without the envelope)
    _, inc, rej_inc = decode_file(spark, FMT, fixture_lines(f"{FLINK}/debezium-data-schema-include.txt", tmp_path))
    _, exc, rej_exc = decode_file(spark, FMT, fixture_lines(f"{FLINK}/debezium-data-schema-exclude.txt", tmp_path))
    assert rej_inc == [] and rej_exc == []
    assert len(inc) == len(exc) == 16
    assert [e["op"] for e in inc] == FLINK_OPS_MYSQL
    assert [e["op"] for e in exc] == FLINK_OPS_MYSQL
    assert {(e["kind"], e["database"], e["schema"], e["table"]) for e in inc} == {("data", "inventory", None, "products")}

    first = inc[0]
    assert first["format"] == FMT
    assert first["before"] is None
    # weight is a float64 column; the value is written back as Java double text
    assert first["after"] == {"id": "101", "name": "scooter", "description": "Small 2-wheel scooter", "weight": "3.140000104904175"}
    # binlog file mysql-bin.000003 -> 3, pos 154, row 0, no transaction block -> total_order 0
    assert first["position"] == {"order": D(3, 154, 0, 0), "text": "mysql-bin.000003:154:0"}
    # source.ts_ms is 0 in these snapshot rows -> the payload's ts_ms
    assert first["event_time_ms"] == 1589355606100
    assert first["primary_key"] is None  # files carry no Kafka key
    # schema envelope: Connect types -> Spark types, optional -> nullable
    assert [(c["name"], c["source_type"], c["spark_type"], c["nullable"]) for c in first["columns"]] == [
        ("id", "int32", "int", False),
        ("name", "string", "string", False),
        ("description", "string", "string", True),
        ("weight", "double", "double", True),
    ]
    # without the envelope the types are inferred from the JSON values
    assert [(c["name"], c["source_type"], c["spark_type"]) for c in exc[0]["columns"]] == [
        ("id", "json:integer", "bigint"),
        ("name", "json:string", "string"),
        ("description", "json:string", "string"),
        ("weight", "json:number", "double"),
    ]
    # record 10: UPDATE of 106 at mysql-bin.000003:362, source.ts_ms 1589361987000
    upd = inc[9]
    assert upd["before"]["description"] == "16oz carpenter's hammer"
    assert upd["after"] == {"id": "106", "name": "hammer", "description": "18oz carpenter hammer", "weight": "1.0"}
    assert upd["position"]["order"] == D(3, 362, 0, 0)
    assert upd["event_time_ms"] == 1589361987000
    # last record: DELETE of 111 at pos 2443
    last = inc[15]
    assert last["after"] is None and last["before"]["id"] == "111"
    assert last["position"] == {"order": D(3, 2443, 0, 0), "text": "mysql-bin.000003:2443:0"}
    # binlog positions grow with the stream order
    orders = [e["position"]["order"] for e in inc]
    assert orders == sorted(orders)
    # the bare file writes hammer 106's weight as the JSON integer 1 (the enveloped one as 1.0):
    # inferred per record as bigint there, the schema says float64 -> "1.0"
    assert exc[5]["after"]["weight"] == "1" and col_types(exc[5])["weight"] == "bigint"
    assert inc[5]["after"]["weight"] == "1.0" and col_types(inc[5])["weight"] == "double"

    # otherwise the same images with and without the envelope
    def strip(img):
        return None if img is None else {k: v for k, v in img.items() if not (k == "weight" and v in ("1", "1.0"))}

    assert [(strip(e["before"]), strip(e["after"]), e["position"]) for e in inc] == [
        (strip(e["before"]), strip(e["after"]), e["position"]) for e in exc
    ]


def test_flink_postgres_with_and_without_envelope(spark, tmp_path):
    # debezium-postgres-data-schema-include.txt / -exclude.txt: 9 snapshot reads then changes
    _, inc, rej_inc = decode_file(spark, FMT, fixture_lines(f"{FLINK}/debezium-postgres-data-schema-include.txt", tmp_path))
    _, exc, rej_exc = decode_file(spark, FMT, fixture_lines(f"{FLINK}/debezium-postgres-data-schema-exclude.txt", tmp_path))
    assert rej_inc == [] and rej_exc == []
    assert [e["op"] for e in inc] == FLINK_OPS_PG
    assert [e["op"] for e in exc] == FLINK_OPS_PG
    assert {(e["database"], e["schema"], e["table"]) for e in inc + exc} == {("postgres", "inventory", "products")}
    first = inc[0]
    assert first["after"] == {"id": "101", "name": "scooter", "description": "Small 2-wheel scooter", "weight": "3.14"}
    assert first["position"] == {"order": D(34078720, 0), "text": "lsn=34078720"}
    assert first["event_time_ms"] == 1596001099434
    assert col_types(first) == {"id": "int", "name": "string", "description": "string", "weight": "double"}
    # all snapshot rows share the snapshot LSN; streamed changes come after it
    assert {tuple(e["position"]["order"]) for e in inc[:9]} == {tuple(D(34078720, 0))}
    assert [e["position"]["order"][0] for e in inc[9:]] == D(34131104, 34132200, 34132560, 34133072, 34133344, 34133584, 34133800)
    # without envelope: 1.0 (id 106) is still fractional -> double, text "1.0"
    r106 = exc[5]
    assert r106["after"]["weight"] == "1.0" and col_types(r106)["weight"] == "double"
    assert col_types(exc[0]) == {"id": "bigint", "name": "string", "description": "string", "weight": "double"}
    # UPDATE 110 (record 14): before and after images, commit time from source.ts_ms
    upd = exc[13]
    assert upd["before"]["description"] == "water resistent white wind breaker"
    assert upd["after"] == {"id": "110", "name": "jacket", "description": "new water resistent white wind breaker", "weight": "0.5"}
    assert upd["event_time_ms"] == 1596010982228
    assert [(e["after"], e["before"]) for e in inc] == [(e["after"], e["before"]) for e in exc]


def test_postgres_delete_without_before_is_missing_image(spark, tmp_path):
    # debezium-postgres-data-replica-identity.txt: REPLICA IDENTITY DEFAULT; updates carry no
    # before image (fine) and the last record, a delete, carries neither image (rejected)
    decoded, events, rejects = decode_file(spark, FMT, fixture_lines(f"{FLINK}/debezium-postgres-data-replica-identity.txt", tmp_path))
    assert decoded.count() == 16
    assert [e["op"] for e in events] == FLINK_OPS_PG[:15]
    assert events[9]["before"] is None and events[9]["after"]["id"] == "106"
    assert [(r.source_record.line, r.error_code) for r in rejects] == [(16, RejectCode.MISSING_IMAGE.value)]


# --------------------------------------------------------------------------------------------
# Logical types


def test_paimon_all_types_logical_values(spark, tmp_path):
    # paimon .../kafka/debezium/table/schema/alltype/debezium-data-1.txt: Debezium 1.9.7 MySQL
    # snapshot row with envelope (Decimal/Date/Timestamp/MicroTimestamp/ZonedTimestamp/MicroTime)
    _, events, rejects = decode_file(spark, FMT, fixture_lines(f"{PAIMON}/kafka/debezium/table/schema/alltype/debezium-data-1.txt", tmp_path))
    assert rejects == []
    (e,) = events
    assert (e["op"], e["database"], e["schema"], e["table"]) == ("r", "paimon_sync_table", None, "all_types_table")
    a, t = e["after"], col_types(e)
    cols = {c["name"]: c for c in e["columns"]}
    # Decimal with connect.decimal.precision 2 / scale 1; this producer writes the number itself
    assert (t["pt"], a["pt"]) == ("decimal(2,1)", "1.1")
    assert (cols["pt"]["source_type"], cols["pt"]["precision"], cols["pt"]["scale"]) == (
        "org.apache.kafka.connect.data.Decimal",
        2,
        1,
    )
    assert (t["_numeric"], a["_numeric"]) == ("decimal(8,3)", "12345.11")
    # Decimal scale 0 without precision (BIGINT UNSIGNED) -> decimal(38,0)
    assert (t["_bigint_unsigned"], a["_bigint_unsigned"]) == ("decimal(38,0)", "20000000000")
    # precision 40 > 38 -> string; 1.2345678987654322e+32 written out with scale 3
    assert (t["_fixed"], a["_fixed"]) == ("string", "123456789876543220000000000000000.000")
    # decimal(38,10): 2.2222222222222224e+27 -> 28 integer digits + 10 decimals
    assert (t["_big_decimal"], a["_big_decimal"]) == ("decimal(38,10)", "2222222222222222400000000000.0000000000")
    # io.debezium.time.Date 19439 days: 2023-01-01 is day 53*365+13 = 19358; +81 = Mar 23
    assert (t["_date"], a["_date"]) == ("date", "2023-03-23")
    # io.debezium.time.Timestamp 1679581805123 ms = 2023-03-23T14:30:05.123Z
    assert (t["_datetime3"], a["_datetime3"]) == ("timestamp", "2023-03-23 14:30:05.123000")
    # MicroTimestamp 1679581805123456 µs
    assert (t["_datetime6"], a["_datetime6"]) == ("timestamp", "2023-03-23 14:30:05.123456")
    # ZonedTimestamp "2023-03-23T22:00:10.123456Z"
    assert (t["_timestamp"], a["_timestamp"]) == ("timestamp", "2023-03-23 22:00:10.123456")
    # MicroTime 36803000000 µs = 36803 s = 10 h 13 min 23 s
    assert (t["_time"], a["_time"]) == ("string", "10:13:23.000000")
    # int16 -> int, int64 -> bigint, float64 -> double, boolean, bytes/Bits -> base64 binary
    assert (t["_tinyint"], a["_tinyint"]) == ("int", "1")
    assert (t["_bigint"], a["_bigint"]) == ("bigint", "10000000000")
    assert (t["_double"], a["_double"]) == ("double", "1.000011")
    assert (t["_bit1"], a["_bit1"]) == ("boolean", "true")
    assert (t["_bin"], a["_bin"]) == ("binary", "Ynl0ZXMAAAAAAA==")
    assert (t["_bit"], a["_bit"]) == ("binary", "xwcAAAAAAAA=")
    # Json / Enum / EnumSet logical types are strings; geometry structs become JSON text
    assert (t["_json"], a["_json"]) == ("string", '{"a": "b"}')
    assert (t["_set"], a["_set"]) == ("string", "a,b")
    assert t["_point"] == "string"
    assert json.loads(a["_point"]) == {"x": 1.0, "y": 1.0, "wkb": "AQEAAAAAAAAAAADwPwAAAAAAAPA/", "srid": None}
    # Flink CDC snapshot: file "" and pos 0 -> zeros; source.ts_ms 0 -> payload ts_ms
    assert e["position"]["order"] == D(0, 0, 0, 0)
    assert e["event_time_ms"] == 1706167086275


def test_memiiso_date_and_kafka_key(spark):
    # memiiso serde-unnested-order-{key,val}-withschema.json (Debezium 2.7.0.Alpha1 MySQL snapshot
    # read) and serde-unnested-delete-{key,val}-withschema.json, each value with its Kafka key
    def doc(name):
        return json.dumps(json.loads(fixture_path(f"{MEMIISO}/{name}").read_text(encoding="utf-8")))

    rows = decode_raw(
        spark,
        [
            (doc("serde-unnested-order-key-withschema.json"), doc("serde-unnested-order-val-withschema.json")),
            (doc("serde-unnested-delete-key-withschema.json"), doc("serde-unnested-delete-val-withschema.json")),
            # the same delete with a bare key (JsonConverter schemas.enable=false)
            ('{"id": 1004}', doc("serde-unnested-delete-val-withschema.json")),
        ],
    )
    assert [r.error_code for r in rows] == [None, None, None]
    (order,), (delete,), (delete2,) = [events_of(r) for r in rows]
    assert (order["op"], order["database"], order["table"]) == ("r", "inventory", "orders")
    # io.debezium.time.Date 16852 days: 2016-01-01 is day 46*365+11 = 16801; +51 = Feb 21
    assert order["after"] == {"order_number": "10004", "order_date": "2016-02-21", "purchaser": "1003", "quantity": "1", "product_id": "107"}
    assert col_types(order)["order_date"] == "date"
    assert order["primary_key"] == ["order_number"]
    assert order["position"] == {"order": D(3, 824, 0, 0), "text": "mysql-bin.000003:824:0"}
    assert order["event_time_ms"] == 1718461481000
    assert (delete["op"], delete["after"]) == ("d", None)
    assert delete["before"] == {"id": "1004", "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"}
    assert delete["primary_key"] == ["id"] and delete2["primary_key"] == ["id"]
    assert delete["position"]["order"] == D(3, 632, 0, 0)
    # transaction block present in the schema but null in the payload
    assert delete["tx_id"] is None and delete["tx_seq"] is None


def test_debezium_serde_documents(spark, tmp_path):
    # debezium/debezium debezium-connector-common/src/test/resources/json/serde-*.json
    # (pretty-printed single documents, written here as one line each)
    src = tmp_path / "serde.txt"
    src.write_text(
        "".join(
            one_line(f"{DBZ}/{n}", tmp_path).read_text(encoding="utf-8")
            for n in ("serde-with-schema.json", "serde-without-schema.json", "serde-update.json", "serde-unknown-property.json", "serde-unwrapped.json")
        ),
        encoding="utf-8",
    )
    decoded, events, rejects = decode_file(spark, FMT, src)
    assert decoded.count() == 5
    assert [e["op"] for e in events] == ["c", "c", "u", "u"]
    anne = {"id": "1004", "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"}
    assert events[0]["after"] == anne and events[1]["after"] == anne
    assert col_types(events[0]) == {"id": "int", "first_name": "string", "last_name": "string", "email": "string"}
    assert events[2]["before"]["first_name"] == "Anne-Marie" and events[2]["after"] == anne
    # an extra column the table never had is carried along (serde-unknown-property.json)
    assert events[3]["after"]["middle_name"] == "L"
    # Debezium 0.10: source.ts_ms 0 -> payload ts_ms; snapshot written as a JSON boolean
    assert {e["event_time_ms"] for e in events} == {1465491411815}
    # ExtractNewRecordState's flattened row is not a change event
    assert [(r.source_record.line, r.error_code) for r in rejects] == [(5, RejectCode.SCHEMA_MISMATCH.value)]


def _connect_field(name, type_, logical=None, params=None, optional=True):
    f = {"type": type_, "optional": optional, "field": name}
    if logical:
        f["name"] = logical
    if params:
        f["parameters"] = params
    return f


def test_logical_type_conversions_by_value(spark):
    # An enveloped Db2 event built from the Connect schema rules (no public file carries base64
    # Decimals): each column exercises one logical type; expected texts computed by hand.
    dec = "org.apache.kafka.connect.data.Decimal"
    cols = [
        (_connect_field("ID", "int32", optional=False), 1),
        # 0x00DF = 223, scale 2 -> 2.23
        (_connect_field("PRICE", "bytes", dec, {"scale": "2", "connect.decimal.precision": "10"}), "AN8="),
        # 0xFF21 = 65313 - 65536 = -223, scale 2 -> -2.23
        (_connect_field("LOSS", "bytes", dec, {"scale": "2", "connect.decimal.precision": "10"}), "/yE="),
        # 0x05 = 5, scale 3 -> 0.005 (no precision parameter -> decimal(38,3))
        (_connect_field("TINY", "bytes", dec, {"scale": "3"}), "BQ=="),
        # 0x00 -> 0.00 ; 0xFF -> -1
        (_connect_field("ZERO", "bytes", dec, {"scale": "2", "connect.decimal.precision": "5"}), "AA=="),
        (_connect_field("MINUS_ONE", "bytes", dec, {"scale": "0", "connect.decimal.precision": "5"}), "/w=="),
        # 12 bytes 27e41b3246bec9b16e398115 = 12345678901234567890123456789, scale 9
        (_connect_field("BIG", "bytes", dec, {"scale": "9", "connect.decimal.precision": "38"}), "J+QbMka+ybFuOYEV"),
        # its two's complement d81be4cdb941364e91c67eeb = -12345678901234567890123456789
        (_connect_field("BIG_NEG", "bytes", dec, {"scale": "9", "connect.decimal.precision": "38"}), "2BvkzblBNk6Rxn7r"),
        # VariableScaleDecimal {scale 3, value 0x3039 = 12345} -> 12.345
        (
            {
                "type": "struct",
                "name": "io.debezium.data.VariableScaleDecimal",
                "optional": True,
                "field": "VSD",
                "fields": [{"type": "int32", "optional": False, "field": "scale"}, {"type": "bytes", "optional": False, "field": "value"}],
            },
            {"scale": 3, "value": "MDk="},
        ),
        # 20073 days = 2024-12-16 ; 16852 days = 2016-02-21
        (_connect_field("D", "int32", "io.debezium.time.Date"), 20073),
        (_connect_field("CD", "int32", "org.apache.kafka.connect.data.Date"), 16852),
        # 1734382925000 ms = 2024-12-16T21:02:05Z
        (_connect_field("TS", "int64", "io.debezium.time.Timestamp"), 1734382925000),
        (_connect_field("CTS", "int64", "org.apache.kafka.connect.data.Timestamp"), 1734382925000),
        # 1734382927123456789 ns -> 2024-12-16T21:02:07.123456Z (truncated to µs)
        (_connect_field("NTS", "int64", "io.debezium.time.NanoTimestamp"), 1734382927123456789),
        # +08:00 offset -> 07:23:38.79 UTC
        (_connect_field("ZTS", "string", "io.debezium.time.ZonedTimestamp"), "2024-12-17T15:23:38.79+08:00"),
        # 56033123 ms = 15 h 33 min 53.123 s
        (_connect_field("T", "int32", "io.debezium.time.Time"), 56033123),
        (_connect_field("MT", "int64", "io.debezium.time.MicroTime"), 56033000000),
        # 75723000000000 ns = 75723 s = 21:02:03
        (_connect_field("NT", "int64", "io.debezium.time.NanoTime"), 75723000000000),
        # MySQL TIME '838:59:59' = 3020399 s; '-01:00:00'
        (_connect_field("LONG_T", "int64", "io.debezium.time.MicroTime"), 3020399000000),
        (_connect_field("NEG_T", "int64", "io.debezium.time.MicroTime"), -3600000000),
        (_connect_field("I8", "int8"), -5),
        (_connect_field("F", "float"), 3.140000104904175),
        (_connect_field("DBL", "double"), 1.0),
        (_connect_field("B", "bytes"), "YQ=="),
        (_connect_field("FLAG", "boolean"), True),
        ({"type": "array", "items": {"type": "int32", "optional": False}, "optional": True, "field": "ARR"}, [1, 2]),
        (_connect_field("NOTE", "string"), None),
    ]
    schema = {
        "type": "struct",
        "optional": False,
        "name": "mydatabase.MYSCHEMA.TYPES.Envelope",
        "fields": [
            {"type": "struct", "optional": True, "field": "before", "fields": [f for f, _ in cols]},
            {"type": "struct", "optional": True, "field": "after", "fields": [f for f, _ in cols]},
            {"type": "struct", "optional": False, "field": "source", "fields": []},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }
    payload = {
        "before": None,
        "after": {f["field"]: v for f, v in cols},
        "source": {
            "connector": "db2",
            "db": "mydatabase",
            "schema": "MYSCHEMA",
            "table": "TYPES",
            "ts_ms": 1559729468470,
            "snapshot": "false",
            "change_lsn": "00000027:00000758:0003",
            "commit_lsn": "00000027:00000758:0005",
        },
        "op": "c",
        "ts_ms": 1559729471739,
    }
    (row,) = decode_raw(spark, [('{"ID": 1}', json.dumps({"schema": schema, "payload": payload}))])
    assert row.error_code is None, row.error_message
    (e,) = events_of(row)
    a, t = e["after"], col_types(e)
    assert a["ID"] == "1" and t["ID"] == "int"
    assert (t["PRICE"], a["PRICE"]) == ("decimal(10,2)", "2.23")
    assert (t["LOSS"], a["LOSS"]) == ("decimal(10,2)", "-2.23")
    assert (t["TINY"], a["TINY"]) == ("decimal(38,3)", "0.005")
    assert (a["ZERO"], a["MINUS_ONE"]) == ("0.00", "-1")
    assert (t["BIG"], a["BIG"]) == ("decimal(38,9)", "12345678901234567890.123456789")
    assert a["BIG_NEG"] == "-12345678901234567890.123456789"
    assert (t["VSD"], a["VSD"]) == ("string", "12.345")
    assert (t["D"], a["D"], a["CD"]) == ("date", "2024-12-16", "2016-02-21")
    assert (t["TS"], a["TS"], a["CTS"]) == ("timestamp", "2024-12-16 21:02:05.000000", "2024-12-16 21:02:05.000000")
    assert a["NTS"] == "2024-12-16 21:02:07.123456"
    assert (t["ZTS"], a["ZTS"]) == ("timestamp", "2024-12-17 07:23:38.790000")
    assert (t["T"], a["T"], a["MT"], a["NT"]) == ("string", "15:33:53.123000", "15:33:53.000000", "21:02:03.000000")
    assert (a["LONG_T"], a["NEG_T"]) == ("838:59:59.000000", "-01:00:00.000000")
    assert (t["I8"], a["I8"]) == ("int", "-5")
    assert (t["F"], a["F"]) == ("float", "3.14")
    assert (t["DBL"], a["DBL"]) == ("double", "1.0")
    assert (t["B"], a["B"]) == ("binary", "YQ==")
    assert (t["FLAG"], a["FLAG"]) == ("boolean", "true")
    # an array of plain items is a Spark array (issue 50), its canonical text the JSON array
    assert (t["ARR"], a["ARR"]) == ("array<int>", "[1,2]")
    assert "NOTE" in a and a["NOTE"] is None
    # identity and key: Db2 source db / schema / table, Kafka key fields
    assert (e["database"], e["schema"], e["table"], e["primary_key"]) == ("mydatabase", "MYSCHEMA", "TYPES", ["ID"])
    # Db2/SQL Server LSNs: hex digits 0000002700000758 0005 (20 digits) -> hi = 0x0000 = 0,
    # lo = 0x0027000007580005 = 10977524214923269; change lsn ...0003 -> 10977524214923267
    assert e["position"] == {
        "order": D(0, 10977524214923269, 0, 10977524214923267, 0, 0),
        "text": "commit_lsn=00000027:00000758:0005 change_lsn=00000027:00000758:0003",
    }
    assert e["event_time_ms"] == 1559729468470


# --------------------------------------------------------------------------------------------
# Db2: transactions, schema changes, truncate, messages, heartbeats, order


def _db2_source(commit_lsn, change_lsn, table="CUSTOMERS"):
    # field set of io.debezium.connector.db2.Source (Db2SourceInfoStructMaker)
    return {
        "version": "2.5.4.Final",
        "connector": "db2",
        "name": "mydatabase",
        "ts_ms": 1580390884335,
        "snapshot": "false",
        "db": "mydatabase",
        "schema": "MYSCHEMA",
        "table": table,
        "change_lsn": change_lsn,
        "commit_lsn": commit_lsn,
    }


def test_db2_transaction_schema_change_and_order(spark):
    # Shapes of the Debezium Db2 connector documentation (transaction boundaries, data events
    # enriched with `transaction`, schema change topic with ddl null); Db2 LSNs are 16 bytes,
    # written 8:8:16 hex digits (io.debezium.connector.db2.Lsn.toString).
    tx = "00000000:00000025:0000000000000d08"
    c1 = "00000000:00000025:0000000000000d98"
    records = [
        {"status": "BEGIN", "id": tx, "ts_ms": 1580390884335, "event_count": None, "data_collections": None},
        {
            "before": None,
            "after": {"ID": 1005, "FIRST_NAME": "john", "LAST_NAME": "doe", "EMAIL": "john.doe@example.org"},
            "source": _db2_source(c1, "00000000:00000025:0000000000000d90"),
            "op": "c",
            "ts_ms": "1580390884335",
            "transaction": {"id": tx, "total_order": "1", "data_collection_order": "1"},
        },
        {
            "before": {"ID": 1005, "FIRST_NAME": "john", "LAST_NAME": "doe", "EMAIL": "john.doe@example.org"},
            "after": {"ID": 1005, "FIRST_NAME": "john", "LAST_NAME": "doe", "EMAIL": "noreply@example.org"},
            "source": _db2_source(c1, "00000000:00000025:0000000000000d94"),
            "op": "u",
            "ts_ms": "1580390884336",
            "transaction": {"id": tx, "total_order": "2", "data_collection_order": "2"},
        },
        {
            "status": "END",
            "id": tx,
            "ts_ms": 1580390884340,
            "event_count": 2,
            "data_collections": [{"data_collection": "mydatabase.MYSCHEMA.CUSTOMERS", "event_count": 2}],
        },
        {
            "source": {**_db2_source("00000000:00000026:0000000000000001", None), "snapshot": "true"},
            "ts_ms": 1588252618953,
            "databaseName": "MYDATABASE",
            "schemaName": "MYSCHEMA",
            "ddl": None,
            "tableChanges": [
                {
                    "type": "CREATE",
                    "id": '"MYSCHEMA"."CUSTOMERS"',
                    "table": {
                        "defaultCharsetName": None,
                        "primaryKeyColumnNames": ["ID"],
                        "columns": [
                            {"name": "ID", "jdbcType": 4, "nativeType": None, "typeName": "int identity", "typeExpression": "int identity", "charsetName": None, "length": 10, "scale": 0, "position": 1, "optional": False, "autoIncremented": False, "generated": False},
                            {"name": "FIRST_NAME", "jdbcType": 12, "typeName": "varchar", "length": 255, "position": 2, "optional": False},
                            {"name": "BALANCE", "jdbcType": 3, "typeName": "decimal", "length": 10, "scale": 2, "position": 3, "optional": True},
                        ],
                    },
                }
            ],
        },
        {"before": None, "after": None, "source": _db2_source("00000000:00000027:0000000000000001", None), "op": "t", "ts_ms": 1580390890000},
        # PostgreSQL logical decoding message: nothing to apply
        {"op": "m", "ts_ms": 1580390890001, "source": {"connector": "postgresql", "db": "d", "lsn": 1}, "message": {"prefix": "p", "content": "AA=="}},
        # Debezium heartbeat topic value
        {"ts_ms": 1588252618953},
    ]
    rows = decode_raw(spark, [(None, json.dumps(r)) for r in records])
    assert [r.error_code for r in rows] == [None] * 8
    evs = [events_of(r) for r in rows]
    assert [len(x) for x in evs] == [1, 1, 1, 1, 1, 1, 0, 1]
    (begin,), (ins,), (upd,), (end,), (ddl,), (trunc,), _, (hb,) = evs
    assert (begin["kind"], begin["tx_id"], begin["tx_size"], begin["event_time_ms"]) == ("tx_begin", tx, None, 1580390884335)
    assert (end["kind"], end["tx_id"], end["tx_size"]) == ("tx_end", tx, 2)
    assert (ins["tx_id"], ins["tx_seq"], upd["tx_seq"]) == (tx, 1, 2)
    assert (ins["database"], ins["schema"], ins["table"]) == ("mydatabase", "MYSCHEMA", "CUSTOMERS")
    # 32 hex digits: hi = 0000000000000025 = 37, lo = 0000000000000d98 = 3480; change lsn
    # ...0d90 = 3472; total_order 1
    assert ins["position"]["order"] == D(37, 3480, 37, 3472, 0, 1)
    assert ins["position"]["text"] == f"commit_lsn={c1} change_lsn=00000000:00000025:0000000000000d90 total_order=1"
    assert upd["position"]["order"] == D(37, 3480, 37, 3476, 0, 2)
    assert ins["position"]["order"] < upd["position"]["order"] < trunc["position"]["order"]
    assert upd["after"]["EMAIL"] == "noreply@example.org" and upd["before"]["EMAIL"] == "john.doe@example.org"
    # schema change: Db2 writes ddl null; the two-part id is "schema"."table"; database as the
    # data events name it (source.db), not databaseName's upper-case spelling
    assert (ddl["kind"], ddl["ddl"], ddl["database"], ddl["schema"], ddl["table"]) == ("ddl", None, "mydatabase", "MYSCHEMA", "CUSTOMERS")
    assert ddl["primary_key"] == ["ID"]
    assert [(c["name"], c["source_type"], c["spark_type"], c["nullable"]) for c in ddl["columns"]] == [
        ("ID", "int identity", "int", False),
        ("FIRST_NAME", "varchar", "string", False),
        ("BALANCE", "decimal", "decimal(10,2)", True),
    ]
    assert ddl["position"]["order"] == D(38, 1, 0, 0, 0, 0)
    assert (trunc["kind"], trunc["op"], trunc["table"], trunc["before"], trunc["after"]) == ("data", "t", "CUSTOMERS", None, None)
    assert (hb["kind"], hb["event_time_ms"], hb["table"]) == ("heartbeat", 1588252618953, None)


def test_decimals_with_more_than_34_digits_are_exact(spark):
    # Regression: the decoder took the digits of the unscaled value with abs(), which Spark 4.0
    # rounds to 34 significant digits on decimal(38,0): 37 nines came back as 1 followed by 37
    # zeros and 38 nines failed the job (NUMERIC_VALUE_OUT_OF_RANGE). Bytes are Java's
    # BigInteger.toByteArray() of the unscaled values, computed by hand:
    # 10^38-1 = 4b3b4ca85a86c47a098a223fffffffff, -(10^38-1) = b4c4b357a5793b85f675ddc000000001,
    # -(10^37-1) = f87a11ef2a25b926ff0bc96000000001.
    dec = "org.apache.kafka.connect.data.Decimal"
    params = {"scale": "10", "connect.decimal.precision": "38"}
    values = {
        "MAX": "SztMqFqGxHoJiiI//////w==",
        "MIN": "tMSzV6V5O4X2dd3AAAAAAQ==",
        "NEG37": "+HoR7yoluSb/C8lgAAAAAQ==",
    }
    fields = [_connect_field(n, "bytes", dec, params) for n in values]
    schema = {"type": "struct", "optional": False, "fields": [
        {"type": "struct", "optional": True, "field": "after", "fields": fields},
        {"type": "string", "optional": False, "field": "op"},
    ]}
    payload = {"before": None, "after": values, "source": {"connector": "mysql", "db": "d", "table": "t", "file": "mysql-bin.000001",
                                                          "pos": 4, "row": 0, "ts_ms": 1}, "op": "c", "ts_ms": 1}
    (row,) = decode_raw(spark, [(None, json.dumps({"schema": schema, "payload": payload}))])
    assert row.error_code is None, row.error_message
    (e,) = events_of(row)
    assert e["after"] == {
        "MAX": "9999999999999999999999999999.9999999999",
        "MIN": "-9999999999999999999999999999.9999999999",
        "NEG37": "-999999999999999999999999999.9999999999",
    }


def test_schema_change_fixtures(spark, tmp_path):
    # memiiso serde-with-array2.json: MySQL schema-change topic message (Debezium 1.7.0.Final,
    # empty tableChanges); paimon mysql/debezium-event-change.json: Flink CDC's historyRecord
    src = tmp_path / "ddl.txt"
    src.write_text(
        one_line(f"{MEMIISO}/serde-with-array2.json", tmp_path).read_text(encoding="utf-8")
        + one_line(f"{PAIMON}/mysql/debezium-event-change.json", tmp_path).read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    _, events, rejects = decode_file(spark, FMT, src)
    assert rejects == []
    create, alter = events
    assert (create["kind"], create["database"], create["schema"], create["table"]) == ("ddl", "inventory", None, "geom")
    assert create["ddl"].startswith("CREATE TABLE `geom`")
    assert create["position"] == {"order": D(3, 154, 0, 0), "text": "mysql-bin.000003:154:0"}
    assert create["event_time_ms"] == 1638187055631
    # id "tinyint1_not_bool_test"."t1": two parts without a schema -> database.table (MySQL)
    assert (alter["kind"], alter["database"], alter["schema"], alter["table"]) == ("ddl", "tinyint1_not_bool_test", None, "t1")
    assert alter["ddl"] == "ALTER TABLE t1 ADD COLUMN _new_tinyint1 TINYINT(1)"
    assert alter["primary_key"] == ["pk"]
    assert [(c["name"], c["spark_type"]) for c in alter["columns"]] == [("pk", "int"), ("_tinyint1", "int"), ("_new_tinyint1", "int")]
    assert alter["position"]["order"] == D(3, 219, 0, 0)


# --------------------------------------------------------------------------------------------
# Bad input, tombstones


def test_bad_records_are_rejected_with_codes(spark, tmp_path):
    # valid records (Flink exclude file, lines 1 and 16) around broken ones
    flink = fixture_lines(f"{FLINK}/debezium-data-schema-exclude.txt", tmp_path).read_text(encoding="utf-8").splitlines()
    enveloped = json.loads(fixture_lines(f"{FLINK}/debezium-data-schema-include.txt", tmp_path).read_text(encoding="utf-8").splitlines()[0])
    enveloped["payload"]["after"]["id"] = "abc"  # int32 column holding a string
    no_table = json.loads(flink[0])
    no_table["source"]["table"] = None
    bad_op = json.loads(flink[0])
    bad_op["op"] = "x"
    bad_lsn = json.loads(flink[0])
    bad_lsn["source"] = {"connector": "sqlserver", "db": "testDB", "schema": "dbo", "table": "t", "commit_lsn": "zz:00", "change_lsn": None}
    src = lines_file(
        tmp_path,
        [
            flink[0],
            flink[0][:120],  # truncated JSON
            "\x00\x01 not json at all",
            "[1, 2, 3]",
            json.dumps(bad_op),
            json.dumps(enveloped),
            json.dumps(no_table),
            json.dumps(bad_lsn),
            '{"schema": {"type": "struct"}, "payload": "not an object"}',
            flink[15],
        ],
    )
    decoded, events, rejects = decode_file(spark, FMT, src)
    assert decoded.count() == 10  # one output row per input record
    assert [(r.source_record.line, r.error_code) for r in rejects] == [
        (2, RejectCode.MALFORMED_JSON.value),
        (3, RejectCode.MALFORMED_JSON.value),
        (4, RejectCode.NOT_AN_OBJECT.value),
        (5, RejectCode.UNKNOWN_OP.value),
        (6, RejectCode.BAD_VALUE.value),
        (7, RejectCode.MISSING_TABLE.value),
        (8, RejectCode.BAD_POSITION.value),
        (9, RejectCode.SCHEMA_MISMATCH.value),
    ]
    assert all(not r.events and r.error_message for r in rejects)
    assert "id" in rejects[4].error_message and "x" in rejects[3].error_message
    assert [(e["op"], (e["after"] or e["before"])["id"]) for e in events] == [("c", "101"), ("d", "111")]


def test_tombstones_are_skipped(spark):
    # a Kafka tombstone (null value after a delete) and JsonConverter's null rendering
    key = '{"schema": {"type": "struct", "fields": [{"type": "int32", "optional": false, "field": "id"}]}, "payload": {"id": 111}}'
    # and the line ``null``: kafka-console-consumer's rendering of a tombstone in a dumped file
    rows = decode_raw(
        spark, [(key, None), (key, '{"schema":null,"payload":null}'), ('{"id": 1}', None), (None, "null"), (key, " null\r")]
    )
    assert len(rows) == 5
    for r in rows:
        assert r.error_code is None and r.error_message is None
        assert r.events == []
    assert rows[0].raw_value is None and rows[0].raw_key == key.encode("utf-8")
    # other formats have no tombstones: there the line is JSON that is not an object
    canal = decode_raw(spark, [(None, "null")], fmt="canal-json")
    assert [r.error_code for r in canal] == [RejectCode.NOT_AN_OBJECT.value]


def test_hostile_values_are_rejects_even_under_ansi(spark):
    # values that overflow every conversion: decoders must reject, never fail the job, also
    # when the session runs in ANSI mode (where casts and conv() raise on overflow)
    schema = {
        "type": "struct",
        "fields": [
            {
                "type": "struct",
                "field": "after",
                "fields": [
                    _connect_field("T", "int64", "io.debezium.time.MicroTime"),
                    _connect_field("D", "int32", "io.debezium.time.Date"),
                    _connect_field("TS", "int64", "io.debezium.time.Timestamp"),
                    _connect_field("DEC", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "2"}),
                    _connect_field("I", "int32"),
                ],
            }
        ],
    }
    after = {
        "T": -9223372036854775808,
        "D": 99999999999,
        "TS": 9223372036854775807,
        "DEC": "f" + "/" * 42 + "w==",  # 33 bytes: beyond decimal(38,0)
        "I": 99999999999,  # beyond int32
    }
    source = {"connector": "db2", "db": "d", "schema": "S", "table": "T", "commit_lsn": "00000025:00000d98:00a2"}
    long_lsn = {**source, "commit_lsn": "ffffffff:ffffffff:ffffffffffffffff:ffffffff"}  # 40 hex digits
    records = [
        json.dumps({"schema": schema, "payload": {"before": None, "after": after, "source": source, "op": "c"}}),
        json.dumps({"before": None, "after": {"I": 1}, "source": long_lsn, "op": "c"}),
        json.dumps({"before": None, "after": {"I": 1}, "source": source, "op": "c"}),
    ]
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        rows = decode_raw(spark, [(None, r) for r in records])
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)
    assert [r.error_code for r in rows] == [RejectCode.BAD_VALUE.value, RejectCode.BAD_POSITION.value, None]
    assert rows[0].error_message.endswith("column(s) T, D, TS, DEC, I")


# --------------------------------------------------------------------------------------------
# Registry and detection (no Spark)


def test_registered_and_detects_its_own_messages():
    from cdclake import formats

    dec = formats.get(FMT)
    assert dec.name == FMT and "debezium-json" in formats.names()
    sample = [
        b'{"before":null,"after":{"id":1},"source":{"db":"d","table":"t"},"op":"c","ts_ms":1}',
        b'{"schema":{},"payload":{"before":null,"after":{"id":1},"source":{},"op":"r"}}',
        b'{"status":"END","id":"1","event_count":2,"data_collections":[]}',
        b'{"data":[{"id":"1"}],"type":"INSERT","isDdl":false}',
    ]
    assert dec.detect_score(sample) == pytest.approx(0.75)


GOLDEN = Path(__file__).parent / "golden"


def test_the_real_postgresql_connector_s_records(spark):
    # records the real connector wrote (Debezium 3.6.1.Final, pgoutput, transaction metadata on;
    # golden/postgres-3.6.1.jsonl, captured by tests/real's set-up): transaction ids are
    # <txId>:<LSN of the record>, numerics of 45 and 48 digits, a NaN, an unchanged TOASTed text
    from cdclake.formats.debezium_json.wire import PLACEHOLDER

    _, events, rejects = decode_file(spark, FMT, GOLDEN / "postgres-3.6.1.jsonl")
    assert rejects == []
    kinds = [(e["kind"], e["table"], e["op"], e["tx_id"], e["tx_size"]) for e in events]
    # the transaction 729 of three changes over two tables, and the empty transaction 748
    assert kinds[:2] == [("tx_begin", None, None, "729", None), ("tx_end", None, None, "729", 3)]
    assert kinds[2:4] == [("tx_begin", None, None, "748", None), ("tx_end", None, None, "748", 0)]
    in_729 = [(t, op, s) for (k, t, op, i, _), e in zip(kinds, events) if i == "729" and k == "data" for s in [e["tx_seq"]]]
    assert sorted(in_729, key=lambda x: x[2]) == [("customers", "c", 1), ("orders", "c", 2), ("customers", "u", 3)]
    by = {(e["table"], e["op"], (e["after"] or {}).get("id")): e for e in events if e["kind"] == "data"}
    # numeric without a scale (VariableScaleDecimal), 45 digits; numeric(50,10); NaN as null
    assert by["orders", "r", "1"]["after"]["amount"] == "123456789012345678901234567890123456789012345.5"
    first, updated = by["types_all", "r", "1"]["after"], by["types_all", "u", "1"]["after"]
    assert first["c_num"] == "12345678901234567890123456789012345678.1234567891"
    assert first["c_num_var"] == "0." + "0" * 29 + "1"
    assert (updated["c_num"], updated["c_num_var"]) == ("-99999999999999999999999999999999999999.9999999999", None)
    types = {c["name"]: c["spark_type"] for c in by["types_all", "r", "1"]["columns"]}
    assert (types["c_num"], types["c_num_var"], types["c_int_arr"], types["c_text_arr"], types["c_num_arr"]) == (
        "string", "string", "array<int>", "array<string>", "string")
    assert (first["c_int_arr"], first["c_text_arr"]) == ("[1,2,3]", '["x","y z"]')
    # the update that left the TOASTed body unchanged carries the placeholder: body not carried
    doc = by["docs", "u", "1"]
    assert doc["after"]["body"] == PLACEHOLDER and doc["present"] == ["id", "title"]
    assert all(e["present"] is None for e in events if e is not doc)
