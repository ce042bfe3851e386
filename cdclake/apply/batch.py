"""One batch of canonical events applied to a target folder: plan once, write everything
concurrently, one Delta commit per touched table, at most two for the rest.

The steps, and what each costs in Spark jobs and Delta commits:

1. :func:`cdclake.apply.plan.plan_batch`: one aggregate over the batch (one query) gives every
   table's columns, key, op counts and positions and every source's progress;
2. :func:`cdclake.apply.audit.read_progress`: the progress the changelog's newest commit
   carries (read by the driver from its commit file, no Spark job; none when this process
   wrote it last and nothing committed to the changelog since);
3. concurrently, per table, what prepares it without writing the batch's rows
   (:func:`cdclake.apply.delta_table.prepare_table`: schema evolution, a newer truncate; no
   commit in a batch without them), beside the rejects append when there are rejects;
4. concurrently, per table, the MERGE (or the write that creates the table): one commit per
   table; the tables are independent, so they are applied side by side in threads
   (``CDCLAKE_APPLY_THREADS``, default 4); beside them, once every table knows what it
   remembers (before its MERGE), the deletes append (only when the batch deletes a key or moves
   one: :class:`cdclake.apply.audit.DeletesAppend`): one commit;
5. the schema-history append (only when a schema changed): one commit;
6. last, the changelog append, which carries the progress in its commit (a few rows merged on
   the driver, :func:`cdclake.apply.audit.update_progress`): one commit.

Exactly once: with a batch identity (:class:`cdclake.apply.audit.Txn`), every commit of steps 3
to 6 carries it (Delta's ``txnAppId``/``txnVersion``: writer options for the appends, the
session settings ``spark.databricks.delta.write.txnAppId``/``txnVersion`` for the MERGEs),
so a batch applied again after a crash skips each table that already committed it and applies
the rest; a batch is complete when its changelog commit is in. The preparation of step 3 is
idempotent by itself.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake import frames
from cdclake.apply import audit, transactions
from cdclake.apply.delta_table import ApplyResult, TableApply, TableState, latest_version, prepare_table
from cdclake.apply.plan import BatchPlan, follow_past_column_ddl, plan_batch
from cdclake.apply.renames import apply_renames, keys_through_renames, relabel_late, step_done, written_after_rename
from cdclake.apply.strategy import write_table
from cdclake.apply.tasks import TableFailed, guarded, is_history_table, run_all, table_path
from cdclake.errors import RejectCode
from cdclake.routing import Routing


def versioned(spark: SparkSession, applied: TableApply, path: str) -> TableApply:
    """``applied`` with its result's ``delta_version``: the table's latest version (its
    commit of this batch, or the one a replay found; one writer per target), read from the
    Delta log's newest commit (no Spark job: :func:`latest_version`)."""
    if applied.touched:
        applied.result.delta_version = latest_version(spark, path)
    return applied


def _write(spark: SparkSession, events: DataFrame, prep, deletes_path: str, deletes: audit.DeletesAppend, on_table=None):
    """One table's write (:func:`write_table`, guarded: a :class:`TableFailed` for a table that
    cannot be applied) with its version, telling ``deletes`` what it remembers as soon as its
    strategy knows (every strategy that remembers anything says so before its MERGE), and
    nothing when the write ends without having said it; then ``on_table(name, failed)``."""
    name = prep.plan.name
    result = None
    try:
        result = guarded(name, lambda: versioned(spark, write_table(spark, events, prep, deletes_path,
                                                                     lambda rows: deletes.add(name, rows)), prep.path))
        return result
    finally:
        try:
            deletes.add(name, None)
        finally:  # the progress display hears of the table even when the deletes append failed
            if on_table is not None:
                on_table(name, not isinstance(result, TableApply))


def write_table_failures(events: DataFrame, failures: list[tuple], fmt: str, target: str, txn: audit.Txn | None) -> None:
    """Append the batch's events of failed tables (``failures``: ``(TablePlan, TableFailed)``)
    to the rejects table: the failure's code, message ``table <name> could not be applied:
    <reason>``, the canonical event as JSON in ``raw_value``, its ``source_record``. One commit,
    under its own batch identity (``<appId>.table_failed``) so a replay appends nothing twice."""
    message = code = None
    for p, f in failures:
        cond = (
            F.col("database").eqNullSafe(F.lit(p.database))
            & F.col("schema").eqNullSafe(F.lit(p.schema))
            & F.col("table").eqNullSafe(F.lit(p.table))
        )
        text = F.lit(f"table {p.name} could not be applied: {f.reason}")
        message = F.when(cond, text) if message is None else message.when(cond, text)
        code = F.when(cond, F.lit(f.code)) if code is None else code.when(cond, F.lit(f.code))
    rows = events.select(
        F.col("source_record"),
        F.lit(None).cast("binary").alias("raw_key"),
        F.to_json(F.struct("*")).cast("binary").alias("raw_value"),
        code.alias("error_code"),
        message.alias("error_message"),
    ).where(F.col("error_message").isNotNull())
    own = audit.Txn(f"{txn.app_id}.table_failed", txn.version) if txn is not None else None
    audit.write_rejects(rows, fmt, target, own)


def apply_batch(
    spark: SparkSession,
    events: DataFrame,
    target: str,
    primary_keys: dict[str, list[str]] | None = None,
    txn: audit.Txn | None = None,
    side_tasks: list | None = None,
    plan: BatchPlan | None = None,
    fmt: str = "canonical",
    max_columns: int | None = None,
    scd_type: int | None = None,
    hold: transactions.Hold | None = None,
    gate: bool = False,
    tx_timeout_ms: int = transactions.DEFAULT_TIMEOUT_MS,
    changelog: bool = True,
    progress: audit.Progress | None = None,
    routing: Routing | None = None,
    on_table=None,
) -> list[ApplyResult]:
    """Apply canonical events (EVENT_SCHEMA rows, any format) to the tables under ``target``.

    ``events`` should be persisted by the caller (every table reads it). ``txn`` makes the
    audit appends idempotent (see :class:`cdclake.apply.audit.Txn`). ``side_tasks``: more
    callables to run with the first wave of writes (the pipeline's rejects append). ``plan``:
    the batch's plan when the caller made it (:func:`plan_batch`), else it is made here.
    ``fmt``: the format named in the rejects of failed tables. ``max_columns``: a table with more
    columns in the batch is not applied; its events are rejected as ``TOO_MANY_COLUMNS``.
    ``scd_type``: 2 creates new tables as history tables (SCD type 2, :mod:`cdclake.apply.history`),
    1 as tables of current rows; None: each table as it is (new ones: 1).
    ``hold``: the transaction gate's decision (:func:`cdclake.apply.transactions.gate`) when
    the caller made it (``plan`` is then the plan of ``hold.events``; ``events`` are the
    batch's own, for the changelog); ``gate``: without ``hold``, run the gate here (the events
    carry transaction boundaries). The gate also runs when the target holds events (unless
    ``plan`` is given); ``tx_timeout_ms`` is its timeout. ``changelog``: append the events to
    ``_cdclake/changelog`` (False for events cdclake makes itself: a table rename's).
    ``progress``: the target's progress as the caller read it for this batch, after
    :func:`cdclake.apply.audit.check_layout` (:func:`cdclake.pipeline.ingest_batch`); None: the
    layout is checked and the progress read here. ``routing``: how new tables are laid out
    (:meth:`cdclake.routing.Routing.layout`: ``--partition-by``, ``--table-property``); the
    events of tables it leaves out are the caller's to drop. ``on_table``: called as
    ``on_table(name, failed)`` as a table's write ends, from the thread that wrote it, or as
    the table is refused or fails its preparation (``failed`` true: :class:`TableFailed`), so
    that a progress display counts every table of the batch once.
    The batch's table renames (:attr:`BatchPlan.renames`) are applied after its tables
    (:func:`cdclake.apply.renames.apply_renames`); their results follow the tables'. Events of
    a renamed table's old name after the rename (a table created again under it) are applied
    after the renames, apart (:func:`cdclake.apply.renames.written_after_rename`).
    Returns one :class:`ApplyResult` per table with data, by table name (two for a table
    written again after its rename in the batch: before and after the rename).

    One table that cannot be applied (its folder refused by the file system, a change Delta
    refuses) does not stop the others: its events of the batch go to the rejects table as
    ``TABLE_FAILED`` (:func:`write_table_failures`), its progress does not move, and its
    :class:`ApplyResult` says why (``failed``).

    Raises:
        CdclakeError(TARGET_LAYOUT): the target was written in another ``_cdclake`` layout.
        CdclakeError(CONCURRENT_WRITE): another writer committed to a table first.
        CdclakeError(SCD_TYPE_MISMATCH): ``scd_type`` is not an existing table's.
    """
    routing = routing or Routing()
    if progress is None:
        audit.check_layout(target, spark)
        progress = audit.read_progress(spark, target)
    # a key configured for a table goes on with its renames (to names with none of their own)
    primary_keys = keys_through_renames(primary_keys, progress.table_states())
    batch_events = events  # the changelog's: the batch's own events, held ones included
    if hold is None and plan is None and (gate or progress.held_version() is not None):
        hold = transactions.gate(
            spark, events, target, progress.held_version(), audit.now_ms(), timeout_ms=tx_timeout_ms, primary_keys=primary_keys,
            applied=progress.changelog_cut(),
        )
        plan = hold.plan
    try:
        return _apply(spark, batch_events, hold.events if hold is not None else events, target, primary_keys, txn,
                      side_tasks, plan, fmt, max_columns, scd_type, hold, progress, changelog, routing=routing, on_table=on_table)
    finally:
        if hold is not None:
            hold.release()


def _apply(spark, batch_events, events, target, primary_keys, txn, side_tasks, plan, fmt, max_columns, scd_type, hold, progress,
           changelog=True, relabel=None, split=frozenset(), routing=Routing(), on_table=None):
    """:func:`apply_batch` after the transaction gate: ``events`` are the ones to apply.
    ``relabel``: move events of tables renamed before this batch that are older than the
    rename to the new name (:func:`cdclake.apply.renames.relabel_late`); default
    ``changelog`` (events cdclake makes itself are never late). ``split``: the rename steps
    (old name, point) the batch was already split at (never split at one twice)."""
    if plan is None:
        plan = plan_batch(events, primary_keys)
    if plan.renames:  # the batch's renames give their new names the old one's configured key
        keys = keys_through_renames(primary_keys, {}, plan.renames)
        if keys is not primary_keys:
            added = {n for n in keys if n not in (primary_keys or {})}
            primary_keys = keys
            if any(p.name in added and p.key_source != "configuration" for p in plan.tables):  # (rename batches only)
                plan = plan_batch(events, primary_keys)
    states = progress.table_states()
    relabelled = None
    if (changelog if relabel is None else relabel) and any(st.renamed for st in states.values()):
        moved = relabel_late(events, plan, states, lambda name: is_history_table(spark, table_path(target, name)), primary_keys,
                             target)
        if moved is not None:  # events of a renamed table older than its rename: the new name's
            # kept (cdclake.frames; materialized by the plan's aggregate): every table's write reads it
            events = frames.keep(moved)
            relabelled = events
            plan = plan_batch(events, primary_keys)
    try:
        cut = written_after_rename(plan, split)
        if cut is None:
            return _apply_plan(spark, batch_events, events, target, primary_keys, txn, side_tasks, plan, fmt, max_columns,
                               scd_type, hold, progress, states, changelog, routing, on_table)
        # a table renamed in this batch and written again under its old name after the rename
        # (created again, or the new name of a swap): the batch without those later events
        # first (its renames move the old table's rows as they were at the rename), then them,
        # under their own identity
        step, cond, key = cut
        head = frames.keep(events.where(f"NOT ({cond})"))
        tail = frames.keep(events.where(cond))
        try:
            out = _apply(spark, batch_events, head, target, primary_keys, txn, side_tasks, None, fmt, max_columns, scd_type,
                         hold, progress, changelog, relabel=False, split=split | {key}, routing=routing, on_table=on_table)
            after = None if txn is None else audit.Txn(f"{txn.app_id}.after-rename.{step}", txn.version)
            progress = audit.read_progress(spark, target)
            r = plan.renames[step - 1]
            if step_done(r, progress.table_states()):
                out += _apply(spark, batch_events, tail, target, primary_keys, after, None, None, fmt, max_columns, scd_type,
                              None, progress, changelog=False, relabel=False, split=split | {key}, routing=routing,
                              on_table=on_table)
            else:
                # the rename was not applied (its new table failed): the old table keeps its
                # rows for the next delivery, and its later events must not land on them
                tail_plan = plan_batch(tail, primary_keys)
                failed = TableFailed(r.old_name, f"its rename to {r.new_name} at the source (position {r.text}) could not be"
                                                 " applied, and these events of the table are after it")
                write_table_failures(tail, [(p, failed) for p in tail_plan.tables], fmt, target, after)
                out += [ApplyResult(p.name, failed=f"{failed.code}: {failed.reason}",
                                    failed_events=planned_events(p)) for p in tail_plan.tables]
        finally:
            frames.release(head)
            frames.release(tail)
        return out
    finally:
        if relabelled is not None:
            frames.release(relabelled)


def reapply(spark: SparkSession, events: DataFrame, target: str, primary_keys: dict[str, list[str]] | None, txn: audit.Txn | None,
            plan: BatchPlan, fmt: str, progress: audit.Progress) -> list[ApplyResult]:
    """Apply ``events`` (EVENT_SCHEMA, kept by the caller) that cdclake read again from
    ``_cdclake/changelog`` as a re-delivery (a rename's re-feed,
    :mod:`cdclake.apply.renames`): no changelog append, events of a table renamed before the
    batch and older than its rename moved to the new name. ``plan``: theirs
    (:func:`plan_batch`); ``progress``: as read before. Returns one :class:`ApplyResult` per table."""
    return _apply(spark, events, events, target, primary_keys, txn, None, plan, fmt, None, None, None, progress,
                  changelog=False, relabel=True)


def planned_events(p) -> int:
    """The batch's events of the table ``p`` (a :class:`TablePlan`): data, DDL and snapshot ends."""
    return sum(p.counts.values()) + len(p.ddl) + p.snapshot_ends


def _held_state(spark: SparkSession, target: str, hold: transactions.Hold, progress: audit.Progress,
                txn: audit.Txn | None) -> dict | None:
    """The progress's held fields (:data:`cdclake.apply.audit.HELD_FIELDS`) after the gate's
    decision ``hold``, None when it changed nothing. When what is held changed, the held table
    is written first (after every table, before the progress that names its version: exactly
    once, see :mod:`cdclake.apply.transactions`)."""
    if not (hold.changed or hold.timed_out):
        return None
    before = progress.held()
    given_up = before["timed_out_transactions"] + hold.timed_out
    if hold.changed:
        version = transactions.write_held(spark, target, hold, txn)
        return {"held_transactions": hold.transactions, "held_events": hold.held_events,
                "held_version": version, "held_since_ms": hold.held_since_ms, "timed_out_transactions": given_up}
    # given up without anything held before or after (a re-delivered piece of an applied
    # transaction): the held table stays as it is, the count moves
    return {**before, "timed_out_transactions": given_up}


def _apply_plan(spark, batch_events, events, target, primary_keys, txn, side_tasks, plan, fmt, max_columns, scd_type, hold,
                progress, states, changelog, routing=Routing(), on_table=None):
    """:func:`_apply` of a batch none of whose renamed tables is written after its rename:
    its tables, then its table renames."""
    follow_past_column_ddl(plan, {n: st.column_ddl for n, st in states.items() if st.column_ddl})
    plan_all = plan
    failures: dict[str, TableFailed] = {}
    deletes_path = f"{target}/{audit.DELETES}"

    # the side appends (the rejects) carry the batch identity in their writer options, so they
    # run beside both the tables' preparation (which must not carry it) and their MERGEs (which
    # carry it as a session setting); they must have committed before the progress is written
    appends = list(side_tasks or [])
    applied: list[TableApply] = []
    deletes = None
    pool = ThreadPoolExecutor(max_workers=max(1, len(appends)), thread_name_prefix="cdclake-append")
    pending = [pool.submit(t) for t in appends]
    try:
        try:
            refused = [
                TableFailed(p.name, f"{len(p.columns)} columns, more than the limit of {max_columns} (--max-columns)",
                            RejectCode.TOO_MANY_COLUMNS.value)
                for p in plan.tables if max_columns is not None and len(p.columns) > max_columns
            ]
            prepared = run_all(
                [
                    lambda p=p: guarded(p.name, lambda: prepare_table(spark, p, table_path(target, p.name), states.get(p.name, TableState()),
                                                                      scd_type, routing.layout(p.name)))
                    for p in plan.tables if p.name not in {f.table for f in refused}
                ]
            )
            failed = refused + [x for x in prepared if isinstance(x, TableFailed)]
            ready = [prep for prep in prepared if not isinstance(prep, TableFailed)]
            if on_table is not None:
                for f in failed:
                    on_table(f.table, True)
            # the deletes append begins once every table knows what it remembers (before its
            # MERGE) and runs beside the MERGEs
            deletes = audit.DeletesAppend(target, txn, {prep.plan.name for prep in ready})
            with audit.txn_session(spark, txn):
                written = run_all([lambda prep=prep: _write(spark, events, prep, deletes_path, deletes, on_table) for prep in ready])
            applied = [a for a in written if not isinstance(a, TableFailed)]
            failed += [a for a in written if isinstance(a, TableFailed)]
            deletes.wait()
        finally:
            pool.shutdown(wait=True)
            if deletes is not None:
                deletes.close()
        for f in pending:
            if f.exception() is not None:
                raise f.exception()
        failures = {f.table: f for f in failed}
        if failures:
            write_table_failures(events, [(p, failures[p.name]) for p in plan.tables if p.name in failures], fmt, target, txn)
            plan = dataclasses.replace(
                plan,
                tables=[p for p in plan.tables if p.name not in failures],
                progress=[sp for sp in plan.progress if sp.table not in failures],
            )
        results = {a.result.table: a.result for a in applied}
        history = []
        for p in plan.tables:
            history.extend(audit.schema_history_rows(p.ddl, results.get(p.name), p.name))
        held = _held_state(spark, target, hold, progress, txn) if hold is not None else None
        audit.record_schema_changes(spark, target, history)
        # last: the changelog append carrying the progress completes the batch
        audit.update_progress(spark, target, plan, progress, results, held, batch_events if changelog else None, txn)
    finally:
        for a in applied:
            for df in a.cached:
                frames.release(df)
    counts = {p.name: planned_events(p) for p in plan_all.tables}
    out = [a.result for a in applied if a.touched] + [
        ApplyResult(name, failed=f"{f.code}: {f.reason}", failed_events=counts.get(name, 0)) for name, f in sorted(failures.items())
    ]
    if plan_all.renames:
        out += apply_renames(spark, target, plan_all, txn, primary_keys, fmt, earlier=progress.rows, apply_events=apply_batch,
                             reapply=reapply, routing=routing)
    return out
