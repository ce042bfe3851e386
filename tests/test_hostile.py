"""Hostile names (issue 11): table, schema and column names come from messages cdclake does not
control. A name never leaves the target, never meets the audit folder ``_cdclake``, never
reaches SQL text unquoted; one table the file system refuses does not stop the others.

The path rules are checked without Spark over many names (hypothesis); one end-to-end run of
two batches (Canal JSON written here: the names are the point, not the format) proves the
tables are written where the rules say, read back with their names, and a blocked table's
events land in the rejects table as ``TABLE_FAILED``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cdclake import targets
from cdclake.cli import step_line
from cdclake.apply import audit
from cdclake.apply.plan import BatchPlan, SourceProgress
from cdclake.errors import RejectCode
from cdclake.formats.base import Limits
from tests.roundtrip import scaled

#: names a hostile producer might send (issue 11's list and more)
HOSTILE = [
    "..", "../../x", "/abs", "a/b", "_cdclake", "_CDCLAKE", "_cdclake.changelog", "", ".", "x" * 1000,
    "a\\b", "a\x00b", "C:\\x", "t`; DROP TABLE x; --", "%2F", "^2F", "~", "a~b", "é" * 300,
    "new\nline", "\x1b[31mred", "*", "[x]", "{a,b}", "a:b", ". .", "..\\..\\x",
]


def _check_folder(target: Path, name: str) -> str:
    folder = targets.table_folder(name)
    assert folder not in ("", ".", "..") and os.sep not in folder and "/" not in folder and "\\" not in folder
    assert "\x00" not in folder and all(c.isprintable() for c in folder)
    assert len(folder.encode("utf-8")) <= 255
    assert folder.lower() != targets.AUDIT_FOLDER and not folder.startswith(".")
    path = Path(os.path.normpath(targets.join(str(target), folder)))
    assert path.parent == target
    back = targets.table_name(folder)
    assert back == name or (back is None and "~" in folder)
    return folder


def test_hostile_names_stay_one_folder_inside_the_target():
    target = Path("/srv/lake")
    folders = [_check_folder(target, n) for n in HOSTILE]
    assert len(set(folders)) == len(HOSTILE)  # no two names share a folder
    # ordinary names keep their folder (targets written before the rules are read the same)
    for n in ("inventory.customers", "db.schema.t", "shop.order_items", "_other.t", "DB2INST1.CUSTOMERS"):
        assert targets.table_folder(n) == n


@settings(max_examples=scaled(500))  # 500 in CI, 5,000 under ``bin/test --thorough``
@given(st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=20, unique=True))
def test_any_name_maps_to_its_own_folder_inside_the_target(names):
    target = Path("/srv/lake")
    folders = [_check_folder(target, n) for n in names]
    assert len(set(folders)) == len(names)


def _canal(database, table, row, es, op="INSERT", old=None):
    cols = list(row)
    return json.dumps({
        "data": [row], "old": old, "database": database, "table": table, "es": es, "ts": es, "id": es,
        "isDdl": False, "type": op, "pkNames": ["id"],
        "mysqlType": {c: ("int" if c == "id" else "varchar(20)") for c in cols},
        "sqlType": {c: (4 if c == "id" else 12) for c in cols},
    })


#: column names that need quoting everywhere (dots, backticks, spaces, newlines, unicode, keywords)
COLUMNS = ["id", "a.b", "sp ace", "new\nline", "ünï", "select", "back`tick", "x,y", "`", "from"]


def test_hostile_names_end_to_end(spark, tmp_path):
    from cdclake.pipeline import IngestConfig, ingest

    home = tmp_path / "home"
    target = home / "lake"
    escape = f"/tmp/cdclake-escape-{uuid.uuid4().hex}"
    # one table per kind of danger (the pure tests above cover the many spellings of each)
    names = [
        ("db", "t`; DROP TABLE x; --"), ("..", ".."), ("db", "../../x"), ("..", "/../.." + escape), ("_cdclake", "changelog"),
        ("db", "y" * 1000), ("db", "blocked"),
    ]
    qualified = [".".join(p for p in n if p) for n in names]
    # a file where the table ``db.blocked`` would go: the file system refuses that one table
    target.mkdir(parents=True)
    (target / "db.blocked").write_text("in the way")
    # the writer lock of a process that died (kill -9) on this host: taken over
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (target / "_cdclake").mkdir()
    (target / "_cdclake" / "writer.lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "id": "gone"}))
    first = tmp_path / "in" / "first.jsonl"
    first.parent.mkdir()
    lines = [_canal(d, t, {c: str(i) for c in COLUMNS}, 1000 + i) for i, (d, t) in enumerate(names)]
    lines.append(_canal("", "", {"id": "1"}, 1999))  # no name at all (Canal needs a database): not a table
    lines.append(_canal("db", "big", {"id": "1", "v": "z" * 5000}, 1998))  # beyond --max-record-bytes
    lines.append(_canal("db", "wide", {"id": "1", **{f"c{i}": "1" for i in range(12)}}, 1997))  # beyond --max-columns
    first.write_text("".join(line + "\n" for line in lines))

    limits = Limits(max_record_bytes=4096, max_columns=len(COLUMNS))
    steps = []
    s1 = ingest(spark, IngestConfig("canal-json", [str(first)], str(target), limits=limits), on_step=steps.append)
    assert (s1.records_in, s1.decoded, s1.rejected) == (len(names) + 3, len(names) + 1, 2)
    assert s1.reject_codes == {RejectCode.MISSING_TABLE.value: 1, RejectCode.RECORD_TOO_LARGE.value: 1}
    failed = {r.table: r for r in s1.tables if r.failed}
    assert sorted(failed) == ["db.blocked", "db.wide"] and failed["db.blocked"].failed_events == 1
    assert failed["db.blocked"].failed.startswith("TABLE_FAILED: ")
    assert "DELTA_CANNOT_CREATE_LOG_PATH" in failed["db.blocked"].failed or "not a directory" in failed["db.blocked"].failed.lower()
    assert failed["db.wide"].failed.startswith("TOO_MANY_COLUMNS: 13 columns")
    assert sorted(r.table for r in s1.tables if not r.failed) == sorted(n for n in qualified if n != "db.blocked")
    # the progress display counts every table once, the failed ones as failed, not applied,
    # then says the batch's tables are done
    start = next(i for i, s in enumerate(steps) if s.text.startswith("applying "))
    per_table, last = steps[start + 1:-1], steps[-1]
    assert sorted(s.text for s in per_table if s.text.startswith("could not")) == ["could not apply db.blocked", "could not apply db.wide"]
    assert (len(per_table), per_table[-1].tables_applied, per_table[-1].tables_failed) == (len(s1.tables), len(s1.tables) - 2, 2)
    assert (last.tables, last.tables_applied, last.tables_failed) == (len(s1.tables), len(s1.tables) - 2, 2)
    assert last.text == f"applied {len(s1.tables) - 2} table(s), 2 failed" and "· 2 table(s) failed ·" in step_line(last)

    # nothing was written outside the target; every table is one folder directly in it
    outside = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if target not in p.parents and p != target)
    assert outside == ["home", "in", "in/first.jsonl"]
    assert not Path(escape).exists() and not (home / "x").exists()
    assert not (target / "_cdclake" / "writer.lock").exists()  # released at the end of the ingest
    folders = {targets.table_folder(n) for n in qualified}
    assert {p.name for p in target.iterdir()} == folders | {"_cdclake"}
    assert (target / "db.blocked").read_text() == "in the way"

    # the blocked table's event is in the rejects table, whole; the tables carry their names
    rejects = spark.read.format("delta").load(str(target / "_cdclake" / "rejects")).collect()
    assert sorted((r.error_code, r.source_record.line) for r in rejects) == [
        (RejectCode.MISSING_TABLE.value, len(names) + 1),
        (RejectCode.RECORD_TOO_LARGE.value, len(names) + 2),
        (RejectCode.TABLE_FAILED.value, names.index(("db", "blocked")) + 1),
        (RejectCode.TOO_MANY_COLUMNS.value, len(names) + 3),
    ]
    event = json.loads(bytes(next(r for r in rejects if r.error_code == RejectCode.TABLE_FAILED.value).raw_value))
    assert (event["database"], event["table"], event["op"], event["after"]["a.b"]) == ("db", "blocked", "c", str(len(names) - 1))
    progress = {r["table"] for r in audit.read_progress(spark, str(target)).rows}
    assert progress == set(qualified) - {"db.blocked"} | {None}  # a refused table's position does not move

    # a second batch: updates of every table (the blocked one now free) find the same folders
    stale = audit.read_progress(spark, str(target))  # what a second writer started from
    (target / "db.blocked").unlink()
    second = tmp_path / "in" / "second.jsonl"
    second.write_text("".join(
        _canal(d, t, {c: ("new" if c == "back`tick" else str(i)) for c in COLUMNS}, 2000 + i, "UPDATE", [{"back`tick": str(i)}]) + "\n"
        for i, (d, t) in enumerate(names)
    ))
    s2 = ingest(spark, IngestConfig("canal-json", [str(second)], str(target)))
    assert not [r for r in s2.tables if r.failed]
    assert {p.name for p in target.iterdir()} == folders | {"_cdclake"}
    for i, n in enumerate(qualified):
        rows = [r.asDict() for r in spark.read.format("delta").load(targets.join(str(target), targets.table_folder(n))).collect()]
        assert len(rows) == 1, n
        want = {c: (i if c == "id" else "new" if c == "back`tick" else str(i)) for c in COLUMNS}
        if n == "db.blocked":  # its insert went to the rejects: the update alone (an upsert) made the row
            assert rows[0]["_cdc_op"] == "u"
        assert {c: rows[0][c] for c in COLUMNS} == want, n

    # that second writer ends after this batch: its progress is merged into the newer rows, not
    # written over them (a lost update would take every table back to the first batch)
    other = SourceProgress("other-writer", None, [Decimal(5)], "5", 5, None)
    audit.update_progress(spark, str(target), BatchPlan(tables=[], progress=[other]), stale, {})
    progress = {(r["source"], r["table"]): r["last_position_text"] for r in audit.read_progress(spark, str(target)).rows}
    assert progress[("other-writer", None)] == "5"
    assert progress[(None, "db.blocked")].startswith(str(2000 + names.index(("db", "blocked"))))
