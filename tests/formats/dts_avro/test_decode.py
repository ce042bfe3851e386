"""Tests of the ``dts-avro`` decoder and of Avro container files of DTS records.

No real DTS Avro record is public (shared/fixtures/SOURCES.md, ``dts-avro``): every record here is
hand-written on the shipped schema (``cdclake/formats/dts_avro/avsc``, Alibaba's
``aliyun-dts-subscribe-demo``) and encoded with fastavro's ``schemaless_writer``, the way the
demo's ``DTSConsumerDemo.py`` reads them. Value conventions follow the official SDK (see the
decoder's docstring): ``sourceTimestamp`` in seconds, ``millis`` of Timestamp / DateTime in
microseconds, ``tags["pk_uk_info"]`` JSON for the primary key, ``\\u002E`` for a dot in a name.

All Kafka-style records are decoded together, once, to keep the run lean.
"""

from __future__ import annotations

import io
import json
import os
from datetime import date, datetime
from decimal import Decimal

import pytest
from fastavro import parse_schema, schemaless_writer, writer

from cdclake.formats.base import DecodeOptions
from cdclake.formats.dts_avro import RECORD_SCHEMA, DtsAvroDecoder, read_avro_records
from cdclake.model import RAW_SCHEMA

FMT = "dts-avro"
NS = "com.alibaba.dts.formats.avro."
PARSED = parse_schema(RECORD_SCHEMA)


# --- record builders ------------------------------------------------------------------------


def encode(rec: dict) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, PARSED, rec)
    return buf.getvalue()


def record(op, rid, *, obj="shop.orders", ts=None, txid="", source="MySQL", fields=None, before=None, after=None, tags=None):
    return {
        "version": 1,
        "id": rid,
        "sourceTimestamp": 1700000000 + rid if ts is None else ts,
        "sourcePosition": f"{4000 + rid}@7",
        "safeSourcePosition": "",
        "sourceTxid": txid,
        "source": {"sourceType": source, "version": "8.0.32"},
        "operation": op,
        "objectName": obj,
        "processTimestamps": None,
        "tags": tags or {},
        "fields": fields,
        "beforeImages": before,
        "afterImages": after,
        "bornTimestamp": 0,
    }


def Int(v, precision=4):
    return (NS + "Integer", {"precision": precision, "value": str(v)})


def Chars(v, charset="utf8mb4"):
    return (NS + "Character", {"charset": charset, "value": v if isinstance(v, bytes) else v.encode("utf-8")})


def Dec(v, precision, scale):
    return (NS + "Decimal", {"value": v, "precision": precision, "scale": scale})


def Flt(v):
    return (NS + "Float", {"value": v, "precision": 0, "scale": 0})


def Ts(seconds, micros):
    return (NS + "Timestamp", {"timestamp": seconds, "millis": micros})


def Dt(year=None, month=None, day=None, hour=None, minute=None, second=None, micros=None):
    return (NS + "DateTime", {"year": year, "month": month, "day": day, "hour": hour, "minute": minute, "second": second, "millis": micros})


def TsTz(dt, tz):
    return (NS + "TimestampWithTimeZone", {"value": dt[1], "timezone": tz})


def BinGeo(v):
    return (NS + "BinaryGeometry", {"type": "POINT", "value": v})


def TxtGeo(v):
    return (NS + "TextGeometry", {"type": "POINT", "value": v})


def BinObj(v):
    return (NS + "BinaryObject", {"type": "BLOB", "value": v})


def TxtObj(v, typ="JSON"):
    return (NS + "TextObject", {"type": typ, "value": v})


EMPTY_NULL, EMPTY_NONE = "NULL", "NONE"  # the EmptyObject enum's symbols

# shop.orders, a MySQL table: (name, dataTypeNumber); the codes are MySQL's column type codes
ORDERS = [
    ("id", 3),  # MYSQL_TYPE_INT32
    ("name", 253),  # MYSQL_TYPE_VAR_STRING
    ("amount", 246),  # MYSQL_TYPE_DECIMAL_NEW
    ("price", 5),  # MYSQL_TYPE_DOUBLE
    ("created", 17),  # MYSQL_TYPE_TIMESTAMP_NEW
    ("updated", 18),  # MYSQL_TYPE_DATETIME_NEW
    ("day", 10),  # MYSQL_TYPE_DATE
    ("dur", 19),  # MYSQL_TYPE_TIME_NEW
    ("yr", 13),  # MYSQL_TYPE_YEAR
    ("big", 8),  # MYSQL_TYPE_INT64 (BIGINT UNSIGNED here)
    ("latin", 254),  # MYSQL_TYPE_STRING
    ("geo", 255),  # MYSQL_TYPE_GEOMETRY
    ("blob", 252),  # MYSQL_TYPE_BLOB
    ("doc", 245),  # MYSQL_TYPE_JSON
    ("gone", 253),  # always EmptyObject NULL
]
FIELDS = [{"name": n, "dataTypeNumber": c} for n, c in ORDERS]
PK_TAGS = {"pk_uk_info": json.dumps({"PRIMARY": ["id"], "uk_name": ["name"]})}


def orders_row(id_, name, amount, big, **over):
    values = {
        "id": Int(id_),
        "name": Chars(name),
        "amount": Dec(amount, 10, 2),
        "price": Flt(19.99),
        "created": Ts(1700000000, 123456),
        "updated": Dt(2024, 2, 29, 13, 5, 6, 7),
        "day": Dt(2024, 2, 29),
        "dur": Dt(hour=-838, minute=59, second=59),
        "yr": Dt(2021),
        "big": Int(big, 8),
        "latin": Chars(b"caf\xe9", "latin1"),
        "geo": BinGeo(b"\x01\x02"),
        "blob": BinObj(b"\x00\xff"),
        "doc": TxtObj('{"a": 1}'),
        "gone": EMPTY_NULL,
    }
    values.update(over)
    return [values[n] for n, _ in ORDERS]


ROW1 = orders_row(1, "Zoë ☕", "12.50", "18446744073709551615")
ROW1_NEW = orders_row(1, "Zoë ☕☕", "13.75", "18446744073709551615", price=None)
ROW2 = orders_row(2, "two", "0.01", 5)
ROW3 = orders_row(3, "snap", "3.00", 7)

# The stream of shop.orders, in commit order (also the content of the container-file tests).
STREAM = [
    record("BEGIN", 1000, obj=None, txid="tx-1"),
    record("INSERT", 1001, txid="tx-1", fields=FIELDS, after=ROW1, tags=PK_TAGS),
    record("INSERT", 1002, txid="tx-1", fields=FIELDS, after=ROW2, tags=PK_TAGS),
    record("UPDATE", 1003, txid="tx-1", fields=FIELDS, before=ROW1, after=ROW1_NEW, tags=PK_TAGS),
    record("DELETE", 1004, txid="tx-1", fields=FIELDS, before=ROW2, tags=PK_TAGS),
    record("COMMIT", 1005, obj=None, txid="tx-1"),
    record("INIT", 1006, fields=FIELDS, after=ROW3, tags=PK_TAGS),
    record("DDL", 1007, after="ALTER TABLE orders ADD COLUMN note varchar(10)"),
    record("HEARTBEAT", 1008, obj=None, ts=1700000000123),  # already ms: kept
    record("NOOP", 1009, obj=None),
    record("CHECKPOINT", 1010, obj=None),
    record("ROLLBACK", 1011, obj=None, txid="tx-2"),
]

# A PostgreSQL source: db.schema.table, codes that are not MySQL's, a partial after image.
PG_FIELDS = [{"name": "id", "dataTypeNumber": 23}, {"name": "at", "dataTypeNumber": 1184}, {"name": "shape", "dataTypeNumber": 600}, {"name": "memo", "dataTypeNumber": 25}]
PG_UPDATE = record(
    "UPDATE",
    2001,
    obj="pgdb.public.items\\u002Ev2",
    source="PostgreSQL",
    fields=PG_FIELDS,
    before=[Int(7), TsTz(Dt(2024, 1, 1, 8, 0, 0, 0), "+08:00"), TxtGeo("POINT(1 2)"), Chars("old")],
    after=[Int(7), TsTz(Dt(2024, 1, 1, 8, 0, 0, 500000), "Asia/Shanghai"), TxtGeo("POINT(3 4)"), EMPTY_NONE],
)

ONE_INT = [{"name": "id", "dataTypeNumber": 3}]
ONE_STR = [{"name": "s", "dataTypeNumber": 253}]
BAD = {
    "random": os.urandom(64),
    "truncated": encode(STREAM[1])[:-9],
    "empty": b"",
    "no_object_name": encode(record("INSERT", 3001, obj=None, fields=ONE_INT, after=[Int(1)])),
    "db_only": encode(record("DELETE", 3002, obj="shop", fields=ONE_INT, before=[Int(1)])),
    "insert_without_after": encode(record("INSERT", 3003, fields=ONE_INT)),
    "delete_without_before": encode(record("DELETE", 3004, fields=ONE_INT, after=[Int(1)])),
    "ddl_without_text": encode(record("DDL", 3005)),
    "no_fields": encode(record("INSERT", 3006, after=[Int(1)])),
    "image_length": encode(record("INSERT", 3007, fields=ONE_INT, after=[Int(1), Int(2)])),
    "char_for_int": encode(record("INSERT", 3008, fields=ONE_INT, after=[Chars("1")])),
    "int_not_a_number": encode(record("INSERT", 3009, fields=ONE_INT, after=[Int("x1")])),
    "bad_utf8": encode(record("INSERT", 3010, fields=ONE_STR, after=[Chars(b"\xff\xfe")])),
    "gbk_without_java_charsets": encode(record("INSERT", 3011, fields=ONE_STR, after=[Chars("你好".encode("gbk"), "gbk")])),
    "bad_date": encode(record("INSERT", 3012, fields=[{"name": "d", "dataTypeNumber": 10}], after=[Dt(2023, 2, 30)])),
    "unknown_zone": encode(record("UPDATE", 3013, source="Oracle", fields=ONE_INT, after=[TsTz(Dt(2024, 1, 1, 0, 0, 0, 0), "Mars/Olympus")])),
}
TOMBSTONE = None


def sr(i):
    return (None, None, None, None, "kafka-like", i, None)


@pytest.fixture(scope="module")
def decoded(spark):
    """Every record above decoded at once: {position text or bad-case name: row}."""
    values = [encode(r) for r in STREAM] + [encode(PG_UPDATE)] + list(BAD.values()) + [TOMBSTONE]
    names = [None] * (len(STREAM) + 1) + list(BAD) + ["tombstone"]
    raw = spark.createDataFrame([(None, v, sr(i + 1)) for i, v in enumerate(values)], RAW_SCHEMA)
    rows = DtsAvroDecoder().decode(raw, DecodeOptions()).orderBy("source_record.line").collect()
    assert len(rows) == len(values)  # one output row per input record
    by_name = {}
    for name, row in zip(names, rows):
        by_name[name or str(row.source_record.line)] = row
    return by_name


def events(row):
    return [e.asDict(recursive=True) for e in row.events]


def one(row):
    assert row.error_code is None, row.error_message
    (e,) = events(row)
    return e


def pos(rid):
    return {"order": [Decimal(rid)], "text": f"{rid}:{4000 + rid}@7"}


# canonical text of ROW1, value by value (TS_FORMAT timestamps are UTC):
ROW1_TEXT = {
    "id": "1",
    "name": "Zoë ☕",  # utf8mb4 bytes decoded as UTF-8
    "amount": "12.50",  # Decimal value text kept
    "price": "19.99",  # Float 19.99 as Spark's double text
    # Timestamp{timestamp=1700000000 s, millis=123456 us}: 1700000000 s = 19675 days + 80000 s
    # = 2023-11-14 22:13:20 UTC, plus 123456 microseconds
    "created": "2023-11-14 22:13:20.123456",
    "updated": "2024-02-29 13:05:06.000007",  # DateTime millis=7 is 7 microseconds
    "day": "2024-02-29",  # DateTime of a DATE column -> date text
    "dur": "-838:59:59",  # TIME -838:59:59 as text
    "yr": "2021",  # YEAR -> int text
    "big": "18446744073709551615",  # 2^64 - 1 does not fit a bigint -> decimal(20,0)
    "latin": "café",  # latin1 0xE9 -> é (ISO-8859-1)
    "geo": "AQI=",  # base64 of 01 02
    "blob": "AP8=",  # base64 of 00 FF
    "doc": '{"a": 1}',
    "gone": None,  # EmptyObject NULL
}
ORDERS_COLUMNS = [
    ("id", "MYSQL_TYPE_INT32", "bigint"),
    ("name", "MYSQL_TYPE_VAR_STRING", "string"),
    ("amount", "MYSQL_TYPE_DECIMAL_NEW", "decimal(10,2)"),
    ("price", "MYSQL_TYPE_DOUBLE", "double"),
    ("created", "MYSQL_TYPE_TIMESTAMP_NEW", "timestamp"),
    ("updated", "MYSQL_TYPE_DATETIME_NEW", "timestamp"),
    ("day", "MYSQL_TYPE_DATE", "date"),
    ("dur", "MYSQL_TYPE_TIME_NEW", "string"),
    ("yr", "MYSQL_TYPE_YEAR", "int"),
    ("big", "MYSQL_TYPE_INT64", "decimal(20,0)"),
    ("latin", "MYSQL_TYPE_STRING", "string"),
    ("geo", "MYSQL_TYPE_GEOMETRY", "binary"),
    ("blob", "MYSQL_TYPE_BLOB", "binary"),
    ("doc", "MYSQL_TYPE_JSON", "string"),
    # always NULL: a VARCHAR code's type is text or bytes by the value's charset, so not stated
    # (the applier creates such a column by its code, string: test_end_to_end_container_file_to_delta)
    ("gone", "MYSQL_TYPE_VAR_STRING", None),
]


def test_insert_every_mysql_branch(decoded):
    e = one(decoded["2"])
    assert (e["format"], e["kind"], e["op"]) == (FMT, "data", "c")
    assert (e["database"], e["schema"], e["table"]) == ("shop", None, "orders")
    assert e["before"] is None
    assert e["after"] == ROW1_TEXT
    assert e["present"] is None
    assert e["primary_key"] == ["id"]  # tags.pk_uk_info PRIMARY
    assert [(c["name"], c["source_type"], c["spark_type"]) for c in e["columns"]] == ORDERS_COLUMNS
    amount = next(c for c in e["columns"] if c["name"] == "amount")
    assert (amount["precision"], amount["scale"]) == (10, 2)
    assert e["position"] == pos(1001)
    assert e["tx_id"] == "tx-1"
    assert e["event_time_ms"] == (1700000000 + 1001) * 1000  # sourceTimestamp is seconds
    assert (e["ddl"], e["tx_seq"], e["tx_last"], e["tx_size"]) == (None, None, None, None)
    assert e["source_record"]["line"] == 2


def test_update_delete_and_snapshot_rows(decoded):
    up = one(decoded["4"])
    assert up["op"] == "u"
    assert up["before"] == ROW1_TEXT
    assert up["after"] == {**ROW1_TEXT, "name": "Zoë ☕☕", "amount": "13.75", "price": None}
    assert up["position"] == pos(1003)
    second = one(decoded["3"])
    assert second["after"]["big"] == "5"
    # only ROW1's big needs decimal(20,0); ROW2's fits a bigint (the applier widens the two)
    assert [c["spark_type"] for c in second["columns"] if c["name"] == "big"] == ["bigint"]
    d = one(decoded["5"])
    assert (d["op"], d["after"]) == ("d", None)
    assert d["before"]["id"] == "2" and d["before"]["amount"] == "0.01"
    r = one(decoded["7"])
    assert (r["op"], r["after"]["id"], r["after"]["name"], r["tx_id"]) == ("r", "3", "snap", None)


def test_ddl_transactions_heartbeat_and_skipped_operations(decoded):
    ddl = one(decoded["8"])
    assert (ddl["kind"], ddl["op"], ddl["database"], ddl["table"]) == ("ddl", None, "shop", "orders")
    assert ddl["ddl"] == "ALTER TABLE orders ADD COLUMN note varchar(10)"  # afterImages string branch
    assert ddl["position"] == pos(1007)
    begin, commit, rollback = one(decoded["1"]), one(decoded["6"]), one(decoded["12"])
    assert [(x["kind"], x["tx_id"], x["database"], x["table"]) for x in (begin, commit, rollback)] == [
        ("tx_begin", "tx-1", None, None),
        ("tx_end", "tx-1", None, None),
        ("tx_end", "tx-2", None, None),
    ]
    hb = one(decoded["9"])
    assert (hb["kind"], hb["database"], hb["table"], hb["event_time_ms"]) == ("heartbeat", None, None, 1700000000123)
    assert hb["position"] == pos(1008)
    for skipped in ("10", "11"):  # NOOP, CHECKPOINT: no event, no error
        assert decoded[skipped].error_code is None and decoded[skipped].events == []


def test_other_source_schema_tz_text_geometry_and_partial_image(decoded):
    e = one(decoded["13"])
    assert (e["op"], e["database"], e["schema"], e["table"]) == ("u", "pgdb", "public", "items.v2")
    # TimestampWithTimeZone 2024-01-01 08:00:00 at +08:00 (and Asia/Shanghai, also +08:00 then)
    # is 2024-01-01 00:00:00 UTC; millis=500000 is half a second
    assert e["before"] == {"id": "7", "at": "2024-01-01 00:00:00.000000", "shape": "POINT(1 2)", "memo": "old"}
    assert e["after"] == {"id": "7", "at": "2024-01-01 00:00:00.500000", "shape": "POINT(3 4)"}  # memo: NONE
    assert e["present"] == ["id", "at", "shape"]
    assert [(c["name"], c["source_type"], c["spark_type"]) for c in e["columns"]] == [
        ("id", "PostgreSQL type 23", "bigint"),
        ("at", "PostgreSQL type 1184", "timestamp"),
        ("shape", "PostgreSQL type 600", "string"),
        ("memo", "PostgreSQL type 25", "string"),
    ]
    assert e["primary_key"] is None


@pytest.mark.parametrize(
    "case, code, message",
    [
        ("random", "AVRO_DECODE_ERROR", "not an Avro binary datum"),
        ("truncated", "AVRO_DECODE_ERROR", "not an Avro binary datum"),
        ("empty", "AVRO_DECODE_ERROR", "not an Avro binary datum"),
        ("no_object_name", "MISSING_TABLE", "objectName null"),
        ("db_only", "MISSING_TABLE", "objectName 'shop'"),
        ("insert_without_after", "MISSING_IMAGE", "INSERT without an afterImages array"),
        ("delete_without_before", "MISSING_IMAGE", "DELETE without a beforeImages array"),
        ("ddl_without_text", "MISSING_IMAGE", "DDL without its text"),
        ("no_fields", "SCHEMA_MISMATCH", "without a 'fields' array"),
        ("image_length", "SCHEMA_MISMATCH", "one value per entry"),
        ("char_for_int", "BAD_VALUE", "column id: after value is a Character, which does not fit MYSQL_TYPE_INT32"),
        ("int_not_a_number", "BAD_VALUE", "column id: after value (Integer) cannot be read as bigint"),
        ("bad_utf8", "BAD_VALUE", "column s: after value (Character charset utf8mb4) cannot be read as string"),
        ("gbk_without_java_charsets", "BAD_VALUE", "charset gbk"),
        ("bad_date", "BAD_VALUE", "column d: after value (DateTime) cannot be read as date"),
        ("unknown_zone", "BAD_VALUE", "(TimestampWithTimeZone) cannot be read as timestamp"),
    ],
)
def test_rejects(decoded, case, code, message):
    row = decoded[case]
    assert row.error_code == code
    assert message in row.error_message
    assert row.events == []
    assert row.raw_value == BAD[case]


def test_tombstone_is_neither_event_nor_reject(decoded):
    row = decoded["tombstone"]
    assert (row.error_code, row.events, row.raw_value) == (None, [], None)


def write_container(path, records):
    with open(path, "wb") as fo:
        writer(fo, PARSED, records, sync_interval=200)  # several blocks per file


def test_container_file_gives_the_same_events_with_file_and_record_number(spark, tmp_path, decoded):
    path = tmp_path / "dts-export.bin"  # the name need not end in .avro
    write_container(path, STREAM)
    raw = read_avro_records(spark, [str(tmp_path)])
    assert raw.schema.simpleString() == RAW_SCHEMA.simpleString()
    rows = DtsAvroDecoder().decode(raw, DecodeOptions()).orderBy("source_record.line").collect()
    assert [r.source_record.line for r in rows] == list(range(1, len(STREAM) + 1))
    assert {r.source_record.file.removeprefix("file:").lstrip("/") for r in rows} == {str(path.resolve()).lstrip("/")}
    for r, rec in zip(rows, STREAM):
        assert r.raw_value == encode(rec)  # re-encoded to the Kafka value bytes
        strip = lambda evs: [{k: v for k, v in e.items() if k != "source_record"} for e in evs]  # noqa: E731
        assert strip(events(r)) == strip(events(decoded[str(r.source_record.line)]))


def test_detect_score():
    d = DtsAvroDecoder()
    assert d.detect_score([encode(r) for r in STREAM[:3]]) == 1.0
    assert d.detect_score([b'{"type": "INSERT", "data": []}']) == 0.0
    buf = io.BytesIO()
    writer(buf, PARSED, STREAM[:2])
    assert d.detect_score([buf.getvalue().split(b"\n")[0], b"junk"]) == 1.0


def test_end_to_end_container_file_to_delta(spark, tmp_path):
    from cdclake.pipeline import ingest_batch

    src = tmp_path / "in"
    src.mkdir()
    write_container(src / "orders.avro", STREAM)
    target = str(tmp_path / "lake")
    raw = read_avro_records(spark, [str(src)])
    s = ingest_batch(spark, raw, DtsAvroDecoder(), DecodeOptions(), target)
    # 12 records; NOOP and CHECKPOINT decode to nothing: 10 events, no rejects
    assert (s.records_in, s.decoded, s.rejected, s.events) == (12, 12, 0, 10)
    df = spark.read.format("delta").load(f"{target}/shop.orders")
    types = dict(df.dtypes)
    assert {n: types[n] for n, _, _ in ORDERS_COLUMNS} == {
        "id": "bigint", "name": "string", "amount": "decimal(10,2)", "price": "double",
        "created": "timestamp", "updated": "timestamp", "day": "date", "dur": "string", "yr": "int",
        "big": "decimal(20,0)", "latin": "string", "geo": "binary", "blob": "binary", "doc": "string",
        "gone": "string",
    }  # fmt: skip
    got = {r["id"]: r.asDict() for r in df.collect()}
    # id 1 inserted then updated (name, amount, price -> NULL); id 2 inserted then deleted;
    # id 3 from the INIT (snapshot) record
    assert sorted(got) == [1, 3]
    one_ = got[1]
    assert (one_["name"], one_["amount"], one_["price"]) == ("Zoë ☕☕", Decimal("13.75"), None)
    assert one_["created"] == datetime(2023, 11, 14, 22, 13, 20, 123456)  # UTC session
    assert one_["updated"] == datetime(2024, 2, 29, 13, 5, 6, 7)
    assert (one_["day"], one_["dur"], one_["yr"]) == (date(2024, 2, 29), "-838:59:59", 2021)
    assert one_["big"] == Decimal("18446744073709551615")
    assert (one_["latin"], bytes(one_["geo"]), bytes(one_["blob"]), one_["doc"], one_["gone"]) == (
        "café", b"\x01\x02", b"\x00\xff", '{"a": 1}', None,
    )  # fmt: skip
    assert one_["_cdc_position"] == [Decimal(1003)] and one_["_cdc_op"] == "u"
    three = got[3]
    assert (three["name"], three["amount"], three["big"], three["_cdc_op"]) == ("snap", Decimal("3.00"), Decimal(7), "r")
    assert three["price"] == 19.99


def test_truncate_statement_is_a_truncate_event(spark):
    # DTS has no truncate operation: a TRUNCATE reaches the stream as a DDL record with the
    # statement (seed 001: DDL is a STRING). On a table it decodes to op t (the applier empties
    # the table); without a table in objectName it stays a ddl event.
    recs = [
        record("DDL", 4001, txid="tx-7", after="TRUNCATE TABLE `shop`.`orders`", tags=PK_TAGS),
        record("DDL", 4002, obj="shop.sales.lines", after="  truncate lines"),
        record("DDL", 4003, obj="shop", after="TRUNCATE TABLE orders"),
        record("DDL", 4004, after="TRUNCATED_NOTES are not a statement"),
    ]
    raw = spark.createDataFrame([(None, encode(r), sr(i + 1)) for i, r in enumerate(recs)], RAW_SCHEMA)
    rows = DtsAvroDecoder().decode(raw, DecodeOptions()).orderBy("source_record.line").collect()
    got = [one(r) for r in rows]
    assert [(e["kind"], e["op"], e["database"], e["schema"], e["table"]) for e in got] == [
        ("data", "t", "shop", None, "orders"),
        ("data", "t", "shop", "sales", "lines"),
        ("ddl", None, "shop", None, None),
        ("ddl", None, "shop", None, "orders"),
    ]
    t = got[0]
    assert (t["before"], t["after"], t["columns"], t["primary_key"], t["tx_id"], t["ddl"], t["position"]) == (
        None, None, None, ["id"], "tx-7", "TRUNCATE TABLE `shop`.`orders`", pos(4001),
    )


def test_decoded_plan_holds_no_from_avro(spark):
    # Spark 4.0's from_avro re-evaluates its options map (a CreateMap whose builder every copy of
    # the expression shares) whenever a plan holding it is canonicalized; the applier plans a
    # batch's tables in concurrent threads, which then failed at random with DUPLICATED_MAP_KEY.
    # The decoder cuts the parsed records from the plan: no later query holds the expression.
    raw = spark.createDataFrame([(None, encode(STREAM[0]), sr(1))], RAW_SCHEMA)
    plan = DtsAvroDecoder().decode(raw, DecodeOptions())._jdf.queryExecution().analyzed().toString().lower()
    assert "from_avro" not in plan and "fromavro" not in plan
    assert "logicalrdd" in plan or "existingrdd" in plan
