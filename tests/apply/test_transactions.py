"""Transactions held back (cdclake/apply/transactions.py): a reader of the target tables never
sees part of a source transaction, whichever way the format marks its bounds (a size, a last
event, BEGIN/END markers), across batches and re-deliveries; status shows what is held."""

from __future__ import annotations

import random

from cdclake.apply.audit import Txn
from cdclake.model import EVENT_SCHEMA
from cdclake.pipeline import apply_events
from cdclake.status import target_status
from tests.apply.test_semantics import ev, row, table
from tests.oracle import replay
from tests.roundtrip import assert_lake_matches, check_each, scramble_units, simulated_workload, tag_event

NEVER = 10**15  # a timeout no workload reaches


def tx(e: dict, tx_id: str, seq: int | None = None, size: int | None = None, last: bool | None = None, ms: int | None = None) -> dict:
    e.update(tx_id=tx_id, tx_seq=seq, tx_size=size, tx_last=last)
    if ms is not None:
        e["event_time_ms"] = ms
    return e


def marker(kind: str, tx_id: str, pos: int, size: int | None = None) -> dict:
    e = ev(None, pos, kind=kind, table=None, key=None, columns=None)
    e.update(database=None, tx_id=tx_id, tx_size=size)
    return e


def apply(spark, target, events, txn=None, timeout=None):
    df = spark.createDataFrame(events, EVENT_SCHEMA)
    kw = {} if timeout is None else {"tx_timeout_ms": timeout}
    return apply_events(spark, df, str(target), None, txn, **kw)


def test_update_halves_are_keyed_as_they_are_paired(spark):
    # the gate's key of an update half (plan.tx_key_sql) is what pair_update_halves groups by:
    # the two halves of one update share it; table `a.b` of database `d` and table `b` of
    # database `d.a` (one qualified name, d.a.b) at one position do not
    from pyspark.sql import functions as F

    from cdclake.apply.plan import UPDATE_HALVES_TX, tx_key_sql

    dw = {"format": "dataworks-json"}
    halves = [ev("u", 7, None, row(1, "x"), table="a.b") | dw, ev("u", 7, row(1, "y"), None, table="a.b") | dw,
              ev("u", 7, None, row(1, "x"), table="b") | dw | {"database": "d.a"}, ev("u", 7, row(1, "x"), table="h")]
    halves[0]["database"] = halves[1]["database"] = "d"
    keys = [r[0] for r in spark.createDataFrame(halves, EVENT_SCHEMA).select(F.expr(tx_key_sql())).collect()]
    assert keys[0] == keys[1] and keys[0].startswith(UPDATE_HALVES_TX) and keys[2] not in (keys[0], None)
    assert keys[3] is None  # a whole update (format test: no halves) is never held


def test_open_transactions_wait_for_the_rest(spark, tmp_path):
    # four ways a format bounds a transaction, cut between two batches, on two tables (t, u):
    # S sized (SharePlex seq/size), Q by its last event (Qlik), D by BEGIN/END markers with the
    # END's event count (Debezium's transaction topic), and one complete in the first batch
    first = [
        ev("c", 1, row(1, "plain")),
        tx(ev("c", 2, row(2, "s1")), "S", 1, 3),
        tx(ev("c", 3, row(3, "s2"), table="u"), "S", 2, 3),
        tx(ev("c", 10, row(10, "q1")), "Q", 1, last=False),
        marker("tx_begin", "D", 19),
        tx(ev("c", 20, row(20, "d1")), "D", 1),
        tx(ev("c", 30, row(30, "whole"), table="u"), "W", 1, 1),
        # an update as two halves (DataWorks, TUPLE) beside the held transactions: paired as usual
        ev("c", 40, row(40, "h0"), table="h"),
        ev("u", 41, None, row(40, "h0"), table="h"),
        ev("u", 41, row(40, "h1"), None, table="h"),
        # a DataWorks update's before half alone: held as a transaction of two
        # (plan.update_half_sql), so a reader sees row 50 as it was, not deleted, until the after
        # half comes (the halves of format "test" above are paired, never held)
        ev("c", 50, row(50, "x"), table="h"),
        ev("u", 51, None, row(50, "x"), table="h") | {"format": "dataworks-json"},
    ]
    txn = Txn("test-transactions", 1)
    apply(spark, tmp_path, first, txn)
    assert table(spark, tmp_path) == [(1, "plain", None)]
    assert table(spark, tmp_path, "db.u") == [(30, "whole", None)]
    assert table(spark, tmp_path, "db.h") == [(40, "h1", None), (50, "x", None)]
    st = target_status(spark, str(tmp_path))
    assert (st["held_transactions"], st["held_events"]) == (4, 6) and st["held_since_ms"] is not None
    first_versions = {t["table"]: t["delta_version"] for t in st["tables"] if t["table"] != "db.h"}

    # the same batch again (a replay after a crash, same identity): nothing changes
    apply(spark, tmp_path, first, txn)
    assert table(spark, tmp_path) == [(1, "plain", None)]
    assert target_status(spark, str(tmp_path))["held_events"] == 6

    second = [
        tx(ev("u", 4, row(2, "s3"), row(2, "s1")), "S", 3, 3),
        tx(ev("c", 11, row(11, "q2")), "Q", 2, last=True),
        marker("tx_end", "D", 21, size=1),
        ev("u", 51, row(50, "y"), None, table="h") | {"format": "dataworks-json"},
    ]
    apply(spark, tmp_path, second, Txn("test-transactions", 2))
    assert table(spark, tmp_path, "db.h") == [(40, "h1", None), (50, "y", None)]
    assert table(spark, tmp_path) == [(1, "plain", None), (2, "s3", None), (10, "q1", None), (11, "q2", None), (20, "d1", None)]
    assert table(spark, tmp_path, "db.u") == [(3, "s2", None), (30, "whole", None)]
    st = target_status(spark, str(tmp_path))
    assert (st["held_transactions"], st["held_events"], st["held_since_ms"]) == (0, 0, None)
    # each table's version after the batch is in the progress: read as of the first batch's
    # versions, both tables are as that batch left them (one consistent cut across tables)
    latest = {n: spark.sql(f"describe history delta.`{tmp_path}/{n}`").agg({"version": "max"}).first()[0] for n in ("db.t", "db.u", "db.h")}
    assert {t["table"]: t["delta_version"] for t in st["tables"]} == latest
    assert set(first_versions) == {"db.t", "db.u"} and all(first_versions[n] < latest[n] for n in first_versions)
    as_of = lambda n: sorted(  # noqa: E731
        (r["id"], r["name"]) for r in spark.read.format("delta").option("versionAsOf", first_versions[n]).load(f"{tmp_path}/{n}").collect()
    )
    assert (as_of("db.t"), as_of("db.u")) == ([(1, "plain")], [(30, "whole")])

    # an at-least-once producer sends S's first two changes again, and the before half of the
    # update at 51: open in this batch alone, but the changelog has each of them, so they are
    # applied (again: nothing changes) and not held until the timeout, nor counted as given up.
    # A change reuses Q's id (an Oracle XID after the undo segments wrap) at a position older
    # than applied ones, a change the changelog has not: held. The third batch is applied as
    # after a crash that cut its first attempt short before its changelog commit (which carries
    # the progress; its held table had committed): the retry reads the changelog as the second
    # batch left it, so it still holds Q
    third = [first[1], first[2], first[-1], tx(ev("c", 45, row(45, "q-again")), "Q", 1, last=False)]
    apply(spark, tmp_path, third, Txn("test-transactions", 3))
    _crash_before_changelog_commit(spark, tmp_path)
    apply(spark, tmp_path, third, Txn("test-transactions", 3))
    assert table(spark, tmp_path) == [(1, "plain", None), (2, "s3", None), (10, "q1", None), (11, "q2", None), (20, "d1", None)]
    assert table(spark, tmp_path, "db.u") == [(3, "s2", None), (30, "whole", None)]
    assert table(spark, tmp_path, "db.h") == [(40, "h1", None), (50, "y", None)]
    st = target_status(spark, str(tmp_path))
    assert (st["held_transactions"], st["held_events"], st["timed_out_transactions"]) == (1, 1, 0)

    # a batch fails before its changelog commit (X's first change, held: the held table
    # committed), another batch completes, then the failed one is delivered again: X is new to
    # every table, so it is held, not taken for a re-delivery
    fourth = [tx(ev("c", 46, row(46, "x1")), "X", 1, 2)]
    failed = Txn("test-transactions-other-files", 1)  # (another file set: an identity of its own)
    apply(spark, tmp_path, fourth, failed)
    _crash_before_changelog_commit(spark, tmp_path)
    apply(spark, tmp_path, [ev("c", 70, row(70, "later"))], Txn("test-transactions", 4))
    apply(spark, tmp_path, fourth, failed)
    assert table(spark, tmp_path)[-1] == (70, "later", None) and (46, "x1", None) not in table(spark, tmp_path)
    st = target_status(spark, str(tmp_path))
    assert (st["held_transactions"], st["held_events"], st["timed_out_transactions"]) == (2, 2, 0)


def _crash_before_changelog_commit(spark, target) -> None:
    """The state a process killed just before the batch's last commit (the changelog append
    that carries the progress) leaves: the changelog's newest commit file is gone, and the next
    process knows no Delta log."""
    log = target / "_cdclake" / "changelog" / "_delta_log"
    version = max(int(p.stem) for p in log.glob("*.json"))
    for file in (f"{version:020d}.json", f"{version:020d}.crc"):
        for f in (log / file, log / f".{file}.crc"):
            f.unlink(missing_ok=True)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def test_a_transaction_the_source_moved_past_is_applied_as_it_is(spark, tmp_path):
    # the rest of G never comes (a rejected record, a table not ingested): once the batch's
    # event time is past G's by more than the timeout, G's changes are applied; H, within the
    # timeout, stays held
    apply(spark, tmp_path, [tx(ev("c", 1, row(1, "g1")), "G", 1, 2, ms=1_000),
                            tx(ev("c", 2, row(2, "h1")), "H", 1, 2, ms=50_000)], timeout=60_000)
    assert not (tmp_path / "db.t").exists()  # both held: no table yet
    assert target_status(spark, str(tmp_path))["timed_out_transactions"] == 0
    apply(spark, tmp_path, [ev("c", 3, row(3, "later")) | {"event_time_ms": 70_000}], timeout=60_000)
    assert table(spark, tmp_path) == [(1, "g1", None), (3, "later", None)]
    st = target_status(spark, str(tmp_path))
    assert (st["held_transactions"], st["timed_out_transactions"]) == (1, 1)  # H held, G given up
    # a re-delivered piece of G in a batch with nothing held before: open in this batch alone;
    # the changelog has it, so it is applied again at once, not given up a second time. Its
    # other change, delivered now for the first time (the rejected record mended and sent
    # again), is new: given up at once (the source is far past it) and counted
    apply(spark, tmp_path, [ev("c", 4, row(4, "h-end")) | {"event_time_ms": 200_000}], timeout=60_000)  # H given up
    apply(spark, tmp_path, [tx(ev("c", 1, row(1, "g1")), "G", 1, 2, ms=1_000),
                            ev("c", 5, row(5, "now")) | {"event_time_ms": 300_000}], timeout=60_000)
    assert table(spark, tmp_path) == [(1, "g1", None), (2, "h1", None), (3, "later", None), (4, "h-end", None), (5, "now", None)]
    st = target_status(spark, str(tmp_path))
    assert (st["held_transactions"], st["held_events"], st["timed_out_transactions"]) == (0, 0, 2)
    apply(spark, tmp_path, [tx(ev("u", 7, row(1, "g1b"), row(1, "g1")), "G", 2, 2, ms=1_000),
                            ev("c", 6, row(6, "then")) | {"event_time_ms": 400_000}], timeout=60_000)
    assert table(spark, tmp_path)[:1] == [(1, "g1b", None)]
    st = target_status(spark, str(tmp_path))
    assert (st["held_transactions"], st["held_events"], st["timed_out_transactions"]) == (0, 0, 3)


def complete_so_far(events: list[dict], delivered: set[int]) -> list[dict]:
    """The oracle's input after some batches: the delivered events (in commit order) outside
    transactions or of transactions every change of which was delivered."""
    members: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        if e["tx_id"] is not None:
            members.setdefault(e["tx_id"], []).append(i)
    return [
        e for i, e in enumerate(events)
        if i in delivered and (e["tx_id"] is None or all(j in delivered for j in members[e["tx_id"]]))
    ]


def test_scrambled_batches_show_only_whole_transactions(spark, tmp_path):
    # simulated workloads (transactions of 1-6 changes over several tables) shuffled, partly
    # delivered twice and cut into three batches: after each batch every table holds exactly
    # what the whole transactions delivered so far (and the changes outside transactions) give
    examples = []
    for k, (seed, shuffle) in enumerate([(3, 5), (8, 9)]):
        source = simulated_workload(seed, 120).events
        events = [tag_event(e, k) for e in source]
        assert sum(e["tx_id"] is not None for e in events) > 20
        parts = scramble_units(list(range(len(events))), random.Random(shuffle), 3, 0.3)
        examples.append((events, parts))
    delivered: list[set[int]] = [set() for _ in examples]
    held_seen = 0
    for b in range(3):
        batch = []
        for k, (events, parts) in enumerate(examples):
            if b < len(parts):
                batch += [events[i] for i in parts[b]]
                delivered[k] |= set(parts[b])
        apply(spark, tmp_path, batch, timeout=NEVER)
        held_seen += target_status(spark, str(tmp_path))["held_transactions"]

        def check(k, b=b):
            events, _ = examples[k]
            rows, schemas = replay(complete_so_far(events, delivered[k]), strict=False, subset=True)
            assert_lake_matches(spark, tmp_path, rows, schemas)

        check_each([f"example {k} after batch {b + 1}" for k in range(len(examples))], check)
    assert held_seen > 0  # the cuts did split transactions
    # every change was delivered by the last batch, some of them twice (a re-delivered piece of
    # a transaction applied in an earlier batch is applied again at once, not held)
    assert all(set().union(*parts) == set(range(len(events))) for events, parts in examples)
    assert target_status(spark, str(tmp_path))["held_transactions"] == 0
