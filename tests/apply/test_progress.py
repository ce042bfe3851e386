"""The progress's driver-side merge (cdclake.apply.audit.merge_progress), without Spark:
the rules the earlier Delta MERGE applied, row by row; and its round trip through a changelog
commit's userMetadata."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from cdclake.apply.audit import (
    LAYOUT, PROGRESS_FIELDS, PROGRESS_TAG, DeletesAppend, Progress, merge_progress, progress_metadata, progress_row,
    progress_rows_of,
)
from cdclake.errors import CdclakeError


def row(source, table, **kw):
    r = dict.fromkeys(PROGRESS_FIELDS)
    r.update(source=source, table=table, **kw)
    return r


def d(*xs):
    return [Decimal(x) for x in xs]


def test_matched_rows_keep_the_greatest_and_newest_values():
    old = [
        row("f1", "db.t", last_position=d(5, 2), last_position_text="5:2", last_event_time_ms=50, updated_at_ms=1),
        row(None, "db.t", last_position=d(5, 2), last_position_text="5:2", last_event_time_ms=50, delete_position=d(4),
            truncate_position=d(3), truncate_position_text="3", rows=10, updated_at_ms=1, move_position=d(2)),
        row("f0", None, last_position=d(1), last_position_text="1", last_heartbeat_ms=7, updated_at_ms=1),
    ]
    new = [
        # an older position arrives later (re-delivery): the position stays, the time still moves
        row("f1", "db.t", last_position=d(5, 1), last_position_text="5:1", last_event_time_ms=60, updated_at_ms=100),
        row(None, "db.t", last_position=d(6), last_position_text="6", last_event_time_ms=40, delete_position=d(3, 9),
            truncate_position=d(2), truncate_position_text="2", rows=None, updated_at_ms=100, move_position=d(1, 9)),
        row("f2", None, last_position=d(9), last_position_text="9", last_heartbeat_ms=3, updated_at_ms=100),
    ]
    got = {(r["source"], r["table"]): r for r in merge_progress(old, new)}
    assert set(got) == {("f1", "db.t"), (None, "db.t"), ("f0", None), ("f2", None)}
    f1 = got[("f1", "db.t")]
    assert (f1["last_position"], f1["last_position_text"], f1["last_event_time_ms"]) == (d(5, 2), "5:2", 60)
    assert (f1["updated_at_ms"], f1["lag_ms"]) == (100, 40)
    t = got[(None, "db.t")]
    assert (t["last_position"], t["last_position_text"]) == (d(6), "6")
    assert t["last_event_time_ms"] == 50 and t["lag_ms"] == 50
    assert t["delete_position"] == d(4)  # [4] > [3, 9]: compared element by element
    assert t["move_position"] == d(2)  # the latest remembered move, the same way
    assert (t["truncate_position"], t["truncate_position_text"]) == (d(3), "3")  # the older truncate loses
    assert t["rows"] == 10  # a batch without a row count keeps the old one
    assert got[("f0", None)] == old[2]  # untouched
    assert got[("f2", None)] == new[2]  # inserted as it is


def test_null_old_position_and_newer_truncate_take_the_batch_values():
    old = [row(None, "db.t", rows=3, updated_at_ms=1)]
    new = [row(None, "db.t", last_position=d(1, 0), last_position_text="1:0", truncate_position=d(1), truncate_position_text="1",
               delete_position=d(1, 0), rows=0, updated_at_ms=2)]
    (t,) = merge_progress(old, new)
    assert (t["last_position"], t["truncate_position"], t["delete_position"], t["rows"]) == (d(1, 0), d(1), d(1, 0), 0)
    assert t["move_position"] is None  # a row written before the column, a batch without a move
    assert t["lag_ms"] is None  # no event time on either side
    # the inputs are not modified
    assert old[0]["last_position"] is None and old[0]["rows"] == 3


def test_table_renames_accumulate_once_each_by_point():
    # a table renamed, created again and renamed again keeps both steps (an event older than
    # each point belongs to that step's new name); the same step again (a replay) counts once
    from cdclake.apply.audit import renamed_of

    first = {"point": d(10, 1), "record": {"file": "f", "line": 3, "partition": None, "offset": None}, "to": ["db", None, "n"],
             "text": "10", "event_time_ms": 10_000}
    second = {"point": d(20, 1), "record": None, "to": ["db", None, "z"]}  # (written before text and event time were kept)
    old = [row(None, "db.t", renamed=[second])]
    new = [row(None, "db.t", renamed=[first]), row(None, "db.u", renamed=None)]
    got = {r["table"]: r for r in merge_progress(merge_progress(old, new), [row(None, "db.t", renamed=[first])])}
    assert renamed_of(got["db.t"]["renamed"]) == [(d(10, 1), ("f", 3, None, None), ("db", None, "n"), "10", 10_000),
                                                  (d(20, 1), None, ("db", None, "z"), None, None)]
    assert renamed_of(got["db.u"]["renamed"]) == []


def test_the_targets_row_keeps_what_is_held_when_a_batch_only_moves_the_changelog():
    # a batch that changes nothing held writes the target's row with the changelog's version
    # alone: the held fields stay, the version moves forward only
    held = dict(held_transactions=2, held_events=5, held_version=7, held_since_ms=11, timed_out_transactions=1)
    old = [row(None, None, changelog_version=4, **held)]
    (kept,) = merge_progress(old, [row(None, None, changelog_version=9)])
    assert {k: kept[k] for k in held} == held and kept["changelog_version"] == 9
    (same,) = merge_progress(old, [row(None, None, changelog_version=3)])
    assert same["changelog_version"] == 4
    # a batch that changed what is held writes its held fields (and may append nothing)
    now = dict(held_transactions=0, held_events=0, held_version=8, held_since_ms=None, timed_out_transactions=1)
    (moved,) = merge_progress(old, [row(None, None, **now)])
    assert {k: moved[k] for k in now} == now and moved["changelog_version"] == 4


def test_the_progress_a_changelog_commit_carries_reads_back_as_written():
    # the rows go into a changelog commit's userMetadata as JSON: positions as decimal text
    # (38 digits keep every one), record coordinates as objects; read back they are what the
    # rest of the applier reads: Decimal lists, a tuple of record coordinates, renames' and
    # column DDL's lists of dicts
    big = Decimal("12345678901234567890123456789012345678")
    rows = [
        progress_row(source="topic:0", table="db.t", last_position=d(5, 2), last_position_text="5:2", updated_at_ms=9),
        progress_row(table="db.t", delete_position=[big, Decimal(1)], truncate_position=d(3), truncate_position_text="3",
                     truncate_record=("f.jsonl", 7, None, None), rows=10, delta_version=4,
                     renamed=[{"point": d(8, -1), "record": {"file": None, "line": None, "partition": 0, "offset": 5},
                               "to": ["db", None, "n"], "text": "8", "event_time_ms": 8000}],
                     column_ddl=[{"order": d(6), "text": "6", "ddl": "ALTER TABLE t DROP COLUMN c"}], move_position=d(2)),
        progress_row(held_transactions=1, held_events=2, held_version=3, held_since_ms=4, timed_out_transactions=0),
    ]
    text = progress_metadata(rows)
    assert json.loads(text)[PROGRESS_TAG] == LAYOUT
    back = progress_rows_of(text)
    assert back == rows
    assert Progress(1, back).table_states()["db.t"].renamed == [(d(8, -1), (None, None, 0, 5), ("db", None, "n"), "8", 8000)]
    assert progress_rows_of("a user's note") is None and progress_rows_of(None) is None
    assert progress_rows_of('{"other": 1}') is None
    with pytest.raises(CdclakeError, match="TARGET_LAYOUT"):
        progress_rows_of(json.dumps({PROGRESS_TAG: LAYOUT + 1, "rows": []}))
    with pytest.raises(TypeError, match="not progress fields"):
        progress_row(tabel="db.t")


def test_the_deletes_append_waits_for_every_table_and_writes_nothing_for_nothing(tmp_path):
    # (without Spark: no table remembers anything, so no append begins)
    sink = DeletesAppend(str(tmp_path), None, {"db.a", "db.b"})
    sink.add("db.a", None)
    sink.add("db.a", "not a frame: a table's first word counts")
    with pytest.raises(RuntimeError, match="db.b"):
        sink.wait()
    sink = DeletesAppend(str(tmp_path), None, {"db.a", "db.b"})
    sink.add("db.b", None)
    sink.add("db.a", None)
    sink.add("db.c", "not a table of the batch")
    sink.wait()
    assert not (tmp_path / "_cdclake").exists()
