"""The ``_cdclake`` tables beside the targets: changelog, rejects, schema history, deletes,
progress. One Delta commit per table per batch at most, each an append except progress (a MERGE
of a few driver-built rows); none of them is read in full by a batch.

All are Delta tables under ``<target>/_cdclake/``:

* ``changelog``: every decoded canonical event (EVENT_SCHEMA) plus ``_ingested_at_ms``
  (bigint, ms). Appended once per batch; with a batch identity (:class:`Txn`: Delta's
  ``txnAppId``/``txnVersion``) the append is idempotent, so a batch ingested again (the same
  files, or a Kafka micro-batch replayed after a crash) adds nothing.
* ``rejects``: one row per record that could not be decoded: ``format``, ``error_code``,
  ``error_message``, ``raw_key``/``raw_value`` (binary, the record's bytes), ``source_record``,
  ``_ingested_at_ms``. Appended like the changelog.
* ``schema_history``: one row per schema change of a target table: ``table``, ``delta_version``
  (the table version after the change), ``schema`` (Spark DDL of the source columns),
  ``change`` (what changed), ``ddl`` (the source DDL text of the batch, if any), ``position``
  (position.text of that DDL), ``recorded_at_ms``.
* ``deletes``: the position of the winning delete of each deleted key (``table``, ``key`` = the
  key's values as JSON, ``position``, ``position_text``), appended per batch. Read only for a
  table whose batch holds a change older than the table's latest delete (an out-of-order
  delivery); grows with deletes, nothing prunes it yet.
* ``progress``: per source (``source`` = file path or ``topic:partition``) and table;
  ``table`` null: the source as a whole (with ``last_heartbeat_ms``); ``source`` null: the
  table as a whole, with the state later batches need (``delete_position``,
  ``truncate_position``/``truncate_position_text``, ``rows``). Columns: ``last_position`` /
  ``last_position_text`` (greatest applied), ``last_event_time_ms``, ``last_heartbeat_ms``,
  ``lag_ms`` (``updated_at_ms`` minus ``last_event_time_ms``), ``updated_at_ms``.

``_cdclake/layout.json`` names the layout of these tables (:data:`LAYOUT`); a target written in
another layout is refused (:func:`check_layout`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.apply.delta_table import ApplyResult, TableState
from cdclake.apply.plan import BatchPlan, order_key
from cdclake.errors import CdclakeError
from cdclake.model import EVENT_COLUMNS

CHANGELOG = "_cdclake/changelog"
REJECTS = "_cdclake/rejects"
SCHEMA_HISTORY = "_cdclake/schema_history"
PROGRESS = "_cdclake/progress"
#: positions of deleted keys, all target tables (see apply/delta_table.py)
DELETES = "_cdclake/deletes"
LAYOUT_FILE = "_cdclake/layout.json"
#: version of the ``_cdclake`` layout this code writes (1: per-table tombstones, merged changelog)
LAYOUT = 2

PROGRESS_SCHEMA = (
    "source string, table string, last_position array<decimal(38,0)>, last_position_text string, "
    "last_event_time_ms bigint, last_heartbeat_ms bigint, updated_at_ms bigint, lag_ms bigint, "
    "delete_position array<decimal(38,0)>, truncate_position array<decimal(38,0)>, "
    "truncate_position_text string, rows bigint"
)
SCHEMA_HISTORY_SCHEMA = (
    "table string, delta_version bigint, schema string, change string, ddl string, position string, recorded_at_ms bigint"
)


@dataclass(frozen=True)
class Txn:
    """A batch's identity for Delta's idempotent writes: ``app_id`` names the writer (a file
    set, a streaming query), ``version`` grows by one per batch of that writer."""

    app_id: str
    version: int


def now_ms() -> int:
    return int(time.time() * 1000)


def check_layout(target: str) -> None:
    """Refuse a target whose ``_cdclake`` tables were written in another layout; mark a new
    target with this one.

    Raises:
        CdclakeError(TARGET_LAYOUT): the target holds ``_cdclake`` tables of another layout.
    """
    root = Path(target)
    marker = root / LAYOUT_FILE
    if marker.exists():
        try:
            found = json.loads(marker.read_text(encoding="utf-8")).get("layout")
        except (ValueError, AttributeError):
            found = None
        if found != LAYOUT:
            raise CdclakeError(
                "TARGET_LAYOUT",
                f"target {target} was written by a cdclake with _cdclake layout {found!r}; this one writes layout {LAYOUT}: use another target",
            )
        return
    if (root / "_cdclake").exists() and any((root / "_cdclake").iterdir()):
        raise CdclakeError(
            "TARGET_LAYOUT",
            f"target {target} holds _cdclake tables of an older cdclake (layout 1); this one writes layout {LAYOUT}: use another target",
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"layout": LAYOUT}) + "\n", encoding="utf-8")


def append(df: DataFrame, path: str, txn: Txn | None = None) -> None:
    """Append ``df`` to the Delta table at ``path`` (created from ``df``'s schema when missing),
    idempotently when ``txn`` is given (Delta skips a (app id, version) it has committed)."""
    writer = df.write.format("delta").mode("append")
    if txn is not None:
        writer = writer.option("txnAppId", txn.app_id).option("txnVersion", txn.version)
    writer.save(path)


def write_changelog(events: DataFrame, target: str, txn: Txn | None = None) -> None:
    """Append the batch's events (EVENT_SCHEMA) to the changelog."""
    append(events.select(*EVENT_COLUMNS).withColumn("_ingested_at_ms", F.lit(now_ms())), f"{target}/{CHANGELOG}", txn)


def write_rejects(rejects: DataFrame, fmt: str, target: str, txn: Txn | None = None) -> None:
    """Append rejected records (DECODED_SCHEMA rows with ``error_code``) to the rejects table."""
    df = rejects.select(
        F.lit(fmt).alias("format"),
        "error_code",
        "error_message",
        "raw_key",
        "raw_value",
        "source_record",
        F.lit(now_ms()).alias("_ingested_at_ms"),
    )
    append(df, f"{target}/{REJECTS}", txn)


def write_deletes(frames: list[DataFrame], target: str, txn: Txn | None = None) -> None:
    """Append the batch's winning deletes of every table (see :class:`TableApply`) at once."""
    if not frames:
        return
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    append(df, f"{target}/{DELETES}", txn)


def record_schema_changes(spark: SparkSession, target: str, rows: list[tuple]) -> None:
    """Append schema_history rows ``(table, delta_version, schema, change, ddl, position)``
    (after the changes were made); nothing when ``rows`` is empty."""
    if not rows:
        return
    now = now_ms()
    df = spark.createDataFrame([(*r, now) for r in rows], SCHEMA_HISTORY_SCHEMA)
    append(df, f"{target}/{SCHEMA_HISTORY}")


def schema_history_rows(plan_ddl: list[tuple], result: ApplyResult | None, table: str) -> list[tuple]:
    """The schema_history rows of one table for one batch: one per schema change (or one
    ``ddl recorded`` row when the batch holds DDL that changed nothing the applier follows)."""
    changes = result.schema_changes if result is not None else []
    if not changes and not plan_ddl:
        return []
    ddl_text = "; ".join(d[2] for d in plan_ddl if d[2]) or None
    ddl_pos = plan_ddl[-1][1] if plan_ddl else None
    version = result.schema_version if result is not None else None
    schema = result.schema if result is not None else None
    return [(table, version, schema, c, ddl_text, ddl_pos) for c in (changes or ["ddl recorded"])]


def read_table_states(spark: SparkSession, target: str) -> dict[str, TableState]:
    """The table rows of the progress table (``source`` null): what earlier batches left for
    each table. One small read (the progress table holds a few rows per source and table)."""
    path = f"{target}/{PROGRESS}"
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    rows = (
        spark.read.format("delta")
        .load(path)
        .where(F.col("source").isNull() & F.col("table").isNotNull())
        .select("table", "delete_position", "truncate_position", "truncate_position_text", "rows")
        .collect()
    )
    return {
        r["table"]: TableState(
            _list(r["delete_position"]), _list(r["truncate_position"]), r["truncate_position_text"], r["rows"]
        )
        for r in rows
    }


def _list(v):
    return None if v is None else list(v)


def _newest(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a if order_key(a) >= order_key(b) else b


def update_progress(
    spark: SparkSession,
    target: str,
    plan: BatchPlan,
    states: dict[str, TableState],
    results: dict[str, ApplyResult],
) -> None:
    """Move the progress table forward: one MERGE of rows built on the driver from the batch's
    plan (per source and table, per source, per table) and the tables' new states."""
    now = now_ms()
    rows = []
    for sp in plan.progress:
        lag = now - sp.last_event_time_ms if sp.last_event_time_ms is not None else None
        rows.append(
            (sp.source, sp.table, sp.last_position, sp.last_position_text, sp.last_event_time_ms, sp.last_heartbeat_ms,
             now, lag, None, None, None, None)
        )
    by_table: dict[str, list] = {}
    for sp in plan.progress:
        if sp.table is not None:
            by_table.setdefault(sp.table, []).append(sp)
    for p in plan.tables:
        old = states.get(p.name, TableState())
        sps = by_table.get(p.name, [])
        best = max(sps, key=lambda s: (order_key(s.last_position), s.last_position_text or ""), default=None)
        times = [s.last_event_time_ms for s in sps if s.last_event_time_ms is not None]
        t_time = max(times) if times else None
        truncate, truncate_text = old.truncate_position, old.truncate_position_text
        if p.truncate is not None and (truncate is None or order_key(p.truncate[0]) > order_key(truncate)):
            truncate, truncate_text = p.truncate
        res = results.get(p.name)
        rows.append(
            (None, p.name, best.last_position if best else None, best.last_position_text if best else None, t_time, None,
             now, now - t_time if t_time is not None else None,
             _newest(old.delete_position, p.max_delete), truncate, truncate_text,
             res.rows_now if res is not None else old.rows)
        )
    if not rows:
        return
    df = spark.createDataFrame(rows, PROGRESS_SCHEMA)
    path = f"{target}/{PROGRESS}"
    if not DeltaTable.isDeltaTable(spark, path):
        append(df, path)
        return
    newer = "(t.{c} IS NULL OR s.{c} > t.{c})"
    pos_newer = newer.format(c="last_position")
    trunc_newer = newer.format(c="truncate_position")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(df.alias("s"), "t.source <=> s.source AND t.table <=> s.table")
        .whenMatchedUpdate(
            set={
                "last_position": f"CASE WHEN {pos_newer} THEN s.last_position ELSE t.last_position END",
                "last_position_text": f"CASE WHEN {pos_newer} THEN s.last_position_text ELSE t.last_position_text END",
                "last_event_time_ms": "greatest(s.last_event_time_ms, t.last_event_time_ms)",
                "last_heartbeat_ms": "greatest(s.last_heartbeat_ms, t.last_heartbeat_ms)",
                "updated_at_ms": "s.updated_at_ms",
                "lag_ms": "s.updated_at_ms - greatest(s.last_event_time_ms, t.last_event_time_ms)",
                "delete_position": "greatest(s.delete_position, t.delete_position)",
                "truncate_position": f"CASE WHEN s.truncate_position IS NOT NULL AND {trunc_newer} THEN s.truncate_position ELSE t.truncate_position END",
                "truncate_position_text": f"CASE WHEN s.truncate_position IS NOT NULL AND {trunc_newer} THEN s.truncate_position_text ELSE t.truncate_position_text END",
                "rows": "coalesce(s.rows, t.rows)",
            }
        )
        .whenNotMatchedInsertAll()
        .execute()
    )
