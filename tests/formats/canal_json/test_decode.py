"""Golden decode tests for canal-json over real messages.

Origins (see shared/fixtures/SOURCES.md): Apache Flink's
``flink-formats/flink-json/src/test/resources/canal-data.txt`` and ``canal-data-with-init.txt``;
Apache Paimon's ``paimon-flink-cdc/src/test/resources/kafka/canal/...`` files.
"""

from __future__ import annotations

from decimal import Decimal

from tests.conftest import decode_file, fixture_lines, fixture_path


def test_flink_canal_data_events(spark):
    _, events, rejects = decode_file(spark, "canal-json", fixture_path("canal-json/apache-flink/canal-data.txt"))
    assert rejects == []
    # 11 messages: INSERT x9 rows, 4 single-row UPDATEs, 1 INSERT, ... 21 events in all
    assert len(events) == 21
    ops = "".join(e["op"] or "-" for e in events)
    assert ops == "cccccccccuuccuudu" + "u" + "-" + "dd"
    first = events[0]
    assert (first["database"], first["schema"], first["table"]) == ("inventory", None, "products2")
    assert first["after"] == {"id": "101", "name": "scooter", "description": "Small 2-wheel scooter", "weight": "3.14"}
    assert first["primary_key"] == ["id"]
    assert first["position"]["order"] == [Decimal(1589373515000), Decimal(3), Decimal(0)]
    assert first["event_time_ms"] == 1589373515000
    types = {c["name"]: (c["source_type"], c["spark_type"]) for c in first["columns"]}
    assert types == {
        "id": ("INTEGER", "int"),
        "name": ("VARCHAR(255)", "string"),
        "description": ("VARCHAR(512)", "string"),
        "weight": ("FLOAT", "float"),
    }
    # UPDATE: `old` holds only the changed column; the before image is data overlaid with it
    upd = events[9]
    assert upd["op"] == "u"
    assert upd["after"]["description"] == "18oz carpenter hammer"
    assert upd["before"] == {"id": "106", "name": "hammer", "description": None, "weight": "1.0"}
    # a two-row UPDATE pairs data[i] with old[i]
    two = [e for e in events if e["position"]["text"].startswith("1589373753000:11")]
    assert [e["before"]["weight"] for e in two] == ["3.14", "8.1"]
    assert [e["after"]["weight"] for e in two] == ["5.17", "5.17"]
    ddl = events[18]
    assert ddl["kind"] == "ddl" and ddl["table"] == "user02" and ddl["ddl"].startswith("CREATE TABLE")
    dels = events[19:]
    assert [e["before"]["id"] for e in dels] == ["102", "103"] and all(e["after"] is None for e in dels)


def test_init_rows_are_snapshot_reads_and_extra_columns_kept(spark):
    _, events, rejects = decode_file(spark, "canal-json", fixture_path("canal-json/apache-flink/canal-data-with-init.txt"))
    assert rejects == []
    assert [e["op"] for e in events[:9]] == ["r"] * 9
    # `other` is not in mysqlType: kept in the image, typed by the applier as a string
    assert events[0]["after"]["other"] == "val1"
    assert "other" not in {c["name"] for c in events[0]["columns"]}


def test_mysql_types_from_paimon_alltype(spark, tmp_path):
    path = fixture_lines("canal-json/apache-paimon/kafka/canal/table/alltype/canal-data.txt", tmp_path)
    _, events, rejects = decode_file(spark, "canal-json", path)
    assert rejects == []
    e = events[0]
    types = {c["name"]: c["spark_type"] for c in e["columns"]}
    assert types["_int_unsigned"] == "bigint"
    assert types["_bigint_unsigned"] == "decimal(20,0)"
    assert types["_tinyint"] == "int"
    assert types["_double"] == "double"
    assert types["_date"] == "date"
    assert types["_datetime6"] == "timestamp"
    assert types["_numeric"] == "decimal(8,3)"
    assert types["_decimal"] == "decimal(8,0)"  # 'DECIMAL(8, 0)' with a space
    assert types["_fixed"] == "string"  # FIXED(40,3): wider than Spark's 38 digits, kept as text
    assert types["_serial"] == "decimal(20,0)"  # SERIAL = BIGINT UNSIGNED
    # canonical text: timestamps with microseconds, UTC
    assert e["after"]["_datetime6"] == "2023-03-23 14:30:05.123456"
    assert e["after"]["_datetime"] == "2023-03-23 14:30:05.000000"
    assert e["after"]["_date"] == "2023-03-23"


def test_dts_inverted_update_and_delete_shape(spark, tmp_path):
    # The DELETE is the seed's own example (seed 001, Canal Json: instances created before
    # 2022-03-20 put the deleted row in `old` and leave `data` null); the UPDATE follows the
    # seed's text (old = after image, data = before image, all columns).
    lines = [
        '{"old":[{"shipping_type":"aaa"}],"database":"dbname","es":1600161894000,"id":58,"isDdl":false,'
        '"mysqlType":{"id":"bigint","shipping_type":"varchar"},"pkNames":["id"],"sql":"",'
        '"sqlType":{"id":-5,"shipping_type":12},"table":"tablename","ts":1600161894771,"type":"DELETE"}',
        '{"data":[{"id":"1","shipping_type":"old"}],"old":[{"id":"1","shipping_type":"new"}],"database":"dbname",'
        '"es":1600161895000,"id":59,"isDdl":false,"mysqlType":{"id":"bigint","shipping_type":"varchar"},'
        '"pkNames":["id"],"sql":"","sqlType":{"id":-5,"shipping_type":12},"table":"tablename","ts":1600161895771,"type":"UPDATE"}',
    ]
    p = tmp_path / "dts.txt"
    p.write_text("\n".join(lines) + "\n")
    _, events, rejects = decode_file(spark, "canal-json", p, canal_dts_inverted=True)
    assert rejects == []
    assert events[0]["op"] == "d" and events[0]["before"] == {"shipping_type": "aaa"}
    assert events[1]["op"] == "u"
    assert events[1]["after"] == {"id": "1", "shipping_type": "new"}
    assert events[1]["before"] == {"id": "1", "shipping_type": "old"}
    # without the option the same DELETE shape is still detected
    _, events2, _ = decode_file(spark, "canal-json", p)
    assert events2[0]["before"] == {"shipping_type": "aaa"}
    assert events2[1]["after"]["shipping_type"] == "old"


def test_bad_records_are_rejected_with_codes(spark, tmp_path):
    good = '{"data":[{"id":"1","v":"x"}],"database":"d","table":"t","pkNames":["id"],"isDdl":false,"mysqlType":{"id":"int","v":"varchar(5)"},"es":1,"id":1,"type":"INSERT"}'
    lines = [
        good,
        '{"data":[{"id":"1"',  # truncated
        "\x00\x01not json at all",
        "[1, 2, 3]",
        '{"data":"oops","database":"d","table":"t","es":1,"type":"INSERT"}',  # wrong shape
        good.replace('"INSERT"', '"UPSERT"'),
        good.replace('"id":"1","v"', '"id":"abc","v"'),  # int column holding abc
        good.replace('"database":"d",', ""),
        good.replace('"es":1,', "").replace(',"id":1,', ","),
        good.replace('"id":"1","v":"x"', '"id":"2","v":"y"'),
    ]
    p = tmp_path / "bad.txt"
    p.write_text("\n".join(lines) + "\n\n")
    decoded, events, rejects = decode_file(spark, "canal-json", p)
    codes = {r.source_record.line: r.error_code for r in rejects}
    assert codes == {
        2: "MALFORMED_JSON",
        3: "MALFORMED_JSON",
        4: "NOT_AN_OBJECT",
        5: "SCHEMA_MISMATCH",
        6: "UNKNOWN_OP",
        7: "BAD_VALUE",
        8: "MISSING_TABLE",
        9: "BAD_POSITION",
    }
    assert decoded.count() == 10  # the blank line is not a record
    assert [e["after"]["id"] for e in events] == ["1", "2"]
