"""Transactions held back: a source transaction reaches the target tables whole or not at all.

Where a format carries transaction boundaries (:attr:`cdclake.formats.base.Capabilities.transaction_bounds`:
Debezium's BEGIN/END records with ``event_count``, Qlik's ``transactionEventCounter`` /
``transactionLastEvent``, SharePlex's ``seq`` of ``size``; the simulator's canonical events), a
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
record of it was rejected, a table of it is not ingested), or the batch holds a re-delivered
part of a transaction applied before (applying it again changes nothing). Event time, not the
clock, so a batch applied again decides the same.

Events without ``tx_id`` are never held, so a format or a run without boundaries (Debezium
without its transaction topic) is applied as it arrives. Formats whose markers do not carry
the transaction's id (DataWorks TRANSACTION_BEGIN/END) or whose markers' ids are not documented
to match their changes' (DTS ``sourceTxid`` on BEGIN/COMMIT) are not held (``transaction_bounds``
false; README "Transactions"). No format here marks rolled-back work: MySQL writes only
committed transactions to the binlog, and a DTS ROLLBACK record ends a transaction whose
changes to non-transactional tables stayed (see the DTS decoder).

Costs: one aggregate over the batch's events (and the held ones) per gated batch, which also
counts the batch's records (so the plan's aggregate then runs over the events to apply only);
the held table is read only when the progress table says it holds events, at the version it
names; it is written (one overwrite) in a batch that held something before or holds something now.

Exactly once: the held table is written after every target table and before the progress
table, both carrying the batch's identity; the progress row of the target (``source`` and
``table`` null) names the held table's version to read (``held_version``), so a batch applied
again after a crash reads what it read the first time and decides the same.

Across tables: each table commits on its own (Delta has no multi-table commit), so a reader of
the latest versions of two tables may see one of them a batch ahead of the other while a batch
is being applied. The progress table keeps each table's Delta version after the last batch
(``delta_version``): every table read as of those versions is one batch's state, with no
transaction in part (README "Transactions").

The held table: the events' :data:`cdclake.model.EVENT_SCHEMA` columns plus ``held_at_ms``
(bigint, ms: when the event was first held).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.model import EVENT_COLUMNS

HELD = "_cdclake/held"
#: how far (event time, ms) the source may move past an open transaction before it is applied
#: as it is (10 minutes)
DEFAULT_TIMEOUT_MS = 600_000


@dataclass
class Hold:
    """What the transaction gate decided for one batch.

    events: the events to apply (EVENT_SCHEMA): the batch's events outside open transactions
        and the held events of transactions the batch completed; persisted (release with
        :meth:`release`).
    held: the events held after the batch (EVENT_SCHEMA + ``held_at_ms``); None when none.
    transactions / held_events: how many open transactions and events are held after the batch.
    held_since_ms: when the oldest held event was first held (None: nothing held).
    timed_out: open transactions given up (their events applied) by the timeout.
    changed: the held table must be written (something was held before or is now).
    records: per error code, ``(records, events)`` of the batch (when the gate counted them).
    """

    events: DataFrame
    held: DataFrame | None
    transactions: int = 0
    held_events: int = 0
    held_since_ms: int | None = None
    timed_out: int = 0
    changed: bool = False
    records: dict[str | None, tuple[int, int]] = field(default_factory=dict)
    cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def open_condition():
    """The SQL condition (a Column over the aggregate of one transaction's events: ``n_seq``,
    ``size``, ``last_seq``, ``begun``, ``ended``, ``said_last``, ``said_not_last``) that the
    transaction is still open (see the module docstring)."""
    expected = F.coalesce(F.col("size"), F.col("last_seq"))
    unsized = F.coalesce(F.col("begun") & ~F.col("ended"), F.lit(False)) | F.coalesce(
        F.col("said_not_last") & ~F.col("said_last"), F.lit(False)
    )
    return F.when(expected.isNotNull(), F.col("n_seq") < expected).otherwise(unsized)


def summarize(src: DataFrame) -> list:
    """The gate's one aggregate (one ``GROUPING SETS`` query, one shuffle) over ``src``: the
    batch's events and the held ones (EVENT_SCHEMA plus ``from_held`` boolean, ``held_at_ms``,
    ``error_code`` and ``pos`` as the flat rows of a batch have them: ``pos`` null for a record
    without events, -1 for a held event). Rows, told apart by ``g_tx`` / ``g_code`` (0: the
    row is of that grouping):

    * per transaction whose state matters (open, or with held events): ``tx_id``, ``open``,
      ``n`` (events), ``n_held`` (of them from the held table), ``held_at_ms`` (least),
      ``last_time`` (its newest event time, ms);
    * per error code (null: decoded): ``n_records``, ``n_events`` (of the batch, held events
      not counted);
    * one row over everything: ``last_time``, the newest event time (the timeout's horizon).
    """
    change = F.col("kind").isin("data", "ddl")
    seq = F.coalesce(F.col("tx_seq").cast("string"), F.col("position.text"))
    in_tx = F.col("tx_id").isNotNull() & F.col("kind").isin("data", "ddl", "tx_begin", "tx_end")
    df = src.select("*", F.when(in_tx, F.col("tx_id")).alias("tx"))
    sets = [[F.col("tx")], [F.col("error_code")], []]
    by = [F.col("tx"), F.col("error_code")]
    batch_row = ~F.col("from_held")
    aggs = [
        F.size(F.collect_set(F.when(change, seq))).alias("n_seq"),
        F.max("tx_size").alias("size"),
        F.max(F.when(F.col("tx_last"), F.col("tx_seq"))).alias("last_seq"),
        F.max(F.col("kind") == "tx_begin").alias("begun"),
        F.max(F.col("kind") == "tx_end").alias("ended"),
        F.max(F.col("tx_last")).alias("said_last"),
        F.max(~F.col("tx_last")).alias("said_not_last"),
        F.count_if(F.col("kind").isNotNull()).alias("n"),
        F.count_if(F.col("from_held")).alias("n_held"),
        F.min("held_at_ms").alias("held_at_ms"),
        F.max("event_time_ms").alias("last_time"),
        F.count_if(batch_row & (F.col("pos").isNull() | (F.col("pos") == 0))).alias("n_records"),
        F.count_if(batch_row & F.col("kind").isNotNull()).alias("n_events"),
        F.grouping("tx").alias("g_tx"),
        F.grouping("error_code").alias("g_code"),
    ]
    out = df.groupingSets(sets, *by).agg(*aggs).select(
        "*", F.when((F.col("g_tx") == 0) & F.col("tx").isNotNull(), open_condition()).alias("open")
    )
    keep = (
        ((F.col("g_tx") == 0) & F.col("tx").isNotNull() & (F.col("open") | (F.col("n_held") > 0)))
        | (F.col("g_code") == 0)
        | ((F.col("g_tx") == 1) & (F.col("g_code") == 1))
    )
    return out.where(keep).select(
        F.col("tx").alias("tx_id"), "open", "n", "n_held", "held_at_ms", "last_time", "error_code", "n_records",
        "n_events", "g_tx", "g_code",
    ).collect()


def read_held(spark: SparkSession, target: str, version: int) -> DataFrame:
    """The held table of ``target`` at ``version`` (EVENT_SCHEMA + ``held_at_ms``)."""
    return spark.read.format("delta").option("versionAsOf", version).load(f"{target}/{HELD}")


def gate(
    spark: SparkSession,
    events: DataFrame,
    target: str,
    held_version: int | None,
    now_ms: int,
    flat: DataFrame | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> Hold:
    """Split a batch's ``events`` (EVENT_SCHEMA) into what to apply now and what to hold.

    ``held_version``: the held table's version to read (from the progress table), None when
    nothing is held. ``flat``: the batch's flat rows (``error_code``, ``pos``, ``e``: the event
    struct, null for a reject), to count records per error code in the same aggregate
    (:attr:`Hold.records`); ``events`` are then its events. ``timeout_ms``: see the module
    docstring. One aggregate (:func:`summarize`); the events to apply are persisted and
    materialised by the plan that reads them next."""
    extra = [F.lit(False).alias("from_held"), F.lit(None).cast("bigint").alias("held_at_ms")]
    batch = events.select(*EVENT_COLUMNS, *extra)
    if flat is not None:
        src = flat.select("error_code", "pos", "e.*", *extra)
    else:
        src = batch.select("*", F.lit(None).cast("string").alias("error_code"), F.lit(0).alias("pos"))
    if held_version is not None:
        held_before = read_held(spark, target, held_version).select(*EVENT_COLUMNS, F.lit(True).alias("from_held"), "held_at_ms")
        batch = batch.unionByName(held_before)
        src = src.unionByName(held_before.select("*", F.lit(None).cast("string").alias("error_code"), F.lit(-1).alias("pos")))
    rows = summarize(src)
    hold = Hold(events=events, held=None)
    for r in rows:
        if r["g_code"] == 0 and flat is not None:
            hold.records[r["error_code"]] = (int(r["n_records"]), int(r["n_events"]))
    horizon = next((r["last_time"] for r in rows if r["g_tx"] == 1 and r["g_code"] == 1), None)
    txs = [r.asDict() for r in rows if r["g_tx"] == 0]
    for r in txs:
        if r["open"] and horizon is not None and r["last_time"] is not None and horizon - r["last_time"] > timeout_ms:
            r["open"] = False  # given up: the source moved on
            hold.timed_out += 1
    open_ids = [r["tx_id"] for r in txs if r["open"]]
    hold.transactions = len(open_ids)
    hold.held_events = sum(int(r["n"]) for r in txs if r["open"])
    since = [int(r["held_at_ms"]) for r in txs if r["open"] and r["held_at_ms"] is not None]
    hold.held_since_ms = min(since) if since else (now_ms if open_ids else None)
    hold.changed = held_version is not None or bool(open_ids)
    if not hold.changed:
        return hold
    # the open ids by a broadcast join; the result keeps no relation alias (a later
    # ``e.kind`` of the applier must name its own struct column, not this join's side)
    ids = spark.createDataFrame([(i, True) for i in open_ids], "_open_tx string, _open boolean")
    marked = batch.join(F.broadcast(ids), batch["tx_id"] == ids["_open_tx"], "left").select(
        *[batch[c] for c in batch.columns], F.coalesce(ids["_open"], F.lit(False)).alias("open")
    )
    apply = marked.where(~F.col("open") & F.col("kind").isNotNull()).select(*EVENT_COLUMNS).persist(StorageLevel.MEMORY_AND_DISK)
    hold.events = apply
    hold.cached.append(apply)
    if open_ids:
        hold.held = marked.where(F.col("open")).select(
            *EVENT_COLUMNS, F.coalesce(F.col("held_at_ms"), F.lit(now_ms)).alias("held_at_ms")
        )
    return hold


def write_held(spark: SparkSession, target: str, hold: Hold, txn=None) -> int:
    """Overwrite the held table with :attr:`Hold.held` (empty when nothing is held); returns the
    table's version after the write (its latest: one writer per target). Carries ``txn`` (a
    batch applied again writes nothing twice)."""
    from cdclake.apply.delta_table import latest_version
    from cdclake.model import EVENT_SCHEMA

    path = f"{target}/{HELD}"
    df = hold.held
    if df is None:
        df = spark.createDataFrame([], EVENT_SCHEMA).withColumn("held_at_ms", F.lit(None).cast("bigint"))
    writer = df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if txn is not None:
        writer = writer.option("txnAppId", txn.app_id).option("txnVersion", txn.version)
    writer.save(path)
    return latest_version(spark, path)
