"""Tests of the ``qlik-json`` decoder (Qlik Replicate / Qlik Talend Data Integration Kafka target).

Real messages: ``Metadata.json`` and ``Data.json`` of jcustenborder/attunity-json-converter
(Attunity Replicate 6.3, MySQL ``employees.salaries``; origins in ``shared/fixtures/SOURCES.md``),
pretty-printed in the fixture and written here one document per line (metadata first).
No real CDC (INSERT/UPDATE/DELETE) message exists as a data file, so the CDC messages below are
hand-written from seed ``004_8379e34633d1519e.txt`` ("データ メッセージ": ``schema``, ``table``,
``headers`` {operation, changeSequence, timestamp, streamPosition, transactionId, changeMask,
columnMask, externalSchemaId, transactionEventCounter, transactionLastEvent}, ``data``,
``beforeData``) on the real messages' table and ``messageSchemaId``; the flat metadata message is
the seed's "メタデータ メッセージ" field list without the envelope.

All decode cases run in one Spark job over one folder; the end-to-end test runs two ingests.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import pytest

from tests.conftest import fixture_path

FMT = "qlik-json"
MODEL = "qlik-replicate/jcustenborder-attunity-json-converter/src/test/resources/com/github/jcustenborder/kafka/conversion/attunity/model"
SCHEMA_ID = "8FB9D3C10EA4B25751DF9CC8318F0A02"  # messageSchemaId of the real messages


def real(name: str) -> str:
    """A real pretty-printed fixture document as one line."""
    return json.dumps(json.loads(fixture_path(f"{MODEL}/{name}").read_text(encoding="utf-8")))


def seq(n: int) -> str:
    """A changeSequence as the seed/FORMATS.md describe it: YYYYMMDDHHmmSShh + change number."""
    return f"2018041320200000{n:019d}"


def headers(op, n=None, change_mask=None, column_mask=None, counter=1, last=True, tx="00000000000000000000000000A1B201", ext=None):
    cdc = op != "REFRESH"
    return {
        "operation": op,
        "changeSequence": seq(n) if n is not None else "",
        "timestamp": "2018-04-13 20:20:00.250" if cdc else "",
        "streamPosition": "mysql-bin.000003:4711" if cdc else "",
        "transactionId": tx if cdc else "",
        "changeMask": change_mask,
        "columnMask": column_mask,
        "externalSchemaId": ext,
        "transactionEventCounter": counter,
        "transactionLastEvent": last,
    }


def wrapped(op, data, before=None, schema_id=SCHEMA_ID, **h):
    """A data message in the atMSG envelope (the real Data.json's shape)."""
    return json.dumps({"magic": "atMSG", "type": "DT", "headers": None, "messageSchemaId": schema_id, "messageSchema": None,
                       "message": {"data": data, "beforeData": before, "headers": headers(op, **h)}})


def flat(op, data, before=None, schema="employees", table="salaries", **h):
    """A flat data message (the seed's field list: schema, table, headers, data, beforeData)."""
    doc = {"schema": schema, "table": table, "headers": headers(op, **h), "data": data, "beforeData": before}
    return json.dumps({k: v for k, v in doc.items() if v is not None or k in ("data", "beforeData")})


def row(emp_no, salary, from_date="1993-11-25", to_date="1994-11-25"):
    return {"emp_no": emp_no, "salary": salary, "from_date": from_date, "to_date": to_date}


def flat_md(schema, table, columns, schema_id, version=1):
    """A flat metadata message (seed: schemaId, lineage, tableStructure.tableColumns, dataSchema)."""
    cols = {}
    for i, (name, typ, length, precision, scale, pk) in enumerate(columns, start=1):
        cols[name] = {"ordinal": i, "type": typ, "length": length, "precision": precision, "scale": scale,
                      "primaryKeyPosition": pk, "nullable": pk == 0}
    return json.dumps({"schemaId": schema_id, "lineage": {"server": "qlik-01", "task": "mysql-to-kafka", "schema": schema,
                       "table": table, "tableVersion": version, "timestamp": "2018-04-13T20:15:00.000"},
                       "tableStructure": {"tableColumns": cols}, "dataSchema": "{}"})


TYPES_MD = flat_md("hr", "types", [
    ("id", "INT4", 10, 0, 0, 1), ("c_int1", "INT1", 3, 0, 0, 0), ("c_int2", "INT2", 5, 0, 0, 0),
    ("c_int8", "INT8", 19, 0, 0, 0), ("c_uint4", "UINT4", 10, 0, 0, 0), ("c_uint8", "UINT8", 20, 0, 0, 0),
    ("c_num", "NUMERIC", 0, 10, 2, 0), ("c_num_wide", "NUMERIC", 0, 40, 0, 0), ("c_real4", "REAL4", 7, 0, 0, 0),
    ("c_real8", "REAL8", 14, 0, 0, 0), ("c_str", "STRING", 20, 0, 0, 0), ("c_wstr", "WSTRING", 20, 0, 0, 0),
    ("c_clob", "CLOB", 0, 0, 0, 0), ("c_nclob", "NCLOB", 0, 0, 0, 0), ("c_bytes", "BYTES", 4, 0, 0, 0),
    ("c_blob", "BLOB", 0, 0, 0, 0), ("c_date", "DATE", 0, 0, 0, 0), ("c_time", "TIME", 0, 0, 0, 0),
    ("c_datetime", "DATETIME", 0, 6, 0, 0), ("c_bool", "BOOLEAN", 1, 0, 0, 0), ("c_geo", "GEOMETRY", 0, 0, 0, 0),
], "TYPES0000000000000000000000000001")
TYPES_ROW = {"id": 1, "c_int1": -5, "c_int2": 300, "c_int8": 9007199254740993, "c_uint4": 4000000000,
             "c_uint8": "18446744073709551615", "c_num": "123.45", "c_num_wide": "1234567890123456789012345678901234567890",
             "c_real4": 1.5, "c_real8": -2.25e10, "c_str": "abc", "c_wstr": "日本語", "c_clob": "long text", "c_nclob": "長い",
             "c_bytes": "0A0B", "c_blob": "", "c_date": "2020-05-29", "c_time": "13:50:29", "c_datetime": "2020-05-29 13:50:29.123456",
             "c_bool": True, "c_geo": "POINT(1 2)"}

CDC_LINES = [
    # 1 flat UPDATE tied by names; columnMask 0B: ordinals 1, 2, 4 (the seed's example)
    flat("UPDATE", {"emp_no": 14472, "salary": 51000, "from_date": None, "to_date": "1994-11-25"}, before=row(14472, 49592),
         n=1, change_mask="02", column_mask="0B", counter=1, last=False),
    # 2 wrapped INSERT tied by messageSchemaId; columnMask 0F: every column
    wrapped("INSERT", row(10001, 60117, "1986-06-26", "1987-06-26"), n=2, column_mask="0F", counter=2, last=True),
    # 3 wrapped DELETE: the row in data (as Qlik writes it), beforeData null
    wrapped("DELETE", row(10001, 60117, "1986-06-26", "1987-06-26"), n=3),
    # 4 flat DELETE: the row in beforeData, data null
    flat("DELETE", None, before=row(10002, 65828, "1996-08-03", "1997-08-03"), n=4),
    # 5 flat INSERT without names, tied by headers.externalSchemaId
    json.dumps({"headers": headers("INSERT", n=5, ext=SCHEMA_ID), "data": row(10003, 40006, "1997-12-15", "1998-12-15"), "beforeData": None}),
    # 6 flat metadata message for hr.types, 7 its data
    TYPES_MD,
    flat("INSERT", TYPES_ROW, schema="hr", table="types", n=7),
    # 8 a table whose metadata message is not in the batch: strings; columnMask 05 resolved by key position
    flat("INSERT", {"id": 7, "name": "Sales", "loc": None}, schema="hr", table="dept", n=8, column_mask="05"),
    # 9 wrapped REFRESH hand-written like Data.json (empty changeSequence)
    wrapped("REFRESH", row(10004, 40054, "1995-12-01", "1996-12-01")),
    # 10 operation in lower case
    flat("update", row(10003, 41000, "1997-12-15", "1998-12-15"), before=row(10003, 40006, "1997-12-15", "1998-12-15"), n=10),
    # 11 no metadata in the batch, columnMask 07 covers every key of data: the whole row
    flat("INSERT", {"id": 8, "name": "Ops", "loc": "Kyoto"}, schema="hr", table="dept", n=11, column_mask="07"),
]

GOOD = flat("INSERT", row(20001, 1), n=100)
BAD_LINES = [
    (GOOD, None),  # 1
    (GOOD[:70], "MALFORMED_JSON"),  # 2 truncated
    ("[1, 2]", "NOT_AN_OBJECT"),  # 3
    (wrapped("INSERT", row(20001, 1), n=112).replace('"atMSG"', '"atMSX"'), "SCHEMA_MISMATCH"),  # 4 magic
    (wrapped("INSERT", row(20001, 1), n=113).replace('"type": "DT"', '"type": "XX"'), "SCHEMA_MISMATCH"),  # 5 type neither MD nor DT
    ('{"foo": 1}', "SCHEMA_MISMATCH"),  # 6 neither kind
    (flat("UPSERT", row(20001, 1), n=101), "UNKNOWN_OP"),  # 7
    (json.dumps({"schema": "employees", "table": "salaries", "headers": {"changeSequence": seq(102)}, "data": row(20001, 1)}), "SCHEMA_MISMATCH"),  # 8 no operation
    (wrapped("INSERT", row(20001, 1), n=103, schema_id="EMPTYCOLS0000000000000000000000001"), "MISSING_TABLE"),  # 9 its MD (line 11) is invalid
    (flat_md("employees", "", [("id", "INT4", 10, 0, 0, 1)], "NOTABLE00000000000000000000000001"), "MISSING_TABLE"),  # 10
    (json.dumps({"schemaId": "EMPTYCOLS0000000000000000000000001", "lineage": {"schema": "employees", "table": "empty", "tableVersion": 1},
                 "tableStructure": {"tableColumns": {}}}), "SCHEMA_MISMATCH"),  # 11 no columns
    (flat("INSERT", row(20001, 1)), "BAD_POSITION"),  # 12 empty changeSequence on a CDC op
    (flat("UPDATE", row(20001, 1), before=row(20001, 0), n=104).replace(seq(104), "2018x"), "BAD_POSITION"),  # 13
    (flat("INSERT", row(20001, "abc"), n=105), "BAD_VALUE"),  # 14 INT4 "abc"
    (flat("INSERT", row(20001, 1, "1993-13-45"), n=106), "BAD_VALUE"),  # 15 DATE
    (flat("INSERT", row(20001, 1), n=107, column_mask="ZZ"), "BAD_VALUE"),  # 16 mask not hex
    (flat("INSERT", None, n=108), "MISSING_IMAGE"),  # 17
    (flat("DELETE", None, n=109), "MISSING_IMAGE"),  # 18
    (flat("INSERT", {**TYPES_ROW, "c_bytes": "XYZ"}, schema="hr", table="types", n=110), "BAD_VALUE"),  # 19 BYTES not hex
    (json.dumps({"magic": "atMSG", "type": "DT", "headers": None, "messageSchemaId": SCHEMA_ID}), "SCHEMA_MISMATCH"),  # 20 no message
    (json.dumps({"schema": "employees", "table": "salaries", "headers": headers("INSERT", n=111), "data": "not an object"}), "SCHEMA_MISMATCH"),  # 21
    (json.dumps({"schemaId": "BADORD", "lineage": {"schema": "employees", "table": "bad_ordinal", "tableVersion": 1},
                 "tableStructure": {"tableColumns": {"id": {"ordinal": "x", "type": "INT4"}}}}), "SCHEMA_MISMATCH"),  # 22
    (GOOD, None),  # 23
]


@pytest.fixture(scope="module")
def decoded(spark, tmp_path_factory):
    """Every file of this module in one folder, decoded in one Spark job: {(file, line): row}."""
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.sources.files import read_lines

    d = tmp_path_factory.mktemp("qlik_json")
    (d / "1-metadata.json").write_text(real("Metadata.json") + "\n", encoding="utf-8")
    (d / "2-data.json").write_text(real("Data.json") + "\n", encoding="utf-8")
    (d / "cdc.jsonl").write_text("\n".join(CDC_LINES) + "\n", encoding="utf-8")
    (d / "bad.jsonl").write_text("\n".join(t for t, _ in BAD_LINES) + "\n", encoding="utf-8")
    rows = formats.get(FMT).decode(read_lines(spark, [str(d)]), DecodeOptions()).collect()
    out = {}
    for r in rows:
        x = r.asDict(recursive=True)
        out[(x["source_record"]["file"].rsplit("/", 1)[-1], x["source_record"]["line"])] = x
    return out


def one(r):
    assert r["error_code"] is None, (r["error_code"], r["error_message"])
    assert len(r["events"]) == 1, r["events"]
    return r["events"][0]


def col(name, source_type, spark_type, precision=None, scale=None, nullable=False):
    return {"name": name, "source_type": source_type, "spark_type": spark_type, "precision": precision, "scale": scale, "nullable": nullable}


SALARIES_COLUMNS = [col("emp_no", "INT4", "int"), col("salary", "INT4", "int"), col("from_date", "DATE", "date"), col("to_date", "DATE", "date")]
KEY = ["emp_no", "from_date"]


def pos(n, text=None):
    return {"order": [Decimal(n)], "text": text if text is not None else str(n)}


# --- the real messages ---------------------------------------------------------------------------

def test_real_metadata_message_is_a_ddl_event(decoded):
    e = one(decoded[("1-metadata.json", 1)])
    assert (e["format"], e["kind"], e["op"]) == ("qlik-json", "ddl", None)
    assert (e["database"], e["schema"], e["table"]) == (None, "employees", "salaries")
    assert e["columns"] == SALARIES_COLUMNS
    # primaryKeyPosition: emp_no 1, from_date 2 (salary, to_date 0)
    assert e["primary_key"] == KEY
    assert e["ddl"] == ("QLIK METADATA employees.salaries tableVersion 1 (emp_no INT4 NOT NULL, salary INT4 NOT NULL, "
                        "from_date DATE NOT NULL, to_date DATE NOT NULL, PRIMARY KEY (emp_no, from_date))")
    assert e["position"] == {"order": [Decimal(0), Decimal(1)], "text": "tableVersion:1"}
    assert e["event_time_ms"] == 1523650438289  # lineage.timestamp 2018-04-13T20:13:58.289 UTC
    assert (e["before"], e["after"], e["present"]) == (None, None, None)


def test_real_refresh_row_is_a_typed_snapshot_read(decoded):
    e = one(decoded[("2-data.json", 1)])
    assert (e["kind"], e["op"]) == ("data", "r")
    assert (e["database"], e["schema"], e["table"]) == (None, "employees", "salaries")  # from the MD
    assert e["after"] == {"emp_no": "14472", "salary": "49592", "from_date": "1993-11-25", "to_date": "1994-11-25"}
    assert e["before"] is None
    assert e["columns"] == SALARIES_COLUMNS and e["primary_key"] == KEY
    assert e["position"] == pos(0)  # empty changeSequence
    assert (e["present"], e["tx_id"], e["tx_seq"], e["tx_last"], e["event_time_ms"]) == (None, None, None, None, None)


# --- hand-written CDC messages (seed 004) ----------------------------------------------------------

def test_update_with_column_mask_0B_carries_ordinals_1_2_4(decoded):
    e = one(decoded[("cdc.jsonl", 1)])
    assert (e["op"], e["schema"], e["table"]) == ("u", "employees", "salaries")
    # 0B = binary 1011: bits 0, 1, 3 = ordinals 1 (emp_no), 2 (salary), 4 (to_date); from_date is absent
    assert e["present"] == ["emp_no", "salary", "to_date"]
    assert e["after"] == {"emp_no": "14472", "salary": "51000", "from_date": None, "to_date": "1994-11-25"}
    assert e["before"] == {"emp_no": "14472", "salary": "49592", "from_date": "1993-11-25", "to_date": "1994-11-25"}
    assert e["position"] == pos(int(seq(1)), seq(1))
    assert len(seq(1)) == 35
    assert e["event_time_ms"] == 1523650800250  # 2018-04-13 20:20:00.250 UTC
    assert (e["tx_id"], e["tx_seq"], e["tx_last"]) == ("00000000000000000000000000A1B201", 1, False)
    assert e["columns"] == SALARIES_COLUMNS and e["primary_key"] == KEY


def test_wrapped_insert_and_deletes(decoded):
    i = one(decoded[("cdc.jsonl", 2)])
    assert (i["op"], i["schema"], i["table"], i["before"]) == ("c", "employees", "salaries", None)
    assert i["after"] == {"emp_no": "10001", "salary": "60117", "from_date": "1986-06-26", "to_date": "1987-06-26"}
    assert i["present"] is None  # 0F: every column, the whole row
    assert (i["tx_seq"], i["tx_last"]) == (2, True)
    d = one(decoded[("cdc.jsonl", 3)])  # the row in data
    assert (d["op"], d["after"], d["present"]) == ("d", None, None)
    assert d["before"] == {"emp_no": "10001", "salary": "60117", "from_date": "1986-06-26", "to_date": "1987-06-26"}
    d2 = one(decoded[("cdc.jsonl", 4)])  # the row in beforeData
    assert (d2["op"], d2["after"]) == ("d", None)
    assert d2["before"] == {"emp_no": "10002", "salary": "65828", "from_date": "1996-08-03", "to_date": "1997-08-03"}
    assert d2["position"] == pos(int(seq(4)), seq(4))


def test_tied_by_external_schema_id(decoded):
    e = one(decoded[("cdc.jsonl", 5)])
    assert (e["op"], e["schema"], e["table"], e["primary_key"]) == ("c", "employees", "salaries", KEY)
    assert e["columns"] == SALARIES_COLUMNS


def test_flat_metadata_message_type_mapping(decoded):
    md = one(decoded[("cdc.jsonl", 6)])
    assert (md["kind"], md["schema"], md["table"], md["primary_key"]) == ("ddl", "hr", "types", ["id"])
    got = {c["name"]: (c["source_type"], c["spark_type"], c["precision"], c["scale"]) for c in md["columns"]}
    assert got == {
        "id": ("INT4", "int", None, None), "c_int1": ("INT1", "int", None, None), "c_int2": ("INT2", "int", None, None),
        "c_int8": ("INT8", "bigint", None, None), "c_uint4": ("UINT4", "bigint", None, None),
        "c_uint8": ("UINT8", "decimal(20,0)", None, None), "c_num": ("NUMERIC(10,2)", "decimal(10,2)", 10, 2),
        "c_num_wide": ("NUMERIC(40,0)", "string", 40, 0), "c_real4": ("REAL4", "float", None, None),
        "c_real8": ("REAL8", "double", None, None), "c_str": ("STRING(20)", "string", None, None),
        "c_wstr": ("WSTRING(20)", "string", None, None), "c_clob": ("CLOB", "string", None, None),
        "c_nclob": ("NCLOB", "string", None, None), "c_bytes": ("BYTES(4)", "binary", None, None),
        "c_blob": ("BLOB", "binary", None, None), "c_date": ("DATE", "date", None, None), "c_time": ("TIME", "string", None, None),
        "c_datetime": ("DATETIME", "timestamp", 6, 0), "c_bool": ("BOOLEAN", "boolean", None, None),
        "c_geo": ("GEOMETRY", "string", None, None),
    }
    assert [c["name"] for c in md["columns"]] == list(TYPES_ROW)  # ordinal order
    e = one(decoded[("cdc.jsonl", 7)])
    assert e["after"] == {
        "id": "1", "c_int1": "-5", "c_int2": "300", "c_int8": "9007199254740993", "c_uint4": "4000000000",
        "c_uint8": "18446744073709551615", "c_num": "123.45", "c_num_wide": "1234567890123456789012345678901234567890",
        "c_real4": "1.5", "c_real8": "-2.25E10", "c_str": "abc", "c_wstr": "日本語", "c_clob": "long text", "c_nclob": "長い",
        "c_bytes": "Cgs=",  # hex 0A0B -> base64
        "c_blob": "", "c_date": "2020-05-29", "c_time": "13:50:29", "c_datetime": "2020-05-29 13:50:29.123456",
        "c_bool": "true", "c_geo": "POINT(1 2)",
    }


def test_data_message_without_its_metadata_in_the_batch(decoded):
    e = one(decoded[("cdc.jsonl", 8)])
    assert (e["op"], e["schema"], e["table"]) == ("c", "hr", "dept")
    assert e["after"] == {"id": "7", "name": "Sales", "loc": None}  # strings as written
    assert (e["columns"], e["primary_key"]) == (None, None)
    # 05 = ordinals 1 and 3, resolved by the position of the keys in `data`
    assert e["present"] == ["id", "loc"]
    whole = one(decoded[("cdc.jsonl", 11)])  # 07: all three keys -> the whole row, present null
    assert (whole["after"], whole["present"]) == ({"id": "8", "name": "Ops", "loc": "Kyoto"}, None)


def test_refresh_and_lower_case_operation(decoded):
    r = one(decoded[("cdc.jsonl", 9)])
    assert (r["op"], r["position"], r["table"]) == ("r", pos(0), "salaries")
    u = one(decoded[("cdc.jsonl", 10)])
    assert (u["op"], u["after"]["salary"], u["before"]["salary"]) == ("u", "41000", "40006")


def test_mask_ordinals(spark):
    from cdclake.formats.qlik_json.metadata import mask_ordinals_sql

    cases = {"0B": [1, 2, 4], "0b": [1, 2, 4], "B": [1, 2, 4], "0B01": [1, 2, 4, 9], "0001": [9], "80": [8], "": [],
             "FFFFFFFFFFFFFFFFFF": list(range(1, 73))}  # 72 bits: more than a 64-bit conv could hold
    exprs = [f"{mask_ordinals_sql(repr(k))} as c{i}" for i, k in enumerate(cases)]
    got = spark.range(1).selectExpr(*exprs, f"{mask_ordinals_sql('cast(null as string)')} as n").first()
    assert [got[f"c{i}"] for i in range(len(cases))] == list(cases.values())
    assert got["n"] is None


# --- bad input -----------------------------------------------------------------------------------

def test_bad_records_rejected_with_their_code(decoded):
    bad = {line: r for (name, line), r in decoded.items() if name == "bad.jsonl"}
    assert sorted(bad) == list(range(1, len(BAD_LINES) + 1))  # one output row per input record
    for line, (_text, code) in enumerate(BAD_LINES, start=1):
        r = bad[line]
        assert r["error_code"] == code, (line, r["error_code"], r["error_message"])
        if code is None:
            assert len(r["events"]) == 1
        else:
            assert r["events"] == [] and r["error_message"] and r["raw_value"] is not None
    assert one(bad[1])["after"] == {"emp_no": "20001", "salary": "1", "from_date": "1993-11-25", "to_date": "1994-11-25"}


def test_every_record_has_one_output_row(decoded):
    assert len(decoded) == 2 + len(CDC_LINES) + len(BAD_LINES)


def test_kafka_records_tombstone_and_binary(spark):
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.model import RAW_SCHEMA

    def rec(value, offset):
        return (None, value, ("qlik", 0, offset, None, None, None, None))

    raw = spark.createDataFrame(
        [rec(real("Metadata.json").encode(), 0), rec(real("Data.json").encode(), 1), rec(None, 2), rec(b"\xff\xfe\x00{", 3)], RAW_SCHEMA
    )
    rows = {r.source_record.offset: r for r in formats.get(FMT).decode(raw, DecodeOptions()).collect()}
    assert rows[1].error_code is None and rows[1].events[0].op == "r" and rows[1].events[0].table == "salaries"
    assert (rows[2].error_code, rows[2].events) == (None, [])  # tombstone: nothing, not an error
    assert rows[3].error_code == "MALFORMED_JSON" and rows[3].raw_value == b"\xff\xfe\x00{"


def test_registry_and_detect_score():
    from cdclake import formats

    dec = formats.get(FMT)
    assert dec.name == FMT and FMT in formats.names()
    assert dec.detect_score([real("Metadata.json").encode(), real("Data.json").encode(), CDC_LINES[0].encode(), TYPES_MD.encode()]) == 1.0
    assert dec.detect_score([b'{"data": [], "type": "INSERT", "isDdl": false}', b"x"]) == 0.0


# --- end to end -----------------------------------------------------------------------------------

def test_ingest_refresh_then_cdc_with_column_mask(spark, tmp_path):
    """Batch 1: MD, the real REFRESH row, hand-written REFRESH/INSERT rows. Batch 2: the MD again
    (Qlik re-sends it when a task starts), a partial UPDATE, a DELETE, a stale REFRESH row."""
    from cdclake.pipeline import IngestConfig, ingest

    md, refresh_real = real("Metadata.json"), real("Data.json")
    b1 = tmp_path / "b1.jsonl"
    b1.write_text("\n".join([
        md,
        refresh_real,  # 14472 49592 1993-11-25 1994-11-25
        wrapped("REFRESH", row(10001, 60117, "1986-06-26", "1987-06-26")),
        wrapped("INSERT", row(10002, 65828, "1996-08-03", "1997-08-03"), n=10),
        wrapped("INSERT", row(10003, 40006, "1997-12-15", "1998-12-15"), n=11),
        # a full-load row of 10003 arriving after its INSERT: REFRESH never overwrites a CDC change
        wrapped("REFRESH", row(10003, 1, "1997-12-15", "1998-12-15")),
    ]) + "\n", encoding="utf-8")
    b2 = tmp_path / "b2.jsonl"
    b2.write_text("\n".join([
        md,
        # columnMask 07: emp_no, salary, from_date; to_date (ordinal 4) is absent -> keeps its value
        wrapped("UPDATE", {"emp_no": 14472, "salary": 51000, "from_date": "1993-11-25", "to_date": None},
                before=row(14472, 49592), n=20, change_mask="02", column_mask="07"),
        wrapped("DELETE", row(10001, 60117, "1986-06-26", "1987-06-26"), n=21),
        wrapped("REFRESH", row(10002, 2, "1996-08-03", "1997-08-03")),  # stale snapshot row
    ]) + "\n", encoding="utf-8")
    target = tmp_path / "lake"
    s1 = ingest(spark, IngestConfig(FMT, [str(b1)], str(target)))
    assert (s1.records_in, s1.decoded, s1.rejected, s1.events) == (6, 6, 0, 6)
    s2 = ingest(spark, IngestConfig(FMT, [str(b2)], str(target)))
    assert (s2.records_in, s2.decoded, s2.rejected, s2.events) == (4, 4, 0, 4)

    df = spark.read.format("delta").load(f"{target}/employees.salaries")
    assert {k: v for k, v in df.dtypes if not k.startswith("_cdc_")} == {
        "emp_no": "int", "salary": "int", "from_date": "date", "to_date": "date"}
    got = sorted((r.emp_no, r.salary, r.from_date, r.to_date, r._cdc_op) for r in df.collect())
    assert got == [
        (10002, 65828, date(1996, 8, 3), date(1997, 8, 3), "c"),  # the stale REFRESH did not win
        (10003, 40006, date(1997, 12, 15), date(1998, 12, 15), "c"),  # nor did the late one in batch 1
        (14472, 51000, date(1993, 11, 25), date(1994, 11, 25), "u"),  # to_date kept (outside the mask)
    ]  # 10001 deleted
