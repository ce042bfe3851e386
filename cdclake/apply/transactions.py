"""Transactions held back: a source transaction reaches the target tables whole or not at all.

Where a format carries transaction boundaries (:attr:`cdclake.formats.base.Capabilities.transaction_bounds`:
Debezium's BEGIN/END records with ``event_count``, Qlik's ``transactionEventCounter`` /
``transactionLastEvent``, SharePlex's ``seq`` of ``size``, DTS's BEGIN/COMMIT records with the
changes' ``sourceTxid``; the simulator's canonical events), a
batch applies only the transactions it holds every change of. The changes of a transaction
that is still open at the end of the batch are written to ``<target>/_cdclake/held`` and
applied by the batch that brings the rest, in this run or a later one.

A transaction (canonical events of one ``tx_id``: data and DDL changes, ``tx_begin``/``tx_end``
markers) is **open** when

* its size is known (``tx_size``: SharePlex ``size``, Debezium END's ``event_count``; else the
  ``tx_seq`` of the event marked ``tx_last``: Qlik) and fewer distinct changes (by ``tx_seq``,
  else by position) than that have arrived; or
* its size is not known and it began (``tx_begin``) without an end (``tx_end``), or a change
  says it is not the last (``tx_last`` false) and none says it is.

An open transaction is given up, and its held changes applied as they are, once the source
has moved on by more than the timeout (``--transaction-timeout-ms``, default
:data:`DEFAULT_TIMEOUT_MS`): the newest event time of the batch (heartbeats included) is later
than the transaction's newest event time by more than it. The rest is not coming then (a
record of it was rejected, a table of it is not ingested). Event time, not the clock, so a
batch applied again decides the same.

A re-delivered piece of a transaction applied before (an at-least-once producer sending part
of it again) is open in its batch alone; it is applied at once (again: that changes nothing),
not held, when the changelog as the last batch left it has each of its changes
(:func:`_redelivered`; the progress keeps the changelog's version, moved only by a batch whose
append is the one since that version: :func:`cdclake.apply.batch._apply_plan`). Otherwise (no
version kept: a target created before it, or one where a batch failed after its append; or a
piece whose changes differ) it waits for the timeout.

Events without ``tx_id`` are not held, so a format or a run without boundaries (Debezium
without its transaction topic) is applied as it arrives; except for an update written as two
records of one position (DataWorks ``UPDATE_BEFOR``/``UPDATE_AFTER``, TUPLE:
:attr:`cdclake.formats.base.Capabilities.update_halves`), whose two halves are held as a
transaction of two, keyed by table and position (:func:`cdclake.apply.plan.tx_key_sql`), so
a reader never sees the row deleted or doubled between the batches that bring them; given up
by the timeout, a half is applied alone (a lone before half deletes its row, ordered before its
own position's changes; at once when the half or the batch has no event time, as nothing
could time it out). Formats whose markers do not carry
the transaction's id (DataWorks TRANSACTION_BEGIN/END) are not held (``transaction_bounds``
false; README "Transactions"). No format here marks rolled-back work: MySQL writes only
committed transactions to the binlog, and a DTS ROLLBACK record ends a transaction whose
changes to non-transactional tables stayed (see the DTS decoder).

Costs: none of its own in a batch where no transaction stays open: the gate's grouping (per
transaction) is a set of the plan's one aggregate (:func:`cdclake.apply.plan.summarize`), run
over the batch's events and the held ones, which also counts the batch's records. A batch that
holds something back plans again over the events to apply (a second aggregate). The held table
is read only when the progress says it holds events, at the version it names (once:
kept, :func:`cdclake.frames.keep`); it is written (one overwrite) in a batch that held something before or holds
something now.

Exactly once: the held table is written after every target table and before the progress
table, both carrying the batch's identity; the progress row of the target (``source`` and
``table`` null) names the held table's version to read (``held_version``), so a batch applied
again after a crash reads what it read the first time and decides the same.

Across tables: each table commits on its own (Delta has no multi-table commit), so a reader of
the latest versions of two tables may see one of them a batch ahead of the other while a batch
is being applied. The progress keeps each table's Delta version after the last batch
(``delta_version``): every table read as of those versions is one batch's state, with no
transaction in part (README "Transactions").

The held table: the events' :data:`cdclake.model.EVENT_SCHEMA` columns plus ``held_at_ms``
(bigint, ms: when the event was first held).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake import frames
from cdclake.apply import plan as plan_mod
from cdclake.apply.audit import CHANGELOG, ChangelogCut
from cdclake.apply.delta_table import latest_version
from cdclake.model import EVENT_COLUMNS, EVENT_SCHEMA

HELD = "_cdclake/held"
#: how far (event time, ms) the source may move past an open transaction before it is applied
#: as it is (10 minutes)
DEFAULT_TIMEOUT_MS = 600_000


@dataclass
class Hold:
    """What the transaction gate decided for one batch.

    events: the events to apply (EVENT_SCHEMA): the batch's events outside open transactions
        and the held events of transactions the batch completed; kept (:func:`cdclake.frames.keep`; release with
        :meth:`release`).
    held: the events held after the batch (EVENT_SCHEMA + ``held_at_ms``); None when none.
    transactions / held_events: how many open transactions and events are held after the batch.
    held_since_ms: when the oldest held event was first held (None: nothing held).
    timed_out: open transactions given up (their events applied) by the timeout.
    redelivered: transactions open in the batch alone that are re-delivered pieces of
        transactions applied before (applied again at once, not held: :func:`_redelivered`).
    changed: the held table must be written (something was held before or is now).
    records: per error code, ``(records, events)`` of the batch (when the gate counted them).
    plan: the plan of :attr:`events` (:class:`cdclake.apply.plan.BatchPlan`, its ``records``
        set to :attr:`records`).
    """

    events: DataFrame
    held: DataFrame | None
    transactions: int = 0
    held_events: int = 0
    held_since_ms: int | None = None
    timed_out: int = 0
    redelivered: int = 0
    changed: bool = False
    records: dict[str | None, tuple[int, int]] = field(default_factory=dict)
    plan: "plan_mod.BatchPlan | None" = None
    cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self.cached:
            frames.release(df)


def read_held(spark: SparkSession, target: str, version: int) -> DataFrame:
    """The held table of ``target`` at ``version`` (EVENT_SCHEMA + ``held_at_ms``)."""
    return spark.read.format("delta").option("versionAsOf", version).load(f"{target}/{HELD}")


def held_transactions(held: DataFrame) -> list[dict]:
    """What each transaction of the held table ``held`` (:func:`read_held`) still waits for,
    one dict per transaction id (oldest held first): ``tx_id``; ``tables`` (qualified names);
    ``changes`` (data and DDL events held) and ``size`` (the changes its END or SharePlex size
    announced, None when not known); ``begun``/``ended`` (its BEGIN / END marker is held);
    ``held_since_ms`` (when its first event was held) and ``last_event_time_ms``. A transaction
    with markers and no change (``changes`` 0) is an END or BEGIN that matched no change; one
    with changes and no ``ended``, changes that no marker closed yet. One small aggregate."""
    change = F.col("kind").isin("data", "ddl")
    name = F.concat_ws(".", "database", "schema", "table")
    rows = (
        held.groupBy("tx_id")
        .agg(
            F.sort_array(F.collect_set(F.when(change, name))).alias("tables"),
            F.count_if(change).alias("changes"),
            F.max("tx_size").alias("size"),
            F.bool_or(F.col("kind") == "tx_begin").alias("begun"),
            F.bool_or(F.col("kind") == "tx_end").alias("ended"),
            F.min("held_at_ms").alias("held_since_ms"),
            F.max("event_time_ms").alias("last_event_time_ms"),
        )
        .orderBy("held_since_ms", "tx_id")
        .collect()
    )
    return [r.asDict() for r in rows]


def gate(
    spark: SparkSession,
    events: DataFrame,
    target: str,
    held_version: int | None,
    now_ms: int,
    flat: DataFrame | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    primary_keys: dict[str, list[str]] | None = None,
    applied: ChangelogCut | None = None,
) -> Hold:
    """Split a batch's ``events`` (EVENT_SCHEMA) into what to apply now and what to hold, and
    plan what is applied (:attr:`Hold.plan`).

    ``held_version``: the held table's version to read (from the progress), None when
    nothing is held. ``flat``: the batch's flat rows (``error_code``, ``pos``, ``e``: the event
    struct, null for a reject), to count records per error code in the same aggregate
    (:attr:`Hold.records`, also the plan's ``records``); ``events`` are then its events.
    ``timeout_ms``: see the module docstring. ``primary_keys``: as for
    :func:`cdclake.apply.plan.plan_batch`. ``applied``: what earlier batches applied
    (:meth:`cdclake.apply.audit.Progress.changelog_cut`), to release a re-delivered piece of an
    applied transaction at once (:func:`_redelivered`); None: such a piece waits for the timeout.

    One aggregate: the plan's (:func:`cdclake.apply.plan.summarize` with its ``tx`` set) over
    the batch's events and the held ones. When no transaction stays open, its table and source
    rows are the plan of what is applied (the batch's events and the released held ones). When
    one does, the events to apply are kept (a broadcast anti-join with the open ids) and
    planned by a second aggregate, which also materialises them."""
    extra = [F.lit(False).alias("from_held"), F.lit(None).cast("bigint").alias("held_at_ms")]
    batch = events.select(*EVENT_COLUMNS, *extra)
    if flat is not None:
        src = flat.select("error_code", "pos", "e.*", *extra)
    else:
        src = batch.select("*", F.lit(None).cast("string").alias("error_code"), F.lit(0).alias("pos"))
    hold = Hold(events=events, held=None)
    try:
        if held_version is not None:
            # cached: the aggregate reads it, then the events to apply (and the new held rows)
            held_before = frames.keep(read_held(spark, target, held_version).select(
                *EVENT_COLUMNS, F.lit(True).alias("from_held"), "held_at_ms"
            ))
            hold.cached.append(held_before)
            batch = batch.unionByName(held_before)
            src = src.unionByName(held_before.select("*", F.lit(None).cast("string").alias("error_code"), F.lit(-1).alias("pos")))
        return _decide(spark, hold, src, batch, held_version, now_ms, flat is not None, timeout_ms, primary_keys, target, applied)
    except BaseException:
        hold.release()
        raise


def _decide(spark, hold: Hold, src: DataFrame, batch: DataFrame, held_version, now_ms: int, counted: bool, timeout_ms: int,
            primary_keys, target: str, applied) -> Hold:
    """:func:`gate` after its inputs are built: the aggregate, the decision, the plan."""
    rows = [r.asDict(recursive=False) for r in plan_mod.summarize(src, primary_keys, records=True, transactions=True)]
    if applied is not None:
        again = _redelivered(spark, target, batch, applied, [r for r in rows if r["by_tx"] == 0 and r["open"]])
        for r in rows:
            if r["by_tx"] == 0 and r["tx"] in again:
                r["open"] = False  # applied before: applying it again changes nothing
        hold.redelivered = len(again)
    if counted:
        hold.records = {r["error_code"]: (int(r["n_records"]), int(r["n_events"])) for r in rows if r["by_code"] == 0}
    # the newest event time of everything (heartbeats too): the timeout's horizon
    times = [r["last_event_time_ms"] for r in rows if r["by_tx"] == 1 and r["by_table"] == 0 and r["last_event_time_ms"] is not None]
    horizon = max(times) if times else None
    txs = [r for r in rows if r["by_tx"] == 0]
    for r in txs:
        last = r["last_event_time_ms"]
        if r["open"] and horizon is not None and last is not None and horizon - last > timeout_ms:
            r["open"] = False  # given up: the source moved on
            hold.timed_out += 1
        elif r["open"] and (horizon is None or last is None) and str(r["tx"]).startswith(plan_mod.UPDATE_HALVES_TX):
            # an update half without event times can never time out: applied alone at once
            r["open"] = False
            hold.timed_out += 1
    open_ids = [r["tx"] for r in txs if r["open"]]
    hold.transactions = len(open_ids)
    hold.held_events = sum(int(r["n_tx"]) for r in txs if r["open"])
    since = [int(r["held_at_ms"]) for r in txs if r["open"] and r["held_at_ms"] is not None]
    hold.held_since_ms = min(since) if since else (now_ms if open_ids else None)
    hold.changed = held_version is not None or bool(open_ids)
    if not open_ids:
        # everything is applied: the aggregate's table and source rows are its plan
        hold.plan = plan_mod.build_plan([r for r in rows if r["by_tx"] == 1], primary_keys)
        if held_version is not None:
            hold.events = frames.keep(batch.select(*EVENT_COLUMNS))
            hold.cached.append(hold.events)
        hold.plan.records = hold.records
        return hold
    # the open ids by a broadcast join; the result keeps no relation alias (a later
    # ``e.kind`` of the applier must name its own struct column, not this join's side)
    ids = spark.createDataFrame([(i, True) for i in open_ids], "_open_tx string, _open boolean")
    keyed = batch.withColumn("_tx_key", F.expr(plan_mod.tx_key_sql(every_kind=True)))
    marked = keyed.join(F.broadcast(ids), keyed["_tx_key"] == ids["_open_tx"], "left").select(
        *[keyed[c] for c in batch.columns], F.coalesce(ids["_open"], F.lit(False)).alias("open")
    )
    apply = frames.keep(marked.where(~F.col("open") & F.col("kind").isNotNull()).select(*EVENT_COLUMNS))
    hold.events = apply
    hold.cached.append(apply)
    hold.held = marked.where(F.col("open")).select(
        *EVENT_COLUMNS, F.coalesce(F.col("held_at_ms"), F.lit(now_ms)).alias("held_at_ms")
    )
    hold.plan = plan_mod.plan_batch(apply, primary_keys)
    hold.plan.records = hold.records
    return hold


def _redelivered(spark: SparkSession, target: str, batch: DataFrame, applied, open_rows: list[dict]) -> set[str]:
    """The open transactions (gate keys, :func:`cdclake.apply.plan.tx_key_sql`) of ``open_rows``
    (the plan aggregate's rows of open transactions) that are re-delivered pieces of
    transactions earlier batches applied: none of their events is held from before, and each
    of their events in the batch (``batch``: EVENT_SCHEMA + ``from_held``) equals one in the
    changelog as the last batch left it (``applied``: :class:`cdclake.apply.audit.ChangelogCut`)
    by transaction, table, kind, position, ``tx_seq`` and update half. A transaction id that
    recurs (an Oracle XID after the undo segments wrap) with new changes does not match, and a
    batch applied again after a crash reads the changelog without the events its first attempt
    appended, so it decides the same.

    Only transactions whose newest position is not past the greatest position any table applied
    are looked up (a transaction the source is still writing is past it: no Spark job). One job
    (a left anti join of the batch's events of those transactions with the changelog's, by
    transaction id where every candidate has one, so Delta's file statistics skip files)."""
    cut = plan_mod.order_key(applied.last_order)
    cands = [r["tx"] for r in open_rows
             if not r["n_held"] and (r["last_order"] is None or plan_mod.order_key(r["last_order"]) <= cut)]
    if not cands:
        return set()
    key = F.expr(plan_mod.tx_key_sql(every_kind=True))
    cols = ["database", "schema", "table", "kind", "tx_seq"]

    def keyed(df: DataFrame) -> DataFrame:
        return df.select(key.alias("_k"), *cols, F.col("position.order").alias("_order"),
                         F.col("before").isNotNull().alias("_before")).where(F.col("_k").isin(cands))

    plain = [c for c in cands if not c.startswith(plan_mod.UPDATE_HALVES_TX)]
    log = spark.read.format("delta").option("versionAsOf", applied.version).load(f"{target}/{CHANGELOG}")
    if len(plain) == len(cands):
        log = log.where(F.col("tx_id").isin(plain))
    mine, log = keyed(batch.where(~F.col("from_held"))).alias("m"), keyed(log).alias("l")
    same = F.col("m._k") == F.col("l._k")
    for c in [*cols, "_order", "_before"]:
        same = same & F.col(f"m.{c}").eqNullSafe(F.col(f"l.{c}"))
    missing = {r[0] for r in mine.join(log, same, "left_anti").select("_k").distinct().collect()}
    return set(cands) - missing


def write_held(spark: SparkSession, target: str, hold: Hold, txn=None) -> int:
    """Overwrite the held table with :attr:`Hold.held` (empty when nothing is held); returns the
    table's version after the write (its latest: one writer per target). Carries ``txn`` (a
    batch applied again writes nothing twice)."""
    path = f"{target}/{HELD}"
    df = hold.held
    if df is None:
        df = spark.createDataFrame([], EVENT_SCHEMA).withColumn("held_at_ms", F.lit(None).cast("bigint"))
    writer = df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if txn is not None:
        writer = writer.option("txnAppId", txn.app_id).option("txnVersion", txn.version)
    writer.save(path)
    return latest_version(spark, path)
