"""Tests of the ``shareplex-json`` decoder (DTS "Shareplex Json").

No public sample file exists (``shared/fixtures/SOURCES.md``); the reference is the three example
messages of seed ``shared/seeds/001_a1c6319148bc2083.txt`` (section "Shareplex Json": 挿入された
データ / 更新されたデータ / 削除されたデータ). They are copied with the seed's ``/* ... */``
comments and the ``…. /* その他のメタデータ */`` placeholder line removed, and (delete) the comma
left dangling after ``"op": "del"`` by the seed's abridgement removed, so that they are JSON;
keys and values are the seed's. The seed abridges the update's and the delete's ``meta`` (no
``scn``; the delete has no ``table``), so decoded as they stand they are rejects; the same two
messages with the elided ``meta`` fields filled in (values hand-written, marked below) decode to
the canonical events. Other cases are hand-written on the seed's template.

Everything of the decode tests is decoded in one Spark job; the end-to-end test runs two ingests.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

FMT = "shareplex-json"
KEYS = {"CL_BIZ1.MIO_LOG": ["MIO_LOG_ID"], "ORDERS": ["ID"]}

# --- seed 001, the three examples (comments and the placeholder line removed) ----------------
S001_INSERT = (
    '{"meta": {"time": "2017-06-16T14:24:34", "userid": 84, "op": "ins", "scn": "14589063118712", '
    '"rowid": "AAATGpAAIAAItcIAAA", "trans": "7.0.411499", "seq": 1, "size": 11, "table": "CL_BIZ1.MIO_LOG", '
    '"idx": "1/11", "posttime": "2017-06-16T14:33:52"}, "data": {"MIO_LOG_ID": "32539737"}}'
)
S001_UPDATE = (
    '{"meta": {"time": "2017-06-16T15:38:13", "userid": 84, "op": "upd", "table": "CL_BIZ1.MIO_LOG"}, '
    '"data": {"CNTR_NO": "1171201606"}, '
    '"key": {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": null, "CNTR_TYPE": null, '
    '"CNTR_NO": "1171201606syui26"}}'
)
S001_DELETE = (
    '{"meta": {"time": "2017-06-16T15:51:35", "userid": 84, "op": "del"}, '
    '"data": {"MIO_LOG_ID": "32539739", "PLNMIO_REC_ID": "31557806", "POL_CODE": null, "CNTR_TYPE": null, "CG_NO": null}}'
)


def complete(message: str, **meta) -> str:
    """``message`` with the ``meta`` fields the seed elides filled in (hand-written values)."""
    d = json.loads(message)
    d["meta"].update(meta)
    return json.dumps(d)


# the update and delete with hand-written scn / rowid / trans / seq / size / table / idx / posttime
UPDATE = complete(S001_UPDATE, scn="14589063118800", rowid="AAATGpAAIAAItcHAAB", trans="7.0.411512", seq=1,
                  size=1, idx="1/1", posttime="2017-06-16T15:38:20")
DELETE = complete(S001_DELETE, scn="14589063118900", rowid="AAATGpAAIAAItcIAAC", trans="7.0.411530", seq=2,
                  size=2, table="CL_BIZ1.MIO_LOG", idx="2/2", posttime="2017-06-16T15:51:40")


def msg(op, data=None, key=None, table="CL_BIZ1.MIO_LOG", scn="14589063119000", seq=1, size=1, time="2017-06-16T16:00:00", **meta):
    """A hand-written message on the seed's template."""
    m = {"time": time, "userid": 84, "op": op, "scn": scn, "rowid": "AAATGpAAIAAItcIAAD", "trans": "7.0.411600",
         "seq": seq, "size": size, "table": table, "idx": f"{seq}/{size}", "posttime": time}
    m.update(meta)
    d = {"meta": {k: v for k, v in m.items() if v is not None}}
    if data is not None:
        d["data"] = data
    if key is not None:
        d["key"] = key
    return json.dumps(d)


ROW = {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None,
       "CNTR_NO": "1171201606syui26", "CG_NO": "CG-7"}

LINES = [
    # line, text, expected error code
    (S001_INSERT, None),  # 1
    (S001_UPDATE, "BAD_POSITION"),  # 2 the seed elides meta.scn
    (S001_DELETE, "MISSING_TABLE"),  # 3 the seed elides meta.table
    (UPDATE, None),  # 4
    (DELETE, None),  # 5
    # long op names (the seed's parameter table), a bare and a quoted table name
    (msg("INSERT", {"ID": "1", "QTY": "2"}, table="SALES.ORDERS", scn="20", seq=1, size=3), None),  # 6
    (msg("UPDATE", {"QTY": None}, key={"ID": "1", "QTY": "2"}, table="ORDERS", scn="20", seq=2, size=3), None),  # 7
    (msg("DELETE", {"ID": "1", "QTY": None}, table='"SALES"."ORDERS"', scn="20", seq=3, size=3), None),  # 8
    (msg("TRUNCATE", table="SALES.ORDERS", scn="21"), None),  # 9
    (msg("UPDATE BEFORE", {"ID": "5", "QTY": "1"}, table="SALES.ORDERS", scn="22", seq=1, size=2), None),  # 10
    (msg("update_after", {"ID": "5", "QTY": "9"}, table="SALES.ORDERS", scn="22", seq=1, size=2), None),  # 11
    (msg("DROP COLUMN", {"QTY": None}, table="SALES.ORDERS", scn="23"), None),  # 12
    # an update that changes the configured key: delete the old key, partial update of the new
    (msg("upd", {"MIO_LOG_ID": "40000001"}, key={"MIO_LOG_ID": "32537893", "CNTR_NO": "1171201606"}, scn="30"), None),  # 13
    # no configured key: every column of `key` is carried
    (msg("upd", {"B": "2"}, key={"A": "1", "B": "1"}, table="CL_BIZ1.NOKEY", scn="31"), None),  # 14
    # seq/size only in idx; time with Z
    (msg("ins", {"MIO_LOG_ID": "7"}, scn="32", seq=None, size=None, idx="4/4", time="2017-06-16T16:00:00Z"), None),  # 15
    # bad input
    ("not json {", "MALFORMED_JSON"),  # 16
    ("[" + S001_INSERT + "]", "NOT_AN_OBJECT"),  # 17
    ('{"meta": {"op": "ins", "table": "A.B", "scn": "1"}, "data": "x"}', "SCHEMA_MISMATCH"),  # 18 data not an object
    ('{"data": {"A": "1"}}', "SCHEMA_MISMATCH"),  # 19 no meta
    (msg("merge", {"MIO_LOG_ID": "1"}), "UNKNOWN_OP"),  # 20
    (msg("ins", {"MIO_LOG_ID": "1"}, table=None), "MISSING_TABLE"),  # 21
    (msg("ins", {"MIO_LOG_ID": "1"}, table="CL_BIZ1."), "MISSING_TABLE"),  # 22
    (msg("ins", {"MIO_LOG_ID": "1"}, scn="14589x"), "BAD_POSITION"),  # 23
    (msg("ins", {"MIO_LOG_ID": "1"}, seq="first"), "BAD_POSITION"),  # 24
    (msg("ins"), "MISSING_IMAGE"),  # 25 insert without data
    (msg("upd", key={"MIO_LOG_ID": "1"}), "MISSING_IMAGE"),  # 26 update without data
    (msg("upd", {"CNTR_NO": "1"}, key={"CNTR_NO": "0"}), "MISSING_IMAGE"),  # 27 key column nowhere
    (msg("del"), "MISSING_IMAGE"),  # 28
]


def pos(*order, text):
    return {"order": [Decimal(o) for o in order], "text": text}


@pytest.fixture(scope="module")
def decoded(spark, tmp_path_factory):
    """Every line of :data:`LINES`, decoded once: {line: row as dict}."""
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.sources.files import read_lines

    p = tmp_path_factory.mktemp("shareplex") / "messages.jsonl"
    p.write_text("\n".join(text for text, _ in LINES) + "\n", encoding="utf-8")
    rows = formats.get(FMT).decode(read_lines(spark, [str(p)]), DecodeOptions(primary_keys=KEYS)).collect()
    return {r.source_record.line: r.asDict(recursive=True) for r in rows}


def events(row):
    assert row["error_code"] is None, (row["error_code"], row["error_message"])
    return row["events"]


def one(row):
    ev = events(row)
    assert len(ev) == 1, ev
    return ev[0]


def test_one_output_row_per_record_and_codes(decoded):
    assert sorted(decoded) == list(range(1, len(LINES) + 1))
    for line, (_text, code) in enumerate(LINES, start=1):
        row = decoded[line]
        assert row["error_code"] == code, (line, row["error_code"], row["error_message"])
        if code is not None:
            assert row["events"] == [] and row["error_message"] and row["raw_value"] is not None


def test_seed_insert(decoded):
    e = one(decoded[1])
    assert e == {
        "format": FMT, "kind": "data", "op": "c",
        "database": "CL_BIZ1", "schema": None, "table": "MIO_LOG",
        "before": None, "after": {"MIO_LOG_ID": "32539737"}, "present": None,
        "primary_key": ["MIO_LOG_ID"], "columns": None,
        "position": pos(14589063118712, 1, text="14589063118712:1"),
        "tx_id": "7.0.411499", "tx_seq": 1, "tx_last": False, "tx_size": 11,
        "ddl": None, "event_time_ms": 1497623074000,  # 2017-06-16T14:24:34 UTC
        "source_record": e["source_record"],
    }
    assert e["source_record"]["line"] == 1 and e["source_record"]["file"].endswith("messages.jsonl")


def test_seed_update_is_a_partial_image_carrying_the_key(decoded):
    e = one(decoded[4])
    assert (e["kind"], e["op"], e["database"], e["table"]) == ("data", "u", "CL_BIZ1", "MIO_LOG")
    # before: `key`, the row before the change; after: the key column from `key` + `data`
    assert e["before"] == {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None,
                           "CNTR_TYPE": None, "CNTR_NO": "1171201606syui26"}
    assert e["after"] == {"MIO_LOG_ID": "32537893", "CNTR_NO": "1171201606"}
    assert e["present"] == ["MIO_LOG_ID", "CNTR_NO"]
    assert e["position"] == pos(14589063118800, 1, text="14589063118800:1")
    assert (e["tx_id"], e["tx_seq"], e["tx_size"], e["tx_last"]) == ("7.0.411512", 1, 1, True)
    assert e["event_time_ms"] == 1497627493000  # 2017-06-16T15:38:13 UTC


def test_seed_delete(decoded):
    e = one(decoded[5])
    assert (e["op"], e["after"], e["present"], e["primary_key"]) == ("d", None, None, ["MIO_LOG_ID"])
    assert e["before"] == {"MIO_LOG_ID": "32539739", "PLNMIO_REC_ID": "31557806", "POL_CODE": None,
                           "CNTR_TYPE": None, "CG_NO": None}
    assert e["position"] == pos(14589063118900, 2, text="14589063118900:2")
    assert (e["tx_seq"], e["tx_size"], e["tx_last"]) == (2, 2, True)
    assert e["event_time_ms"] == 1497628295000  # 2017-06-16T15:51:35 UTC


def test_long_op_names_and_table_names(decoded):
    ins, upd, dele = one(decoded[6]), one(decoded[7]), one(decoded[8])
    assert (ins["op"], ins["database"], ins["table"], ins["primary_key"]) == ("c", "SALES", "ORDERS", ["ID"])
    # a bare table name: no database; the key configured under the bare name is found
    assert (upd["op"], upd["database"], upd["table"], upd["primary_key"]) == ("u", None, "ORDERS", ["ID"])
    assert (upd["after"], upd["present"]) == ({"ID": "1", "QTY": None}, ["ID", "QTY"])  # QTY set to NULL
    assert (dele["op"], dele["database"], dele["table"]) == ("d", "SALES", "ORDERS")  # quotes removed
    assert [e["position"]["order"][1] for e in (ins, upd, dele)] == [1, 2, 3]
    t = one(decoded[9])
    assert (t["kind"], t["op"], t["before"], t["after"], t["table"]) == ("data", "t", None, None, "ORDERS")
    # UPDATE BEFORE / UPDATE AFTER: one image each, same position, no `present`: paired by the applier
    b, a = one(decoded[10]), one(decoded[11])
    assert (b["op"], b["before"], b["after"], b["present"]) == ("u", {"ID": "5", "QTY": "1"}, None, None)
    assert (a["op"], a["before"], a["after"], a["present"]) == ("u", None, {"ID": "5", "QTY": "9"}, None)
    assert a["position"] == b["position"] == pos(22, 1, text="22:1")
    d = one(decoded[12])
    assert (d["kind"], d["op"], d["table"], d["ddl"]) == ("ddl", None, "ORDERS", 'DROP COLUMN {"QTY":null}')


def test_key_change_deletes_the_old_key(decoded):
    old, new = events(decoded[13])
    assert (old["op"], old["before"], old["after"]) == ("d", {"MIO_LOG_ID": "32537893", "CNTR_NO": "1171201606"}, None)
    assert new["op"] == "u"
    assert new["after"] == {"CNTR_NO": "1171201606", "MIO_LOG_ID": "40000001"}  # all of `key`, overlaid with data
    assert new["present"] == ["CNTR_NO", "MIO_LOG_ID"]
    assert old["position"] == new["position"]


def test_no_configured_key_and_idx_fallback(decoded):
    e = one(decoded[14])
    assert (e["primary_key"], e["after"], e["present"]) == (None, {"A": "1", "B": "2"}, ["A", "B"])
    e = one(decoded[15])
    assert e["position"] == pos(32, 4, text="32:4")
    assert (e["tx_seq"], e["tx_size"], e["tx_last"]) == (4, 4, True)
    assert e["event_time_ms"] == 1497628800000  # 2017-06-16T16:00:00Z


def test_detect_score():
    from cdclake import formats

    dec = formats.get(FMT)
    assert dec.detect_score([S001_INSERT.encode(), UPDATE.encode()]) == 1.0
    assert dec.detect_score([b'{"data": [], "type": "INSERT", "isDdl": false}', b"x"]) == 0.0


def test_end_to_end_partial_update_then_delete(spark, tmp_path):
    """Insert a full row, apply the seed's partial update (only CNTR_NO changes, every other
    column is kept), then delete the row; the seed's own insert stays."""
    from cdclake.pipeline import IngestConfig, ingest

    target = str(tmp_path / "lake")
    first = tmp_path / "first.jsonl"
    first.write_text("\n".join([msg("ins", ROW, scn="14589063118700"), S001_INSERT, UPDATE]) + "\n", encoding="utf-8")
    s = ingest(spark, IngestConfig(FMT, [str(first)], target, primary_keys={"CL_BIZ1.MIO_LOG": ["MIO_LOG_ID"]}))
    assert (s.records_in, s.rejected, s.events) == (3, 0, 3)
    cols = ["MIO_LOG_ID", "PLNMIO_REC_ID", "POL_CODE", "CNTR_TYPE", "CNTR_NO", "CG_NO"]
    df = spark.read.format("delta").load(f"{target}/CL_BIZ1.MIO_LOG")
    assert {f.name: f.dataType.simpleString() for f in df.schema.fields if f.name in cols} == {c: "string" for c in cols}
    got = sorted(tuple(r[c] for c in cols) for r in df.collect())
    assert got == [
        ("32537893", "31557806", None, None, "1171201606", "CG-7"),  # only CNTR_NO changed
        ("32539737", None, None, None, None, None),
    ]

    second = tmp_path / "second.jsonl"
    gone = msg("del", ROW | {"CNTR_NO": "1171201606"}, scn="14589063119500")
    second.write_text("\n".join([gone, S001_DELETE]) + "\n", encoding="utf-8")
    s = ingest(spark, IngestConfig(FMT, [str(second)], target, primary_keys={"CL_BIZ1.MIO_LOG": ["MIO_LOG_ID"]}))
    assert (s.records_in, s.decoded, s.rejected, s.reject_codes) == (2, 1, 1, {"MISSING_TABLE": 1})
    df = spark.read.format("delta").load(f"{target}/CL_BIZ1.MIO_LOG")
    assert [r["MIO_LOG_ID"] for r in df.collect()] == ["32539737"]
