"""Apply one batch to a Delta table that keeps its rows' history (SCD type 2), in one commit.

A history table holds one row per *version* of a source row: the source columns as they were
from one change to the next, the :data:`~cdclake.apply.delta_table.META_COLUMNS` of the change
that began the version (``_cdc_position``, ``_cdc_op``, ``_cdc_event_time_ms``, ...) and
:data:`HISTORY_COLUMNS`:

* ``_cdc_valid_from`` timestamp: the event time of the change that began the version;
* ``_cdc_valid_to`` timestamp: the event time of the change that ended it (null while current,
  or when the source gives no event time);
* ``_cdc_is_current`` boolean: no later change of the row is known (a deleted row has none);
* ``_cdc_present`` array<string>: the columns the beginning change carried (null: all; set
  for partial images, SharePlex and Qlik updates);
* ``_cdc_end`` struct: the change that ended the version (``position``,
  ``position_text``, ``op``: ``u``/``c``/``r`` for a next version, ``d`` for a delete, ``t``
  for a truncate or a dropped table, ``event_time_ms``, ``record``, ``sub``), null while
  current.

The history is ordered by the same order as SCD type 1 (:func:`delta_table.order_sql`:
snapshot rank, position, sub, then the record's coordinates), not by event time; the event
times are there for readers' "as of" queries. Like Databricks' ``APPLY CHANGES ... STORED AS
SCD TYPE 2``, a delete closes the row's current version and adds none, and a change that
arrives late is put into the history at its place: the version before it ends at it, and it
ends where the next change begins.

How a batch is applied: the batch's changes (:func:`delta_table.change_rows`) are *points*
of each key's history; with them go the points the table already holds for the touched keys
(each version is the point that began it; a version ended by a delete or truncate gives that
point too, from ``_cdc_end``), the deletes and truncates remembered in ``_cdclake/deletes``
(read only when the batch holds a change older than one of them), and each truncate of the
batch for every touched key. The points are deduplicated by their order (a change delivered
again from the same record is the same point; of a table without a key, from any record:
:func:`_copy_ends`), ordered, and each non-delete point becomes a version that ends at the next
point. The recomputed versions are MERGEd into the table by their identity (key and beginning
change): new versions are inserted, versions whose end or values changed are updated, nothing
is deleted but the versions a table rename moved in that a later change of the old table
supersedes (:func:`_versions`' ``regions``, :func:`cdclake.apply.renames.relabel_late`). Only versions that may change are read: the current ones and those that end
after the batch's oldest change; a batch with a truncate reads them all (truncates are rare).
Partial images take the columns they do not carry from the version before them, recomputed
when a change arrives late between them.

A table without a key is a multiset, as in SCD type 1 (:mod:`cdclake.apply.keyless`): its
identical rows are copies, each with versions of its own, and a delete ends the version of the
copy that began first (:func:`_copy_ends`). A snapshot read ranked below the stream caps its
image (one current version or none): a batch reads the touched images' stored reads whose
versions it cannot change as :data:`CAP` points, so the cap holds in later batches too. A
read a table rename moved in (op ``r`` at the rename's point followed by -1) caps as it did
in the old table; a copy's version that begins and ends in the rename's region is no version
of the new table (:func:`_versions`' ``regions``); an image whose capping read ended in the
old table before the rename stays capped by the cap the rename carried (:func:`_carried_caps`).

A partial update that moves its row to a new key (Qlik) begins the new key's version with the
old key's values, as of just before the move, for the columns it does not carry
(:func:`delta_table.fill_moves`). The move is remembered in ``_cdclake/deletes`` (op ``m``,
with the columns it carried); a later batch that holds a change of the old key older than the
move makes the move again from the new key's stored version (:func:`_with_moves_again`), so
the old key's history, now with the late change, fills it anew and the new key's versions
from the move on are recomputed; so are the moves of a chain (A to B, then B to C), filled in
:data:`~cdclake.apply.moves.MOVE_HOPS` passes, each reading the old keys as the pass before
filled them.

Limits: a column renamed by DDL keeps its old name in older versions' ``_cdc_present``; a
chain longer than :data:`~cdclake.apply.moves.MOVE_HOPS` moves fills its first moves only.
"""

from __future__ import annotations

from functools import reduce
from typing import Callable

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from cdclake import frames
from cdclake.apply.delta_table import (
    HISTORY_COLUMNS,
    KEY_JSON,
    META_COLUMNS,
    MOVED,
    ORDER_TYPE,
    Prepared,
    TableApply,
    may_be_older,
    moves_to_remember,
    needs_delete_check,
    needs_move_check,
    ord_struct_sql,
    position_literal_sql,
    record_of_sql,
    table_events,
    change_rows,
    fill_moves,
    key_as_written_now,
    key_range_sql,
    key_schema_sql,
    merge_condition_sql,
    q,
    read_deletes,
    remembered_struct_sql,
    table_properties,
)
from cdclake.apply.keyless import after_truncate_sql, in_region_sql, moved_read_sql, rank_of, with_read_copies
from cdclake.apply.moves import MOVE_HOPS
from cdclake.apply.plan import TablePlan, order_key

#: the op of a point that only says its image is capped (:func:`_copy_ends`): a table's stored
#: snapshot read ranked below the stream whose version the batch cannot change; it begins no
#: version and ends none, but its segment's points each end the version before them
CAP = "k"


def _point(keys: dict[str, str], names: list[str], alias: dict[str, str], op, ord_sql: str, pos_text, etime, src: int,
           values: bool = False, present=None) -> list:
    """The select list of a point: key columns from ``keys`` (alias -> SQL), the other columns
    (the table's own values when ``values``, else null) and their carried flags."""
    cols = []
    for n in names:
        a = alias[n]
        if a in keys:
            cols.append(F.expr(keys[a]).alias(a))
        elif values:
            cols.append(F.col(q(n)).alias(a))
        else:
            cols.append(F.lit(None).alias(a))
    for n in names:
        a = alias[n]
        if values:
            cols.append((F.col("_cdc_present").isNull() | F.array_contains("_cdc_present", n)).alias("_p" + a))
        else:
            cols.append(F.lit(False).alias("_p" + a))
    return [
        *cols,
        F.lit(op).alias("_op") if isinstance(op, str) else op.alias("_op"),
        (present if present is not None else F.lit(None).cast("array<string>")).alias("_present"),
        F.expr(ord_sql).alias("_ord"),
        pos_text.alias("_pos_text"),
        etime.alias("_etime"),
        F.lit(src).alias("_src"),
    ]


def _typed(df: DataFrame, columns: dict[str, str], alias: dict[str, str]) -> DataFrame:
    """Cast a point frame's columns to the table's types (null literals, read values)."""
    return df.select(
        *[F.col(alias[n]).cast(t).alias(alias[n]) for n, t in columns.items()],
        *[F.col("_p" + alias[n]) for n in columns],
        "_op", "_present", F.col("_ord").cast(ORDER_TYPE).alias("_ord"), "_pos_text", F.col("_etime").cast("bigint").alias("_etime"), "_src",
        *(["_from"] if "_from" in df.columns else []),  # (change rows of a partial update that moves its row)
    )


def _batch_truncates(spark: SparkSession, events: DataFrame, plan: TablePlan) -> DataFrame | None:
    """The batch's truncates of the table (``t`` events, and the DDL that drops or truncates
    it and the end of a full snapshot: ``plan.ends``): ``_ord`` (:data:`ORDER_TYPE`), ``_pos_text``, ``_etime``; None when
    there are none."""
    frames = []
    if plan.counts.get("t"):
        frames.append(table_events(events, plan).where(F.col("op") == "t").select(
            F.expr(ord_struct_sql("1", "position.order", "1", "source_record")).alias("_ord"),
            F.col("position.text").alias("_pos_text"),
            F.col("event_time_ms").alias("_etime"),
        ))
    # DDL and snapshot ends: a null record (before every change of their position); the plan
    # keeps no event time for DDL
    for order, text, etime in plan.ends:
        frames.append(spark.range(1).select(
            F.expr(f"CAST(named_struct('_rank', 1, 'pos', {position_literal_sql(order)}, '_sub', 1, 'file', NULL, 'line', NULL,"
                   f" 'part', NULL, 'off', NULL) AS {ORDER_TYPE})").alias("_ord"),
            F.lit(text).alias("_pos_text"),
            F.lit(etime).cast("bigint").alias("_etime"),
        ))
    return reduce(DataFrame.unionByName, frames) if frames else None


def truncates(plan: TablePlan) -> bool:
    """The batch truncates the table (a ``t`` event, DDL that drops or truncates it, the end of
    a full snapshot)."""
    return bool(plan.counts.get("t") or plan.ends)


def _key_match(left: DataFrame, right: DataFrame, pairs: list[tuple[str, str]]):
    return reduce(lambda a, b: a & b, [left[x].eqNullSafe(right[y]) for x, y in pairs])


def _delete_points(rem_deletes: DataFrame, plan: TablePlan, columns: dict[str, str], alias: dict[str, str]) -> DataFrame:
    """Remembered deletes (``_cdclake/deletes`` rows) as :func:`history_source` points (op
    ``d``); a key column or, without a key, any column renamed after the delete is read under
    its old name (:func:`remembered_struct_sql`)."""
    names = list(columns)
    key = plan.key or names
    read = remembered_struct_sql("key", {k: columns[k] for k in key}, plan.column_history)
    rd = rem_deletes.withColumn("_k", F.expr(read)).select(
        *_point({alias[k]: f"_k.{q(k)}" for k in key}, names, alias, "d",
                ord_struct_sql("1", "position", "coalesce(sub, 1)", "record"), F.col("position_text"), F.col("event_time_ms"), 0)
    )
    return _typed(rd, columns, alias)


def _filled(batch: DataFrame, stored: DataFrame | None, plan: TablePlan, columns: dict[str, str], truncs: DataFrame | None,
            hops: int) -> DataFrame:
    """:func:`history_source`'s batch points whose partial updates move their row (``_from``)
    with the old key's values, from the batch and the stored versions (``stored``): a chain of
    moves (A to B, then B to C) fills by passes, each reading the old keys' changes as the pass
    before filled them (a chain of n moves takes n passes, up to :data:`MOVE_HOPS`; ``hops``:
    the remembered moves followed). A history keeps no per-column positions (``_o_c<i>``)."""
    passes = max(1, min(MOVE_HOPS, plan.moves + hops))
    filled = batch
    for _ in range(passes):
        filled = fill_moves(batch, stored, plan, columns, truncs, history=True, read_from=filled)
        filled = filled.drop(*[c for c in filled.columns if c.startswith("_o_c")])
    return filled.drop("_from")


def _stored_points(spark: SparkSession, prep: Prepared, alias: dict[str, str], touched: DataFrame, reach: list[str],
                   moved: list, rewrite_all: bool, caps: bool) -> DataFrame:
    """:func:`history_source`'s points read from the stored history table: per stored version
    its own point (values, op, order) and the delete or truncate that ended it, one scan.
    ``touched``: the keys (``_c<i>``) the batch touches; only their versions that may change are
    read, unless ``rewrite_all`` (a batch with truncates, or a keyless table whose columns are
    dropped or renamed: every version). ``caps``: a keyless table whose snapshot reads rank
    below the stream (their reads are read as CAP points too). ``reach``, ``moved``: as
    :func:`history_source`."""
    plan, columns, path = prep.plan, prep.columns, prep.path
    names = list(columns)
    key = plan.key or names
    tbl = spark.read.format("delta").load(path)
    if not rewrite_all:  # only the keys the batch touches, and only their versions that may change
        rng = key_range_sql(plan, columns, reach=reach)
        if rng is not None:  # (a range Delta skips files by; the semi-join cannot)
            tbl = tbl.where(rng)
        tbl = tbl.join(touched, _key_match(tbl, touched, [(q(k), alias[k]) for k in key]), "left_semi")
        if plan.min_data is not None:
            rank, order = plan.min_data
            may_change = (F.col("_cdc_is_current")
                          | F.expr(f"struct({rank_of('_cdc_end.op', '_cdc_end.position', plan.snapshot_by_position, moved)},"
                                   f" _cdc_end.position) >= struct({rank}, {position_literal_sql(order)})"))
            if caps:  # the touched images' snapshot reads that begin their caps, as CAP points
                cap = F.col("_cdc_op") == "r"
                if prep.state.truncate_position is not None:  # (a cap ends at the table's truncate)
                    cap = cap & F.expr(after_truncate_sql("_cdc_op", "_cdc_position", plan.snapshot_by_position, moved,
                                                          prep.state.truncate_position))
                tbl = tbl.where(may_change | cap).withColumn("_cap", ~may_change)
            else:
                tbl = tbl.where(may_change)
    row_ord = ord_struct_sql(rank_of("_cdc_op", "_cdc_position", plan.snapshot_by_position, moved), "_cdc_position", "1", "_cdc_record")
    op = F.when(F.col("_cap"), F.lit(CAP)).otherwise(F.col("_cdc_op")) if "_cap" in tbl.columns else F.col("_cdc_op")
    versions = _point({}, names, alias, op, row_ord, F.col("_cdc_position_text"),
                      F.col("_cdc_event_time_ms"), 0, values=True, present=F.col("_cdc_present"))
    end_ord = ord_struct_sql("1", "_cdc_end.position", "_cdc_end.sub", "_cdc_end.record")
    ended = _point({alias[k]: q(k) for k in key}, names, alias, F.col("_cdc_end.op"), end_ord,
                   F.col("_cdc_end.position_text"), F.col("_cdc_end.event_time_ms"), 0)
    # one scan of the table gives both points of a version: its own, and the delete or
    # truncate that ended it (a second scan of the table cost a file-listing job)
    both = F.array(F.struct(*versions), F.when(F.col("_cdc_end.op").isin("d", "t"), F.struct(*ended)))
    stored = _typed(tbl.select(F.explode(both).alias("_pt")).where(F.col("_pt").isNotNull()).select("_pt.*"), columns, alias)
    return stored


def history_source(spark: SparkSession, events: DataFrame, prep: Prepared, deletes_path: str) -> tuple[DataFrame, DataFrame | None, list[str]]:
    """The MERGE source of a history table's batch and the deletes to remember.

    Returns ``(versions, deletes, reach)``: ``versions`` has the table's source columns as
    ``_c<i>`` (``prep.columns`` order) and every :data:`META_COLUMNS` and
    :data:`HISTORY_COLUMNS` column under its own name, one row per version that may have changed
    (keys touched by the batch); ``deletes`` the batch's deletes and truncates as rows of
    ``_cdclake/deletes`` (``table``, ``key`` JSON or null for a truncate, ``position``,
    ``position_text``, ``record``, ``sub``, ``event_time_ms``; with ``op``, ``to`` and
    ``present`` the partial updates that moved a row to a new key, op :data:`MOVED`), None when
    there are none; ``reach`` the keys (JSON) of rows that remembered moves took to a new key
    whose old key the batch changes (:func:`_moves_of_touched`): they may lie outside the
    batch's key range, which the MERGE widens by them."""
    plan, columns = prep.plan, prep.columns
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    key = plan.key or names
    keys = [alias[k] for k in key]
    # (a table without a key: every update with a before image takes a copy and makes one,
    # also one whose images are equal, as in cdclake.apply.keyless)
    # (a table without a key: a snapshot read a rename moved in ranks as streamed, after the
    # table's truncate at the rename's point, and caps its image: keyless.rank_of, _copy_ends)
    moved = [] if plan.key else [*prep.state.moved_in, *plan.moved_into]
    batch = _typed(change_rows(events, plan, columns, None, every_update_moves=not plan.key,
                               rank=rank_of("op", "position.order", plan.snapshot_by_position, moved)).withColumn("_src", F.lit(1)),
                   columns, alias)
    truncs = _batch_truncates(spark, events, plan)
    moves = moves_to_remember(batch, plan, columns) if "_from" in batch.columns else None
    followed, hops = _moves_of_touched(spark, batch, prep, deletes_path) if prep.exists else ([], 0)
    reach = sorted({m["to"] for m in followed})

    # a table without a key whose snapshot reads rank below the stream: such a read caps its
    # image (one copy or none) until the next truncate or read, so a batch reads it, as a CAP
    # point, also when its version can no longer change (_copy_ends)
    caps = not plan.key and not plan.snapshot_by_position
    # a table without a key whose column the batch drops or renames: every image again
    # (cdclake.apply.keyless: events written after the DDL were matched with their batch's columns)
    recount = not plan.key and plan.drops_or_renames_columns
    touched = batch.select(*keys).distinct()
    if reach:  # the new keys of the remembered moves: their versions from the move on are recomputed
        touched = touched.unionByName(_keys_of(spark, reach, plan, columns)).distinct()
    stored = _stored_points(spark, prep, alias, touched, reach, moved, rewrite_all=truncs is not None or recount,
                            caps=caps) if prep.exists else None
    if stored is not None and (truncs is not None or recount):  # every key of the table meets the batch's truncates
        touched = touched.unionByName(stored.select(*keys)).distinct()

    if followed:
        batch = _with_moves_again(spark, batch, stored, followed, plan, columns)
    if "_from" in batch.columns:  # partial updates that move their row: the old key's values, from the versions too
        batch = _filled(batch, stored, plan, columns, truncs, hops)
    parts = [batch] + ([stored] if stored is not None else [])
    if caps and moved:  # the caps a rename carried in for images whose reads ended in the old table
        carried = _carried_caps(spark, prep, deletes_path, alias, touched)
        if carried is not None:
            parts.append(carried)
    remembered = _remembered(spark, prep, deletes_path, every=recount)
    if remembered is not None:
        rem_deletes, rem_truncs = remembered
        parts.append(_delete_points(rem_deletes, plan, columns, alias))
        truncs = rem_truncs if truncs is None else truncs.unionByName(rem_truncs)
    if truncs is not None:
        t = touched.crossJoin(truncs.select(F.col("_ord").cast(ORDER_TYPE).alias("_ord"), "_pos_text", F.col("_etime").cast("bigint").alias("_etime")))
        parts.append(_typed(t.select(*_point({a: a for a in keys}, names, alias, "t", "_ord", F.col("_pos_text"), F.col("_etime"), 1)), columns, alias))
    points = reduce(DataFrame.unionByName, parts)
    deletes = None
    if plan.counts.get("d") or plan.counts.get("u"):
        deletes = batch.where(F.col("_op") == "d").select(
            F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in key]), KEY_JSON).alias("key"), "_ord", "_pos_text", "_etime")
    remember = history_deletes(spark, events, plan, deletes)
    if moves is not None:
        remember = moves if remember is None else remember.unionByName(moves, allowMissingColumns=True)
    # (a table without a key: its move's own batch reaches the region too, and every region's
    # moved reads cap their images)
    regions = _regions_reached(plan, prep.state.moved_in if plan.key else moved)
    return _versions(points, columns, alias, keys, copies=not plan.key, regions=regions, moved=moved), remember, reach


def _regions_reached(plan: TablePlan, moved_in: list) -> list:
    """The points of ``moved_in`` (renames into the table) whose region the batch may reach:
    its oldest change is before the region's end (the point's last element plus one), so it
    may be a change moved in there (:func:`_versions`' ``regions``); a batch with a truncate
    reaches all. Told on the driver; an in-order batch reaches none (its changes are newer
    than every rename), and its versions are computed as before (no ``_drop``)."""
    if plan.truncate is not None:  # (the plan keeps the latest truncate only; truncates are rare)
        return [list(r) for r in moved_in if r]
    if plan.min_data is None:
        return []
    oldest = order_key(list(plan.min_data[1]))
    return [list(r) for r in moved_in if r and oldest < order_key([*r[:-1], r[-1] + 1])]


def _moves_of_touched(spark: SparkSession, batch: DataFrame, prep: Prepared, deletes_path: str) -> tuple[list, int]:
    """The remembered moves (``_cdclake/deletes`` rows of op :data:`MOVED`) not older than the
    batch's oldest change of the keys the batch touches, and of the keys those moved rows to,
    and so on (a chain): ``key`` and ``to`` (JSON as written now, :data:`KEY_JSON`),
    ``position``, ``record``, ``present``, distinct. One small Spark job (the moves not older
    than the batch's oldest change, each marked whether the batch touches its key; the chains
    are followed on the driver), run only when the batch may hold a change older than a
    remembered move (:func:`needs_move_check`); an empty list otherwise, or for a table
    without a key. Also returns the longest chain's number of moves (0: none)."""
    plan, columns = prep.plan, prep.columns
    if not plan.key or not needs_move_check(plan, prep.state) or not DeltaTable.isDeltaTable(spark, deletes_path):
        return [], 0
    alias = {n: f"_c{i}" for i, n in enumerate(columns)}
    key_types = {k: columns[k] for k in plan.key}
    rank, order = plan.min_data
    rem = read_deletes(spark, deletes_path, plan.name).where(
        (F.col("op") == MOVED) & F.expr(f"struct(1, position) >= struct({rank}, {position_literal_sql(order)})"))

    keys = batch.select(F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in plan.key]), KEY_JSON).alias("_bk"), F.lit(True).alias("_hit"))
    ent = rem.select(key_as_written_now("key", key_types, plan.column_history).alias("key"),
                     key_as_written_now("to", key_types, plan.column_history).alias("to"),
                     "position", "record", "present").distinct()
    moves = ent.join(keys.distinct(), F.col("key") == F.col("_bk"), "left").select(ent["*"], F.coalesce("_hit", F.lit(False)).alias("hit")).collect()
    reached = {m["key"] for m in moves if m["hit"]}
    hops = 1 if reached else 0
    while True:  # (every key a chain passes through: a move of such a key is made again too)
        more = {m["to"] for m in moves if m["key"] in reached} - reached
        if not more or not {m["key"] for m in moves} & more:
            break
        reached |= more
        hops += 1
    return [m for m in moves if m["key"] in reached], hops


def _keys_of(spark: SparkSession, keys: list[str], plan: TablePlan, columns: dict[str, str]) -> DataFrame:
    """Keys (JSON, :data:`KEY_JSON`) as a frame of the key's ``_c<i>`` columns, typed."""
    alias = {n: f"_c{i}" for i, n in enumerate(columns)}
    schema = key_schema_sql(plan, columns)
    k = F.from_json("k", schema)
    return spark.createDataFrame([(j,) for j in keys], "k string").select(*[k.getField(n).cast(columns[n]).alias(alias[n]) for n in plan.key])


def _with_moves_again(spark: SparkSession, batch: DataFrame, stored: DataFrame, followed: list, plan: TablePlan,
                      columns: dict[str, str]) -> DataFrame:
    """``batch`` (points of the batch, with ``_from`` added when missing) and, again, each of
    ``followed`` (:func:`_moves_of_touched`) as the change row it was: the new key's stored
    version that the move began (``stored``: points read from the table), with only the
    columns the move carried (the entry's ``present``; the version's ``_cdc_present`` for an
    entry written without it) and ``_from`` the old key, so that :func:`fill_moves` fills
    the others again from the old key's history, which the batch changed. ``_src`` -1: it wins
    over the stored point of the same order (:func:`_versions` keeps the first), and the new
    key's later versions take the filled columns from it. A move whose version is not stored
    (none was read) is not made again."""
    alias = {n: f"_c{i}" for i, n in enumerate(columns)}
    schema = key_schema_sql(plan, columns)
    from_type = ST.StructType([ST.StructField(alias[k], batch.schema[alias[k]].dataType) for k in plan.key])
    if "_from" not in batch.columns:
        batch = batch.withColumn("_from", F.lit(None).cast(from_type))
    rows = [(m["key"], m["to"], m["position"], m["record"], m["present"]) for m in followed]
    record = F.expr(record_of_sql("_ord"))
    mv = spark.createDataFrame(rows, ST.StructType([
        ST.StructField("_m_key", ST.StringType()), ST.StructField("_m_to", ST.StringType()),
        ST.StructField("_m_pos", stored.schema["_ord"].dataType["pos"].dataType),
        ST.StructField("_m_record", stored.select(record.alias("r")).schema["r"].dataType),
        ST.StructField("_m_present", ST.ArrayType(ST.StringType())),
    ]))
    key_json = F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in plan.key]), KEY_JSON)
    versions = stored.where(~F.col("_op").isin("d", "t"))
    met = versions.join(F.broadcast(mv), (key_json == F.col("_m_to")) & (F.col("_ord.pos") == F.col("_m_pos"))
                        & record.eqNullSafe(F.col("_m_record")))
    present = F.coalesce(F.col("_m_present"), F.col("_present"))
    old = F.from_json("_m_key", schema)
    made = {}
    for n in columns:
        a = alias[n]
        if n in plan.key:
            continue
        carried = F.coalesce(F.array_contains(present, n), present.isNull())
        made[a] = F.when(carried, F.col(a))
        made["_p" + a] = carried
    made.update({
        "_op": F.lit("u"),
        "_present": present,
        "_src": F.lit(-1),
        "_from": F.struct(*[old.getField(k).cast(columns[k]).alias(alias[k]) for k in plan.key]).cast(from_type),
    })
    again = met.select(*[made.get(c, F.col(c)).alias(c) for c in batch.columns])
    return batch.unionByName(again)


def _remembered(spark: SparkSession, prep: Prepared, deletes_path: str, every: bool = False) -> tuple[DataFrame, DataFrame] | None:
    """The remembered deletes (key not null) and truncates (key null, as ``_ord``,
    ``_pos_text``, ``_etime``) of the table that may matter to the batch: read only when the
    batch holds a change not newer than the table's latest delete or truncate. ``every``: all
    of them (every image of a table without a key is counted again)."""
    plan, state = prep.plan, prep.state
    # (a rename's move into a table without a key: the old table's deletes carried with it end
    # the reads it moves, history._copy_ends; the new table's progress does not know them yet;
    # a move of no rows has no data, and no delete matters to it)
    need_deletes = every or needs_delete_check(plan, state) or bool(
        not plan.key and plan.moved_into and plan.max_delete is not None and plan.min_data is not None)
    need_truncs = every or may_be_older(plan, state.truncate_position)
    if not (need_deletes or need_truncs) or not DeltaTable.isDeltaTable(spark, deletes_path):
        return None
    rem = read_deletes(spark, deletes_path, plan.name)
    # (op not d: a copy taken from an SCD type 1 table without a key, cdclake.apply.keyless)
    rem = rem.where(F.col("op").isNull() | (F.col("op") == "d"))
    if not every and plan.min_data is not None:
        rank, order = plan.min_data
        rem = rem.where(F.expr(f"struct(1, position) >= struct({rank}, {position_literal_sql(order)})"))
    deletes = rem.where(F.col("key").isNotNull() & F.lit(need_deletes))
    truncs = rem.where(F.col("key").isNull() & F.lit(need_truncs)).select(
        F.expr(ord_struct_sql("1", "position", "coalesce(sub, 1)", "record")).alias("_ord"),
        F.col("position_text").alias("_pos_text"),
        F.col("event_time_ms").alias("_etime"),
    )
    return deletes, truncs


def _carried_caps(spark: SparkSession, prep: Prepared, deletes_path: str, alias: dict[str, str], touched: DataFrame) -> DataFrame | None:
    """The caps a table rename carried into ``prep``'s table (no key, snapshot reads ranked
    below the stream) for the images whose reads had ended in the old table
    (:func:`cdclake.apply.renames._carry_deletes`: ``_cdclake/deletes`` rows of op ``r``), of
    the images in ``touched`` (``_c<i>`` columns) and newer than the table's truncate, as
    :data:`CAP` points; None without a deletes table."""
    if not DeltaTable.isDeltaTable(spark, deletes_path):
        return None
    plan, columns, names = prep.plan, prep.columns, list(prep.columns)
    rem = read_deletes(spark, deletes_path, plan.name).where(F.col("op") == "r")
    if prep.state.truncate_position is not None:
        rem = rem.where(f"position > {position_literal_sql(prep.state.truncate_position)}")
    read = remembered_struct_sql("key", dict(columns), plan.column_history)
    caps = _typed(rem.withColumn("_k", F.expr(read)).select(
        *_point({alias[n]: f"_k.{q(n)}" for n in names}, names, alias, CAP,
                ord_struct_sql("1", "position", "coalesce(sub, 1)", "record"), F.col("position_text"), F.col("event_time_ms"), 0)), columns, alias)
    keys = [alias[n] for n in names]
    return caps.join(touched, _key_match(caps, touched, [(a, a) for a in keys]), "left_semi")


def _history_rows(stepped: DataFrame, columns: dict[str, str], alias: dict[str, str], with_drop: bool) -> DataFrame:
    """:func:`_versions`' versions (``stepped``: a point's values, ``_op``, ``_present``,
    ``_ord``, ``_pos_text``, ``_etime`` and the next point ``_nxt``) as rows of the history
    table: the source columns under their names, the :data:`META_COLUMNS` and the
    :data:`HISTORY_COLUMNS` (``_cdc_end`` from ``_nxt``; current when there is none), and
    ``_drop`` when ``with_drop``."""
    end = (
        f"CASE WHEN _nxt IS NULL THEN NULL ELSE CAST(named_struct('position', _nxt._ord.pos, 'position_text', _nxt._pos_text,"
        f" 'op', _nxt._op, 'event_time_ms', _nxt._etime, 'record', {record_of_sql('_nxt._ord')}, 'sub', _nxt._ord._sub)"
        f" AS {HISTORY_COLUMNS['_cdc_end']}) END"
    )
    return stepped.select(
        *[alias[n] for n in columns],
        F.col("_ord.pos").alias("_cdc_position"),
        F.col("_pos_text").alias("_cdc_position_text"),
        F.col("_op").alias("_cdc_op"),
        F.col("_etime").alias("_cdc_event_time_ms"),
        F.expr(record_of_sql("_ord")).cast(META_COLUMNS["_cdc_record"]).alias("_cdc_record"),
        F.expr("timestamp_millis(_etime)").alias("_cdc_valid_from"),
        F.expr("timestamp_millis(_nxt._etime)").alias("_cdc_valid_to"),
        F.col("_nxt").isNull().alias("_cdc_is_current"),
        F.col("_present").alias("_cdc_present"),
        F.expr(end).alias("_cdc_end"),
        *(["_drop"] if with_drop else []),
    )


def _versions(points: DataFrame, columns: dict[str, str], alias: dict[str, str], keys: list[str], copies: bool = False,
              regions: list | None = None, moved: list = ()) -> DataFrame:
    """Each key's points in order, deduplicated (a point of the batch that the table holds
    already is the table's), as versions: every point that is not a delete or truncate, ended
    by the next point. A column an image does not carry takes the value of the latest point
    before it that carries it (the first point of a key read from the table carries all of
    its stored values).

    ``copies`` (a table without a key, whose key is the whole image): the points of an image
    are copies of one row, not one row's changes; each version ends as :func:`_copy_ends` says
    (``moved``: the points of the renames into the table, whose moved reads cap their images).

    ``regions`` (:attr:`TableState.moved_in`): the points of the table renames that moved rows
    into the table. Of a table without a key (``copies``), a copy's version that begins and
    ends in one region ended in the old table before the rename: it is no version of this
    table. Of a keyed table, the changes at a region (positions that begin with its
    point, longer than it: the moved versions, and the old table's changes that arrived after
    the move, :func:`cdclake.apply.renames.relabel_late`) all stand for the old table's row as
    it was at the rename, so per key only the newest of them counts, and none when a truncate
    of the region (the old table's, carried) is newer: the others begin no version and end
    none (values are taken before they go). A stored version among them is returned with
    ``_drop`` true, for the MERGE to delete; with ``regions``, every row has ``_drop``."""
    w = Window.partitionBy(*keys).orderBy("_ord", "_src")
    points = points.select(
        "*",
        F.lag("_ord").over(w).eqNullSafe(F.col("_ord")).alias("_dup"),
        (F.row_number().over(w) == 1).alias("_first"),
    ).where(~F.col("_dup"))
    deleting = F.col("_op").isin("d", "t", CAP)  # (points that begin no version)
    w2 = Window.partitionBy(*keys).orderBy("_ord")
    upto = w2.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    regions = [r for r in regions or [] if r]
    nxt_of = F.lead(F.struct("_ord", "_op", "_pos_text", "_etime")).over(w2)
    if copies:
        points = _copy_ends(points, keys, list(moved))
    elif not regions:
        points = points.withColumn("_nxt", nxt_of)
    values = []
    for n in columns:
        a = alias[n]
        if a in keys:
            values.append(F.col(a))
            continue
        carried = F.col("_p" + a) & ~deleting | ((F.col("_src") == 0) & F.col("_first") & ~deleting)
        values.append(F.last(F.when(carried, F.struct(F.col(a).alias("v"))), ignorenulls=True).over(upto)["v"].alias(a))
    if regions and copies:
        # a copy's version that begins and ends in one region ended in the old table before
        # the rename: not a version of this table (a stored one goes, by the MERGE)
        rg = _region_of("_ord.pos", regions)
        inner = rg.isNotNull() & rg.eqNullSafe(_region_of("_nxt._ord.pos", regions))
        valued = points.select(*values, "_op", "_present", "_ord", "_pos_text", "_etime", "_src", "_nxt", inner.alias("_drop"))
        stepped = valued.where(~deleting & (~F.col("_drop") | (F.col("_src") == 0))).drop("_src")
    elif regions:
        points = points.withColumn("_rg", _region_of("_ord.pos", regions))
        region = Window.partitionBy(*keys, "_rg")
        truncating = F.col("_op") == "t"
        newest = F.max(F.when(~truncating, F.col("_ord"))).over(region)
        last_trunc = F.max(F.when(truncating, F.col("_ord"))).over(region)
        keep = (F.col("_rg").isNull() | truncating
                | ((F.col("_ord") == newest) & (last_trunc.isNull() | (last_trunc < newest))))
        valued = points.select(*values, "_op", "_present", "_ord", "_pos_text", "_etime", "_src", keep.alias("_keep"))
        kept = valued.where("_keep").withColumn("_nxt", nxt_of).withColumn("_drop", F.lit(False))
        # stored versions the region's newer change supersedes: deleted by the MERGE
        gone = valued.where(~F.col("_keep") & (F.col("_src") == 0) & ~deleting).withColumn(
            "_nxt", F.lit(None).cast(kept.schema["_nxt"].dataType)).withColumn("_drop", F.lit(True))
        stepped = kept.unionByName(gone).where(~deleting).drop("_keep", "_src")
    else:
        stepped = points.select(*values, "_op", "_present", "_ord", "_pos_text", "_etime", F.col("_nxt")).where(~deleting)
    return _history_rows(stepped, columns, alias, bool(regions))


def _region_of(pos: str, regions: list) -> Column:
    """The index in ``regions`` (rename points, ``position.order`` lists) of the region the
    position ``pos`` (SQL of an array<decimal>) lies in (:func:`keyless.in_region_sql`); NULL
    in none."""
    rg = None
    for i, r in enumerate(regions):
        inside = F.expr(in_region_sql(pos, r))
        rg = F.when(inside, i) if rg is None else rg.when(inside, i)
    return rg


def _copy_ends(points: DataFrame, keys: list[str], moved: list = ()) -> DataFrame:
    """``points`` (deduplicated by ``_ord``, of a table without a key: ``keys`` are every
    column) with ``_nxt``, the point that ends each version: a struct of its ``_ord``,
    ``_op``, ``_pos_text``, ``_etime``; null while current (and on deletes and truncates,
    which begin no version).

    Identical rows are copies, read as :mod:`cdclake.apply.keyless` reads them for a table of
    current rows, so that the current versions are that table's rows:

    * an *atom* is an image, a sign and a point (stream rank, position, sub), not the
      record's coordinates: a change delivered again from another file or offset counts once
      (the table's own first); identical rows of one snapshot at one position are told apart
      by their occurrence (:func:`cdclake.apply.keyless.with_read_copies`);
    * an insert, an update's after image or a snapshot read (+1) begins a copy's version and
      ends none; a delete or an update's before image (-1) ends the version of the earliest
      copy still current (first in, first out), and one with no current copy ends nothing
      (its insert was never captured);
    * a truncate ends every current copy; so does a snapshot read of the image, which says how
      many copies there are at its point (its reads at one point begin one version each);
    * after a snapshot read that ranks below every streamed change (Canal/DTS ``INIT``, Qlik
      ``REFRESH``: its place among them is unknown) the image keeps one row or none, as in
      :mod:`~cdclake.apply.keyless`: each of its points ends the version before it.

    So the points of an image fall into segments, each begun by a truncate or a snapshot
    point. In a segment, with ``S_j`` the prefix sums of the signs, a -1 ends a copy when
    ``S_j >= min(0, S_i for i < j)``; the ``k``-th such -1 ends the ``k``-th +1's version (the
    two sort next to each other by ``k``, so a ``lead`` finds it); a version no -1 ends ends at
    the next segment's first point. Window functions over one exchange by image, each frame
    growing or a single row (linear in an image's points); no lambda."""
    op = F.col("_op")
    points = points.withColumn("_sign", F.when(op == "d", -1).when(op.isin("t", CAP), 0).otherwise(1))
    points = with_read_copies(points, keys, F.col("_src") == 1)
    atom = Window.partitionBy(*keys, "_sign", F.col("_ord._rank"), F.col("_ord.pos"), F.col("_ord._sub"), "_pc").orderBy("_src", "_ord")
    points = points.withColumn("_atom", F.row_number().over(atom)).where(F.col("_atom") == 1)
    by_image = Window.partitionBy(*keys).orderBy("_ord")
    point = F.struct(F.col("_ord._rank").alias("r"), F.col("_ord.pos").alias("p"))
    again = F.coalesce((F.lag(op).over(by_image) == "r") & F.lag(point).over(by_image).eqNullSafe(point), F.lit(False))
    this = F.struct("_ord", "_op", "_pos_text", "_etime")
    upto = by_image.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # the next reset after a row: the latest before it in descending order (a growing frame)
    backwards = Window.partitionBy(*keys).orderBy(F.col("_ord").desc()).rowsBetween(Window.unboundedPreceding, -1)
    points = points.withColumn("_reset", op.isin("t", CAP) | (op == "r") & ~again)
    points = points.select(
        "*",
        F.sum(F.col("_reset").cast("int")).over(upto).alias("_seg"),
        F.last(F.when(F.col("_reset"), this), ignorenulls=True).over(backwards).alias("_next_seg"),
        F.lead(this).over(by_image).alias("_next"),
        (F.col("_reset") & (op == "r") & ((F.col("_ord._rank") == 0) | F.expr(moved_read_sql("_op", "_ord.pos", moved)))
         | (op == CAP)).alias("_below"),
    )
    seg = Window.partitionBy(*keys, "_seg")
    seg_upto = seg.orderBy("_ord").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    points = points.withColumn("_s", F.sum("_sign").over(seg_upto))
    low = F.least(F.lit(0), F.coalesce(F.min("_s").over(seg.orderBy("_ord").rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)))
    points = points.select("*", ((F.col("_sign") == -1) & (F.col("_s") >= low)).alias("_ends"), F.max("_below").over(seg).alias("_one"))
    plus = F.col("_sign") == 1
    points = points.withColumn(
        "_k",
        F.when(plus, F.sum(plus.cast("int")).over(seg_upto)).when(F.col("_ends"), F.sum(F.col("_ends").cast("int")).over(seg_upto)),
    )
    pairs = seg.orderBy(F.col("_k").asc_nulls_last(), F.col("_ends"))
    then = F.lead(F.struct(F.col("_k").alias("k"), F.col("_ends").alias("e"), this.alias("p"))).over(pairs)
    paired = F.when(then["e"] & (then["k"] == F.col("_k")), then["p"])
    ends = F.when(F.col("_one"), F.col("_next")).otherwise(F.coalesce(paired, F.col("_next_seg")))
    work = ("_sign", "_atom", "_pc", "_reset", "_seg", "_next_seg", "_next", "_below", "_s", "_ends", "_one", "_k")
    return points.select(*[c for c in points.columns if c not in work], F.when(plus, ends).alias("_nxt"))


def history_deletes(spark: SparkSession, events: DataFrame, plan: TablePlan, deletes: DataFrame | None = None) -> DataFrame | None:
    """The batch's deletes (``deletes``: ``key`` JSON, ``_ord``, ``_pos_text``, ``_etime``) and
    truncates (key null) of a history table as ``_cdclake/deletes`` rows; None when there are
    none."""
    frames = [deletes] if deletes is not None else []
    truncs = _batch_truncates(spark, events, plan)
    if truncs is not None:
        frames.append(truncs.select(F.lit(None).cast("string").alias("key"), F.col("_ord").cast(ORDER_TYPE).alias("_ord"), "_pos_text", "_etime"))
    if not frames:
        return None
    return reduce(DataFrame.unionByName, frames).select(
        F.lit(plan.name).alias("table"),
        "key",
        F.col("_ord.pos").alias("position"),
        F.col("_pos_text").alias("position_text"),
        F.expr(record_of_sql("_ord")).cast(META_COLUMNS["_cdc_record"]).alias("record"),
        F.col("_ord._sub").alias("sub"),
        F.col("_etime").cast("bigint").alias("event_time_ms"),
    )


def as_table_rows(versions: DataFrame, columns: dict[str, str]) -> DataFrame:
    """Versions (``_c<i>`` columns) as rows of the history table (source names)."""
    return versions.select(
        *[F.col(f"_c{i}").alias(n) for i, n in enumerate(columns)], *META_COLUMNS, *HISTORY_COLUMNS
    )


def write_history(spark: SparkSession, events: DataFrame, prep: Prepared, deletes_path: str,
                  remember: Callable[[DataFrame | None], None] | None = None) -> TableApply:
    """Apply the batch's changes of ``prep``'s table to its history table: one MERGE (or the
    write that creates the table). The result counts inserted and updated (ended or recomputed)
    versions, and deleted ones (only a version a table rename moved in that a later-arriving
    change of the old table supersedes: :func:`_versions`' ``regions``). ``remember``: called
    with the table's ``_cdclake/deletes`` rows (None: nothing) before the MERGE."""
    out, plan, path, result, columns = prep.out, prep.plan, prep.path, prep.out.result, prep.columns
    src, out.deletes, reach = history_source(spark, events, prep, deletes_path)
    if remember is not None:
        remember(out.deletes)
    src = frames.keep(src)
    out.cached.append(src)
    drops = "_drop" in src.columns  # (a table rows were moved into: superseded moved versions go)
    if not prep.exists:
        observed = Observation()
        rows = as_table_rows(src.where("NOT _drop") if drops else src, columns).observe(observed, F.count(F.lit(1)).alias("n"))
        writer = rows.write.format("delta").mode("append")
        for k, v in table_properties(columns).items():
            writer = writer.option(k, v)
        writer.save(path)
        result.inserted = int(observed.get["n"])
        return out
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    key = plan.key or names
    if truncates(plan):  # the source holds every key of the table: no key range
        cond = " AND ".join(f"t.{q(k)} <=> s.{alias[k]}" for k in key)
    else:
        cond = merge_condition_sql(plan, columns, reach)
    same_start = "t._cdc_position <=> s._cdc_position AND t._cdc_record <=> s._cdc_record AND (t._cdc_op = 'r') <=> (s._cdc_op = 'r')"
    cond = f"{cond} AND {same_start}"
    others = [n for n in names if n not in key]

    def values(side) -> str:
        """SQL: the non-key values of a version as one struct (``side``: column name -> SQL)."""
        return "named_struct(" + ", ".join(f"'{alias[n]}', {side(n)}" for n in others) + ")"

    changed = " OR ".join(
        [f"NOT (t.{c} <=> s.{c})" for c in ("_cdc_end", "_cdc_is_current", "_cdc_present")]
        + ([f"NOT ({values(lambda n: f't.{q(n)}')} <=> {values(lambda n: f's.{alias[n]}')})"] if others else [])
    )
    sets = {q(n): f"s.{alias[n]}" for n in names}
    sets.update({q(c): f"s.{c}" for c in (*META_COLUMNS, *HISTORY_COLUMNS)})
    merge = DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), F.expr(cond))
    if drops:
        merge = (merge.whenMatchedDelete(condition="s._drop").whenMatchedUpdate(condition=f"NOT s._drop AND ({changed})", set=sets)
                 .whenNotMatchedInsert(condition="NOT s._drop", values=sets))
    else:
        merge = merge.whenMatchedUpdate(condition=changed, set=sets).whenNotMatchedInsert(values=sets)
    metrics = merge.execute().first()
    if metrics is None:  # skipped: the batch's transaction identity was already committed
        result.replayed = True
        prep.rows_before = None
        return out
    result.inserted = int(metrics["num_inserted_rows"] or 0)
    result.updated = int(metrics["num_updated_rows"] or 0)
    result.deleted = int(metrics["num_deleted_rows"] or 0)  # (superseded moved versions only)
    return out
