"""Tests of the ``datahub-tuple`` decoder (DataHub TUPLE records as JSON lines or Parquet).

No public sample of DTS-written TUPLE records exists (``shared/fixtures/SOURCES.md``: the
DataHub fixtures are SDK mock responses). The golden records are the four rows of seed
``shared/seeds/000_d2c269d42c40e542.txt``'s TUPLE example table ("データ形式", TUPLE: INSERT,
UPDATE BEFORE, UPDATE AFTER, DELETE), with the seed's ``_sequence_id_``, ``_operation_type_``,
``_excute_time_``, ``_before_image_`` and ``_after_image_`` values; the data columns ``id`` and
``name`` and the ``_source_table_`` value are hand-written (the seed's table shows none). Other
cases are hand-written on the same template.

The decode tests share one Spark job; the end-to-end and Parquet tests run one more each.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

FMT = "datahub-tuple"
TABLE = "demo_db.demo_table"
KEYS = {TABLE: ["id"]}


def rec(op, seq, ms, before, after, table=TABLE, **data):
    """A TUPLE record: the data columns, then the metadata columns (None: left out)."""
    meta = {"_sequence_id_": seq, "_operation_type_": op, "_excute_time_": ms, "_source_table_": table,
            "_before_image_": before, "_after_image_": after}
    return json.dumps(data | {k: v for k, v in meta.items() if v is not None})


# --- seed 000, the TUPLE example table -------------------------------------------------------
S000_INSERT = rec("I", "1649991610688000000", 1649991726000, "N", "Y", id=1, name="a")
S000_UPDATE_BEFORE = rec("U", "1649991610688000001", 1649991756000, "Y", "N", id=1, name="a")
S000_UPDATE_AFTER = rec("U", "1649991610688000001", 1649991756000, "N", "Y", id=2, name="b")  # the key changes
S000_DELETE = rec("D", "1649991610688000002", 1649991774000, "Y", "N", id=2, name="b")

LINES = [
    (S000_INSERT, None),  # 1
    (S000_UPDATE_BEFORE, None),  # 2
    (S000_UPDATE_AFTER, None),  # 3
    (S000_DELETE, None),  # 4
    # JSON kinds -> types; a bare table name; lower-case op and flags; time as a string
    (rec("i", "1649991610688000003", "1649991800000", "n", "y", table="demo_table", id=3, price=9.5, ok=True,
         note=None, tags={"a": [1]}, big=123456789012345678901234, code="007"), None),  # 5
    (rec("I", "1649991610688000004", None, None, None, id=4), None),  # 6 an insert without flags or time
    # bad input
    ("not json {", "MALFORMED_JSON"),  # 7
    ("[" + S000_INSERT + "]", "NOT_AN_OBJECT"),  # 8
    (rec("X", "1649991610688000005", 1649991800000, "N", "Y", id=5), "UNKNOWN_OP"),  # 9
    (rec("I", None, 1649991800000, "N", "Y", id=5), "BAD_POSITION"),  # 10 no _sequence_id_
    (rec("I", "16499916x", 1649991800000, "N", "Y", id=5), "BAD_POSITION"),  # 11
    (rec("I", "1649991610688000006", 1649991800000, "Y", "Y", id=5), "SCHEMA_MISMATCH"),  # 12 I with a before image
    (rec("U", "1649991610688000007", 1649991800000, "Y", "Y", id=5), "SCHEMA_MISMATCH"),  # 13
    (rec("U", "1649991610688000008", 1649991800000, None, None, id=5), "SCHEMA_MISMATCH"),  # 14 U without flags
    (rec("D", "1649991610688000009", 1649991800000, "N", "Y", id=5), "SCHEMA_MISMATCH"),  # 15
    (rec(None, "1649991610688000010", 1649991800000, "N", "Y", id=5), "SCHEMA_MISMATCH"),  # 16 no op
    (rec("I", "1649991610688000011", 1649991800000, "N", "Y", table=None, id=5), "MISSING_TABLE"),  # 17
    (rec("I", "1649991610688000012", 1649991800000, "N", "Y"), "MISSING_IMAGE"),  # 18 metadata only
]


def pos(seq):
    return {"order": [Decimal(seq)], "text": seq}


def col(name, kind, spark_type):
    return {"name": name, "source_type": f"json:{kind}", "spark_type": spark_type, "precision": None, "scale": None, "nullable": None}


@pytest.fixture(scope="module")
def decoded(spark, tmp_path_factory):
    """Every line of :data:`LINES`, decoded once: {line: row as dict}."""
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.sources.files import read_lines

    p = tmp_path_factory.mktemp("datahub_tuple") / "records.jsonl"
    p.write_text("\n".join(text for text, _ in LINES) + "\n", encoding="utf-8")
    rows = formats.get(FMT).decode(read_lines(spark, [str(p)]), DecodeOptions(primary_keys=KEYS)).collect()
    return {r.source_record.line: r.asDict(recursive=True) for r in rows}


def one(row):
    assert row["error_code"] is None, (row["error_code"], row["error_message"])
    assert len(row["events"]) == 1, row["events"]
    return row["events"][0]


def test_one_output_row_per_record_and_codes(decoded):
    assert sorted(decoded) == list(range(1, len(LINES) + 1))
    for line, (_text, code) in enumerate(LINES, start=1):
        row = decoded[line]
        assert row["error_code"] == code, (line, row["error_code"], row["error_message"])
        if code is not None:
            assert row["events"] == [] and row["error_message"] and row["raw_value"] is not None


def test_seed_rows_as_canonical_events(decoded):
    cols = [col("id", "integer", "bigint"), col("name", "string", "string")]
    base = {"format": FMT, "kind": "data", "database": "demo_db", "schema": None, "table": "demo_table",
            "present": None, "primary_key": ["id"], "columns": cols,
            "tx_id": None, "tx_seq": None, "tx_last": None, "tx_size": None, "ddl": None}
    expected = [
        dict(op="c", before=None, after={"id": "1", "name": "a"}, position=pos("1649991610688000000"), event_time_ms=1649991726000),
        dict(op="u", before={"id": "1", "name": "a"}, after=None, position=pos("1649991610688000001"), event_time_ms=1649991756000),
        dict(op="u", before=None, after={"id": "2", "name": "b"}, position=pos("1649991610688000001"), event_time_ms=1649991756000),
        dict(op="d", before={"id": "2", "name": "b"}, after=None, position=pos("1649991610688000002"), event_time_ms=1649991774000),
    ]
    for line, exp in enumerate(expected, start=1):
        e = one(decoded[line])
        assert e["source_record"]["line"] == line
        assert {k: v for k, v in e.items() if k != "source_record"} == base | exp, line


def test_types_inferred_from_json_kinds(decoded):
    e = one(decoded[5])
    # a bare table name: no database, so the key configured for demo_db.demo_table does not apply
    assert (e["op"], e["database"], e["table"], e["primary_key"]) == ("c", None, "demo_table", None)
    assert e["after"] == {"id": "3", "price": "9.5", "ok": "true", "note": None, "tags": '{"a":[1]}',
                          "big": "123456789012345678901234", "code": "007"}
    assert e["columns"] == [col("id", "integer", "bigint"), col("price", "number", "double"), col("ok", "boolean", "boolean"),
                            col("note", "null", None), col("tags", "object", "string"), col("big", "integer", "decimal(38,0)"),
                            col("code", "string", "string")]
    assert e["event_time_ms"] == 1649991800000  # _excute_time_ as a string
    e = one(decoded[6])
    assert (e["op"], e["after"], e["event_time_ms"]) == ("c", {"id": "4"}, None)


def test_detect_score():
    from cdclake import formats

    dec = formats.get(FMT)
    assert dec.detect_score([S000_INSERT.encode(), S000_DELETE.encode()]) == 1.0
    assert dec.detect_score([b'{"meta": {"op": "ins"}, "data": {}}', b"x"]) == 0.0
    assert dec.detect_score([b"PAR1\x15\x04"]) == 1.0  # a Parquet file's head


def test_end_to_end_update_pair_is_one_update_and_metadata_stays_out(spark, tmp_path):
    """The seed's four rows plus one insert: the U pair changes the key 1 -> 2 (so an unpaired
    after half would leave row 1 behind), the D removes row 2; only row 3 is left, and the
    target table has the data columns and cdclake's _cdc_ columns, no TUPLE metadata column."""
    from cdclake.pipeline import IngestConfig, ingest

    p = tmp_path / "topic.jsonl"
    extra = rec("I", "1649991610688000003", 1649991780000, "N", "Y", id=3, name="c")
    p.write_text("\n".join([S000_INSERT, S000_UPDATE_BEFORE, S000_UPDATE_AFTER, S000_DELETE, extra]) + "\n", encoding="utf-8")
    target = str(tmp_path / "lake")
    s = ingest(spark, IngestConfig(FMT, [str(p)], target, primary_keys=KEYS))
    assert (s.records_in, s.rejected, s.events) == (5, 0, 5)
    df = spark.read.format("delta").load(f"{target}/{TABLE}")
    data_cols = [c for c in df.columns if not c.startswith("_cdc_")]
    assert data_cols == ["id", "name"]
    assert dict(df.dtypes)["id"] == "bigint"
    assert [(r["id"], r["name"]) for r in df.collect()] == [(3, "c")]


def test_parquet_round_trip_and_mixed_folder(spark, tmp_path):
    """TUPLE records written as Parquet by Spark, read back with read_parquet_records (via the
    decoder's read_files, beside a JSON-lines file in the same folder) and decoded; records
    without _source_table_ take the configured table."""
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.formats.datahub_tuple import read_parquet_records

    folder = tmp_path / "in"
    schema = ("id bigint, price double, name string, _sequence_id_ string, _operation_type_ string, "
              "_excute_time_ bigint, _before_image_ string, _after_image_ string")
    records = [
        (1, 2.5, "a", "1649991610688000000", "I", 1649991726000, "N", "Y"),
        (1, 2.5, "a", "1649991610688000001", "U", 1649991756000, "Y", "N"),
        (1, 3.0, None, "1649991610688000001", "U", 1649991756000, "N", "Y"),
    ]
    spark.createDataFrame(records, schema).coalesce(1).write.parquet(str(folder / "parquet"))
    (folder / "more.jsonl").write_text(S000_DELETE + "\n", encoding="utf-8")

    raw = read_parquet_records(spark, [str(folder / "parquet")])
    got = sorted((r.source_record.line, json.loads(r.value)) for r in raw.collect())
    assert [line for line, _ in got] == [1, 2, 3]
    assert got[0][1] == {"id": 1, "price": 2.5, "name": "a", "_sequence_id_": "1649991610688000000", "_operation_type_": "I",
                         "_excute_time_": 1649991726000, "_before_image_": "N", "_after_image_": "Y"}

    dec = formats.get(FMT)
    rows = dec.decode(dec.read_files(spark, [str(folder)]), DecodeOptions(extra={"table": "cfg_db.cfg_table"})).collect()
    by = {(r.source_record.file.rsplit(".", 1)[-1], r.source_record.line): r for r in rows}
    assert sorted(by) == [("jsonl", 1), ("parquet", 1), ("parquet", 2), ("parquet", 3)]
    assert all(r.error_code is None for r in rows)
    ins, before, after = (by[("parquet", i)].events[0] for i in (1, 2, 3))
    assert (ins.op, ins.database, ins.table, ins.primary_key) == ("c", "cfg_db", "cfg_table", None)
    assert ins.after == {"id": "1", "price": "2.5", "name": "a"}
    assert [(c.name, c.spark_type) for c in ins.columns] == [("id", "bigint"), ("price", "double"), ("name", "string")]
    assert (before.op, before.before, before.after) == ("u", {"id": "1", "price": "2.5", "name": "a"}, None)
    assert (after.op, after.after) == ("u", {"id": "1", "price": "3.0"})  # a NULL is left out of the Parquet row's JSON
    assert before.position == after.position and ins.event_time_ms == 1649991726000
    d = by[("jsonl", 1)].events[0]
    assert (d.op, d.database, d.table) == ("d", "demo_db", "demo_table")  # its own _source_table_ wins


def test_a_key_configured_by_glob_is_the_named_tables(spark, decoded, tmp_path):
    """``--primary-key 'db.*=id'`` gives the TUPLE records the key ``--primary-key TABLE=id``
    gives them (the decode's configured-key lookup, cdclake.formats.base.configured_key_sql)."""
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.sources.files import read_lines

    p = tmp_path / "records.jsonl"
    p.write_text("\n".join(text for text, _ in LINES) + "\n", encoding="utf-8")
    glob = {TABLE.split(".")[0] + ".*": ["id"], "other.*": ["x"]}
    rows = formats.get(FMT).decode(read_lines(spark, [str(p)]), DecodeOptions(primary_keys=glob)).collect()
    by_glob = {r.source_record.line: [e.primary_key for e in r.events or []] for r in rows}
    by_name = {line: [e["primary_key"] for e in row["events"] or []] for line, row in decoded.items()}
    assert by_glob == by_name and any(keys == [["id"]] for keys in by_glob.values())
