"""One batch of canonical events applied to a target folder: plan once, write everything
concurrently, one Delta commit per touched table and per audit table.

The steps, and what each costs in Spark jobs and Delta commits:

1. :func:`cdclake.apply.plan.plan_batch`: one aggregate over the batch (one query) gives every
   table's columns, key, op counts and positions and every source's progress;
2. :func:`cdclake.apply.audit.read_progress`: one small read of the progress table (the
   latest truncate and delete of each table, its row count), none when this process wrote it
   last and nothing committed to it since;
3. concurrently: the changelog append (one commit) and, per table, what prepares it without
   writing the batch's rows (:func:`cdclake.apply.delta_table.prepare_table`: schema
   evolution, a newer truncate; no commit in a batch without them);
4. concurrently, per table, the MERGE (or the write that creates the table): one commit per
   table; the tables are independent, so they are applied side by side in threads
   (``CDCLAKE_APPLY_THREADS``, default 4);
5. concurrently: the deletes append, the schema-history append (only when a schema changed)
   and the progress overwrite (a few rows merged on the driver): one commit each.

Exactly once: with a batch identity (:class:`cdclake.apply.audit.Txn`), the changelog append
and every commit of steps 4 and 5 carry it (Delta's ``txnAppId``/``txnVersion``: writer options for the appends, the
session settings ``spark.databricks.delta.write.txnAppId``/``txnVersion`` for the MERGEs and
the progress overwrite), so a batch applied again after a crash skips each table that already
committed it and applies the rest. The preparation of step 3 is idempotent by itself.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import DataFrame, SparkSession

from cdclake import targets
from cdclake.apply import audit
from cdclake.apply.delta_table import ApplyResult, TableApply, TableState, prepare_table, write_table
from cdclake.apply.plan import BatchPlan, plan_batch


def table_path(target: str, name: str) -> str:
    """Where the Delta table of source table ``name`` (qualified, dots kept) lives."""
    return targets.join(target, name)


def threads() -> int:
    """How many writes of a batch run at once (``CDCLAKE_APPLY_THREADS``, default 4)."""
    return max(1, int(os.environ.get("CDCLAKE_APPLY_THREADS", "4")))


def run_all(tasks: list, workers: int | None = None) -> list:
    """Run the callables ``tasks`` in a thread pool; returns their results in order. Every task
    runs to its end even when another fails; then the first failure is raised."""
    if not tasks:
        return []
    if len(tasks) == 1:
        return [tasks[0]()]
    with ThreadPoolExecutor(max_workers=min(workers or threads(), len(tasks)), thread_name_prefix="cdclake-apply") as pool:
        futures = [pool.submit(t) for t in tasks]
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
    return [f.result() for f in futures]


def apply_batch(
    spark: SparkSession,
    events: DataFrame,
    target: str,
    primary_keys: dict[str, list[str]] | None = None,
    txn: audit.Txn | None = None,
    side_tasks: list | None = None,
    plan: BatchPlan | None = None,
) -> list[ApplyResult]:
    """Apply canonical events (EVENT_SCHEMA rows, any format) to the tables under ``target``.

    ``events`` should be persisted by the caller (every table reads it). ``txn`` makes the
    audit appends idempotent (see :class:`cdclake.apply.audit.Txn`). ``side_tasks``: more
    callables to run with the first wave of writes (the pipeline's rejects append). ``plan``:
    the batch's plan when the caller made it (:func:`plan_batch`), else it is made here.
    Returns one :class:`ApplyResult` per table with data, by table name.

    Raises:
        CdclakeError(TARGET_LAYOUT): the target was written in another ``_cdclake`` layout.
    """
    audit.check_layout(target, spark)
    if plan is None:
        plan = plan_batch(events, primary_keys)
    progress = audit.read_progress(spark, target)
    states = progress.table_states()
    deletes_path = f"{target}/{audit.DELETES}"

    # the appends carry the batch identity in their writer options, so they run beside both
    # the tables' preparation (which must not carry it) and their MERGEs (which carry it as a
    # session setting); they must have committed before the progress is written
    appends = [lambda: audit.write_changelog(events, target, txn), *(side_tasks or [])]
    applied: list[TableApply] = []
    pool = ThreadPoolExecutor(max_workers=len(appends), thread_name_prefix="cdclake-append")
    pending = [pool.submit(t) for t in appends]
    try:
        try:
            prepared = run_all(
                [lambda p=p: prepare_table(spark, p, table_path(target, p.name), states.get(p.name, TableState())) for p in plan.tables]
            )
            with audit.txn_session(spark, txn):
                applied = run_all([lambda prep=prep: write_table(spark, events, prep, deletes_path) for prep in prepared])
        finally:
            pool.shutdown(wait=True)
        for f in pending:
            if f.exception() is not None:
                raise f.exception()
        results = {a.result.table: a.result for a in applied}
        history = []
        for p in plan.tables:
            history.extend(audit.schema_history_rows(p.ddl, results.get(p.name), p.name))
        deletes = [a.deletes for a in applied if a.deletes is not None]
        with audit.txn_session(spark, txn):
            run_all(
                [
                    lambda: audit.write_deletes(deletes, target, txn),
                    lambda: audit.record_schema_changes(spark, target, history),
                    lambda: audit.update_progress(spark, target, plan, progress, results),
                ]
            )
    finally:
        for a in applied:
            for df in a.cached:
                df.unpersist()
    return [a.result for a in applied if a.touched]
