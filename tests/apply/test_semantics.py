"""The applier's guarantees (DESIGN.md), checked on canonical events built by hand, so they hold
for every format: order by position whatever the arrival, snapshot vs stream, partial images,
key changes, truncate, tables without a key, re-delivery."""

from __future__ import annotations

import itertools
import json
import shutil
from decimal import Decimal

from delta.tables import DeltaTable

from cdclake.apply import audit
from cdclake.model import EVENT_SCHEMA
from cdclake.pipeline import apply_events
from cdclake.status import target_status
from tests.readers import lake_rows

COLS = [
    {"name": "id", "source_type": "int", "spark_type": "int", "precision": None, "scale": None, "nullable": False},
    {"name": "name", "source_type": "varchar", "spark_type": "string", "precision": None, "scale": None, "nullable": True},
    {"name": "amount", "source_type": "decimal(10,2)", "spark_type": "decimal(10,2)", "precision": 10, "scale": 2, "nullable": True},
]
_line = itertools.count(1)


def ev(op, pos, after=None, before=None, present=None, table="t", key=("id",), columns=COLS, kind="data", line=None):
    return {
        "format": "test", "kind": kind, "op": op, "database": "db", "schema": None, "table": table,
        "before": before, "after": after, "present": present, "primary_key": list(key) if key else None,
        "columns": columns, "position": {"order": [Decimal(p) for p in (pos if isinstance(pos, tuple) else (pos,))], "text": str(pos)},
        "tx_id": None, "tx_seq": None, "tx_last": None, "tx_size": None, "ddl": None, "event_time_ms": 1000 * (pos if isinstance(pos, int) else 1),
        "source_record": {"topic": None, "partition": None, "offset": None, "timestamp_ms": None, "file": "mem", "line": line or next(_line)},
    }


def row(i, name, amount=None):
    return {"id": str(i), "name": name, "amount": amount}


def apply(spark, target, events, **kw):
    df = spark.createDataFrame(events, EVENT_SCHEMA)
    return apply_events(spark, df, str(target), kw.get("primary_keys"))


def table(spark, target, name="db.t"):
    """(id, name, amount) of every row of the table, sorted; read by delta-rs where it opens
    the table (tests/readers.py ``lake_rows``)."""
    return sorted((r["id"], r["name"], r["amount"]) for r in lake_rows(spark, f"{target}/{name}"))


def test_configured_key_and_new_columns(spark, tmp_path):
    cols2 = COLS + [{"name": "extra", "source_type": "bigint", "spark_type": "bigint", "precision": None, "scale": None, "nullable": True}]
    apply(spark, tmp_path, [ev("c", 1, row(1, "a"), key=None)], primary_keys={"t": ["id"]})
    apply(spark, tmp_path, [ev("u", 2, {**row(1, "b"), "extra": "7"}, key=None, columns=cols2)], primary_keys={"db.t": ["id"]})
    df = spark.read.format("delta").load(f"{tmp_path}/db.t")
    assert [(r["id"], r["name"], r["extra"]) for r in df.collect()] == [(1, "b", 7)]
    hist = spark.read.format("delta").load(f"{tmp_path}/_cdclake/schema_history").collect()
    assert any("add columns (extra bigint)" in h["change"] for h in hist)


def test_merge_condition_carries_the_batch_key_range(spark):
    # the range of the first key column over before and after images, measured by the planning
    # aggregate; the key configured (--primary-key) for events that carry none
    from cdclake.apply.delta_table import merge_condition_sql
    from cdclake.apply.plan import plan_batch

    events = [ev("u", 20, row(7, "x"), row(2, "y"), key=None), ev("c", 21, row(5, "z"), key=None), ev("d", 22, before=row(-3, "w"), key=None)]
    (p,) = plan_batch(spark.createDataFrame(events, EVENT_SCHEMA), {"t": ["id"]}).tables
    assert p.key == ["id"]
    cols = {"id": "int", "name": "string", "amount": "decimal(10,2)"}
    assert merge_condition_sql(p, cols) == "t.`id` <=> s._c0 AND t.`id` >= CAST(-3 AS int) AND t.`id` <= CAST(7 AS int)"
    assert merge_condition_sql(p, {**cols, "id": "decimal(3,1)"}).endswith("t.`id` >= -3BD AND t.`id` <= 7BD")
    # a range the column's type cannot hold (a bad value): none, as the CAST would wrap (ANSI off)
    assert merge_condition_sql(p, {**cols, "id": "tinyint"}).endswith("t.`id` >= CAST(-3 AS tinyint) AND t.`id` <= CAST(7 AS tinyint)")
    (big,) = plan_batch(spark.createDataFrame([*events, ev("c", 24, row(3000000000, "big"), key=None)], EVENT_SCHEMA), {"t": ["id"]}).tables
    assert merge_condition_sql(big, cols) == "t.`id` <=> s._c0"
    assert merge_condition_sql(big, {**cols, "id": "bigint"}).endswith("t.`id` <= CAST(3000000000 AS bigint)")
    # keys outside the batch that remembered moves carry changes to (delta_table.follow_moves)
    # widen the range; a key the range cannot hold as a number gives none
    assert merge_condition_sql(p, cols, ['{"id":12}', '{"id":-5}']).endswith("t.`id` >= CAST(-5 AS int) AND t.`id` <= CAST(12 AS int)")
    assert merge_condition_sql(p, {**cols, "id": "decimal(3,1)"}, ['{"id":7.5}']).endswith("t.`id` >= -3BD AND t.`id` <= 8BD")
    assert merge_condition_sql(p, cols, ['{"id":"x"}']) == "t.`id` <=> s._c0"
    # an event without the key's value: no range
    (p,) = plan_batch(spark.createDataFrame([*events, ev("c", 23, {"name": "v"})], EVENT_SCHEMA)).tables
    assert merge_condition_sql(p, cols) == "t.`id` <=> s._c0"


def test_the_plan_tells_which_updates_may_move_a_row_to_another_key(spark):
    # the planning aggregate counts the updates whose before image gives a key column another
    # value (or no value); only those make the applier look for the old keys to remember
    from cdclake.apply.plan import may_rekey, plan_batch

    def plan(events, keys=None):
        return {p.table: p for p in plan_batch(spark.createDataFrame(events, EVENT_SCHEMA), keys).tables}

    same = [ev("u", 1, row(1, "b"), row(1, "a"), table="a"), ev("u", 2, row(2, "b"), table="a")]  # (no before image)
    moved = [ev("u", 3, row(9, "b"), row(1, "a"), table="b"), ev("u", 4, row(2, "b"), row(2, "a"), table="b")]
    no_key = [ev("u", 5, {"name": "b"}, {"name": "a"}, table="c")]  # the key in neither image: no old key
    halves = [ev("u", 6, before=row(3, "a"), table="d")]  # an update half: the after image comes apart
    other = [ev("u", 7, row(4, "b"), row(4, "a"), table="e"), ev("u", 8, row(5, "b"), row(5, "a"), table="e", key=("name",))]
    plans = plan(same + moved + no_key + halves + other)
    assert {t: (p.rekeys, may_rekey(p)) for t, p in plans.items()} == {
        "a": (0, False), "b": (1, True), "c": (0, False), "d": (1, True), "e": (1, True)}
    # events stating one key but the table another (configured): the events' key decides the
    # count, and the difference makes it unknown
    (p,) = plan([ev("u", 1, row(1, "b"), row(1, "c"))], {"t": ["name"]}).values()
    assert (p.key, p.rekeys, may_rekey(p)) == (["name"], 1, True)
    (p,) = plan([ev("u", 1, row(1, "b"), row(1, "b"), key=("id",))], {"t": ["id"]}).values()
    assert (p.rekeys, may_rekey(p)) == (0, False)


def test_progress_is_reread_after_another_writer_commits(spark, tmp_path):
    # the progress rides on the changelog's commits (userMetadata); the process keeps the
    # progress it wrote and reads it again only when the changelog has a later commit than its
    # own (another process wrote the target in between)
    apply(spark, tmp_path, [ev("c", 1, row(1, "a"))])
    mine = audit.read_progress(spark, str(tmp_path))
    assert mine.version == 0 and {(r["source"], r["table"]) for r in mine.rows} == {("mem", "db.t"), ("mem", None), (None, "db.t")}
    # the changelog's version after the batch: the commit that carries the progress (its first)
    assert mine.changelog_version() == 0 and mine.changelog_cut().version == 0
    assert not (tmp_path / audit.LEGACY_PROGRESS).exists()
    assert audit._cached_progress(spark, f"{tmp_path}/{audit.CHANGELOG}") is not None
    other = {**dict.fromkeys(audit.PROGRESS_FIELDS), "source": "elsewhere"}
    theirs = spark.createDataFrame([ev("c", 1, row(5, "x"), table="elsewhere")], EVENT_SCHEMA)
    audit.write_changelog(theirs, str(tmp_path), metadata=audit.progress_metadata(mine.rows + [other]))
    assert audit._cached_progress(spark, f"{tmp_path}/{audit.CHANGELOG}") is None
    seen = audit.read_progress(spark, str(tmp_path))
    assert seen.version == 1 and ("elsewhere", None) in {(r["source"], r["table"]) for r in seen.rows}
    assert seen.rows == [{**r, "changelog_version": None} for r in mine.rows] + [other]  # (JSON keeps every value as read)
    # commits without the progress (a user's OPTIMIZE, a foreign append) are passed over
    DeltaTable.forPath(spark, f"{tmp_path}/{audit.CHANGELOG}").optimize().executeCompaction()
    audit.write_changelog(theirs, str(tmp_path))
    assert audit.read_progress(spark, str(tmp_path)).changelog_version() == 1
    # the next batch keeps the other writer's row and moves its own
    apply(spark, tmp_path, [ev("u", 2, row(1, "b"), row(1, "a"))])
    after = audit.read_progress(spark, str(tmp_path))
    rows = {(r["source"], r["table"]): r for r in after.rows}
    assert ("elsewhere", None) in rows and rows[(None, "db.t")]["last_position_text"] == "2" and rows[(None, "db.t")]["rows"] == 1
    assert after.version == after.changelog_version() == 4


def test_a_layout_2_target_moves_its_progress_into_the_changelog(spark, tmp_path):
    # a target written by a cdclake of layout 2 kept its progress in a table of its own and
    # appended the changelog first: here its second batch (identity app/1) crashed after that
    # append, before its MERGE and its progress. This cdclake applies the batch again: it reads
    # the old progress table (a late insert older than a delete it remembers stays out), the
    # changelog append is skipped (its identity is in), so the progress goes in a changelog
    # commit of its own, and the old table goes. The state is then a layout 3 target's after the
    # same batches
    first = [ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("d", 3, before=row(2, "b"))]
    second = [ev("c", 2, row(2, "late")), ev("u", 4, row(1, "a4"), row(1, "a"))]
    now, old = tmp_path / "now", tmp_path / "old"
    apply_events(spark, spark.createDataFrame(first, EVENT_SCHEMA), str(now), txn=audit.Txn("app", 0))
    shutil.copytree(now, old)
    shutil.rmtree(old / audit.CHANGELOG)
    # layout 2: no progress in the changelog's commits
    audit.write_changelog(spark.createDataFrame(first, EVENT_SCHEMA), str(old), audit.Txn("app", 0))
    audit.write_changelog(spark.createDataFrame(second, EVENT_SCHEMA), str(old), audit.Txn("app", 1))
    rows = audit.read_progress(spark, str(now)).rows + [{**dict.fromkeys(audit.PROGRESS_FIELDS), "changelog_version": 0}]
    legacy = spark.createDataFrame([tuple(r[f] for f in audit.PROGRESS_FIELDS) for r in rows], audit.PROGRESS_SCHEMA)
    legacy.write.format("delta").save(str(old / audit.LEGACY_PROGRESS))
    (old / audit.LAYOUT_FILE).write_text('{"layout": 2}')
    assert target_status(spark, str(old))["tables"][0]["rows"] == 1
    assert json.loads((old / audit.LAYOUT_FILE).read_text()) == {"layout": 2}  # (a reader moves nothing)
    before = audit.read_progress(spark, str(old))
    assert before.changelog_version() == 0 and before.table_states()["db.t"].delete_position == [Decimal(3)]

    for target in (old, now):
        apply_events(spark, spark.createDataFrame(second, EVENT_SCHEMA), str(target), txn=audit.Txn("app", 1))
    assert table(spark, old) == table(spark, now) == [(1, "a4", None)]
    assert json.loads((old / audit.LAYOUT_FILE).read_text()) == {"layout": audit.LAYOUT} and not (old / audit.LEGACY_PROGRESS).exists()
    after = audit.read_progress(spark, str(old))
    assert after.changelog_version() == 2  # the progress's own commit
    state = {(r["source"], r["table"]): {k: v for k, v in r.items() if k not in ("updated_at_ms", "lag_ms")} for r in after.rows}
    want = {(r["source"], r["table"]): {k: v for k, v in r.items() if k not in ("updated_at_ms", "lag_ms")}
            for r in audit.read_progress(spark, str(now)).rows}
    assert state.pop((None, None))["changelog_version"] is None  # (the layout 2 target row: the commit's version now)
    assert state[(None, "db.t")]["last_position_text"] == "4" and state == want
    # applied once more, the batch changes nothing
    apply_events(spark, spark.createDataFrame(second, EVENT_SCHEMA), str(old), txn=audit.Txn("app", 1))
    assert audit.read_progress(spark, str(old)).changelog_version() == 2 and table(spark, old) == [(1, "a4", None)]


def test_only_deletes_and_key_changes_are_remembered(spark, tmp_path):
    # a batch of updates that keep their keys appends nothing to the deletes table (issue 51: it
    # no longer even runs the append, an empty one, with its Delta transaction check), while a
    # key change in such a batch still remembers the old key
    apply(spark, tmp_path, [ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("d", 3, before=row(2, "b"))])
    log = tmp_path / "_cdclake" / "deletes" / "_delta_log"
    commits = len(list(log.glob("*.json")))
    assert commits == 1
    apply(spark, tmp_path, [ev("u", 4, row(1, "a2"), row(1, "a"))])
    assert len(list(log.glob("*.json"))) == commits
    apply(spark, tmp_path, [ev("u", 5, row(3, "a3"), row(1, "a2"))])  # a key change: key 1's row is gone
    assert len(list(log.glob("*.json"))) == commits + 1
    remembered = {(r["key"], int(r["position"][0])) for r in spark.read.format("delta").load(f"{tmp_path}/_cdclake/deletes").collect()}
    assert remembered == {('{"id":2}', 3), ('{"id":1}', 5)}
    # and what is remembered still works: key 1's insert, older than its key change, stays out
    apply(spark, tmp_path, [ev("c", 4, row(1, "late"))])
    assert table(spark, tmp_path) == [(3, "a3", None)]


def test_progress_keeps_data_positions_apart_from_heartbeats_and_markers(spark, tmp_path):
    # a heartbeat's and a transaction marker's positions are other coordinates (Debezium: a
    # bare ts_ms): the source's last position is its data's; the heartbeat moves its event time
    untabled = {"database": None, "table": None, "op": None, "primary_key": None, "columns": None}
    beat = {**ev(None, 900, kind="heartbeat"), **untabled}
    end = {**ev(None, 800, kind="tx_end"), **untabled, "tx_id": "x", "tx_size": 1}
    apply(spark, tmp_path, [ev("c", 5, row(1, "a")), beat, end])
    rows = [r for r in audit.read_progress(spark, str(tmp_path)).rows if r["source"] == "mem" and r["table"] is None]
    assert [(r["last_position_text"], r["last_heartbeat_ms"], r["last_event_time_ms"]) for r in rows] == [("5", 900_000, 900_000)]
    assert table(spark, tmp_path) == [(1, "a", None)]


def test_column_mapping_only_when_a_name_needs_it(spark, tmp_path):
    # plain names: no column mapping, so every Delta reader (delta-rs's pandas path too) reads
    # the table; a later column whose name has a space turns column mapping on first
    from tests.readers import delta_rs_rows, has_column_mapping

    apply(spark, tmp_path, [ev("c", 1, row(1, "a", "1.50"))])
    assert not has_column_mapping(tmp_path / "db.t")
    assert [(r["id"], r["name"]) for r in delta_rs_rows(tmp_path / "db.t")] == [(1, "a")]
    spaced = {"name": "unit price", "source_type": "int", "spark_type": "int", "precision": None, "scale": None, "nullable": True}
    apply(spark, tmp_path, [ev("u", 2, {**row(1, "b", "1.50"), "unit price": "7"}, row(1, "a", "1.50"), columns=[*COLS, spaced])])
    assert has_column_mapping(tmp_path / "db.t")
    got = spark.read.format("delta").load(f"{tmp_path}/db.t").collect()
    assert [(r["id"], r["name"], r["unit price"]) for r in got] == [(1, "b", 7)]
    assert [(r["id"], r["name"], r["unit price"]) for r in delta_rs_rows(tmp_path / "db.t")] == [(1, "b", 7)]
    history = spark.read.format("delta").load(f"{tmp_path}/_cdclake/schema_history").collect()
    assert any(r["change"] == "column mapping on (a new column name needs it)" for r in history)


# ---- scenarios that share batches ---------------------------------------------------------------
# Each scenario has tables of its own and a list of steps: (events of one batch, the expected
# rows of its tables after that batch, or None). Step i of every scenario is applied in one
# batch (one apply_events call: every Delta commit here costs seconds), so a scenario's tables
# see exactly the batches the scenario defines; its table "t" is named after the scenario, its
# table "x" "<scenario>_x".


def _greatest_position_wins_in_any_arrival_order():
    events = [
        ev("c", 1, row(1, "a", "1.00")),
        ev("u", 2, row(1, "b", "2.00"), row(1, "a", "1.00")),
        ev("u", 3, row(1, "c", "3.50"), row(1, "b", "2.00")),
        ev("c", 4, row(2, "x")),
        ev("d", 5, before=row(2, "x")),
    ]
    perms = [events, events[::-1], [events[2], events[0], events[4], events[3], events[1]]]
    batch = [dict(e, table=f"p{i}") for i, perm in enumerate(perms) for e in perm]
    return [(batch, {f"p{i}": [(1, "c", Decimal("3.50"))] for i in range(len(perms))})]


def _equal_positions_keep_arrival_order():
    return [([ev("c", 7, row(1, "first"), line=1), ev("u", 7, row(1, "second"), line=2)], {"t": [(1, "second", None)]})]


def _snapshot_never_overwrites_streamed_change():
    return [
        ([ev("u", 5, row(1, "streamed"))], None),
        # a snapshot read with a *greater* position still loses to the streamed change
        ([ev("r", 9, row(1, "snapshot")), ev("r", 9, row(2, "snap2"))], {"t": [(1, "streamed", None), (2, "snap2", None)]}),
        # a later streamed change wins over the snapshot row
        ([ev("u", 10, row(2, "new"))], {"t": [(1, "streamed", None), (2, "new", None)]}),
    ]


def _partial_images_update_only_their_columns():
    # two partial updates of key 1 in one batch, arriving in reverse order: both columns change;
    # key 2: NULL carried explicitly sets NULL, absent column keeps its value
    return [
        ([ev("c", 1, row(1, "a", "1.00")), ev("c", 2, row(2, "b", "2.00"))], None),
        (
            [
                ev("u", 4, {"id": "1", "amount": "9.99"}, present=["id", "amount"]),
                ev("u", 3, {"id": "1", "name": "z"}, present=["id", "name"]),
                ev("u", 5, {"id": "2", "name": None}, present=["id", "name"]),
            ],
            {"t": [(1, "z", Decimal("9.99")), (2, None, Decimal("2.00"))]},
        ),
    ]


def _update_that_changes_the_key_moves_the_row():
    return [([ev("c", 1, row(1, "a")), ev("u", 2, row(5, "a"), row(1, "a"))], {"t": [(5, "a", None)]})]


def _truncate_empties_the_table_as_of_its_position():
    # (and the batch's result counts the 2 rows the truncate removed: checked below)
    return [
        ([ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b"))], None),
        ([ev("c", 3, row(3, "before-trunc")), ev("t", 4), ev("c", 5, row(4, "after"))], {"t": [(4, "after", None)]}),
    ]


def _truncate_and_change_of_one_position_keep_arrival_order():
    # Equal positions keep arrival order for a truncate too (the record's coordinates after the
    # position): t: a truncate of a later batch at its row's own position removes it, and a
    # change of that position with an older record stays out; x: a change in a later batch at
    # the position of a truncate remembered by a table not created yet lands; y: in one batch,
    # a change of the truncate's position before it is removed, one after it lands.
    return [
        ([ev("c", 7, row(1, "a")), ev("t", 7, table="x"),
          ev("c", 9, row(5, "before"), table="y"), ev("t", 9, table="y"), ev("c", 9, row(3, "after"), table="y")],
         {"t": [(1, "a", None)], "x": [], "y": [(3, "after", None)]}),
        ([ev("c", 7, row(4, "older record"), line=1), ev("t", 7), ev("c", 7, row(2, "later"), table="x")],
         {"t": [], "x": [(2, "later", None)], "y": [(3, "after", None)]}),
    ]


def _table_without_key_matches_whole_before_image():
    nokey = dict(key=None)
    return [
        ([ev("c", 1, row(1, "a"), **nokey), ev("c", 2, row(2, "b"), **nokey)], None),
        ([ev("u", 3, row(1, "a2"), row(1, "a"), **nokey), ev("d", 4, before=row(2, "b"), **nokey)], {"t": [(1, "a2", None)]}),
    ]


def _type_widens_in_place():
    # (the column's type is checked below)
    small = [dict(c, spark_type="int") if c["name"] == "id" else c for c in COLS]
    big = [dict(c, spark_type="bigint") if c["name"] == "id" else c for c in COLS]
    return [
        ([ev("c", 1, row(1, "a"), columns=small)], None),
        ([ev("c", 2, row(9000000000, "big"), columns=big)], {"t": [(1, "a", None), (9000000000, "big", None)]}),
    ]


def _any_shuffle_gives_the_same_table(seed):
    # deletes applied in the first batch are remembered (tombstones): an older insert or update
    # of the same key arriving in the second batch does not bring the row back
    import random

    rnd = random.Random(seed)
    events, state, pos = [], {}, 0
    for _ in range(40):
        pos += 1
        k = rnd.randint(1, 6)
        if k in state and rnd.random() < 0.3:
            events.append(ev("d", pos, before=row(k, state.pop(k))))
        elif k in state:
            new = f"v{pos}"
            events.append(ev("u", pos, row(k, new), row(k, state[k])))
            state[k] = new
        else:
            state[k] = f"v{pos}"
            events.append(ev("c", pos, row(k, state[k])))
    rnd.shuffle(events)
    half = len(events) // 2
    # the second batch has duplicates
    return [(events[:half], None), (events[half:] + events[:5], {"t": sorted((k, v, None) for k, v in state.items())})]


def _delete_then_older_insert_in_a_later_batch():
    return [
        ([ev("d", 5, before=row(1, "x"))], None),
        ([ev("c", 3, row(1, "x")), ev("c", 4, row(2, "y"))], {"t": [(2, "y", None)]}),
        ([ev("c", 6, row(1, "again"))], {"t": [(1, "again", None), (2, "y", None)]}),  # a newer insert does
    ]


def _truncate_is_remembered_across_batches():
    return [
        ([ev("c", 1, row(1, "a")), ev("t", 10)], None),
        ([ev("c", 5, row(2, "older than truncate")), ev("c", 11, row(3, "newer"))], {"t": [(3, "newer", None)]}),
    ]


def _key_change_then_older_insert_in_a_later_batch():
    # An update that changes the key deletes the old key's row; the old key's insert, older and
    # delivered in a later batch, must stay deleted. A keyless table's update always changes its
    # "key" (the whole image). Found by tests/apply/test_properties.py (datahub-tuple seed 0,
    # dts-avro seed 6: the audit_log row came back).
    nokey = dict(key=None, table="n")
    return [
        ([ev("u", 5, row(5, "a"), row(1, "a")), ev("u", 5, row(1, "a2"), row(1, "a"), **nokey)], None),
        ([ev("c", 3, row(1, "a")), ev("c", 3, row(1, "a"), **nokey)], {"t": [(5, "a", None)], "n": [(1, "a2", None)]}),
    ]


def _a_remembered_delete_still_matches_after_the_key_widens():
    # the deletes table keeps the key as JSON of its batch's types; after the key column
    # widens (int -> decimal(12,2)) an older insert of the deleted key, delivered later, must
    # still find its delete and stay out (the column's type is checked below)
    wide = [{**COLS[0], "source_type": "decimal(12,2)", "spark_type": "decimal(12,2)", "precision": 12, "scale": 2}, *COLS[1:]]
    return [
        ([ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("d", 5, before=row(1, "a"))], None),
        (
            [ev("c", 3, row("1.00", "a"), columns=wide), ev("c", 6, row("3.00", "c"), columns=wide)],
            {"t": [(Decimal("2.00"), "b", None), (Decimal("3.00"), "c", None)]},
        ),
    ]


def _update_halves_split_across_batches_make_one_update():
    # DataWorks UPDATE_BEFOR/UPDATE_AFTER and TUPLE U rows: one update written as two records
    # with one position. Each half may reach the applier in another batch, in either order, and
    # be re-delivered; a lone before half deletes its row ordered before its own position's
    # changes (sub 0), so the final table is the one update. Tables: kb (key change 1 -> 2,
    # before half first), ka (the same, after half first), sb (same key, before half first; its
    # after half has the smaller line, as across Kafka partitions, so the remembered delete must
    # lose by its order within the position, not by the record), sa (same key, after half first:
    # the later before half must not delete the row its after half wrote), p (both halves in
    # batch 1, the before half re-delivered alone). The deletes' sub is checked below. The
    # events' format ("test") is not one that writes halves: a DataWorks or TUPLE lone half is
    # held back until its other half comes (test_transactions), and applied alone like these
    # only once given up by the transaction timeout.
    def half(table, image, side, line):
        return ev("u", 2, table=table, line=line, **{side: image})

    first = [ev("c", 1, row(1, "a"), table=t) for t in ("kb", "ka", "sb", "sa", "p")]
    first += [half("kb", row(1, "a"), "before", 10), half("ka", row(2, "b"), "after", 11), half("sb", row(1, "a"), "before", 900),
              half("sa", row(1, "b"), "after", 12), half("p", row(1, "a"), "before", 13), half("p", row(1, "b"), "after", 14)]
    second = [half("kb", row(2, "b"), "after", 20), half("kb", row(1, "a"), "before", 10), half("ka", row(1, "a"), "before", 21),
              half("sb", row(1, "b"), "after", 100), half("sa", row(1, "a"), "before", 22), half("p", row(1, "a"), "before", 13)]
    one, two = (1, "a", None), (2, "b", None)
    return [
        # between the batches a reader sees the before half's delete (the row is back with its after half)
        (first, {"kb": [], "ka": [one, two], "sb": [], "sa": [(1, "b", None)], "p": [(1, "b", None)]}),
        (second, {"kb": [two], "ka": [two], "sb": [(1, "b", None)], "sa": [(1, "b", None)], "p": [(1, "b", None)]}),
    ]


def _table_dropped_or_truncated_by_ddl():
    # DROP TABLE (Canal/DataWorks ERASE, a Debezium or DTS DDL text) and TRUNCATE TABLE as DDL
    # text end the table's rows at their position, as a truncate: older rows go, older events
    # re-delivered or late stay out, newer events (the table created again) land. Table t: a
    # drop; table x: a truncate statement, in a batch without data (its schema-history line is
    # checked below). ``{table}`` in a statement is the table's name in the lake.
    def ddl(pos, text, table="t"):
        return dict(ev(None, pos, kind="ddl", table=table), ddl=text)

    return [
        ([ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("c", 1, row(1, "a"), table="x")], None),
        (
            [ddl(3, "DROP TABLE IF EXISTS `db`.`{table}`"), ev("c", 4, row(3, "c")), ev("c", 2, row(2, "b")), ddl(3, "truncate table db.{table}", "x")],
            {"t": [(3, "c", None)], "x": []},
        ),
        ([ev("c", 1, row(9, "late")), ev("u", 5, row(3, "c2"), row(3, "c")), ev("c", 2, row(2, "late"), table="x")], {"t": [(3, "c2", None)], "x": []}),
    ]


def _table_rename_moves_the_rows():
    # RENAME TABLE t TO n at position 5 (cdclake.apply.renames): n gets t's rows as they were
    # just before 5 (t's own update at 4 included; not the inserts of keys 9 and 2 after the
    # rename, into a table created again under the old name: applied after the move, so key 2,
    # which the old table held, does not replace the row that moves), then n's own changes after
    # 5 apply on top (an update of a moved row, a delete of one, both in the rename's batch,
    # applied before the move: the moved rows are older); t keeps only its rows after 5. A
    # re-delivered batch changes nothing; n's later changes land. Table k (no key): its two
    # identical rows move as two, though the table created again under its name is truncated
    # after the rename in the same batch (then gets one copy of its own). Tables a, b, c: a swap
    # in one statement (a -> c, b -> a, c -> b), done in order. Table e: created again under its
    # name after its rename to en, and that table's insert of key 1 arrived a batch before the
    # rename: it replaced the old (1, "a") there, so the move cannot read that row; the old
    # table's changes before the rename are read again from the changelog and applied to en as
    # late events (renames._apply_again), so en gets (1, "a") all the same (the schema history
    # of en says so).
    def ddl(pos, text, table="t"):
        return dict(ev(None, pos, kind="ddl", table=table), ddl=text)

    def nokey(op, pos, **kw):
        return ev(op, pos, table="k", key=None, **kw)

    second = [
        ev("u", 4, row(2, "b2"), row(2, "b")), ddl(5, "RENAME TABLE `db`.`rename` TO `db`.`rename_n`, rename_k TO rename_kn"),
        ev("u", 6, row(1, "a6"), row(1, "a"), table="n"), ev("d", 7, before=row(3, "c"), table="n"), ev("c", 8, row(9, "new")),
        ev("c", 8, row(2, "new2")), nokey("t", 7), nokey("c", 8, after=row(7, "same")),
        ddl(5, "ALTER TABLE rename_a RENAME TO rename_c; RENAME TABLE rename_b TO rename_a, rename_c TO rename_b", "a"),
        ddl(5, "RENAME TABLE rename_e TO rename_en", "e"),
    ]
    return [
        ([ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("c", 3, row(3, "c")),
          nokey("c", 1, after=row(7, "same")), nokey("c", 2, after=row(7, "same")),
          ev("c", 1, row(1, "a"), table="a"), ev("c", 2, row(2, "b"), table="b"),
          ev("c", 1, row(1, "a"), table="e"), ev("c", 2, row(2, "b"), table="e"), ev("c", 8, row(1, "new"), table="e")],
         {"t": [(1, "a", None), (2, "b", None), (3, "c", None)], "k": [(7, "same", None)] * 2, "e": [(1, "new", None), (2, "b", None)]}),
        (second, {"t": [(2, "new2", None), (9, "new", None)], "n": [(1, "a6", None), (2, "b2", None)], "k": [(7, "same", None)],
                  "kn": [(7, "same", None)] * 2, "a": [(2, "b", None)], "b": [(1, "a", None)], "c": [],
                  "e": [(1, "new", None)], "en": [(1, "a", None), (2, "b", None)]}),
        ([*second, ev("c", 9, row(4, "d"), table="n")],
         {"t": [(2, "new2", None), (9, "new", None)], "n": [(1, "a6", None), (2, "b2", None), (4, "d", None)],
          "k": [(7, "same", None)], "kn": [(7, "same", None)] * 2,
          "a": [(2, "b", None)], "b": [(1, "a", None)], "c": []}),
    ]


def _table_created_again_before_its_rename_arrives():
    # RENAME TABLE t TO n at 5, and a table created again under the name t whose changes
    # arrive a batch before the rename: its truncate at 7 removed the old rows (1, 2) before the
    # move could read them. Table g (no key): the new table's insert at 6 and delete at 8 of an
    # image the old one held twice. When the rename arrives, the old tables' changes before it
    # are read again from the changelog and applied as late events (renames._apply_again): n
    # and gn get every row t and g held at 5, and t and g keep only the new tables' rows. The
    # last batch delivers everything again. t's inserts at 1 and 2 are one transaction, applied
    # in batch 1; batch 2 delivers a part of it again, which the gate holds (it waits for the
    # rest): the re-feed still reads the transaction (renames._still_open: whole in the
    # changelog); it left both rows out of n until session 36 (the probe's seed 6).
    def ddl(pos, text, table="t"):
        return dict(ev(None, pos, kind="ddl", table=table), ddl=text)

    def nokey(op, pos, **kw):
        return ev(op, pos, table="g", key=None, **kw)

    def tx(e, seq):
        return dict(e, tx_id="recreate-ta", tx_seq=seq, tx_last=seq == 2, tx_size=2)

    first = [tx(ev("c", 1, row(1, "a")), 1), tx(ev("c", 2, row(2, "b")), 2), ev("t", 7), ev("c", 8, row(3, "c")),
             nokey("c", 1, after=row(7, "same")), nokey("c", 2, after=row(7, "same")), nokey("c", 6, after=row(7, "same")),
             nokey("d", 8, before=row(7, "same"))]
    # table c: the table created again under its name adds extra, widens amount and renames
    # name to label (at 8 and 9, after the rename at 5), and adds gone, which the old table
    # dropped at 4: cn keeps c's columns at 5 (renames.columns_at_point; checked in
    # test_scenarios_in_shared_batches; gone was the new name's too until session 37); 2's row
    # keeps per-column positions (its partial update at 3): moved by column, name read from label
    gone = {"name": "gone", "source_type": "varchar", "spark_type": "string", "precision": None, "scale": None, "nullable": True}
    wide = [{**COLS[0]}, {**COLS[1]}, {**COLS[2], "source_type": "decimal(12,2)", "spark_type": "decimal(12,2)", "precision": 12},
            {"name": "extra", "source_type": "bigint", "spark_type": "bigint", "precision": None, "scale": None, "nullable": True}, gone]
    relabeled = [wide[0], {**wide[1], "name": "label"}, *wide[2:]]
    first += [ev("c", 1, {**row(1, "a", "1.50"), "gone": "old"}, table="c", columns=[*COLS, gone]), ev("c", 2, row(2, "b"), table="c"),
              ev("u", 3, {"id": "2", "amount": "2.50"}, present=["id", "amount"], table="c"),
              ddl(4, "ALTER TABLE db.{table} DROP COLUMN gone", table="c"),
              ev("c", 8, {**row(3, "c", "123456.78"), "extra": "7", "gone": "new"}, table="c", columns=wide),
              ddl(9, "ALTER TABLE db.{table} RENAME COLUMN name TO label", table="c"),
              ev("u", 10, {"id": "3", "label": "c2", "amount": "123456.78", "extra": "8", "gone": "new"}, table="c", columns=relabeled)]
    second = [ddl(5, "RENAME TABLE recreate TO recreate_n, recreate_g TO recreate_gn, recreate_c TO recreate_cn"), first[0]]
    done = {"t": [(3, "c", None)], "n": [(1, "a", None), (2, "b", None)], "g": [], "gn": [(7, "same", None)] * 2,
            "cn": [(1, "a", Decimal("1.50")), (2, "b", Decimal("2.50"))]}
    return [(first, {"t": [(3, "c", None)], "g": [(7, "same", None)] * 2}), (second, done), (first + second, done)]


def _late_event_of_a_renamed_table_older_than_its_column_drop():
    # t drops its column extra at 3, then is renamed to n at 10; t's update at 2, written
    # before the drop, arrives after the rename: it goes to n (renames.relabel_late), read with
    # the columns in force at its position in t: the drop, carried to n with the rename
    # (TablePlan.carried_column_ddl, n's column_ddl in the progress), keeps extra out of n
    # (checked below: it was added to n again)
    cols = COLS + [{"name": "extra", "source_type": "bigint", "spark_type": "bigint", "precision": None, "scale": None,
                    "nullable": True}]

    def ddl(pos, text):
        return dict(ev(None, pos, kind="ddl"), ddl=text)

    first = [ev("c", 1, {**row(1, "a"), "extra": "7"}, columns=cols), ddl(3, "ALTER TABLE db.{table} DROP COLUMN extra"),
             ev("c", 4, row(2, "b"))]
    late = [ev("u", 2, {**row(1, "a2"), "extra": "8"}, {**row(1, "a"), "extra": "7"}, columns=cols)]
    return [(first, {"t": [(1, "a", None), (2, "b", None)]}),
            ([ddl(10, "RENAME TABLE rencol TO rencol_n")], {"t": [], "n": [(1, "a", None), (2, "b", None)]}),
            (late, {"t": [], "n": [(1, "a2", None), (2, "b", None)]})]


def _column_rename_chain_whose_later_step_arrives_first():
    # t: at -> r1 at 2 and r1 -> r2 at 36 at the source; the second statement arrives a batch
    # before the first (Debezium's schema topic read apart from the table's topic). Batch 2's
    # rename goes on to r2 (plan._follow_drops_and_renames, a chained rename): at is merged
    # into r2 as of 2 and dropped, not renamed to r1 beside r2. d: the same with DROP COLUMN r1
    # at 36: at is dropped. Checked in test_scenarios_in_shared_batches (the rows here are
    # (id, name, amount); the chain is on a fourth column)
    ts = {"source_type": "datetime", "spark_type": "timestamp", "precision": None, "scale": None, "nullable": True}
    first, second = [], []
    for table, end in (("t", "RENAME COLUMN r1 TO r2"), ("d", "DROP COLUMN r1")):
        def cols(name):
            return COLS + [dict(ts, name=name)] if name else COLS

        def ddl(pos, text):
            return dict(ev(None, pos, kind="ddl", table=table), ddl=f"ALTER TABLE db.{{table}} {text}")

        last = "r2" if table == "t" else None
        first += [ev("c", 1, {**row(1, "a"), "at": "2020-01-01 00:00:01"}, table=table, columns=cols("at")),
                  ev("c", 5, {**row(2, "b"), "r1": "2020-01-01 00:00:05"}, table=table, columns=cols("r1")), ddl(36, end),
                  ev("c", 40, {**row(3, "c"), **({last: "2020-01-01 00:00:40"} if last else {})}, table=table, columns=cols(last))]
        second += [ddl(2, "RENAME COLUMN at TO r1")]
    # i: interleaved: at -> r1 at 2 arrives first, then r1 -> r2 at 36 with the insert at 1
    # that names at: one pass in position order (plan.follow_past_column_ddl) reads at as r2,
    # and the table's r1 is renamed to r2
    def ddl_i(pos, text):
        return dict(ev(None, pos, kind="ddl", table="i"), ddl=f"ALTER TABLE db.{{table}} {text}")

    first += [ddl_i(2, "RENAME COLUMN at TO r1"), ev("c", 5, {**row(2, "b"), "r1": "2020-01-01 00:00:05"}, table="i",
                                                    columns=COLS + [dict(ts, name="r1")])]
    second += [ev("c", 1, {**row(1, "a"), "at": "2020-01-01 00:00:01"}, table="i", columns=COLS + [dict(ts, name="at")]),
               ddl_i(36, "RENAME COLUMN r1 TO r2"),
               ev("c", 40, {**row(3, "c"), "r2": "2020-01-01 00:00:40"}, table="i", columns=COLS + [dict(ts, name="r2")])]
    # u: the whole chain in one batch, each statement delivered twice: each is followed once
    # (followed again, r1 -> r2 read r2 from r1 alone, and the values written as at were lost:
    # the SCD type 2 probe of session 39, simulated seed 889525647)
    def ddl_u(pos, text):
        return dict(ev(None, pos, kind="ddl", table="u"), ddl=f"ALTER TABLE db.{{table}} {text}")

    u = [ev("c", 1, {**row(1, "a"), "at": "2020-01-01 00:00:01"}, table="u", columns=COLS + [dict(ts, name="at")]),
         ddl_u(2, "RENAME COLUMN at TO r1"), ev("c", 5, {**row(2, "b"), "r1": "2020-01-01 00:00:05"}, table="u", columns=COLS + [dict(ts, name="r1")]),
         ddl_u(36, "RENAME COLUMN r1 TO r2"), ev("c", 40, {**row(3, "c"), "r2": "2020-01-01 00:00:40"}, table="u", columns=COLS + [dict(ts, name="r2")])]
    first += [u[3], u[1], *u, u[3]]
    rows = [(1, "a", None), (2, "b", None), (3, "c", None)]
    return [(first, {"t": rows, "d": rows, "i": [(2, "b", None)], "u": rows}), (second, {"t": rows, "d": rows, "i": rows})]


def _late_events_of_a_renamed_table_follow_it():
    # an event of t older than its rename (t -> n at 10) that arrives after the rename was
    # applied belongs to n (cdclake.apply.renames.relabel_late): an update lands there, an
    # insert older than a delete t remembered stays out (the deletes moved with the rows), a
    # delete removes the moved row; a change of t after 10 (t created again) stays in t. In
    # batch 3 n is renamed to z at 20: in batch 4 a late change of t follows both renames. Key 4
    # is a snapshot read ranked below the stream (op r of a format whose snapshot positions do
    # not order with its stream; its position 50 says nothing): a late streamed change of it
    # still wins in n. Tables d (a key) and k (none): a TRUNCATE TABLE / DROP TABLE statement
    # at 2, older than the rename at 10, arrives after it: the rows it ended moved to dn and kn,
    # so it ends them there too (renames._late_ddl; until session 37 it reached only the old
    # name, and k's snapshot read at 0 and insert at 1 stayed in kn). Tables x and y: a column
    # drop and a column rename at 5 arrive after the rename: xn loses extra, yn's extra goes
    # into label, which yn's own insert at 11 has (checked in test_scenarios_in_shared_batches)
    def ddl(pos, text, table="t"):
        return dict(ev(None, pos, kind="ddl", table=table), ddl=text)

    nokey = dict(table="k", key=None)
    extra = {"name": "extra", "source_type": "varchar", "spark_type": "string", "precision": None, "scale": None, "nullable": True}
    late_end = [ddl(2, "TRUNCATE TABLE db.{table}", "d"), ddl(2, "DROP TABLE IF EXISTS `db`.`{table}`", "k"),
                ddl(5, "ALTER TABLE db.{table} DROP COLUMN extra", "x"), ddl(5, "ALTER TABLE db.{table} RENAME COLUMN extra TO label", "y")]
    d3, k3 = [(3, "c", None)], [(8, "y", None)]
    ab = [(1, "a", None), (2, "b", None)]
    return [
        ([ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("c", 3, row(3, "c")), ev("d", 4, before=row(3, "c")),
          ev("r", 50, row(4, "snap")), ev("c", 1, row(1, "a"), table="d"), ev("c", 3, row(3, "c"), table="d"),
          ev("r", (0, 1), row(7, "x"), **nokey), ev("c", 1, row(6, "w"), **nokey), ev("c", 3, row(8, "y"), **nokey),
          *[ev("c", 1, {**row(1, "a"), "extra": "e1"}, table=t, columns=[*COLS, extra]) for t in ("x", "y")]],
         {"t": [(1, "a", None), (2, "b", None), (4, "snap", None)], "d": [(1, "a", None), *d3],
          "k": [(6, "w", None), (7, "x", None), *k3]}),
        ([ddl(10, "RENAME TABLE renlate TO renlate_n, renlate_d TO renlate_dn, renlate_k TO renlate_kn, renlate_x TO renlate_xn,"
                  " renlate_y TO renlate_yn"),
          ev("c", 11, row(2, "b"), table="xn"), ev("c", 11, {**row(2, "b"), "label": "x2"}, table="yn", columns=[*COLS, {**extra, "name": "label"}])],
         {"t": [], "n": [(1, "a", None), (2, "b", None), (4, "snap", None)], "d": [], "dn": [(1, "a", None), *d3],
          "kn": [(6, "w", None), (7, "x", None), *k3], "xn": ab, "yn": ab}),
        ([ev("u", 5, row(1, "a5"), row(1, "a")), ev("c", 3, row(3, "c")), ev("d", 6, before=row(2, "b")), ev("c", 12, row(9, "new")),
          ev("u", 9, row(4, "s9"), row(4, "snap")), ddl(20, "RENAME TABLE renlate_n TO renlate_z", "n"),
          ev("c", 15, row(5, "n15"), table="n"), *late_end],
         {"t": [(9, "new", None)], "n": [], "z": [(1, "a5", None), (4, "s9", None), (5, "n15", None)], "dn": d3, "kn": k3}),
        ([ev("u", 7, row(1, "a7"), row(1, "a5")), ev("c", 2, row(2, "b")), *late_end],
         {"t": [(9, "new", None)], "n": [], "z": [(1, "a7", None), (4, "s9", None), (5, "n15", None)], "dn": d3, "kn": k3, "k": []}),
    ]


def _renamed_table_keeps_positions_per_column():
    # A table with per-column positions (delta_table.COLUMN_ORDERS) renamed: its rows move with
    # them (renames._moved_by_column), so the row's insert older than a partial update, arriving
    # after the rename, still fills the columns the update did not carry (key 1; key 2, a row
    # with no map, moves as an insert). The last batch delivers everything again.
    def ddl(pos, text, table="t"):
        return dict(ev(None, pos, kind="ddl", table=table), ddl=text)

    first = [ev("u", 5, {"id": "1", "amount": "5.00"}, present=["id", "amount"]), ev("c", 1, row(2, "b", "2.00"))]
    second = [ddl(10, "RENAME TABLE renpart TO renpart_n")]
    third = [ev("c", 1, row(1, "a", "1.00"))]
    done = {"t": [], "n": [(1, "a", Decimal("5.00")), (2, "b", Decimal("2.00"))]}
    return [
        (first, {"t": [(1, None, Decimal("5.00")), (2, "b", Decimal("2.00"))]}),
        (second, {"t": [], "n": [(1, None, Decimal("5.00")), (2, "b", Decimal("2.00"))]}),
        (third, done),
        (first + second + third, done),
    ]


def _late_snapshot_read_of_a_renamed_table_lands():
    # Snapshot reads of the old table that rank below the stream (format test: like Canal's
    # INIT), arriving after the rename, go to the new table as the move made them (op c at the
    # rename's point, before the moved rows; renames.relabel_late): key 2, which the old table
    # never had, lands; key 1's moved row is newer; key 3's delete, carried with the rename,
    # keeps it out. (As op r they ranked below the new table's truncate at the point: lost.)
    first = [ev("c", 1, row(1, "a")), ev("c", 2, row(3, "z")), ev("d", 3, before=row(3, "z"))]
    second = [dict(ev(None, 10, kind="ddl"), ddl="RENAME TABLE renread TO renread_n")]
    third = [ev("r", (0, 5), row(2, "snap")), ev("r", (0, 6), row(1, "old snap")), ev("r", (0, 7), row(3, "z"))]
    done = {"t": [], "n": [(1, "a", None), (2, "snap", None)]}
    return [(first, {"t": [(1, "a", None)]}), (second, {"t": [], "n": [(1, "a", None)]}), (third, done), (first + second + third, done)]


def _configured_key_follows_the_rename():
    # renkey's key is configured (SCENARIO_KEYS), its events state none, and its updates carry
    # no before image: the new name n has no key configured, and gets renkey's
    # (renames.keys_through_renames): n's own update in the rename's batch (2) and a late
    # update of t older than the rename (3), moved to n, replace their rows. Until session 38
    # n was a table without a key there: both updates added a row beside the old one
    def ddl(pos, text):
        return dict(ev(None, pos, kind="ddl", key=None), ddl=text)

    bare = dict(key=None)
    return [
        ([ev("c", 1, row(1, "a"), **bare), ev("c", 2, row(2, "b"), **bare), ev("c", 3, row(3, "c"), **bare)],
         {"t": [(1, "a", None), (2, "b", None), (3, "c", None)]}),
        ([ddl(10, "RENAME TABLE renkey TO renkey_n"), ev("u", 11, row(2, "b11"), table="n", **bare)],
         {"t": [], "n": [(1, "a", None), (2, "b11", None), (3, "c", None)]}),
        ([ev("u", 5, row(1, "a5"), **bare), ev("u", 12, row(3, "c12"), table="n", **bare)],
         {"t": [], "n": [(1, "a5", None), (2, "b11", None), (3, "c12", None)]}),
    ]


#: keys configured for the scenarios' tables (``--primary-key``), as test_scenarios_in_shared_batches gives them
SCENARIO_KEYS = {"db.renkey": ["id"]}


def _renamed_table_without_key_keeps_its_capped_images():
    # Format test reads rank below the stream (like Canal's INIT): in a table without a key
    # such a read caps its image, one row or none (cdclake.apply.keyless), because the stream
    # may repeat what the snapshot read. A rename keeps the cap in the new table
    # (renames.reads_stay): the read moves as a read, and so does a late one. t: k is read and
    # inserted (one row), m read and deleted (none); after the rename n inserts k once and m
    # twice, in the rename's own batch: one row each. l: a late read of k arrives after the
    # rename, with a new insert of k: one row. c: renamed twice, then k inserted twice.
    nokey = dict(key=None)
    k, m = row(1, "k"), row(2, "m")

    def e(op, pos, table, after=None, before=None):
        return ev(op, pos, after, before, table=table, **nokey)

    def rename(pos, old, new):
        return dict(ev(None, pos, kind="ddl", table=old, **nokey), ddl=f"RENAME TABLE {{table}} TO rencap_{new}")

    first = [e("r", (0, 1), "t", k), e("c", 2, "t", k), e("r", (0, 2), "t", m), e("d", 3, "t", before=m),
             e("c", 2, "l", k), e("r", (0, 1), "c", k)]
    second = [rename(10, "t", "n"), e("c", 11, "n", k), e("c", 12, "n", m), e("c", 13, "n", m),
              rename(10, "l", "ln"), rename(10, "c", "cm")]
    third = [e("r", (0, 5), "l", k), e("c", 11, "ln", k), rename(20, "cm", "cz"), e("c", 21, "cz", k), e("c", 22, "cz", k)]
    one_k = [(1, "k", None)]
    done = {"t": [], "n": [(1, "k", None), (2, "m", None)], "l": [], "ln": one_k, "c": [], "cm": [], "cz": one_k}
    return [
        (first, {"t": one_k, "l": one_k, "c": one_k}),
        (second, {"t": [], "n": [(1, "k", None), (2, "m", None)], "l": [], "ln": one_k, "c": [], "cm": one_k}),
        (third, done),
        (first + second + third, done),
    ]


def _snapshot_by_position_lands_after_a_delete_or_truncate():
    # Debezium's snapshot rows carry the position the snapshot was read at, which orders with
    # streamed changes (Capabilities.snapshot_positions): a snapshot taken again after a delete
    # or truncate lands; one older than a change, delete or truncate does not
    def dbz(*a, **kw):
        return dict(ev(*a, **kw), format="debezium-json")

    return [
        ([dbz("c", 1, row(1, "a")), dbz("c", 2, row(2, "b")), dbz("d", 4, before=row(1, "a")), dbz("u", 8, row(3, "streamed"))], None),
        (
            [dbz("r", 6, row(1, "resnap")), dbz("r", 3, row(2, "snap3")), dbz("r", 7, row(3, "old snap"))],
            {"t": [(1, "resnap", None), (2, "snap3", None), (3, "streamed", None)]},
        ),
        ([dbz("t", 9), dbz("r", 10, row(4, "after truncate")), dbz("r", 8, row(5, "before truncate"))], {"t": [(4, "after truncate", None)]}),
    ]


def _completed_snapshot_removes_rows_it_did_not_read():
    # --snapshot-removes-missing: Debezium's snapshot_end event (after the table's last snapshot
    # row, same position and record) removes the rows older than the snapshot, as a truncate
    # whose record sorts before the snapshot's rows: row 2, gone from the source while nothing
    # streamed, is removed; the snapshot's rows of an earlier batch (1) and of this one (4)
    # stay, and so does a change newer than the snapshot (3); a late change older than it and
    # the earlier batch's events again change nothing
    def dbz(*a, **kw):
        return dict(ev(*a, **kw), format="debezium-json")

    # (the snapshot's rows of batch 2 come before its last row in the input: a lower line)
    second = [dbz("r", 5, row(1, "snap1")), dbz("u", 6, row(3, "after"), row(3, "c"))]
    last = dbz("r", 5, row(4, "snap4"))
    end = dict(dbz(None, 5, kind="snapshot_end", key=None, columns=None), source_record=last["source_record"])
    return [
        ([dbz("c", 1, row(1, "a")), dbz("c", 2, row(2, "b")), dbz("c", 3, row(3, "c"))], None),
        (second, {"t": [(1, "snap1", None), (2, "b", None), (3, "after", None)]}),
        ([last, end, dbz("c", 4, row(2, "late")), *second], {"t": [(1, "snap1", None), (3, "after", None), (4, "snap4", None)]}),
    ]


def _keyless_identical_rows_stay_separate():
    # a table without a key is a multiset (cdclake.apply.keyless): two identical inserts are two
    # rows, a delete takes one copy, an update moves one copy (also an update that changes
    # nothing), a delete that arrives before its insert takes it when it comes, and re-delivered
    # changes count once
    # (again with another record, as from another file: a change is known by its position).
    # Table s (Debezium: snapshot reads order by position): a snapshot read sets the number of
    # copies at its point instead of adding one, also when read again. Table q (snapshot reads
    # rank below the stream, which may repeat what the snapshot read): one row or none
    nokey = dict(key=None)
    i1, i2 = ev("c", 1, row(1, "x"), **nokey), ev("c", 2, row(1, "x"), **nokey)
    d4 = ev("d", 4, before=row(1, "x"), **nokey)

    def again(e):  # the same change delivered again, from another file
        return dict(e, source_record={**e["source_record"], "file": "other"})

    def dbz(*a, **kw):
        return dict(ev(*a, table="s", **nokey, **kw), format="debezium-json")

    s2, r5 = dbz("c", 2, row(1, "x")), dbz("r", 5, row(1, "x"))
    x = [(1, "x", None)]
    return [
        ([i1, i2, ev("c", 3, row(2, "y"), **nokey), dbz("c", 1, row(1, "x")), s2, ev("r", 1, row(1, "x"), table="q", **nokey)],
         {"t": [(1, "x", None), (1, "x", None), (2, "y", None)], "s": x * 2, "q": x}),
        ([d4, again(i1), ev("d", 7, before=row(3, "w"), **nokey), r5, again(s2), ev("c", 100, row(1, "x"), table="q", **nokey)],
         {"t": [(1, "x", None), (2, "y", None)], "s": x, "q": x}),
        ([ev("u", 5, row(1, "z"), row(1, "x"), **nokey), ev("c", 6, row(3, "w"), **nokey), again(d4), i2,
          ev("u", 8, row(2, "y"), row(2, "y"), **nokey), dbz("c", 6, row(1, "x")), again(r5), ev("d", 101, before=row(1, "x"), table="q", **nokey)],
         {"t": [(1, "z", None), (2, "y", None)], "s": x * 2, "q": []}),
    ]


def _remembered_keys_keep_microseconds():
    # a keyless table whose rows differ only below a millisecond: the delete of one, remembered
    # from batch 1, must not keep out an older insert of the other (remembered keys were JSON
    # with milliseconds, so the two rows were one key)
    cols = [*COLS, {"name": "at", "source_type": "datetime(6)", "spark_type": "timestamp", "precision": None, "scale": None, "nullable": True}]
    a = {**row(1, "x"), "at": "2024-01-01 00:00:00.200791"}
    b = {**row(1, "x"), "at": "2024-01-01 00:00:00.200792"}
    return [
        ([ev("d", 5, before=a, key=None, columns=cols)], {"t": []}),
        ([ev("c", 3, b, key=None, columns=cols), ev("c", 2, a, key=None, columns=cols)], {"t": [(1, "x", None)]}),
    ]


def _keyless_partial_update_before_its_insert_in_an_earlier_batch():
    # a partial update whose before image holds every column is completed into a full one, which
    # moves the keyless row (remembered in _cdclake/deletes); the table's delete position must
    # move with it, or the row's older insert in a later batch lands again (found with SharePlex
    # in session 14, whose upd was partial then)
    nokey = dict(key=None)
    return [
        ([ev("u", 2, {"id": "1", "name": "b"}, row(1, "a"), present=["id", "name"], **nokey)], {"t": [(1, "b", None)]}),
        ([ev("c", 1, row(1, "a"), **nokey)], {"t": [(1, "b", None)]}),
    ]


def _partial_update_that_changes_the_key_moves_the_whole_row():
    # Qlik: a partial update that changes the key carries the key and the changed columns only;
    # the columns it does not carry come from the old key's row (delta_table.fill_moves): from
    # the table (5 -> 6), from the table and the batch's own earlier partial update (1 -> 2),
    # none known (8 -> 9: only the columns it carries). The old keys' rows are gone, and the
    # batch again (re-delivered) changes nothing.
    def mv(pos, old, new, **changed):
        return ev("u", pos, {"id": str(new), **changed}, {"id": str(old)}, present=["id", *changed])

    moves = [ev("u", 3, {"id": "1", "name": "b"}, {"id": "1", "name": "a"}, present=["id", "name"]),
             mv(4, 1, 2), mv(5, 5, 6, amount="6.00"), mv(6, 8, 9, name="n")]
    moved = {"t": [(2, "b", Decimal("1.00")), (6, "x", Decimal("6.00")), (9, "n", None)]}
    return [
        ([ev("c", 1, row(1, "a", "1.00")), ev("c", 2, row(5, "x", "5.00"))], {"t": [(1, "a", Decimal("1.00")), (5, "x", Decimal("5.00"))]}),
        (moves, moved),
        (moves, moved),
    ]


def _partial_updates_keep_positions_per_column():
    # Per-column positions (delta_table.COLUMN_ORDERS), whatever the batches: key 1, a partial
    # update applied before its row's older insert (Qlik), which then fills the columns the update
    # did not carry, and a later-arriving full update between them sets those again but not the
    # newer partial's column; key 2, a re-delivered older insert folded with a newer partial
    # update does not undo the table's newer full update; key 3, two partial updates around the
    # table's full image: only the newer sets its column; key 4, an older partial update and an
    # older insert arriving after a partial: each column keeps its newest value; key 5, a partial
    # update that moves the row to key 6 arriving with the row's older insert after a partial
    # update (delta_table.fill_moves reads the row per column: the insert's amount is not lost to
    # a NULL no change set); key 7, a partial update that moves the row to key 8 in a batch before
    # the row's older insert (the move is remembered, delta_table.follow_moves: the insert still
    # sets the name in 8, not the amount the move set); keys 9 -> 10 -> 11, the same through a
    # chain of two moves; key 20 -> 21, the old key's partial update newer than its insert but
    # older than the move arriving after both (a column the move fills keeps its own order);
    # key 22 -> 23, a move of a stored row with a column no change had set (not filled: the
    # later-arriving insert sets it); 24 -> 25 then 26 -> 24, a key used again by a later move
    # (26's late insert goes to 24, not on to 25); 30 -> 31 -> 32 then 33 -> 31 (30's late insert
    # goes to 32 only); 40 -> 41, the late batch also holds 41's own earlier insert and delete,
    # older than the move (40's insert still lands in 41); 42 -> 43, the late batch also holds
    # 42's delete between its insert and the move (the insert goes nowhere: the batch's own
    # delete ends 42's row before the move). The last batch delivers the first two again with the inserts not seen
    # yet: the re-delivery changes nothing.
    def part(pos, i, **changed):
        return ev("u", pos, {"id": str(i), **changed}, present=["id", *changed])

    def move(pos, old, new, **changed):
        return ev("u", pos, {"id": str(new), **changed}, {"id": str(old)}, present=["id", *changed])

    first = [part(5, 1, amount="5.00"), ev("c", 1, row(2, "a", "1.00")), ev("u", 4, row(2, "d", "4.00"), row(2, "a", "1.00")),
             ev("c", 4, row(3, "d", "4.00")), part(6, 4, name="n6"), part(2, 5, name="n2"),
             move(3, 7, 8, amount="9.00"), move(3, 9, 10, amount="8.00"), move(4, 10, 11),
             ev("c", 1, row(20, "a", "1.00")), move(3, 20, 21, amount="3.00"), part(2, 22, name="p"),
             move(3, 24, 25), move(4, 26, 24), move(3, 30, 31), move(4, 31, 32), move(5, 33, 31), move(4, 40, 41, amount="9.00"),
             move(4, 42, 43, amount="9.00")]
    second = [ev("c", 1, row(1, "a", "1.00")), ev("c", 1, row(2, "a", "1.00"), line=first[1]["source_record"]["line"]),
              part(6, 2, name="f"), part(3, 3, name="z"), part(5, 3, amount="5.00"), part(5, 4, name="n5", amount="5.00"),
              ev("c", 1, row(5, "a", "1.00")), ev("u", 3, {"id": "6"}, {"id": "5"}, present=["id"]),
              ev("c", 1, row(7, "a7", "1.00")), ev("c", 2, row(9, "a9", "1.00")),
              part(2, 20, name="n2"), move(3, 22, 23), ev("c", 2, row(26, "b", "2.00")), ev("c", 1, row(30, "a", "1.00")),
              ev("c", 1, row(41, "b", "5.00")), ev("d", 3, before={"id": "41"}), ev("c", 2, row(40, "a", "1.00")),
              ev("c", 1, row(42, "a", "1.00")), ev("d", 2, before={"id": "42"})]
    third = [ev("u", 3, row(1, "c", "3.00"), row(1, "a", "1.00")), ev("c", 1, row(4, "a", "1.00")),
             ev("c", 1, row(22, "i", "1.00")), ev("c", 1, row(24, "a", "1.00")), ev("c", 2, row(33, "d", "2.00"))]
    moved = [(8, "a7", Decimal("9.00")), (11, "a9", Decimal("8.00")), (21, "n2", Decimal("3.00"))]
    done = {"t": [(1, "c", Decimal("5.00")), (2, "f", Decimal("4.00")), (3, "d", Decimal("5.00")), (4, "n6", Decimal("5.00")),
                  (6, "n2", Decimal("1.00")), *moved, (23, "p", Decimal("1.00")), (24, "b", Decimal("2.00")),
                  (25, "a", Decimal("1.00")), (31, "d", Decimal("2.00")), (32, "a", Decimal("1.00")),
                  (41, "a", Decimal("9.00")), (43, None, Decimal("9.00"))]}
    return [
        (first, {"t": [(1, None, Decimal("5.00")), (2, "d", Decimal("4.00")), (3, "d", Decimal("4.00")), (4, "n6", None), (5, "n2", None),
                       (8, None, Decimal("9.00")), (11, None, Decimal("8.00")), (21, "a", Decimal("3.00")), (22, "p", None),
                       (24, None, None), (25, None, None), (31, None, None), (32, None, None), (41, None, Decimal("9.00")),
                       (43, None, Decimal("9.00"))]}),
        (second, {"t": [(1, "a", Decimal("5.00")), (2, "f", Decimal("4.00")), (3, "d", Decimal("5.00")), (4, "n6", Decimal("5.00")),
                        (6, "n2", Decimal("1.00")), *moved, (23, "p", None), (24, "b", Decimal("2.00")), (25, None, None),
                        (31, None, None), (32, "a", Decimal("1.00")), (41, "a", Decimal("9.00")),
                        (43, None, Decimal("9.00"))]}),
        (third + first + second, done),
    ]


def _older_change_in_a_later_batch_and_redelivery():
    # t: an older change arriving in a later batch; the whole input again changes nothing.
    # Equal positions keep arrival order across batches too: the winning record's coordinates
    # are kept in the row (_cdc_record) and in the deletes table and compared after the
    # position, so a later record of the same position wins in a later batch and a re-delivered
    # one (same coordinates) changes nothing: e (update), d (delete), old (a table written before
    # _cdc_record existed, made by test_scenarios_in_shared_batches before the first batch: the
    # column is added, its rows read null, a tie goes to the batch). Also checked below: the
    # third batch changes none of t, e, old (its counts), old gained _cdc_record, e's record.
    def at(table, op, pos, line, **kw):
        return ev(op, pos, table=table, line=line, **kw)

    first = [ev("c", 1, row(1, "a")), ev("u", 3, row(1, "c"), row(1, "b"))]
    late = [ev("u", 2, row(1, "b"), row(1, "a"))]
    eq1 = [at("e", "c", 7, 101, after=row(1, "first")), at("d", "c", 8, 201, after=row(2, "x")), at("d", "d", 8, 202, before=row(2, "x"))]
    eq2 = [at("e", "u", 7, 102, after=row(1, "second")), at("old", "u", 7, 301, after=row(1, "tie"))]
    return [
        (first + eq1, {"t": [(1, "c", None)], "e": [(1, "first", None)], "d": []}),
        # the insert of key 2 again: it was deleted at its position
        (late + eq2 + [eq1[1]], {"t": [(1, "c", None)], "e": [(1, "second", None)], "d": [], "old": [(1, "tie", None)]}),
        # the whole input again (re-delivered), and a later record of key 2 at the delete's position
        (first + late + eq1 + eq2 + [at("d", "c", 8, 203, after=row(2, "again"))],
         {"t": [(1, "c", None)], "e": [(1, "second", None)], "old": [(1, "tie", None)], "d": [(2, "again", None)]}),
    ]


SCENARIOS = {
    "order": _greatest_position_wins_in_any_arrival_order,
    "ties": _equal_positions_keep_arrival_order,
    "snap": _snapshot_never_overwrites_streamed_change,
    "partial": _partial_images_update_only_their_columns,
    "keymove": _update_that_changes_the_key_moves_the_row,
    "trunc": _truncate_empties_the_table_as_of_its_position,
    "truncties": _truncate_and_change_of_one_position_keep_arrival_order,
    "keyless": _table_without_key_matches_whole_before_image,
    "widen": _type_widens_in_place,
    **{f"shuffle{seed}": (lambda seed=seed: _any_shuffle_gives_the_same_table(seed)) for seed in range(3)},
    "delold": _delete_then_older_insert_in_a_later_batch,
    "truncmem": _truncate_is_remembered_across_batches,
    "keylate": _key_change_then_older_insert_in_a_later_batch,
    "widendel": _a_remembered_delete_still_matches_after_the_key_widens,
    "halves": _update_halves_split_across_batches_make_one_update,
    "ended": _table_dropped_or_truncated_by_ddl,
    "resnap": _snapshot_by_position_lands_after_a_delete_or_truncate,
    "snapend": _completed_snapshot_removes_rows_it_did_not_read,
    "microkey": _remembered_keys_keep_microseconds,
    "keylessdup": _keyless_identical_rows_stay_separate,
    "keylesspart": _keyless_partial_update_before_its_insert_in_an_earlier_batch,
    "partmove": _partial_update_that_changes_the_key_moves_the_whole_row,
    "colpos": _partial_updates_keep_positions_per_column,
    "rename": _table_rename_moves_the_rows,
    "recreate": _table_created_again_before_its_rename_arrives,
    "rencol": _late_event_of_a_renamed_table_older_than_its_column_drop,
    "colchain": _column_rename_chain_whose_later_step_arrives_first,
    "renlate": _late_events_of_a_renamed_table_follow_it,
    "renpart": _renamed_table_keeps_positions_per_column,
    "renread": _late_snapshot_read_of_a_renamed_table_lands,
    "rencap": _renamed_table_without_key_keeps_its_capped_images,
    "renkey": _configured_key_follows_the_rename,
    "arrive": _older_change_in_a_later_batch_and_redelivery,
}


def _table_name(scenario: str, t: str) -> str:
    return scenario if t == "t" else f"{scenario}_{t}"


def _relabel(scenario: str, e: dict) -> dict:
    """Event ``e`` of ``scenario`` on the scenario's own table (``{table}`` in DDL text too)."""
    t = _table_name(scenario, e["table"])
    return dict(e, table=t, ddl=e["ddl"].replace("{table}", t) if e["ddl"] else None)


def test_scenarios_in_shared_batches(spark, tmp_path):
    """Every scenario of SCENARIOS, step i of each applied in batch i: each scenario's tables
    equal what it expects after each of its steps."""
    steps = {name: make() for name, make in SCENARIOS.items()}
    # arrive_old: a table an older cdclake wrote, before _cdc_record existed
    spark.createDataFrame(
        [(1, "old", None, [Decimal(7)], "7", "c", 7000)],
        "id int, name string, amount decimal(10,2), _cdc_position array<decimal(38,0)>, _cdc_position_text string, _cdc_op string, _cdc_event_time_ms bigint",
    ).write.format("delta").save(str(tmp_path / "db.arrive_old"))
    results = []
    for i in range(max(map(len, steps.values()))):
        batch = [_relabel(name, e) for name, s in steps.items() if i < len(s) for e in s[i][0]]
        results.append({r.table: r for r in apply(spark, tmp_path, batch, primary_keys=SCENARIO_KEYS)})
        want = {(name, t): rows for name, s in steps.items() if i < len(s) and s[i][1] for t, rows in s[i][1].items()}
        got = {(name, t): table(spark, tmp_path, f"db.{_table_name(name, t)}") if (tmp_path / f"db.{_table_name(name, t)}").exists() else []
               for name, t in want}
        assert got == want, f"after batch {i + 1}"
    # what the rows alone do not show
    assert results[1]["db.trunc"].truncated == 2
    dtypes = {t: dict(spark.read.format("delta").load(f"{tmp_path}/db.{t}").dtypes)["id"] for t in ("widen", "widendel")}
    assert dtypes == {"widen": "bigint", "widendel": "decimal(12,2)"}
    assert [c for c in spark.read.format("delta").load(f"{tmp_path}/db.rencol_n").columns if not c.startswith("_cdc")] == [
        "id", "name", "amount"]
    # renlate: the late column drop and rename reached the new names
    late = {t: spark.read.format("delta").load(f"{tmp_path}/db.renlate_{t}") for t in ("xn", "yn")}
    assert {t: [c for c in df.columns if not c.startswith("_cdc")] for t, df in late.items()} == {
        "xn": ["id", "name", "amount"], "yn": ["id", "name", "amount", "label"]}
    assert sorted((r["id"], r["label"]) for r in late["yn"].collect()) == [(1, "e1"), (2, "x2")]
    # colchain: at merged into r2 as of 2 (1 takes at's value), or dropped at the chain's end
    chain = {t: spark.read.format("delta").load(f"{tmp_path}/db.{t}") for t in ("colchain", "colchain_d", "colchain_i", "colchain_u")}
    assert {t: [c for c in df.columns if not c.startswith("_cdc")] for t, df in chain.items()} == {
        "colchain": ["id", "name", "amount", "r2"], "colchain_d": ["id", "name", "amount"], "colchain_i": ["id", "name", "amount", "r2"],
        "colchain_u": ["id", "name", "amount", "r2"]}
    for t in ("colchain", "colchain_i", "colchain_u"):
        assert sorted((r["id"], str(r["r2"])) for r in chain[t].collect()) == [
            (1, "2020-01-01 00:00:01"), (2, "2020-01-01 00:00:05"), (3, "2020-01-01 00:00:40")], t
    # recreate: cn has c's columns at the rename; c, the table created again, its own
    source = {t: [(n, d) for n, d in spark.read.format("delta").load(f"{tmp_path}/db.recreate_{t}").dtypes if not n.startswith("_cdc")]
              for t in ("c", "cn")}
    assert source == {"cn": [("id", "int"), ("name", "string"), ("amount", "decimal(10,2)")],
                      "c": [("id", "int"), ("label", "string"), ("amount", "decimal(12,2)"), ("gone", "string"), ("extra", "bigint")]}
    assert [(r["id"], r["label"], r["amount"], r["extra"], r["gone"])
            for r in spark.read.format("delta").load(f"{tmp_path}/db.recreate_c").collect()] == [(3, "c2", Decimal("123456.78"), 8, "new")]
    history = {(r["table"], r["change"]) for r in spark.read.format("delta").load(f"{tmp_path}/_cdclake/schema_history").collect()}
    assert {("db.ended", "table dropped at the source (position 3): its older rows removed, as by a truncate"),
            ("db.ended_x", "table truncated at the source (position 3): its older rows removed, as by a truncate"),
            ("db.snapend", "full snapshot of the table completed (position 5): its older rows removed, as by a truncate"),
            ("db.rename_n", "table renamed from db.rename at the source (position 5): its rows moved here;"
                            " rows held before removed, as by a truncate"),
            ("db.rename", "table renamed to db.rename_n at the source (position 5): its rows moved there and removed here,"
                          " as by a truncate"),
            ("db.rename_en", "table renamed from db.rename_e at the source (position 5): its rows moved here; rows held before"
                             " removed, as by a truncate; db.rename_e was written at position 8 (after the rename) by an earlier"
                             " batch, a table created again under that name: its changes before the rename were read again"
                             " from the changelog and applied here")} <= history
    # the renames re-delivered in batch 3 are not applied again (each old table's truncate is
    # at its step's point): rename_c, which only the renames touch, has no result there
    assert results[1]["db.rename_c"].truncated == 1 and "db.rename_c" not in results[2]
    assert results[1]["db.ended"].truncated == 2 and results[1]["db.ended_x"].truncated == 1
    assert (results[2]["db.snapend"].truncated, results[2]["db.snapend"].updated) == (1, 0)
    remembered = spark.read.format("delta").load(f"{tmp_path}/_cdclake/deletes").collect()
    subs = {(r["table"], r["key"], r["sub"]) for r in remembered}
    # keylessdup: the deletes (d4, d7 and both updates' before images) and the copies they took
    # (i1, i2, c3 moved by its own update, c6 taken by d7)
    dup = sorted((r["op"], [int(p) for p in r["position"]], r["sub"]) for r in remembered if r["table"] == "db.keylessdup")
    assert dup == [("c", [1], 1), ("c", [2], 1), ("c", [3], 1), ("c", [6], 1), ("d", [4], 1), ("d", [5], 0), ("d", [7], 1), ("d", [8], 0)]
    assert [(results[i]["db.keylessdup"].inserted, results[i]["db.keylessdup"].deleted) for i in range(3)] == [(3, 0), (0, 1), (2, 2)]
    assert {("db.halves_kb", '{"id":1}', 0), ("db.halves_sb", '{"id":1}', 0), ("db.halves_ka", '{"id":1}', 0)} <= subs
    # colpos: every move is remembered (op m, the old key, the new one, sub 0), and the progress
    # keeps the table's latest move (the gate of delta_table.follow_moves); a table of full
    # images has none
    moves = {(r["key"], r["to"], int(r["position"][0]), r["sub"]) for r in remembered if r["table"] == "db.colpos" and r["op"] == "m"}
    assert moves == {('{"id":%d}' % a, '{"id":%d}' % b, p, 0)
                     for a, b, p in ((5, 6, 3), (7, 8, 3), (9, 10, 3), (10, 11, 4), (20, 21, 3), (22, 23, 3), (24, 25, 3), (26, 24, 4),
                                     (30, 31, 3), (31, 32, 4), (33, 31, 5), (40, 41, 4), (42, 43, 4))}
    states = {r["table"]: r for r in audit.read_progress(spark, str(tmp_path)).rows if r["source"] is None}
    assert (states["db.colpos"]["move_position"], states["db.arrive"]["move_position"]) == ([Decimal(5)], None)
    # arrive: the old table gained _cdc_record; the re-delivery changed none of t, e, old; e
    # keeps its winning record's coordinates
    assert any("_cdc_record" in c for c in results[1]["db.arrive_old"].schema_changes)
    assert {t: (results[2][t].inserted, results[2][t].updated, results[2][t].deleted) for t in ("db.arrive", "db.arrive_e", "db.arrive_old")} \
        == dict.fromkeys(("db.arrive", "db.arrive_e", "db.arrive_old"), (0, 0, 0))
    rec = spark.read.format("delta").load(f"{tmp_path}/db.arrive_e").first()["_cdc_record"]
    assert (rec["file"], rec["line"], rec["partition"], rec["offset"]) == ("mem", 102, None, None)




def test_a_rename_whose_new_table_cannot_be_created(spark, tmp_path):
    # RENAME TABLE t TO n where the file system refuses n (a file in its place), and the batch
    # writes the re-created t after the rename: t keeps its rows for the next delivery, the
    # schema history says why, and t's later insert goes to the rejects (TABLE_FAILED) rather
    # than onto the old rows (cdclake.apply.batch._apply). Delivered again once n can be made,
    # the rename moves the rows and the insert lands.
    apply(spark, tmp_path, [ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b"))])
    (tmp_path / "db.n").write_text("in the way")
    batch = [dict(ev(None, 5, kind="ddl"), ddl="RENAME TABLE t TO n"), ev("c", 8, row(2, "new"))]
    failed = {r.table: r for r in apply(spark, tmp_path, batch) if r.failed}
    assert failed["db.n"].failed.startswith("TABLE_FAILED: ")
    assert failed["db.t"].failed_events == 1 and "its rename to db.n" in failed["db.t"].failed
    assert table(spark, tmp_path) == [(1, "a", None), (2, "b", None)]
    rejects = spark.read.format("delta").load(f"{tmp_path}/_cdclake/rejects").collect()
    assert [(r.error_code, json.loads(bytes(r.raw_value))["after"]["name"]) for r in rejects] == [("TABLE_FAILED", "new")]
    history = [r["change"] for r in spark.read.format("delta").load(f"{tmp_path}/_cdclake/schema_history").collect()]
    assert any(h.startswith("not applied: table renamed to db.n at the source (position 5): table db.n could not be created") for h in history)
    (tmp_path / "db.n").unlink()
    assert not any(r.failed for r in apply(spark, tmp_path, batch))
    assert table(spark, tmp_path, "db.n") == [(1, "a", None), (2, "b", None)] and table(spark, tmp_path) == [(2, "new", None)]


def test_a_column_rename_chain_arriving_after_all_its_names_merges_them_into_the_last(spark, tmp_path):
    # at -> r1 at 2 and r1 -> r2 at 36 at the source; the events of each name (1: at, 5: r1,
    # 40: r2) arrive first and make all three columns, then both statements in one batch: the
    # table must end with r2 alone, holding every row's value (found by the SCD type 2 probe of
    # session 39, simulated seed 3199319394, shuffle 3574989832; scenario colchain has the
    # steps in two batches)
    ts = {"source_type": "datetime", "spark_type": "timestamp", "precision": None, "scale": None, "nullable": True}

    def cols(name):
        return COLS + [dict(ts, name=name)]

    def ddl(pos, text, table="chain"):
        return dict(ev(None, pos, kind="ddl", table=table), ddl=f"ALTER TABLE db.{table} {text}")

    # chain2: the same without an event of the last name (r2 is made by the rename of r1);
    # chain3: at -> r1 -> r2 -> r3, events of at and r2 only (r1 never in the table)
    apply(spark, tmp_path, [ev("c", 1, {**row(1, "a"), "at": "2020-01-01 00:00:01"}, table="chain", columns=cols("at")),
                            ev("c", 5, {**row(2, "b"), "r1": "2020-01-01 00:00:05"}, table="chain", columns=cols("r1")),
                            ev("c", 40, {**row(3, "c"), "r2": "2020-01-01 00:00:40"}, table="chain", columns=cols("r2")),
                            ev("c", 1, {**row(1, "a"), "at": "2020-01-01 00:00:01"}, table="chain2", columns=cols("at")),
                            ev("c", 5, {**row(2, "b"), "r1": "2020-01-01 00:00:05"}, table="chain2", columns=cols("r1")),
                            ev("c", 1, {**row(1, "a"), "at": "2020-01-01 00:00:01"}, table="chain3", columns=cols("at")),
                            ev("c", 40, {**row(3, "c"), "r2": "2020-01-01 00:00:40"}, table="chain3", columns=cols("r2"))])
    apply(spark, tmp_path, [ddl(2, "RENAME COLUMN at TO r1"), ddl(36, "RENAME COLUMN r1 TO r2"),
                            ddl(2, "RENAME COLUMN at TO r1", "chain2"), ddl(36, "RENAME COLUMN r1 TO r2", "chain2"),
                            ddl(2, "RENAME COLUMN at TO r1", "chain3"), ddl(36, "RENAME COLUMN r1 TO r2", "chain3"),
                            ddl(50, "RENAME COLUMN r2 TO r3", "chain3")])
    for table, last, ids in [("chain", "r2", [1, 2, 3]), ("chain2", "r2", [1, 2]), ("chain3", "r3", [1, 3])]:
        df = spark.read.format("delta").load(f"{tmp_path}/db.{table}")
        assert [c for c in df.columns if not c.startswith("_cdc")] == ["id", "name", "amount", last], table
        expected = {1: "2020-01-01 00:00:01", 2: "2020-01-01 00:00:05", 3: "2020-01-01 00:00:40"}
        assert sorted((r["id"], str(r[last])) for r in df.collect()) == [(i, expected[i]) for i in ids], table
