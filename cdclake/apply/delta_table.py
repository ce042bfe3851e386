"""Apply one batch of canonical events to one Delta table (SCD type 1).

Semantics (DESIGN.md, "Semantics the applier guarantees"):

* per key the change with the greatest order wins, whatever the arrival order; the order is
  ``(stream rank, position.order, arrival)`` where the stream rank is 0 for snapshot reads (op
  ``r``) and 1 for streamed changes, so a snapshot row never overwrites a streamed change;
  equal positions keep arrival order (file, line / partition, offset);
* a change whose order is not greater than the one already applied to the row is ignored, so
  re-delivering applied records changes nothing;
* deletes remove the row; an update that changes the key deletes the old key's row;
* a partial image (``present`` set) changes only the columns it carries, also when several
  partial updates of one key meet in a batch (they are folded column by column);
* a full image sets every column: a column missing from the image is NULL;
* ``t`` (truncate) removes every row older than the truncate and every older event of the batch;
* tables without a key match on all columns (the whole before image).

Target tables hold the source columns (source names and types) plus :data:`META_COLUMNS`, and use
Delta column mapping (``name`` mode, so source names such as ``#alibaba_rds_row_id#`` are legal
and columns can later be renamed or dropped) and type widening.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdclake.apply import types as T
from cdclake.apply.plan import TablePlan
from cdclake.values import cast_sql

#: metadata columns added to every target table
META_COLUMNS = {
    "_cdc_position": "array<decimal(38,0)>",  # position.order of the last change applied to the row
    "_cdc_position_text": "string",  # position.text of that change
    "_cdc_op": "string",  # its op code (r marks a row last written by a snapshot read)
    "_cdc_event_time_ms": "bigint",  # its commit time at the source, ms since epoch
}

TABLE_PROPERTIES = {
    "delta.columnMapping.mode": "name",
    "delta.enableTypeWidening": "true",
}


def q(name: str) -> str:
    """Back-quote an identifier for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


@dataclass
class ApplyResult:
    """What applying one batch did to one table (row counts from Delta's operation metrics)."""

    table: str
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    truncated: int = 0
    rows_now: int = 0
    schema_changes: list[str] = field(default_factory=list)


def ensure_table(spark: SparkSession, path: str, plan: TablePlan) -> tuple[dict[str, str], list[str]]:
    """Create the Delta table at ``path`` or evolve it to hold ``plan.columns``.

    New columns are added; a column whose batch type is wider than its table type is widened
    (in place where Delta's type widening allows, else by rewriting the table). Returns the
    table's source columns (name -> Spark type, table order) and a list of human-readable
    schema changes (empty when nothing changed).
    """
    changes: list[str] = []
    if not DeltaTable.isDeltaTable(spark, path):
        builder = DeltaTable.createIfNotExists(spark).location(path)
        cols = dict(plan.columns)
        for k in plan.key:
            cols.setdefault(k, "string")
        for name, typ in cols.items():
            builder = builder.addColumn(name, typ)
        for name, typ in META_COLUMNS.items():
            builder = builder.addColumn(name, typ)
        for k, v in TABLE_PROPERTIES.items():
            builder = builder.property(k, v)
        builder.execute()
        changes.append("create table (" + ", ".join(f"{n} {t}" for n, t in cols.items()) + ")")
        return cols, changes

    current = _source_columns(spark, path)
    added = {n: t for n, t in plan.columns.items() if n not in current}
    if added:
        cols_sql = ", ".join(f"{q(n)} {t}" for n, t in added.items())
        spark.sql(f"ALTER TABLE delta.{q(path)} ADD COLUMNS ({cols_sql})")
        changes.append("add columns (" + ", ".join(f"{n} {t}" for n, t in added.items()) + ")")
    rewrite: dict[str, str] = {}
    for n, t in plan.columns.items():
        if n in current:
            wide = T.widen(current[n], t)
            if wide != T.normalize(current[n]):
                if T.can_widen_in_place(current[n], wide):
                    spark.sql(f"ALTER TABLE delta.{q(path)} ALTER COLUMN {q(n)} TYPE {wide}")
                else:
                    rewrite[n] = wide
                changes.append(f"widen {n} {current[n]} -> {wide}")
    if rewrite:
        df = spark.read.format("delta").load(path)
        df = df.select([F.col(q(c)).cast(rewrite[c]).alias(c) if c in rewrite else F.col(q(c)) for c in df.columns])
        df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    return _source_columns(spark, path), changes


def _source_columns(spark: SparkSession, path: str) -> dict[str, str]:
    schema = spark.read.format("delta").load(path).schema
    return {f.name: f.dataType.simpleString() for f in schema.fields if f.name not in META_COLUMNS}


def apply_table(
    spark: SparkSession, events: DataFrame, plan: TablePlan, path: str, tombstone_path: str | None = None
) -> ApplyResult:
    """MERGE the batch's data events for ``plan``'s table into the Delta table at ``path``.

    ``events``: EVENT_SCHEMA rows of the whole batch (filtered here to this table's ``data``
    events). ``tombstone_path``: a Delta table remembering, per deleted key, the position of
    its delete (and the position of the last truncate), so that a change older than a delete
    or truncate applied in an *earlier* batch cannot bring the row back; None disables it.
    Returns the Delta operation metrics as an :class:`ApplyResult`.
    """
    result = ApplyResult(plan.name)
    columns, result.schema_changes = ensure_table(spark, path, plan)
    key = plan.key or list(columns)
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}

    ev = _table_events(events, plan).withColumn("_rank", F.when(F.col("op") == "r", 0).otherwise(1))

    target = DeltaTable.forPath(spark, path)
    if plan.counts.get("t"):
        result.truncated = _truncate(spark, ev, target, path, tombstone_path)
        trunc = ev.where(F.col("op") == "t").agg(F.max(F.struct("_rank", F.col("position.order").alias("p"))).alias("m"))
        ev = ev.crossJoin(trunc).where((F.col("op") != "t") & (F.struct("_rank", F.col("position.order").alias("p")) > F.col("m"))).drop("m")
    else:
        ev = ev.where(F.col("op") != "t")

    def typed(img: str, n: str):
        return F.expr(cast_sql(f"element_at({img}, {_lit(n)})", columns[n]))

    # An update that changes the key first deletes the row of the old key (same position).
    key_after = F.struct(*[typed("after", k) for k in key])
    key_before = F.struct(*[typed("before", k) for k in key])
    moved = ev.where((F.col("op") == "u") & F.col("before").isNotNull() & F.col("present").isNull() & ~key_before.eqNullSafe(key_after))
    rows = ev.withColumn("_sub", F.lit(1)).unionByName(moved.withColumn("op", F.lit("d")).withColumn("after", F.lit(None)).withColumn("_sub", F.lit(0)))
    rows = rows.withColumn("_img", F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after")))
    rows = rows.select(
        F.col("op").alias("_op"),
        F.col("present").alias("_present"),
        F.struct(
            "_rank",
            F.col("position.order").alias("pos"),
            "_sub",
            F.col("source_record.file").alias("file"),
            F.col("source_record.line").alias("line"),
            F.col("source_record.partition").alias("part"),
            F.col("source_record.offset").alias("off"),
        ).alias("_ord"),
        F.col("position.text").alias("_pos_text"),
        F.col("event_time_ms").alias("_etime"),
        *[typed("_img", n).alias(alias[n]) for n in names],
        *[(F.col("_img").isNotNull() & (F.col("present").isNull() | F.array_contains("present", n))).alias("_p" + alias[n]) for n in names],
    )
    keys = [alias[k] for k in key]
    if plan.partial:
        src = _fold_partial(rows, keys, names, alias)
    else:
        payload = [c for c in rows.columns if c not in keys]
        src = rows.groupBy(*keys).agg(F.max_by(F.struct(*payload), "_ord").alias("w")).select(*keys, "w.*")
    src = src.withColumn("_key_json", F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in key])))
    if tombstone_path and DeltaTable.isDeltaTable(spark, tombstone_path):
        src = _drop_older_than_tombstones(spark, src, tombstone_path)
    src = src.persist()

    cond = " AND ".join(f"t.{q(k)} <=> s.{alias[k]}" for k in key)
    wins = "(struct(s._ord._rank, s._ord.pos) > struct(CASE WHEN t._cdc_op = 'r' THEN 0 ELSE 1 END, t._cdc_position))"
    meta = {
        "_cdc_position": "s._ord.pos",
        "_cdc_position_text": "s._pos_text",
        "_cdc_op": "s._op",
        "_cdc_event_time_ms": "s._etime",
    }
    if plan.partial:
        update = {
            q(n): f"s.{alias[n]}" if n in key else f"CASE WHEN s._p{alias[n]} THEN s.{alias[n]} ELSE t.{q(n)} END"
            for n in names
        }
    else:
        update = {q(n): f"s.{alias[n]}" for n in names}
    update.update({q(k): v for k, v in meta.items()})
    insert = {q(n): f"s.{alias[n]}" for n in names}
    insert.update({q(k): v for k, v in meta.items()})
    (
        target.alias("t")
        .merge(src.alias("s"), cond)
        .whenMatchedDelete(condition=f"s._op = 'd' AND {wins}")
        .whenMatchedUpdate(condition=f"s._op != 'd' AND {wins}", set=update)
        .whenNotMatchedInsert(condition="s._op != 'd'", values=insert)
        .execute()
    )
    metrics = target.history(1).select("operationMetrics").first()[0] or {}
    result.inserted = int(metrics.get("numTargetRowsInserted", 0))
    result.updated = int(metrics.get("numTargetRowsUpdated", 0))
    result.deleted = int(metrics.get("numTargetRowsDeleted", 0))
    if tombstone_path:
        _remember_deletes(spark, src, tombstone_path)
    src.unpersist()
    result.rows_now = spark.read.format("delta").load(path).count()
    return result


def _table_events(events: DataFrame, plan: TablePlan) -> DataFrame:
    """The batch's data events of ``plan``'s table that have something to apply."""
    return events.where(
        (F.col("kind") == "data")
        # a change without the image it needs has nothing to apply (decoders reject such
        # records; an unpaired before half of a split update ends here)
        & ((F.col("op") == "t") | F.when(F.col("op") == "d", F.col("before").isNotNull()).otherwise(F.col("after").isNotNull()))
        & F.col("database").eqNullSafe(F.lit(plan.database))
        & F.col("schema").eqNullSafe(F.lit(plan.schema))
        & (F.col("table") == F.lit(plan.table))
    )


def remember_truncate(spark: SparkSession, events: DataFrame, plan: TablePlan, tombstone_path: str) -> None:
    """Remember the latest truncate of ``plan``'s table in ``events`` (EVENT_SCHEMA rows) when
    its Delta table does not exist yet (a truncate carries no columns to create it with), so that
    an older change delivered in a later batch cannot bring a truncated row back."""
    last = _table_events(events, plan).where(F.col("op") == "t").agg(F.max(F.col("position")).alias("p")).first()["p"]
    if last is not None:
        row = spark.createDataFrame([(TRUNCATE_KEY, list(last["order"]), last["text"])], _TOMBSTONE_SCHEMA)
        _remember(spark, row, tombstone_path)


TRUNCATE_KEY = "\u0000truncate"  # the tombstone row that holds the last truncate's position
_TOMBSTONE_SCHEMA = "key string, position array<decimal(38,0)>, position_text string"


def _drop_older_than_tombstones(spark: SparkSession, src: DataFrame, tombstone_path: str) -> DataFrame:
    """Drop the batch's winners that are older than a delete (same key) or truncate remembered
    from earlier batches."""
    tomb = spark.read.format("delta").load(tombstone_path)
    trunc = tomb.where(F.col("key") == TRUNCATE_KEY).agg(F.max("position").alias("_trunc_pos"))
    keyed = tomb.where(F.col("key") != TRUNCATE_KEY).select(F.col("key").alias("_key_json"), F.col("position").alias("_tomb_pos"))
    newer = F.struct(F.col("_ord._rank"), F.col("_ord.pos"))
    return (
        src.join(keyed, "_key_json", "left")
        .crossJoin(trunc)
        .where(
            (F.col("_tomb_pos").isNull() | (newer > F.struct(F.lit(1), F.col("_tomb_pos"))))
            & (F.col("_trunc_pos").isNull() | (newer > F.struct(F.lit(1), F.col("_trunc_pos"))))
        )
        .drop("_tomb_pos", "_trunc_pos")
    )


def _remember(spark: SparkSession, rows: DataFrame, tombstone_path: str) -> None:
    """Upsert ``rows`` (key, position, position_text) into the tombstone table, keeping the
    greatest position per key."""
    if not DeltaTable.isDeltaTable(spark, tombstone_path):
        DeltaTable.createIfNotExists(spark).location(tombstone_path).addColumns(
            spark.createDataFrame([], _TOMBSTONE_SCHEMA).schema
        ).execute()
    (
        DeltaTable.forPath(spark, tombstone_path)
        .alias("t")
        .merge(rows.alias("s"), "t.key = s.key")
        .whenMatchedUpdateAll(condition="s.position > t.position")
        .whenNotMatchedInsertAll()
        .execute()
    )


def _remember_deletes(spark: SparkSession, src: DataFrame, tombstone_path: str) -> None:
    deletes = src.where(F.col("_op") == "d").select(
        F.col("_key_json").alias("key"), F.col("_ord.pos").alias("position"), F.col("_pos_text").alias("position_text")
    )
    _remember(spark, deletes, tombstone_path)


def _fold_partial(rows: DataFrame, keys: list[str], names: list[str], alias: dict[str, str]) -> DataFrame:
    """Fold a key's events into one row: from the key's last full image (insert, snapshot,
    delete or full update) on, each column takes the value of the latest event carrying it."""
    w = Window.partitionBy(*keys)
    full = F.col("_op").isin("c", "r", "d") | F.col("_present").isNull()
    seg = rows.withColumn("_last_full", F.max(F.when(full, F.col("_ord"))).over(w)).where(
        F.col("_last_full").isNull() | (F.col("_ord") >= F.col("_last_full"))
    )
    aggs = [
        F.max_by("_op", "_ord").alias("_op"),
        F.max("_ord").alias("_ord"),
        F.max_by("_pos_text", "_ord").alias("_pos_text"),
        F.max_by("_etime", "_ord").alias("_etime"),
    ]
    for n in names:
        a = alias[n]
        if a in keys:
            continue
        aggs.append(F.max_by(a, F.when(F.col("_p" + a), F.col("_ord"))).alias(a))
        aggs.append(F.bool_or("_p" + a).alias("_p" + a))
    return seg.groupBy(*keys).agg(*aggs)


def _truncate(spark: SparkSession, ev: DataFrame, target: DeltaTable, path: str, tombstone_path: str | None) -> int:
    """Delete the rows older than the batch's latest truncate (and remember its position);
    returns how many rows were deleted."""
    last = ev.where(F.col("op") == "t").agg(F.max(F.col("position")).alias("p")).first()["p"]
    order = "array(" + ", ".join(f"cast({v} as decimal(38,0))" for v in last["order"]) + ")"
    target.delete(f"struct(CASE WHEN _cdc_op = 'r' THEN 0 ELSE 1 END, _cdc_position) < struct(1, {order})")
    metrics = target.history(1).select("operationMetrics").first()[0] or {}
    if tombstone_path:
        row = spark.createDataFrame([(TRUNCATE_KEY, list(last["order"]), last["text"])], _TOMBSTONE_SCHEMA)
        _remember(spark, row, tombstone_path)
    return int(metrics.get("numDeletedRows", 0))


def _lit(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
