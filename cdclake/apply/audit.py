"""The ``_cdclake`` tables beside the targets: changelog, rejects, schema history, progress.

All are Delta tables under ``<target>/_cdclake/``:

* ``changelog``: every decoded canonical event (EVENT_SCHEMA) plus ``_ingested_at_ms``
  (bigint, ms). Written insert-only on the event's identity (source record, position, kind, op,
  table), so ingesting the same input twice adds nothing.
* ``rejects``: one row per record that could not be decoded: ``format``, ``error_code``,
  ``error_message``, ``raw_key``/``raw_value`` (binary, the record's bytes), ``source_record``,
  ``_ingested_at_ms``. Insert-only on the source record.
* ``schema_history``: one row per schema change of a target table: ``table``, ``delta_version``
  (the table version after the change), ``schema`` (Spark DDL of the source columns),
  ``change`` (what changed), ``ddl`` (the source DDL text of the batch, if any), ``position``
  (position.text of that DDL), ``recorded_at_ms``.
* ``tombstones/<table>``: per target table, the position of the delete of every deleted key
  (``key`` is the key's values as JSON) and of the last truncate, so that an older change
  arriving in a later batch cannot bring a row back. Grows with deletes; nothing prunes it yet.
* ``progress``: per source (``file`` path, or ``topic:partition``) and per table (``table``
  null for the source as a whole): ``last_position`` / ``last_position_text`` (greatest
  applied), ``last_event_time_ms``, ``last_heartbeat_ms``, ``lag_ms`` (``updated_at_ms`` minus
  ``last_event_time_ms``), ``updated_at_ms``.
"""

from __future__ import annotations

import time

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.model import EVENT_COLUMNS

CHANGELOG = "_cdclake/changelog"
REJECTS = "_cdclake/rejects"
SCHEMA_HISTORY = "_cdclake/schema_history"
PROGRESS = "_cdclake/progress"
#: per target table: positions of deleted keys and of the last truncate (see apply/delta_table.py)
TOMBSTONES = "_cdclake/tombstones"


def now_ms() -> int:
    return int(time.time() * 1000)


def _insert_new(spark: SparkSession, df: DataFrame, path: str, cond: str) -> int:
    """Insert the rows of ``df`` that are not yet in the Delta table at ``path`` (created from
    ``df``'s schema when missing); returns the number inserted."""
    if not DeltaTable.isDeltaTable(spark, path):
        df.write.format("delta").mode("overwrite").save(path)
        return spark.read.format("delta").load(path).count()
    target = DeltaTable.forPath(spark, path)
    target.alias("t").merge(df.alias("s"), cond).whenNotMatchedInsertAll().execute()
    metrics = target.history(1).select("operationMetrics").first()[0] or {}
    return int(metrics.get("numTargetRowsInserted", 0))


def write_changelog(spark: SparkSession, events: DataFrame, target: str) -> int:
    """Append the batch's events (EVENT_SCHEMA) to the changelog, skipping ones already there."""
    df = events.select(*EVENT_COLUMNS).withColumn("_ingested_at_ms", F.lit(now_ms()))
    cond = (
        "t.source_record <=> s.source_record AND t.position <=> s.position AND t.kind = s.kind "
        "AND t.op <=> s.op AND t.table <=> s.table"
    )
    return _insert_new(spark, df, f"{target}/{CHANGELOG}", cond)


def write_rejects(spark: SparkSession, rejects: DataFrame, fmt: str, target: str) -> int:
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
    return _insert_new(spark, df, f"{target}/{REJECTS}", "t.source_record <=> s.source_record")


def record_schema_change(
    spark: SparkSession, target: str, table: str, table_path: str, changes: list[str], ddl: list[tuple]
) -> None:
    """Append one schema_history row per change of ``table`` (after the change was made)."""
    if not changes and not ddl:
        return
    version, schema = None, None
    if DeltaTable.isDeltaTable(spark, table_path):
        dt = DeltaTable.forPath(spark, table_path)
        version = dt.history(1).select("version").first()[0]
        schema = ", ".join(
            f"{f.name} {f.dataType.simpleString()}" for f in dt.toDF().schema.fields if not f.name.startswith("_cdc_")
        )
    ddl_text = "; ".join(d[2] for d in ddl if d[2]) or None
    ddl_pos = ddl[-1][1] if ddl else None
    rows = [(table, version, schema, c, ddl_text, ddl_pos, now_ms()) for c in (changes or ["ddl recorded"])]
    df = spark.createDataFrame(
        rows, "table string, delta_version bigint, schema string, change string, ddl string, position string, recorded_at_ms bigint"
    )
    df.write.format("delta").mode("append").save(f"{target}/{SCHEMA_HISTORY}")


def update_progress(spark: SparkSession, events: DataFrame, target: str) -> None:
    """Move the progress table forward from the batch's events (data, DDL and heartbeats)."""
    src = F.coalesce(
        F.col("source_record.file"),
        F.concat_ws(":", F.col("source_record.topic"), F.col("source_record.partition").cast("string")),
    )
    qualified = F.concat_ws(".", "database", "schema", "table")
    ev = events.select(
        src.alias("source"),
        F.when(F.col("table").isNotNull(), qualified).alias("table"),
        "position",
        "event_time_ms",
        (F.col("kind") == "heartbeat").alias("hb"),
    )
    per_table = ev.where(F.col("table").isNotNull()).groupBy("source", "table").agg(
        F.max("position").alias("p"), F.max("event_time_ms").alias("last_event_time_ms"), F.lit(None).cast("bigint").alias("last_heartbeat_ms")
    )
    per_source = ev.groupBy("source").agg(
        F.max("position").alias("p"),
        F.max("event_time_ms").alias("last_event_time_ms"),
        F.max(F.when(F.col("hb"), F.col("event_time_ms"))).alias("last_heartbeat_ms"),
    ).withColumn("table", F.lit(None).cast("string"))
    now = now_ms()
    df = (
        per_table.unionByName(per_source)
        .select(
            "source",
            "table",
            F.col("p.order").alias("last_position"),
            F.col("p.text").alias("last_position_text"),
            "last_event_time_ms",
            "last_heartbeat_ms",
            F.lit(now).alias("updated_at_ms"),
            (F.lit(now) - F.col("last_event_time_ms")).alias("lag_ms"),
        )
    )
    path = f"{target}/{PROGRESS}"
    if not DeltaTable.isDeltaTable(spark, path):
        df.write.format("delta").mode("overwrite").save(path)
        return
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(df.alias("s"), "t.source = s.source AND t.table <=> s.table")
        .whenMatchedUpdate(
            set={
                "last_position": "CASE WHEN s.last_position > t.last_position OR t.last_position IS NULL THEN s.last_position ELSE t.last_position END",
                "last_position_text": "CASE WHEN s.last_position > t.last_position OR t.last_position IS NULL THEN s.last_position_text ELSE t.last_position_text END",
                "last_event_time_ms": "greatest(s.last_event_time_ms, t.last_event_time_ms)",
                "last_heartbeat_ms": "greatest(s.last_heartbeat_ms, t.last_heartbeat_ms)",
                "updated_at_ms": "s.updated_at_ms",
                "lag_ms": "s.updated_at_ms - greatest(s.last_event_time_ms, t.last_event_time_ms)",
            }
        )
        .whenNotMatchedInsertAll()
        .execute()
    )
