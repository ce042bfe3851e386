"""A batch applied again under its identity (Delta's txnAppId/txnVersion, :class:`Txn`) after a
crash that left some of its commits done and others not: the tables that committed it skip it,
the others apply it, and nothing lands twice (tables, changelog, deletes, row counts).

The crash is made for real on disk: the batch is applied whole, then the last commit of some of
its tables is removed from their Delta logs (``_delta_log/<version>.json`` and its checksum),
which is the state a process killed between those Delta commits leaves (data files written by
an uncommitted transaction are invisible to every reader).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import functions as F

from cdclake.apply import audit
from cdclake.apply.batch import apply_batch
from cdclake.model import EVENT_SCHEMA
from tests.apply.test_semantics import ev, row, table


def _crash_before(spark, target: Path, names) -> None:
    """The crash: the tables ``names`` (folders under ``target``, in order; a name twice drops
    two commits) did not commit their newest version (each loses its newest commit file, with
    Delta's checksum file and the local file system's hidden ``.crc`` files), and the process
    that applies the batch again knows no Delta log (the ones this JVM holds are dropped)."""
    for name in names:
        log = target / name / "_delta_log"
        version = max(int(p.stem) for p in log.glob("*.json"))
        for file in (f"{version:020d}.json", f"{version:020d}.crc"):
            for f in (log / file, log / f".{file}.crc"):
                if f.exists():
                    f.unlink()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def _apply(spark, target, events, txn):
    return apply_batch(spark, spark.createDataFrame(events, EVENT_SCHEMA), str(target), txn=txn)


def test_a_batch_replayed_after_a_partial_commit_lands_once(spark, tmp_path):
    first = [ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("c", 3, row(7, "x"), table="u")]
    _apply(spark, tmp_path, first, audit.Txn("app", 0))
    second = [
        ev("u", 4, row(1, "a2"), row(1, "a")),
        ev("d", 5, before=row(2, "b")),
        ev("c", 6, row(3, "c")),
        ev("c", 7, row(8, "y"), table="u"),
    ]
    txn = audit.Txn("app", 1)
    _apply(spark, tmp_path, second, txn)
    # the crash: table db.u and the changelog (which carries the progress) did not commit
    # batch 1; db.t and the deletes table did
    _crash_before(spark, tmp_path, ("db.u", "_cdclake/changelog"))
    assert sorted(r[0] for r in spark.read.format("delta").load(str(tmp_path / "db.u")).select("id").collect()) == [7]

    results = {r.table: r for r in _apply(spark, tmp_path, second, txn)}

    assert results["db.t"].replayed and not results["db.u"].replayed
    assert (results["db.u"].inserted, results["db.u"].rows_now) == (1, 2)
    assert results["db.t"].rows_now == 2  # counted again: the table skipped the batch
    assert table(spark, tmp_path) == [(1, "a2", None), (3, "c", None)]
    assert table(spark, tmp_path, "db.u") == [(7, "x", None), (8, "y", None)]
    changelog = spark.read.format("delta").load(str(tmp_path / "_cdclake/changelog"))
    assert changelog.groupBy(F.col("position.text")).count().where("count != 1").count() == 0
    assert changelog.count() == len(first) + len(second)
    deletes = spark.read.format("delta").load(str(tmp_path / "_cdclake/deletes"))
    assert [(r["table"], r["position_text"]) for r in deletes.collect()] == [("db.t", "5")]
    progress = {r["table"]: r["rows"] for r in audit.read_progress(spark, str(tmp_path)).rows if r["table"]}
    assert progress == {"db.t": 2, "db.u": 2}

    # the next batch of the same writer is applied
    _apply(spark, tmp_path, [ev("d", 8, before=row(3, "c"))], audit.Txn("app", 2))
    assert table(spark, tmp_path) == [(1, "a2", None)]
    assert spark.read.format("delta").load(str(tmp_path / "_cdclake/changelog")).count() == len(first) + len(second) + 1


def test_a_rename_replayed_after_a_crash_between_its_applies_moves_once(spark, tmp_path):
    # RENAME TABLE t TO n (and k TO kn, a table without a key holding two identical rows): the
    # crash came after n's move and the copy of t's remembered deletes, before n's progress,
    # t's end and kn's move committed (cdclake.apply.renames: the old tables end only after the
    # new ones). Applied again, the move lands once: kn still holds two rows, not four; n's
    # deletes from t are copied once; a late change of t then follows the rename
    def nokey(op, pos, **kw):
        return ev(op, pos, table="k", key=None, **kw)

    first = [ev("c", 1, row(1, "a")), ev("c", 2, row(2, "b")), ev("c", 3, row(3, "c")), ev("d", 4, before=row(3, "c")),
             nokey("c", 1, after=row(7, "same")), nokey("c", 2, after=row(7, "same"))]
    _apply(spark, tmp_path, first, audit.Txn("app", 0))
    rename = [dict(ev(None, 5, kind="ddl"), ddl="RENAME TABLE t TO n, k TO kn")]
    txn = audit.Txn("app", 1)
    _apply(spark, tmp_path, rename, txn)
    assert table(spark, tmp_path, "db.n") == [(1, "a", None), (2, "b", None)]
    _crash_before(spark, tmp_path, ("db.t", "db.k", "db.kn", "_cdclake/changelog", "_cdclake/changelog"))
    assert table(spark, tmp_path) == [(1, "a", None), (2, "b", None)] and table(spark, tmp_path, "db.kn") == []

    _apply(spark, tmp_path, rename, txn)
    assert table(spark, tmp_path) == [] and table(spark, tmp_path, "db.k") == []
    assert table(spark, tmp_path, "db.n") == [(1, "a", None), (2, "b", None)]
    assert table(spark, tmp_path, "db.kn") == [(7, "same", None)] * 2
    deletes = spark.read.format("delta").load(str(tmp_path / "_cdclake/deletes"))
    assert sorted((r["table"], [int(x) for x in r["position"]]) for r in deletes.collect()) == [("db.n", [5, 1, 4]), ("db.t", [4])]
    # a late change of t older than the rename lands in n; an insert older than t's delete stays out
    _apply(spark, tmp_path, [ev("u", 3, row(1, "a3"), row(1, "a")), ev("c", 3, row(3, "c"))], audit.Txn("app", 2))
    assert table(spark, tmp_path, "db.n") == [(1, "a3", None), (2, "b", None)] and table(spark, tmp_path) == []

    # n renamed to m at 10 and a table created again under the name n, written at 11 (a key n
    # held): that write is applied after the move, apart (cdclake.apply.renames.
    # written_after_rename, identity <appId>.after-rename.1); the crash came before its commits
    # (n's and the changelog's, which carries the progress). Applied again: m holds n's rows as they were at 10, n
    # only its new row, once
    again = [dict(ev(None, 10, kind="ddl", table="n"), ddl="RENAME TABLE n TO m"), ev("c", 11, row(1, "new"), table="n")]
    txn = audit.Txn("app", 3)
    _apply(spark, tmp_path, again, txn)
    moved = [(1, "a3", None), (2, "b", None)]
    assert table(spark, tmp_path, "db.m") == moved and table(spark, tmp_path, "db.n") == [(1, "new", None)]
    _crash_before(spark, tmp_path, ("db.n", "_cdclake/changelog"))
    assert table(spark, tmp_path, "db.n") == []
    _apply(spark, tmp_path, again, txn)
    assert table(spark, tmp_path, "db.m") == moved and table(spark, tmp_path, "db.n") == [(1, "new", None)]

    # m renamed to z at 20, and a table created again under the name m, truncated at 21 and
    # written at 22, whose changes arrive a batch before the rename: the truncate removed m's
    # rows before the move could read them, so the rename's batch reads m's changes again from
    # the changelog and applies them (renames._apply_again, identity <appId>.rename.1.again);
    # the crash came before that apply's commits of z and of the changelog (which carries the progress). Applied
    # again: z holds m's rows as they were at 20, m only its new row
    _apply(spark, tmp_path, [ev("t", 21, table="m"), ev("c", 22, row(5, "m22"), table="m")], audit.Txn("app", 4))
    assert table(spark, tmp_path, "db.m") == [(5, "m22", None)]
    rename_m = [dict(ev(None, 20, kind="ddl", table="m"), ddl="RENAME TABLE m TO z")]
    txn = audit.Txn("app", 5)
    _apply(spark, tmp_path, rename_m, txn)
    assert table(spark, tmp_path, "db.z") == moved and table(spark, tmp_path, "db.m") == [(5, "m22", None)]
    _crash_before(spark, tmp_path, ("db.z", "_cdclake/changelog"))
    assert table(spark, tmp_path, "db.z") == []
    _apply(spark, tmp_path, rename_m, txn)
    assert table(spark, tmp_path, "db.z") == moved and table(spark, tmp_path, "db.m") == [(5, "m22", None)]
