"""Tables without a key (SCD type 1) as multisets: identical source rows stay separate rows.

A table without a key (none configured, none in its messages) matches rows on their whole
image. Two identical source rows (a log table's ``INSERT ... VALUES (1, 'x'), (1, 'x')``) are
two rows of the target, and deleting one of them removes one copy.

Each change is read as *atoms* of an image ``K`` (the row's values, as the JSON text
``_cdclake/deletes`` keys use): +1 for an insert, a snapshot read or an update's after image,
-1 for a delete or an update's before image (every update with a before image is both, also one
that changes nothing). The copies of ``K`` are the greedy matching of its atoms in change order
(:func:`cdclake.apply.delta_table.order_sql`): each -1 takes the earliest copy not taken yet that
is older than it, and one with no older copy takes nothing (its insert was never captured).
With ``S_k`` the prefix sums of the signs, ``S_0 = 0``, there are ``S_n - min_k S_k`` copies
(a snapshot sets the start, below).

Exactly once: an atom is known by its image, sign and point (stream rank, position, sub), not
by its record coordinates, which differ when a change is delivered again (another file, another
offset), so a re-delivered one counts once. A snapshot read from Kafka is the exception
(:func:`with_read_copies`): a snapshot's reads share its position (a Debezium snapshot's, Canal/DTS
``INIT``, DataWorks full-load rows, Qlik ``REFRESH``), so identical rows it read are told apart
by their Kafka offsets: the k-th read of an image at one point among one partition's records
of the batch (in offset order) is copy k, and so is the k-th of the target's rows and
remembered atoms of it that came from Kafka. A record delivered again by Kafka has its offset,
and Kafka's idempotent producer (the default since Kafka 3.0) writes no duplicates; a
connector that restarts inside its snapshot sends it again from the start at new offsets,
which in a later batch are occurrences the target has already. Limits: identical rows of one
snapshot split over two batches (a snapshot bigger than a micro-batch) count as many as the
larger part; a snapshot sent again in full within the same batch and partition as the first
(a restart inside it, with no change written meanwhile, so at the same position) counts its
identical rows twice; reads from files (exports, whose lines may repeat a record) count once
per image and point, as every identical row did before.
Two identical streamed rows need two positions, and they do not always get them; where
they share one they count once, as every identical row did before: Canal, whose ``id``
is the Canal batch's and ``es`` a whole second, so two single-row statements of one second in
one Canal batch share ``(es, id, 0)``; DataWorks full-load rows (all ``[-1]``); SharePlex
without ``seq``; Debezium Oracle without transaction metadata (``scn`` only); positions that
fall back to an event time. Debezium MySQL (binlog ``row``), PostgreSQL and SQL Server LSNs,
DTS record ids and SharePlex ``scn``/``seq`` give every row change its own. The table's rows of ``K`` are the surviving +1 atoms
(each row keeps its order in ``_cdc_position``/``_cdc_record``); every other atom is remembered in
``_cdclake/deletes`` (column ``op``: ``d``, or null in rows written before it, for a -1; the
change's op for a +1 whose copy was taken). A batch reads both for the images it touches, adds
its own atoms, counts again and writes the difference: the atoms that are no row now appended
to ``_cdclake/deletes`` (before the MERGE: :func:`_remember`), then one MERGE that deletes the
copies taken and inserts the new ones.

A snapshot read (op ``r``) is not one more copy but the number of copies at its point: the
reads of an image at its latest snapshot point set its count, and older changes no longer
count (:func:`_count`), so a snapshot read again adds nothing. A snapshot that ranks below
every streamed change (Canal/DTS ``INIT``, Qlik ``REFRESH``: its point among them is unknown,
and the stream may hold changes it already read) leaves its images one row or none, as the
latest counting change says.

A table rename keeps the cap (:mod:`cdclake.apply.renames`): a snapshot read of the old table
ranked below the stream moves to the new table as a read (op ``r``) at the rename's point
followed by -1, and so does a late one (``relabel_late``) and a remembered one
(``_carry_deletes``). Here such a *moved read* (op ``r`` at a position that begins with the
point of a rename into the table: :attr:`TableState.moved_in`, :attr:`TablePlan.moved_into`)
ranks as streamed (1), so the new table's truncate at the point keeps it, and caps its image
as a read ranked below the stream does (:func:`_count`): the image keeps one row or none in
the new table too, until a truncate (:func:`rank_of`).

Survivors: the greedy matching takes the earliest copies, so the survivors are the latest
``count`` of the +1 atoms that count; any ``count`` of them make the same rows (a remembered one
takes its values from its key's JSON).

Costs, only for a table without a key: the table's rows of the touched images (a scan of the
table, as the whole-image MERGE already made), the remembered atoms of the table (a scan of
``_cdclake/deletes``, only once the table had a delete or an update), one aggregate job, the
MERGE. An insert-only table
remembers nothing: only deletes and the copies they take are written to ``_cdclake/deletes``.

An SCD type 2 table without a key is a multiset the same way, its atoms counted as here:
each copy has a history of its own, and its current versions are the rows this module
gives (:func:`cdclake.apply.history._copy_ends`). A remembered atom is JSON with the column
names of its batch; it is read back with the names now
(:func:`cdclake.apply.delta_table.remembered_struct_sql`: a column renamed after the atom's
change by its old name), so a -1 remembered before a column rename still takes the copy of an
older +1 that arrives after it. Events written after a column drop or rename that arrive in
a batch before it are matched with the columns of their batch (a before image without the
dropped column, or with the new name where the rows still have the old one, matches no row);
so a batch that drops or renames a column of the table counts every image of it again, from
all its rows and remembered atoms with the columns now (one scan of each, as if it touched
every image). Limits: identical rows that an older version collapsed into
one row stay one; a rename that was not applied (its new name existed and the two were not
merged: "not applied" in the schema history) is still followed when an image is read back.
"""

from __future__ import annotations

from functools import reduce

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdclake import frames
from cdclake.apply.audit import TXN_APP_ID_CONF, TXN_VERSION_CONF, Txn, append
from cdclake.apply.delta_table import (
    KEY_JSON,
    MOVED,
    ORDER_TYPE,
    Prepared,
    as_table_rows,
    order_of_change,
    ord_struct_sql,
    position_literal_sql,
    record_of_sql,
    change_rows,
    latest_version,
    q,
    rank_sql,
    read_deletes,
    remembered_columns,
    remembered_struct_sql,
    table_properties,
    truncate_sql,
)
from cdclake.apply.tasks import concurrent_conflict


def in_region_sql(pos: str, point: list) -> str:
    """SQL: the position ``pos`` (``position.order``, SQL) lies in the region of the rename
    point ``point`` (a ``position.order`` list): it begins with the point and is longer (the
    rows a table rename moved, the old table's late changes moved after them)."""
    return f"(size({pos}) > {len(point)} AND slice({pos}, 1, {len(point)}) = {position_literal_sql(point)})"


def moved_read_sql(op: str, pos: str, moved_in: list) -> str:
    """SQL: the change or row (op ``op``, ``position.order`` ``pos``, both SQL) is a snapshot
    read that a table rename moved in: op ``r`` at a position in the region of one of
    ``moved_in`` (rename points: :func:`in_region_sql`). False without points."""
    if not moved_in:
        return "false"
    each = " OR ".join(in_region_sql(pos, list(p)) for p in sorted({tuple(p) for p in moved_in}))
    return f"coalesce({op} = 'r' AND ({each}), false)"


def rank_of(op: str, pos: str, by_position: bool, moved_in: list) -> str:
    """SQL: the stream rank of a change or row of a table without a key (as
    :func:`cdclake.apply.delta_table.rank_sql`), but 1 for a snapshot read a rename moved in
    (:func:`moved_read_sql`): it ranks after the new table's truncate at the rename's point,
    and :func:`_count` reads it as a read ranked below the stream (a cap)."""
    if by_position or not moved_in:
        return rank_sql(op, by_position)
    return f"CASE WHEN {op} = 'r' AND NOT {moved_read_sql(op, pos, moved_in)} THEN 0 ELSE 1 END"


def after_truncate_sql(op: str, pos: str, by_position: bool, moved_in: list, truncate: list) -> str:
    """SQL: the change or row (``op``, ``pos``: SQL of its op and ``position.order``) ranks after
    the table's truncate at ``truncate`` (a ``position.order``), by :func:`rank_of`: a snapshot
    read's cap ends at the truncate (:func:`cdclake.apply.history.history_source`, and the caps a
    rename carries, :func:`cdclake.apply.renames._carry_deletes`)."""
    return f"struct({rank_of(op, pos, by_position, moved_in)}, {pos}) > struct(1, {position_literal_sql(truncate)})"


def with_read_copies(df: DataFrame, image: list, is_batch: F.Column, op: str = "_op", positive: F.Column | None = None) -> DataFrame:
    """``df`` (atoms or history points: the image columns ``image``, ``op``, ``_ord`` of
    :data:`ORDER_TYPE`) with ``_pc``, the part of an atom's identity beyond its image, sign and
    point: for a snapshot read from Kafka (op ``r``, an offset, and ``positive`` where given)
    its occurrence among the reads of its image at its point (1, 2 ...; see the module
    docstring), counted over the batch's records of one partition (``is_batch``; in offset
    order, a record seen twice is one occurrence) and, apart from them, over the target's own
    rows and remembered atoms; NULL for every other change, which its point alone identifies.
    One window over the image's atoms."""
    o = F.col("_ord")
    read = (F.col(op) == "r") & o["off"].isNotNull()
    if positive is not None:
        read = read & positive
    w = Window.partitionBy(*image, o["_rank"], o["pos"], is_batch, F.when(is_batch, o["part"]), read).orderBy(o["part"], o["off"])
    return df.withColumn("_pc", F.when(read, F.dense_rank().over(w)))


def _flags(live: bool, kept: bool, img: bool) -> list:
    return [F.lit(live).alias("_live"), F.lit(kept).alias("_kept"), F.lit(img).alias("_img")]


def _image_json(cs: list, names: list[str]) -> F.Column:
    """An image's identity: the JSON of its values ``cs`` under the column ``names`` (:data:`KEY_JSON`)."""
    return F.to_json(F.struct(*[c.alias(n) for c, n in zip(cs, names)]), KEY_JSON)


def _live_atoms(spark: SparkSession, prep: Prepared, moved_in: list) -> DataFrame:
    """The table's rows, read as of its latest version when the batch begins, as
    :func:`write_keyless`' atoms (one copy each, ``_live``)."""
    names, path, by_position = list(prep.columns), prep.path, prep.plan.snapshot_by_position
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    table = spark.read.format("delta").option("versionAsOf", latest_version(spark, path)).load(path)
    live = table.select(
        *[F.col(q(n)).alias(alias[n]) for n in names],
        _image_json([F.col(q(n)) for n in names], names).alias("_k"),
        F.lit(1).alias("_sign"),
        F.col("_cdc_op").alias("_op"),
        F.expr(ord_struct_sql(rank_of("_cdc_op", "_cdc_position", by_position, moved_in), "_cdc_position", "1", "_cdc_record")).alias("_ord"),
        F.col("_cdc_position_text").alias("_pos_text"),
        F.col("_cdc_event_time_ms").alias("_etime"),
        *_flags(True, False, True),
    )
    return live


def _atoms_to_remember(acts: DataFrame, table: str) -> DataFrame:
    """The acts to remember (``_remember``) as ``_cdclake/deletes`` rows of ``table`` (a copy
    taken or made: its op; a delete: ``d``)."""
    return acts.where("_remember").select(
        *remembered_columns(table, "_k"), F.when(F.col("_sign") == 1, F.col("_op")).otherwise(F.lit("d")).alias("op"))


def _one_per_point(atoms: DataFrame, payload: list[str]) -> DataFrame:
    """One atom per image, sign and point (rank, position, sub): a change re-delivered (in
    another file or at another offset: its record differs), a row and its remembered atom. Its
    order is its first record's; ``_row_ord`` is the order of the table's row of it; its
    ``payload`` columns are the image's (an atom with an image first)."""
    return atoms.groupBy("_k", "_sign", F.col("_ord._rank").alias("_pr"), F.col("_ord.pos").alias("_pp"),
                         F.col("_ord._sub").alias("_ps"), "_pc").agg(
        F.min("_ord").alias("_ord"),
        F.max(F.when(F.col("_live"), F.col("_ord"))).alias("_row_ord"),
        F.max_by(F.struct(*payload), F.col("_img").cast("int")).alias("w"),
        F.bool_or("_live").alias("_live"), F.bool_or("_kept").alias("_kept"), F.bool_or("_img").alias("_img"),
    ).select("_k", "_sign", "_ord", "_row_ord", "w.*", "_live", "_kept", "_img")


def write_keyless(spark: SparkSession, events: DataFrame, prep: Prepared, deletes_path: str) -> None:
    """Apply the batch's changes of ``prep``'s table, which has no key and current rows only,
    as described in the module docstring: appends the atoms to remember to ``deletes_path``
    (:func:`_remember`), then MERGEs; sets ``prep.out.result`` (``inserted``, ``deleted``,
    ``replayed``) and ``prep.out.cached``.

    ``events``: EVENT_SCHEMA rows of the batch (persisted by the caller). The table and the
    deletes table are read as of their latest versions when the batch begins, so every frame
    here reads the same rows however often Spark computes it."""
    out, plan, path, result = prep.out, prep.plan, prep.path, prep.out.result
    columns = prep.columns
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    by_position = plan.snapshot_by_position
    # (renames into the table: a snapshot read they moved in ranks as streamed, see rank_of)
    moved_in = [*prep.state.moved_in, *plan.moved_into]

    rows = change_rows(events, plan, columns, prep.truncate, every_update_moves=True,
                       rank=rank_of("op", "position.order", by_position, moved_in))
    batch = frames.keep(rows.select(
        *[F.col(alias[n]) for n in names],
        _image_json([F.col(alias[n]) for n in names], names).alias("_k"),
        F.when(F.col("_op") == "d", -1).otherwise(1).alias("_sign"),
        "_op", F.col("_ord").cast(ORDER_TYPE).alias("_ord"),
        "_pos_text", "_etime", *_flags(False, False, True),
    ))
    out.cached.append(batch)
    # (a batch that drops or renames a column counts every image again: see the module docstring)
    # (and so does a rename's move into it: the remembered atoms carried with it may cap
    # images that no moved row touches, see rank_of)
    recount = plan.drops_or_renames_columns or bool(plan.moved_into)
    touched = batch.select("_k").distinct()

    def of_touched(df: DataFrame) -> DataFrame:
        return df if recount else df.join(touched, "_k", "left_semi")

    parts = [batch]
    if prep.exists:
        parts.append(of_touched(_live_atoms(spark, prep, moved_in)))
    # remembered atoms exist only for a table that had a delete (or an update) before
    if ((prep.state.delete_position is not None or (plan.moved_into and plan.max_delete is not None))
            and DeltaTable.isDeltaTable(spark, deletes_path)):
        parts.append(of_touched(_remembered(spark, deletes_path, plan.name, columns, by_position, plan.column_history, moved_in)))
    # one exchange, by image: every window and the grouping below partition by the image (and
    # more), which that hash partitioning already satisfies (no further exchange)
    atoms = with_read_copies(reduce(lambda a, b: a.unionByName(b), parts).repartition("_k"), ["_k"],
                             ~F.col("_live") & ~F.col("_kept"), positive=F.col("_sign") == 1)
    if prep.truncate is not None:  # remembered atoms older than the table's truncate are gone with it
        atoms = atoms.where(F.expr(f"{order_of_change('_ord')} > {truncate_sql(prep.truncate)}"))
    payload = [*[alias[n] for n in names], "_op", "_pos_text", "_etime"]
    atoms = _count(_one_per_point(atoms, payload), by_position)
    candidate = (F.col("_sign") == 1) & (F.col("_in_snapshot") | F.col("_after"))
    by_image = Window.partitionBy("_k")
    atoms = atoms.withColumn("_rn", F.row_number().over(by_image.orderBy(candidate.desc(), F.col("_ord").desc())))
    survives = candidate & (F.col("_rn") <= F.col("_count"))
    acts = frames.keep(atoms.select(
        *payload, "_k", "_sign", "_ord", "_row_ord",
        F.when(F.col("_live") & ~survives, "del").when(survives & ~F.col("_live"), "ins").alias("_act"),
        # (an atom a later snapshot read superseded never counts again: nothing to remember)
        ((F.col("_in_snapshot") | F.col("_after")) & ~F.col("_kept") & ~survives).alias("_remember"),
    ).where(F.col("_act").isNotNull() | F.col("_remember")))
    out.cached.append(acts)
    n = acts.groupBy().agg(
        F.count_if(F.col("_act") == "del").alias("d"), F.count_if(F.col("_act") == "ins").alias("i"), F.count_if("_remember").alias("r")
    ).first()
    if n["r"]:  # before the MERGE (see _remember)
        _remember(spark, _atoms_to_remember(acts, plan.name), deletes_path, plan.name)
    if not prep.exists:  # created by this batch (also when it holds no row: the table exists from now on)
        writer = as_table_rows(acts.where(F.col("_act") == "ins"), columns).write.format("delta").mode("append")
        for k, v in table_properties(columns).items():
            writer = writer.option(k, v)
        writer.save(path)
        result.inserted = n["i"]
        return
    if not (n["d"] or n["i"]):
        return
    _merge_acts(spark, prep, acts)


def _merge_acts(spark: SparkSession, prep: Prepared, acts: DataFrame) -> None:
    """:func:`write_keyless`' MERGE: each ``del`` act deletes the copy it took (its values,
    position and record, field by field: a row written before ``_cdc_record`` existed holds a
    null struct, read as null fields), each ``ins`` act inserts a row; sets ``prep.out.result``
    (a batch whose identity the table committed already: ``replayed``)."""
    names, path, result = list(prep.columns), prep.path, prep.out.result
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    same = " AND ".join(f"t.{q(c)} <=> s.{alias[c]}" for c in names)
    record = " AND ".join(f"t._cdc_record.{f} <=> s._row_ord.{g}" for f, g in (("file", "file"), ("line", "line"), ("partition", "part"), ("offset", "off")))
    cond = f"s._act = 'del' AND {same} AND t._cdc_position <=> s._row_ord.pos AND {record}"
    meta = {
        "_cdc_position": "s._ord.pos",
        "_cdc_position_text": "s._pos_text",
        "_cdc_op": "s._op",
        "_cdc_event_time_ms": "s._etime",
        "_cdc_record": record_of_sql("s._ord"),
    }
    insert = {**{q(c): f"s.{alias[c]}" for c in names}, **{q(k): v for k, v in meta.items()}}
    metrics = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(acts.where(F.col("_act").isNotNull()).alias("s"), F.expr(cond))
        .whenMatchedDelete()
        .whenNotMatchedInsert(condition="s._act = 'ins'", values=insert)
        .execute()
        .first()
    )
    if metrics is None:  # the batch's transaction identity was committed to the table already
        result.replayed = True
        prep.rows_before = None
        return
    result.inserted = int(metrics["num_inserted_rows"] or 0)
    result.deleted = int(metrics["num_deleted_rows"] or 0)


def _remember(spark: SparkSession, df: DataFrame, deletes_path: str, table: str) -> None:
    """Append the table's atoms to remember (``_cdclake/deletes`` rows) **before** its MERGE.

    Written after it, as the other tables' deletes are, a crash between the two would lose the
    copies the MERGE took: the batch applied again reads the table after the MERGE (which Delta
    then skips) and no longer sees them. Written first, a batch applied again finds them
    remembered and decides the same. The append carries its own identity (the batch's app id
    with ``.keyless.<table>``, the batch's version) so that it is made once, and is tried again
    when another table's append to the same deletes table commits first (two tables may append
    at once)."""
    app, version = spark.conf.get(TXN_APP_ID_CONF, None), spark.conf.get(TXN_VERSION_CONF, None)
    txn = Txn(f"{app}.keyless.{table}", int(version)) if app and version else None
    for attempt in range(3):
        try:
            append(df, deletes_path, txn, evolve=True)
            return
        except Exception as e:  # noqa: BLE001 (a conflict is tried again, anything else raised)
            if attempt == 2 or not concurrent_conflict(e):
                raise


def _count(atoms: DataFrame, by_position: bool = False) -> DataFrame:
    """``atoms`` (one per image, sign and order) with the number of copies of their image
    (``_count``), and which of them count (``_in_snapshot``: a read of the image's latest
    snapshot; ``_after``: a change after it, or any when no snapshot read the image).

    A snapshot read (op ``r``) says how many copies there were at its point, not that one more
    came: the reads of one image at one snapshot point (rank and position: a snapshot's rows
    share its position) set the count to their number, and every change older than them no
    longer counts. So a snapshot taken again (a connector restarted in its snapshot, a full
    load run again) does not copy the rows it reads again. From that count (0 without a
    snapshot) the changes after it go on greedily: ``m + S_n - min(0, min_k(m + S_k))``.
    A read a rename moved in (:func:`rank_of`: rank 1 in a table whose reads rank below the
    stream, not ``by_position``) has rank 0 here: it caps its image. Window functions over
    the image's atoms; no lambda."""
    by_image = Window.partitionBy("_k")
    read = (F.col("_op") == "r") & (F.col("_sign") == 1)
    rank = F.col("_ord._rank") if by_position else F.when(read, F.lit(0)).otherwise(F.col("_ord._rank"))
    point = F.struct(rank.alias("r"), F.col("_ord.pos").alias("p"))
    atoms = atoms.withColumn("_snap", F.max(F.when(read, point)).over(by_image))
    atoms = atoms.withColumn("_in_snapshot", F.coalesce(read & (point == F.col("_snap")), F.lit(False)))
    atoms = atoms.withColumn("_m", F.sum(F.col("_in_snapshot").cast("int")).over(by_image))
    atoms = atoms.withColumn("_snap_end", F.max(F.when(F.col("_in_snapshot"), F.col("_ord"))).over(by_image))
    atoms = atoms.withColumn("_after", ~F.col("_in_snapshot") & (F.col("_snap_end").isNull() | ((F.col("_ord") > F.col("_snap_end")) & ~read)))
    running = by_image.orderBy("_ord").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    atoms = atoms.withColumn("_s", F.col("_m") + F.sum(F.when(F.col("_after"), F.col("_sign")).otherwise(0)).over(running))
    total = F.col("_m") + F.sum(F.when(F.col("_after"), F.col("_sign")).otherwise(0)).over(by_image)
    greedy = total - F.least(F.lit(0), F.min("_s").over(by_image))
    # a snapshot that ranks below every streamed change (Canal/DTS INIT, Qlik REFRESH) has no
    # place among them: the stream may hold changes it already read (Qlik's cached changes),
    # so its image keeps one row while its latest counting atom is a +1, none after a -1
    latest = F.max_by(F.col("_sign"), F.when(F.col("_in_snapshot") | F.col("_after"), F.col("_ord"))).over(by_image)
    below = F.col("_snap.r") == 0
    return atoms.withColumn("_count", F.when(below, F.when(latest == 1, 1).otherwise(0)).otherwise(greedy))


def _remembered(spark: SparkSession, deletes_path: str, table: str, columns: dict[str, str], by_position: bool,
                history: list = (), moved_in: list = ()) -> DataFrame:
    """The remembered atoms of ``table`` (``_cdclake/deletes`` rows with a key) as atoms whose
    image is read from their key (``_img`` false: a row or a change of the batch gives the
    same values first); keys are read back with the table's types and names now and written
    again, so they match after a column widened, was added, dropped or renamed (``history``:
    the table's column DDL, :func:`cdclake.apply.delta_table.remembered_struct_sql`; see
    ``_drop_older_than_deletes``). ``moved_in``: the points of the renames into the table
    (:func:`rank_of`)."""
    rem = read_deletes(spark, deletes_path, table, latest_version(spark, deletes_path))
    op = F.coalesce(F.col("op"), F.lit("d"))
    # (not a keyed table's remembered move, op m: a table of that name that had a key)
    rem = rem.where(F.col("key").isNotNull() & ~op.eqNullSafe(F.lit(MOVED)))
    rank = rank_of("coalesce(op, 'd')", "position", by_position, list(moved_in))
    point = f"struct({rank}, position)"
    rem = rem.withColumn("_v", F.expr(remembered_struct_sql("key", columns, history, point)))
    return rem.select(
        *[F.col("_v").getField(n).alias(f"_c{i}") for i, n in enumerate(columns)],
        F.to_json(F.col("_v"), KEY_JSON).alias("_k"),
        F.when(op == "d", -1).otherwise(1).alias("_sign"),
        op.alias("_op"),
        F.expr(ord_struct_sql(rank, "position", "coalesce(sub, 1)", "record")).alias("_ord"),
        F.col("position_text").alias("_pos_text"),
        F.col("event_time_ms").alias("_etime"),
        *_flags(False, True, False),
    )
