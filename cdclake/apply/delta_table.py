"""Apply one batch of canonical events to one Delta table (SCD type 1), in one Delta commit.

A table created with ``scd_type=2`` keeps every row's history instead: :func:`cdclake.apply.strategy.write_table`
hands it to :mod:`cdclake.apply.history`, which shares this module's preparation (schema
evolution), its change rows (:func:`change_rows`) and its order.

Semantics (DESIGN.md, "Semantics the applier guarantees"):

* per key the change with the greatest order wins, whatever the arrival order; the order is
  ``(stream rank, position.order, arrival)`` where the stream rank is 0 for snapshot reads (op
  ``r``) and 1 for streamed changes, so a snapshot row never overwrites a streamed change
  (for a format whose snapshot rows carry positions that order with streamed ones, Debezium,
  every change ranks 1 and a snapshot row is ordered by its position: :func:`rank_sql`);
  equal positions keep arrival order (file, line / partition, offset), across batches too: the
  winning change's coordinates are kept in the row (``_cdc_record``) and compared after the
  position, so a later record of the same position wins and a re-delivered one changes nothing;
* a change whose order is not greater than the one already applied to the row is ignored, so
  re-delivering applied records changes nothing;
* deletes remove the row; an update that changes the key deletes the old key's row;
* a partial image (``present`` set) changes only the columns it carries, also when several
  partial updates of one key meet in a batch (they are folded column by column); a table with
  a key keeps per-column positions from its first partial image on (:data:`COLUMN_ORDERS`,
  :func:`_by_column_sets`): each column holds the value of the newest change that set it, so
  a partial update applied before its row's older insert gets its other columns from that
  insert when it arrives, in whatever batch;
* a full image sets every column: a column missing from the image is NULL;
* ``t`` (truncate) removes every row older than the truncate and every older event of the batch;
  the latest truncate's position is kept in the table's progress row (:class:`TableState`), so
  older events arriving in later batches are dropped too, also when the table did not exist yet;
* the position of every delete is kept in ``_cdclake/deletes`` (see :mod:`cdclake.apply.audit`),
  and a batch holding changes older than the table's latest delete is checked against it, so an
  older change arriving in a later batch cannot bring a deleted row back;
* tables without a key match on all columns (the whole before image).

Commits per batch and table: one (the MERGE, or the write that creates the table); a truncate
adds a DELETE, a schema change an ALTER TABLE (rare events), and so does a table's first
partial image (the :data:`COLUMN_ORDERS` column).

Target tables hold the source columns (source names and types) plus :data:`META_COLUMNS`, with
the lowest Delta protocol their data needs, so that every Delta reader opens them: column
mapping (``name`` mode) only when a column name holds a character Delta refuses without it
(:func:`needs_column_mapping`: space, ``,;{}()=``, newline, tab; turned on by ALTER before such
a column is added to an existing table), type widening (the ``typeWidening`` table feature,
which delta-rs cannot read yet) only when one of its columns widens in place. delta-rs 1.6.6's
pyarrow/pandas path reads a column-mapped table of reader version 2 as all NULLs without an
error (its SQL ``QueryBuilder`` reads it right): measured, see tests/readers.py.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import reduce
from typing import Callable

from delta.tables import DeltaTable
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from cdclake import frames
from cdclake.apply import types as T
from cdclake.apply.moves import Entry, order_sort_key, resolve
from cdclake.apply.plan import RECORD_FIELDS, TablePlan, may_rekey, names_back, ranked_key, truncate_key
from cdclake.errors import CdclakeError
from cdclake.normalize import pair_update_halves
from cdclake.routing import TableLayout
from cdclake.sqltext import quote_ident, sql_str
from cdclake.values import cast_sql

#: metadata columns added to every target table
META_COLUMNS = {
    "_cdc_position": "array<decimal(38,0)>",  # position.order of the last change applied to the row
    "_cdc_position_text": "string",  # position.text of that change
    "_cdc_op": "string",  # its op code (r marks a row last written by a snapshot read)
    "_cdc_event_time_ms": "bigint",  # its commit time at the source, ms since epoch
    # where that change's record came from: the last tie-breaker of equal positions, so that
    # "equal positions keep arrival order" holds across batches (and a re-delivered record,
    # whose coordinates are the same, changes nothing)
    "_cdc_record": "struct<file:string,line:bigint,partition:int,offset:bigint>",
}

#: columns a table that keeps its rows' history (SCD type 2, ``--scd-type 2``) has besides
#: :data:`META_COLUMNS`, which there describe the change that began the version; see
#: :mod:`cdclake.apply.history`
HISTORY_COLUMNS = {
    "_cdc_valid_from": "timestamp",  # event time of the change that began the version
    "_cdc_valid_to": "timestamp",  # event time of the change that ended it (null: current)
    "_cdc_is_current": "boolean",
    "_cdc_present": "array<string>",  # the columns the beginning change carried (null: all)
    # the change that ended the version (null: current); op d: a delete, t: a truncate
    "_cdc_end": "struct<position:array<decimal(38,0)>,position_text:string,op:string,event_time_ms:bigint,"
    "record:struct<file:string,line:bigint,partition:int,offset:bigint>,sub:int>",
}
#: the order struct of a change (``_ord`` of :func:`change_rows`: stream rank, position, sub,
#: then the record's coordinates), spelled out so that rows from the batch, the table and the
#: deletes table union, and so that a table can keep it per column (:data:`COLUMN_ORDERS`)
ORDER_TYPE = "struct<_rank:int,pos:array<decimal(38,0)>,_sub:int,file:string,line:bigint,part:int,off:bigint>"
#: per-column positions (Paimon's sequence groups, per column): in a table of current rows with
#: a key that has received a partial image (``present`` set: Qlik, SharePlex), the order of the
#: change that set each column, for a row whose columns were not all set by its latest change
#: (null when they were; a column the map does not name is not known yet: a partial update
#: applied before its row's insert arrived). Added to a table by its first partial batch
#: (:func:`prepare_table`), never to the others.
COLUMN_ORDERS = "_cdc_column_orders"
PARTIAL_COLUMNS = {COLUMN_ORDERS: f"map<string,{ORDER_TYPE}>"}
#: every column cdclake adds to a target table
SYSTEM_COLUMNS = {**META_COLUMNS, **HISTORY_COLUMNS, **PARTIAL_COLUMNS}
#: the field metadata key of a Delta generated column (its SQL expression)
GENERATED = "delta.generationExpression"

#: ``to_json`` options of a remembered delete's key (``_cdclake/deletes``): timestamps keep
#: their microseconds (``to_json``'s default format keeps milliseconds, so two keys that differ
#: below a millisecond were one key). Keys are read back by ``from_json`` without options,
#: which parses any fraction: keys written before (milliseconds) still read.
KEY_JSON = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"}


def order_sql(rank: str, pos: str, sub: str, file: str, line: str, part: str, off: str) -> str:
    """SQL: a change's place in the order, the one definition that the MERGE (source against
    row), the deletes check (batch winner against a remembered delete) and the remembered
    deletes compare: ``(rank, position, sub, file, line, partition, offset)``.

    ``rank`` is 0 for a snapshot read (op ``r``), else 1; ``sub`` orders the changes of one
    position: 0 for a delete that goes before its own position's changes (the old key's row of
    a key change, a before half whose after half is not in the batch), 1 for every other change
    (so a row, which never holds such a delete, is 1); the record's coordinates (file, line /
    partition, offset) keep arrival order among equal positions."""
    return (
        f"named_struct('rank', {rank}, 'pos', {pos}, 'sub', {sub}, 'file', {file}, 'line', {line},"
        f" 'part', {part}, 'off', {off})"
    )


def order_of_change(ord_: str) -> str:
    """:func:`order_sql` of a folded change (``_ord`` of :func:`_fold`, ``s._ord`` in the MERGE)."""
    return order_sql(*(f"{ord_}.{f}" for f in ("_rank", "pos", "_sub", "file", "line", "part", "off")))


def rank_sql(op: str, by_position: bool) -> str:
    """SQL: the stream rank of a change or row whose op is the SQL ``op``: 0 for a snapshot
    read (``r``), below every streamed change (1), unless the table's snapshot rows order with
    its streamed changes by position (``by_position``: :attr:`TablePlan.snapshot_by_position`,
    Debezium), where every change ranks 1."""
    return "1" if by_position else f"CASE WHEN {op} = 'r' THEN 0 ELSE 1 END"


def _order_of_row(t: str, by_position: bool = False) -> str:
    """:func:`order_sql` of a target row (alias ``t``; "" for none): its ``_cdc_*`` columns."""
    p = f"{t}." if t else ""
    return order_sql(
        rank_sql(f"{p}_cdc_op", by_position), f"{p}_cdc_position", "1",
        *(f"{p}_cdc_record.{f}" for f in RECORD_FIELDS),
    )


#: :func:`order_sql` of a remembered delete (a ``_cdclake/deletes`` row: a delete is streamed,
#: rank 1; ``sub`` and ``record`` read null in rows written before they existed)
_ORDER_OF_DELETE = order_sql("1", "position", "coalesce(sub, 1)", *(f"record.{f}" for f in RECORD_FIELDS))


#: the columns ``_cdclake/deletes`` gained after its first layout (:mod:`cdclake.apply.audit`),
#: with their types: rows written before a column existed read it as null
DELETES_LATER_COLUMNS = {"record": META_COLUMNS["_cdc_record"], "sub": "int", "event_time_ms": "bigint", "op": "string", "to": "string",
                         "present": "array<string>"}


def read_deletes(spark: SparkSession, deletes_path: str, table: str, version: int | None = None) -> DataFrame:
    """The rows of ``_cdclake/deletes`` (:mod:`cdclake.apply.audit`) of ``table`` (remembered
    deletes, truncates of a history table, a keyless table's copies, moves: every ``op``),
    with every column of :data:`DELETES_LATER_COLUMNS` (null where the table was written
    before it existed; ``op`` null is a delete). ``version``: read as of that Delta version
    (None: the latest the session knows). Lazy: no Spark job of its own."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    rem = reader.load(deletes_path)
    for c, t in DELETES_LATER_COLUMNS.items():
        if c not in rem.columns:
            rem = rem.withColumn(c, F.lit(None).cast(t))
    return rem.where(F.col("table") == F.lit(table))


def key_schema_sql(plan: TablePlan, columns: dict[str, str]) -> str:
    """The schema (Spark DDL) of ``plan``'s key columns with their types in ``columns``:
    ``from_json`` reads a remembered key (:data:`KEY_JSON`) with it."""
    return ", ".join(f"{q(k)} {columns[k]}" for k in plan.key)


def remembered_struct_sql(c: str, types: dict[str, str], history: list = (), point: str = "struct(1, position)") -> str:
    """SQL: the remembered key or image in JSON column ``c`` (:data:`KEY_JSON`, written with
    the names and types of its batch) as a struct of ``types``' columns (name -> Spark type:
    the table's now; a widened type reads its old values, a missing field is null).

    ``history``: the table's column DDL (:attr:`TablePlan.column_history`). A column renamed
    after the remembered change (its order: SQL ``point``, ``struct(rank, position)``) may be
    named by its old name in ``c``, written before the rename was applied: it is read from the
    first of its names that holds a value (:func:`cdclake.apply.plan.names_back`); a column
    whose name denoted another column at the change's point (that column dropped or renamed
    after it, this one added later) is null. Without column DDL, ``from_json`` alone."""
    back = names_back(list(types), list(history))
    extra = {old: types[n] for n, (_since, hops) in back.items() for old, _ in hops if old not in types}
    schema = ", ".join(f"{q(n)} {t}" for n, t in {**types, **extra}.items())
    parsed = f"from_json({c}, {sql_str(schema)})"
    if not extra and all(since is None and not hops for since, hops in back.values()):
        return parsed
    fields = []
    for n, (since, hops) in back.items():
        value = f"{parsed}.{q(n)}"
        if hops:  # (newest name first; an older one only for a change older than its rename)
            value = "coalesce(" + ", ".join(
                [value, *(f"CASE WHEN {point} < struct(1, {position_literal_sql(until)}) THEN {parsed}.{q(old)} END" for old, until in hops)]) + ")"
        if since is not None:
            value = f"CASE WHEN {point} > struct(1, {position_literal_sql(since)}) THEN {value} END"
        fields.append(f"{sql_str(n)}, {value}")
    return f"named_struct({', '.join(fields)})"


def key_as_written_now(c: str, types: dict[str, str], history: list = (), point: str = "struct(1, position)"):
    """Column: the remembered key in JSON column ``c`` as a batch writes it now: read back with
    the key's types now (``types``: key column -> Spark type; a widened type writes its old
    values the same way) and names now (:func:`remembered_struct_sql`)."""
    options = ", ".join(f"{sql_str(k)}, {sql_str(v)}" for k, v in KEY_JSON.items())
    return F.expr(f"to_json({remembered_struct_sql(c, types, history, point)}, map({options}))")


def record_of_sql(ord_: str) -> str:
    """SQL: the ``_cdc_record`` struct of the order struct ``ord_`` (``_ord`` of :func:`_fold`,
    ``s._ord`` in the MERGE)."""
    return f"named_struct('file', {ord_}.file, 'line', {ord_}.line, 'partition', {ord_}.part, 'offset', {ord_}.off)"


#: what Delta refuses in a column name unless the table has column mapping (Parquet's limits)
_NEEDS_MAPPING = re.compile(r"[ ,;{}()\n\t=]")
#: the table property that turns column mapping on (name mode)
COLUMN_MAPPING = {"delta.columnMapping.mode": "name"}


def needs_column_mapping(names) -> bool:
    """True when one of ``names`` (column names) holds a character Delta refuses without
    column mapping (space, ``,;{}()=``, newline, tab)."""
    return any(_NEEDS_MAPPING.search(n) for n in names)


def table_properties(names) -> dict[str, str]:
    """Properties of a new target table with columns ``names``: nothing, so that every Delta
    reader opens it (delta-rs 1.6.6's pyarrow/pandas path reads a column-mapped table of
    reader version 2 as all NULLs, silently), except column mapping when a name needs it."""
    return dict(COLUMN_MAPPING) if needs_column_mapping(names) else {}


#: key types whose batch range is put into the MERGE condition (see :func:`_merge`)
#: back-quote an identifier for Spark SQL (:func:`cdclake.sqltext.quote_ident`)
q = quote_ident


@dataclass
class TableState:
    """What earlier batches left for a table (its row in the progress, ``source`` null).

    delete_position: ``position.order`` of the latest delete ever applied (None: no delete yet).
    truncate_position / truncate_position_text: the latest truncate's position.
    rows: the table's row count after the last batch (None: unknown).
    truncate_record: the latest truncate's record coordinates (``(file, line, partition,
        offset)``; None: a DDL statement's, or a progress row written before they were kept),
        which order it among the changes of its own position.
    renamed: the table renames applied to the table (the progress's ``renamed``).
    column_ddl: ``(order, text, ddl)`` of the DDL statements that dropped or renamed a column of
        the table (the progress's ``column_ddl``; :func:`cdclake.apply.plan.follow_past_column_ddl`).
    move_position: ``position.order`` of the latest partial update that moved a row to a new
        key (remembered in ``_cdclake/deletes``, :func:`follow_moves`), None: none yet.
    moved_in: the points (``position.order``) of the table renames that moved another table's
        rows into this one (from the other tables' ``renamed``; :mod:`cdclake.apply.renames`):
        a history table's versions there begin at the point followed by their own start.
    """

    delete_position: list | None = None
    truncate_position: list | None = None
    truncate_position_text: str | None = None
    rows: int | None = None
    truncate_record: tuple | None = None
    #: the table renames applied to the table: ``(point, record, (database, schema, table))``
    #: by point (see :mod:`cdclake.apply.renames`)
    renamed: list = field(default_factory=list)
    column_ddl: list = field(default_factory=list)
    move_position: list | None = None
    moved_in: list = field(default_factory=list)
    #: the table's Delta version when the last batch that wrote it was done (the progress
    #: table's ``delta_version``; None: not kept): what this batch's own commits came after
    version: int | None = None


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
    #: the table's source columns after the batch (``name type, ...``) when the schema changed
    schema: str | None = None
    #: the table's Delta version after the schema change, when there was one
    schema_version: int | None = None
    #: the key rows were matched on (empty: the whole before image) and where it came from
    key: list[str] = field(default_factory=list)
    key_source: str = ""
    #: the table had already committed this batch (a replay after a crash): Delta skipped its write
    replayed: bool = False
    #: why the table could not be applied (``TABLE_FAILED``): its events of the batch went to the
    #: rejects table and the table was left as it was; None when it was applied
    failed: str | None = None
    #: how many of the batch's events that failure sent to the rejects table
    failed_events: int = 0
    #: the table's Delta version once the batch is applied (None: not known); the progress
    #: table keeps it, so a reader can read every table as of one batch
    delta_version: int | None = None


@dataclass
class TableApply:
    """One table's part of a batch: its result, the batch's winning deletes of the table
    (``table string, key string, position array<decimal(38,0)>, position_text string``; None when
    there are none) and the cached frames to release once the batch is done."""

    result: ApplyResult
    deletes: DataFrame | None = None
    cached: list[DataFrame] = field(default_factory=list)
    #: false when the batch only held a truncate of a table that does not exist yet
    touched: bool = True


def _columns_of(plan: TablePlan) -> dict[str, str]:
    cols = dict(plan.columns)
    for k in plan.key:
        cols.setdefault(k, "string")
    return cols


def evolve_table(
    spark: SparkSession, path: str, plan: TablePlan, columns: dict[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Evolve the existing Delta table at ``path`` to hold ``plan.columns``.

    First the batch DDL's column renames and drops (``plan.renames``/``plan.drops``, see
    :mod:`cdclake.apply.ddl`; column mapping is turned on for them, so neither rewrites data;
    a key column is never dropped); then new columns are added; a column whose batch type is
    wider than its table type is widened (in place where Delta's type widening allows,
    enabling the feature on the table first, else by rewriting the table); one of
    ``plan.untyped`` (no event of the batch states its type) keeps its type. A table written
    before one of :data:`META_COLUMNS` existed (``_cdc_record``) gets it first, by ALTER (its
    rows read null there). Returns the table's
    source columns (name -> Spark type, table order) and human-readable schema changes (empty
    when nothing changed). ``columns``: the table's columns (:func:`_columns`) when the caller
    has read them.
    """
    changes: list[str] = [*plan.unapplied, *plan.ended]
    columns = columns if columns is not None else _columns(spark, path)
    missing_meta = {n: t for n, t in META_COLUMNS.items() if n not in columns}
    if missing_meta:  # a table written before the column existed (``_cdc_record``): its rows read null
        spark.sql(f"ALTER TABLE delta.{q(path)} ADD COLUMNS (" + ", ".join(f"{q(n)} {t}" for n, t in missing_meta.items()) + ")")
        changes.append("add metadata columns (" + ", ".join(missing_meta) + ")")
    current = {n: t for n, t in columns.items() if n not in SYSTEM_COLUMNS}
    batch_renames = {new: old for new, old in plan.renames.items() if new not in plan.earlier_renames}
    points = {new: plan.rename_orders[new] for new in batch_renames if new in plan.rename_orders}
    chains = _chains_held(plan, batch_renames, current)
    if chains:
        _ensure_column_mapping(spark, path, changes, "to rename or drop a column")
        for new, steps in chains.items():
            holder, ended = _merge_chain(spark, path, plan, steps, current, COLUMN_ORDERS in columns, changes)
            if holder is not None:
                batch_renames[new], points[new] = holder, ended
        current = source_column_types(spark, path)
    renames = {new: old for new, old in batch_renames.items() if old in current and new not in current}
    # the new name exists: events written after the rename, delivered before it, made it (a
    # database refuses a rename onto an existing column): the two are merged into it
    # (not a name the batch renames back or swaps: the new name is no old name of the batch's)
    merged = {new: old for new, old in batch_renames.items() if old in current and new in current and new in points
              and new != old and new not in batch_renames.values() and old not in batch_renames
              and old not in plan.key and new not in plan.key}
    changes += [f"not applied: rename column {old} -> {new} ({new} exists)" for new, old in batch_renames.items()
                if old in current and new in current and new not in merged]
    if merged:
        _ensure_column_mapping(spark, path, changes, "to rename or drop a column")
        for new, old in merged.items():
            _merge_and_drop(spark, path, plan, old, new, points[new], COLUMN_ORDERS in columns, changes)
        current = source_column_types(spark, path)
    drops = [n for n in plan.drops if n in current and n not in plan.key]
    if renames or drops:  # column mapping makes both a metadata change (no rewrite)
        _ensure_column_mapping(spark, path, changes, "to rename or drop a column")
        if renames and COLUMN_ORDERS in columns:  # first: a batch prepared again after a crash between
            _rename_in_column_orders(spark, path, renames)  # the two does it again (no row names the old)
        if drops and COLUMN_ORDERS in columns:  # a column of that name added again later is not set yet
            m = q(COLUMN_ORDERS)
            gone = ", ".join(sql_str(n) for n in drops)
            spark.sql(f"UPDATE delta.{q(path)} SET {m} = map_filter({m}, (k, v) -> NOT array_contains(array({gone}), k))"
                      f" WHERE arrays_overlap(map_keys({m}), array({gone}))")
        for new, old in renames.items():
            spark.sql(f"ALTER TABLE delta.{q(path)} RENAME COLUMN {q(old)} TO {q(new)}")
            changes.append(f"rename column {old} -> {new}")
        for n in drops:
            spark.sql(f"ALTER TABLE delta.{q(path)} DROP COLUMN {q(n)}")
            changes.append(f"drop column {n}")
        current = source_column_types(spark, path)
    _add_and_widen(spark, path, plan, current, changes)
    return (source_column_types(spark, path) if changes else current), changes


def _add_and_widen(spark: SparkSession, path: str, plan: TablePlan, current: dict[str, str], changes: list[str]) -> None:
    """:func:`evolve_table`'s last step: add the batch's new columns (``plan.columns`` not in
    ``current``, the table's source columns after renames and drops) and widen the columns whose
    batch type is wider (in place where Delta's type widening allows, else by rewriting the
    table); appends a line per change to ``changes``."""
    added = {n: t for n, t in plan.columns.items() if n not in current}
    if added and needs_column_mapping(added):
        _ensure_column_mapping(spark, path, changes, "a new column name needs it")
    if added:
        cols_sql = ", ".join(f"{q(n)} {t}" for n, t in added.items())
        spark.sql(f"ALTER TABLE delta.{q(path)} ADD COLUMNS ({cols_sql})")
        changes.append("add columns (" + ", ".join(f"{n} {t}" for n, t in added.items()) + ")")
    rewrite: dict[str, str] = {}
    in_place: dict[str, str] = {}
    for n, t in plan.columns.items():
        if n in current and n not in plan.untyped:  # an untyped column keeps the table's type
            wide = T.widen(current[n], t)
            if wide != T.normalize(current[n]):
                (in_place if T.can_widen_in_place(current[n], wide) else rewrite)[n] = wide
                changes.append(f"widen {n} {current[n]} -> {wide}")
    if in_place:
        spark.sql(f"ALTER TABLE delta.{q(path)} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        for n, wide in in_place.items():
            spark.sql(f"ALTER TABLE delta.{q(path)} ALTER COLUMN {q(n)} TYPE {wide}")
    if rewrite:
        # the rewrite keeps the table's partitioning and its generated columns' expressions
        # (field metadata, which the read schema drops)
        meta = {f.name: {GENERATED: f.metadata[GENERATED]} for f in table_schema(spark, path).fields if GENERATED in f.metadata}
        df = spark.read.format("delta").load(path)
        df = df.select([(F.col(q(c)).cast(rewrite[c]) if c in rewrite else F.col(q(c))).alias(c, metadata=meta.get(c) or {})
                        for c in df.columns])
        parts = DeltaTable.forPath(spark, path).detail().select("partitionColumns").first()[0] or []
        df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy(*parts).save(path)


def _chains_held(plan: TablePlan, batch_renames: dict[str, str], current: dict[str, str]) -> dict[str, list]:
    """The batch's chains of column renames (``a -> b -> c``, :attr:`TablePlan.rename_steps`)
    whose table holds a name between the first and the last (events of each name arrived in
    earlier batches than the statements): new name -> its steps. Not a chain that names a key
    column or a name another of the batch's renames reads or writes (a swap: left to the
    one-step rules). Pure Python."""
    out = {}
    for new, old in batch_renames.items():
        steps = plan.rename_steps.get(new, [])
        if len(steps) < 2 or steps[0][0] != old or steps[-1][1] != new:
            continue
        between = [b for _a, b, _o in steps[:-1]]
        names = {old, new, *between}
        others = {n for n2, o2 in batch_renames.items() if n2 != new for n in (n2, o2)}
        if any(b in current for b in between) and not names & set(plan.key) and not names & others:
            out[new] = steps
    return out


def _merge_chain(spark: SparkSession, path: str, plan: TablePlan, steps: list, current: dict[str, str], by_column: bool,
                 changes: list[str]) -> tuple[str | None, list | None]:
    """Merge the names of a chain of column renames (``steps``: ``(old, new, order)``, oldest
    first) that the table holds, one step at a time up to the last step's old name: the name
    that holds the chain's values so far is merged into the next name the table holds, as of
    the position where that holder was renamed away (:func:`_merge_renamed_column`), then
    dropped. Returns the name that holds the chain's values before its last step and the order
    its name ended (the last step's old name and order when the table holds it), or ``(None,
    None)`` when the table holds none. Changes ``current`` and appends to ``changes``."""
    holder, ended = None, None
    for i, (a, b, order) in enumerate(steps):
        if a in current:  # (the holder itself, merged into a name, or the first name the table holds)
            holder, ended = a, order
        if holder is not None and b in current and i < len(steps) - 1:
            _merge_and_drop(spark, path, plan, holder, b, ended, by_column, changes)
            current.pop(holder)
            holder = None
    return holder, ended


def _ensure_column_mapping(spark: SparkSession, path: str, changes: list[str], why: str) -> None:
    """Turn Delta column mapping (by name) on for the table at ``path`` unless it is on, saying
    so in ``changes`` (``why``: what needs it). Renames and drops of columns need it (no
    rewrite), and so do column names Delta refuses without it."""
    if not _has_column_mapping(spark, path):
        spark.sql(f"ALTER TABLE delta.{q(path)} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
        changes.append(f"column mapping on ({why})")


def _merge_and_drop(spark: SparkSession, path: str, plan: TablePlan, old: str, new: str, order: list, by_column: bool,
                    changes: list[str]) -> None:
    """A column rename ``old`` -> ``new`` onto a column the table holds: ``old``'s values merged
    into ``new`` as of ``order`` (:func:`_merge_renamed_column`), then ``old`` dropped; said in
    ``changes``. Needs column mapping on."""
    _merge_renamed_column(spark, path, plan, old, new, order, by_column)
    spark.sql(f"ALTER TABLE delta.{q(path)} DROP COLUMN {q(old)}")
    changes.append(f"rename column {old} -> {new} ({new} was written by later events first: merged into it)")


def _merge_renamed_column(spark: SparkSession, path: str, plan: TablePlan, old: str, new: str, order: list,
                          by_column: bool) -> None:
    """A column rename ``old`` -> ``new`` whose new column exists already (events written
    after the rename arrived in an earlier batch than it): a row takes ``old``'s value into
    ``new`` where ``new`` was not set by a change after the rename (the row's order, or with
    per-column positions ``new``'s, older than ``order``, the rename's position), so that the values of
    changes older than the rename are not lost when ``old`` is dropped after this. One UPDATE;
    run again (a crash before the drop), it changes nothing more. ``by_column``: the table
    keeps :data:`COLUMN_ORDERS` (its ``new`` entry takes ``old``'s where ``old``'s value is
    taken; ``old``'s is removed)."""
    point = f"CAST(named_struct('_rank', 1, 'pos', {position_literal_sql(order)}, '_sub', 0, 'file', NULL, 'line', NULL,"
    point += f" 'part', NULL, 'off', NULL) AS {ORDER_TYPE})"
    row = ord_struct_sql(rank_sql("_cdc_op", plan.snapshot_by_position), "_cdc_position", "1", "_cdc_record")
    m = q(COLUMN_ORDERS)
    take = f"({column_order_sql(m, new, row) if by_column else row}) < {point}"
    # (a NULL new value only: one a snapshot read ranked below the stream wrote after the rename stays)
    sets = [f"{q(new)} = CASE WHEN {take} THEN coalesce({q(new)}, {q(old)}) ELSE {q(new)} END"]
    if by_column:
        o, n = sql_str(old), sql_str(new)
        value = f"CASE WHEN {take} THEN coalesce(element_at({m}, {o}), element_at({m}, {n})) ELSE element_at({m}, {n}) END"
        entry = f"CASE WHEN ({value}) IS NOT NULL THEN named_struct('key', {n}, 'value', {value}) END"
        sets.append(f"{m} = CASE WHEN {m} IS NULL THEN NULL ELSE map_concat(map_filter({m}, (k, v) -> k NOT IN ({o}, {n})),"
                    f" map_from_entries(array_compact(array({entry})))) END")
    spark.sql(f"UPDATE delta.{q(path)} SET {', '.join(sets)}" + ("" if by_column else f" WHERE {take}"))


def _rename_in_column_orders(spark: SparkSession, path: str, renames: dict[str, str]) -> None:
    """Rename the entries of :data:`COLUMN_ORDERS` in the rows whose map names a renamed column
    (``renames``: new name -> old), so that the column keeps the order of the change that set
    it (a column the map does not name counts as the lowest, :func:`_by_column_sets`: a
    snapshot read ranked below the stream would set it). One UPDATE (a Delta commit that
    rewrites the files holding such rows), only in a batch whose DDL renames a column of a
    table with the map; a lambda over each map's few entries, not on the apply path."""
    m = q(COLUMN_ORDERS)
    olds = ", ".join(sql_str(o) for o in [*renames.values(), *renames])  # (a stale entry of a new name: removed)
    moved = ", ".join(f"CASE WHEN map_contains_key({m}, {sql_str(o)}) THEN named_struct('key', {sql_str(n)}, 'value', element_at({m}, {sql_str(o)})) END"
                      for n, o in renames.items())
    named = " OR ".join(f"map_contains_key({m}, {sql_str(o)})" for o in renames.values())
    spark.sql(f"UPDATE delta.{q(path)} SET {m} = map_concat(map_filter({m}, (k, v) -> NOT array_contains(array({olds}), k)),"
              f" map_from_entries(array_compact(array({moved})))) WHERE {named}")


def _has_column_mapping(spark: SparkSession, path: str) -> bool:
    props = DeltaTable.forPath(spark, path).detail().select("properties").first()["properties"] or {}
    return props.get("delta.columnMapping.mode", "none") != "none"


def _columns(spark: SparkSession, path: str) -> dict[str, str]:
    """Every column cdclake writes of the Delta table at ``path``, metadata columns too: name ->
    Spark type. Generated columns (a ``--partition-by`` transform's) are left out: Delta
    computes them on every write."""
    schema = table_schema(spark, path)
    return {f.name: f.dataType.simpleString() for f in (schema.fields if schema is not None else []) if GENERATED not in f.metadata}


def source_column_types(spark: SparkSession, path: str) -> dict[str, str]:
    """The source columns of the Delta table at ``path`` (without :data:`SYSTEM_COLUMNS`)."""
    return {n: t for n, t in _columns(spark, path).items() if n not in SYSTEM_COLUMNS}


def create_empty(spark: SparkSession, path: str, cols: dict[str, str], history: bool = False, layout: TableLayout = TableLayout(),
                 partial: bool = False) -> None:
    """Create an empty target table at ``path`` when none is there: the source columns ``cols``
    (name -> Spark type) and the :data:`META_COLUMNS` (with the :data:`HISTORY_COLUMNS` and
    :data:`PARTIAL_COLUMNS` too when ``history``; :data:`PARTIAL_COLUMNS` when ``partial``), with
    the table properties the names need (:func:`table_properties`) and ``layout``'s
    (:class:`cdclake.routing.TableLayout`: partition columns, a transform's as a generated
    column, and Delta properties). One Delta commit.

    Raises:
        CdclakeError(BAD_OPTION): a partition column of ``layout`` that is not one of ``cols``.
    """
    builder = DeltaTable.createIfNotExists(spark).location(path)
    system = SYSTEM_COLUMNS if history else {**META_COLUMNS, **(PARTIAL_COLUMNS if partial else {})}
    for name, typ in {**cols, **system}.items():
        builder = builder.addColumn(name, typ)
    for part in layout.partition_by:
        needed = part.source or part.name
        if needed not in cols:
            raise CdclakeError("BAD_OPTION", f"--partition-by: the table at {path} has no column {needed!r}"
                                             f" (its columns: {', '.join(cols)})")
        if part.generated is not None:
            if part.name in cols:
                raise CdclakeError("BAD_OPTION", f"--partition-by: the partition column {part.name!r} of the table at {path} would"
                                                 f" hide its own column of that name: partition by {part.name} itself, or by another column")
            builder = builder.addColumn(part.name, part.spark_type, generatedAlwaysAs=part.generated)
    if layout.partition_by:
        builder = builder.partitionedBy(*[part.name for part in layout.partition_by])
    for k, v in {**table_properties(cols), **dict(layout.properties)}.items():
        builder = builder.property(k, v)
    builder.execute()


def _newer(a, b) -> bool:
    """Truncate point a (``(position.order, record)``, see :func:`truncate_sql`) is newer than
    b (None is older than everything)."""
    return a is not None and (b is None or truncate_key(*a) > truncate_key(*b))


@dataclass
class Prepared:
    """A table made ready for its batch's rows by :func:`prepare_table`: ``exists`` (a Delta
    table is at ``path``), ``columns`` (source column -> Spark type, table order) and the
    ``truncate`` point in force (``(position.order, record)``: see :func:`truncate_sql`; or None); ``history``:
    the table keeps its rows' history (SCD type 2, :mod:`cdclake.apply.history`)."""

    plan: TablePlan
    path: str
    state: TableState
    out: TableApply
    exists: bool = False
    columns: dict[str, str] = field(default_factory=dict)
    truncate: tuple | None = None
    rows_before: int | None = 0
    history: bool = False
    #: the table keeps per-column positions (:data:`COLUMN_ORDERS`): a table of current rows
    #: with a key that has received a partial image
    column_orders: bool = False


def prepare_table(spark: SparkSession, plan: TablePlan, path: str, state: TableState, scd_type: int | None = None,
                  layout: TableLayout = TableLayout()) -> Prepared:
    """The first step of a table's batch: every change to the table that does not write the
    batch's rows, each idempotent by itself (a batch prepared again changes nothing more):
    schema evolution (:func:`evolve_table`), a truncate newer than the table's latest one
    (deletes the rows older than it), the empty table of a DDL-only batch.

    Runs before the batch's idempotent writes begin (:func:`cdclake.apply.strategy.write_table` under Delta's
    ``txnAppId``/``txnVersion``): a Delta commit made here under the batch's transaction
    identity would make the table skip the batch's MERGE.

    ``scd_type``: 2 creates a new table as a history table (:mod:`cdclake.apply.history`), 1 as
    a table of current rows; None: as the table is (a new one: 1). A history table's truncate
    is applied by its MERGE (it ends the versions, deletes nothing). ``layout``: how a new
    table is made (``--partition-by``, ``--table-property``); a table with one is created here,
    empty (one more commit, only on its first batch), and its rows MERGEd into it.

    Raises:
        CdclakeError(SCD_TYPE_MISMATCH): ``scd_type`` is not the existing table's.
        CdclakeError(BAD_OPTION): a partition column of ``layout`` the table does not have.
    """
    result = ApplyResult(plan.name, key=list(plan.key), key_source=plan.key_source)
    prep = Prepared(plan, path, state, TableApply(result))
    prep.exists = DeltaTable.isDeltaTable(spark, path)
    batch_truncate = (plan.truncate[0], plan.truncate_record) if plan.truncate else None
    table_truncate = (state.truncate_position, state.truncate_record) if state.truncate_position is not None else None
    prep.truncate = batch_truncate if _newer(batch_truncate, table_truncate) else table_truncate
    prep.rows_before = state.rows if prep.exists else 0

    if prep.exists:
        all_columns = _columns(spark, path)
        prep.history = "_cdc_is_current" in all_columns
        if scd_type is not None and scd_type != (2 if prep.history else 1):
            raise CdclakeError(
                "SCD_TYPE_MISMATCH",
                f"table {plan.name} is SCD type {2 if prep.history else 1} (its folder {path}); it cannot be applied with --scd-type {scd_type}",
            )
        prep.columns, result.schema_changes = evolve_table(spark, path, plan, all_columns)
        prep.column_orders = COLUMN_ORDERS in all_columns
        if not prep.column_orders and not prep.history and plan.key and plan.partial and plan.has_changes:
            # the table's first partial image: its rows keep per-column positions from now on
            # (bookkeeping, like the _cdc_ columns: not a schema change of the source table)
            spark.sql(f"ALTER TABLE delta.{q(path)} ADD COLUMNS ({q(COLUMN_ORDERS)} {PARTIAL_COLUMNS[COLUMN_ORDERS]})")
            prep.column_orders = True
        if _newer(batch_truncate, table_truncate) and not prep.history:
            result.truncated = _truncate(spark, path, batch_truncate, plan.snapshot_by_position)
    elif plan.has_changes or plan.columns:
        prep.history = scd_type == 2
        prep.column_orders = not prep.history and bool(plan.key) and plan.partial
        prep.columns = _columns_of(plan)
        result.schema_changes = ["create table (" + ", ".join(f"{n} {t}" for n, t in prep.columns.items()) + ")", *plan.unapplied, *plan.ended]
        if not plan.has_changes or layout:  # a DDL-only batch: the table exists from its DDL on
            create_empty(spark, path, prep.columns, prep.history, layout, prep.column_orders)
            prep.exists = True
    else:  # a truncate of a table not created yet: the progress row remembers it
        prep.history = scd_type == 2
        prep.out.touched = False
    return prep


def remembered_columns(table: str, key: str) -> list:
    """The columns of a ``_cdclake/deletes`` row (``table``, ``key`` JSON, ``position``,
    ``position_text``, ``record``, ``sub``, ``event_time_ms``) over a frame of folded change rows
    (``_ord``, ``_pos_text``, ``_etime``) whose key JSON is the column ``key``."""
    return [
        F.lit(table).alias("table"),
        F.col(key).alias("key"),
        F.col("_ord.pos").alias("position"),
        F.col("_pos_text").alias("position_text"),
        F.expr(record_of_sql("_ord")).alias("record"),
        F.col("_ord._sub").alias("sub"),
        F.col("_etime").alias("event_time_ms"),
    ]


def write_keyed(spark: SparkSession, events: DataFrame, prep: Prepared, deletes_path: str,
                remember: Callable[[DataFrame | None], None] | None = None) -> TableApply:
    """The keyed strategy's write (SCD type 1, a table with a key; called by
    :func:`cdclake.apply.strategy.write_table` for a table touched by the batch): the batch's
    last change per key MERGEd into the table (or the write that creates it): one commit.

    ``events``: EVENT_SCHEMA rows of the whole batch (kept by the caller; filtered here to
    this table's ``data`` events). ``deletes_path``: the deletes table (``_cdclake/deletes``),
    read only when the batch holds a change older than the table's latest remembered delete.

    When the session carries the batch's transaction identity
    (``spark.databricks.delta.write.txnAppId``/``txnVersion``) and the table has already
    committed it (the batch is replayed after a crash), Delta skips the MERGE; the table's row
    count is then counted again (``ApplyResult.replayed``). Returns the Delta operation metrics
    as an :class:`ApplyResult` inside a :class:`TableApply`. ``remember``: called with the
    batch's ``_cdclake/deletes`` rows of the table (:attr:`TableApply.deletes`, None: nothing)
    before the MERGE.
    """
    out, plan, path, result = prep.out, prep.plan, prep.path, prep.out.result
    columns = prep.columns
    rows_before = prep.rows_before
    if plan.has_changes:
        src, cached, moves, followed = _fold(spark, events, plan, columns, prep.truncate, prep.state, deletes_path, path if prep.exists else None,
                                   by_column=prep.column_orders)
        out.cached = cached
        gone = src.where(F.col("_op") == "d")  # the batch's deletes and the old keys of its key changes
        # a batch of updates without deletes remembers only the keys its updates moved away from:
        # none in most batches, as the plan tells (may_rekey); else one small job finds out,
        # instead of an empty append to the deletes table (its Delta transaction check: 3 jobs)
        if plan.counts.get("d") or moves is not None or (may_rekey(plan) and not gone.isEmpty()):
            out.deletes = gone.select(*remembered_columns(plan.name, "_key_json"))
            if moves is not None:
                out.deletes = out.deletes.unionByName(moves, allowMissingColumns=True)
        if remember is not None:
            remember(out.deletes)
        if prep.exists:
            if not _merge(spark, path, src, plan, columns, result, by_column=prep.column_orders, reach=followed):
                result.replayed = True
                rows_before = None
        else:
            observed = Observation()
            rows = src.where(F.col("_op") != "d").observe(observed, F.count(F.lit(1)).alias("n"))
            writer = as_table_rows(rows, columns, prep.column_orders).write.format("delta").mode("append")
            for k, v in table_properties(columns).items():
                writer = writer.option(k, v)
            writer.save(path)
            result.inserted = int(observed.get["n"])
    prep.rows_before = rows_before
    count_rows(spark, prep)
    return out


def latest_version(spark: SparkSession, path: str | None = None, table: DeltaTable | None = None) -> int:
    """The newest commit version (int) of the Delta table at ``path`` (or of ``table``).

    For a ``path``, read by the driver from the table's log (Delta's ``DeltaLog.update``, no
    Spark job; measured: ``DeltaTable.history(1)`` costs one job, a job per touched table and
    batch). Where that JVM API is not reachable (another Delta version, Spark Connect) and for
    a ``table``, one small job reads ``DeltaTable.history(1)``. Raises AnalysisException when
    ``path`` is not a Delta table."""
    if table is None and path is not None:
        try:
            jvm = spark._jvm
            none = jvm.scala.Option.apply(None)
            log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
            version = int(log.update(False, none, none).version())
            if version >= 0:  # (-1: no Delta table there: DeltaTable.forPath raises below)
                return version
        except (AttributeError, Py4JError):
            pass
    table = table if table is not None else DeltaTable.forPath(spark, path)
    return int(table.history(1).select("version").first()[0])


def table_schema(spark: SparkSession, path: str) -> ST.StructType | None:
    """The schema of the Delta table at ``path`` as its log keeps it (field metadata included,
    which Delta's read schema drops: :data:`GENERATED` marks a generated column); None when
    there is no Delta table there. Read by the driver from the table's log
    (``DeltaLog.update``, as :func:`latest_version`: no Spark job), else from a read of the
    table's schema (without field metadata)."""
    try:
        jvm = spark._jvm
        none = jvm.scala.Option.apply(None)
        snapshot = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path).update(False, none, none)
        if snapshot.version() < 0:
            return None
        return ST.StructType.fromJson(json.loads(snapshot.schema().json()))
    except (AttributeError, Py4JError):
        if not DeltaTable.isDeltaTable(spark, path):
            return None
        return spark.read.format("delta").load(path).schema


def source_columns(spark: SparkSession, path: str) -> list[tuple[str, str]] | None:
    """The source columns (``_cdc_`` ones and generated partition columns left out) of the Delta
    table at ``path``, in its order, as ``(name, DataType.simpleString)``; None when there is no
    Delta table there (:func:`table_schema`: no Spark job)."""
    schema = table_schema(spark, path)
    if schema is None:
        return None
    return [(f.name, f.dataType.simpleString()) for f in schema.fields if not f.name.startswith("_cdc_") and GENERATED not in f.metadata]


def count_rows(spark: SparkSession, prep: Prepared) -> None:
    """Set the result's ``rows_now`` (counted again when the row count before is unknown) and,
    after a schema change, its ``schema`` and ``schema_version``."""
    result, path, rows_before = prep.out.result, prep.path, prep.rows_before
    if rows_before is None:  # a table from before rows were tracked, or a replayed batch: count
        result.rows_now = spark.read.format("delta").load(path).count()
    else:
        result.rows_now = rows_before + result.inserted - result.deleted - result.truncated
    if result.schema_changes:
        result.schema = ", ".join(f"{n} {t}" for n, t in source_column_types(spark, path).items())
        result.schema_version = latest_version(spark, path)  # (from the log: DeltaTable.history cost two jobs)


def as_table_rows(src: DataFrame, columns: dict[str, str], by_column: bool = False) -> DataFrame:
    """The folded rows (``_c<i>`` columns) as rows of the target table (source names);
    ``by_column``: with :data:`COLUMN_ORDERS` (the fold's ``_orders``)."""
    return src.select(
        *[F.col(f"_c{i}").alias(n) for i, n in enumerate(columns)],
        F.col("_ord.pos").alias("_cdc_position"),
        F.col("_pos_text").alias("_cdc_position_text"),
        F.col("_op").alias("_cdc_op"),
        F.col("_etime").alias("_cdc_event_time_ms"),
        F.expr(record_of_sql("_ord")).alias("_cdc_record"),
        *([F.col("_orders").cast(PARTIAL_COLUMNS[COLUMN_ORDERS]).alias(COLUMN_ORDERS)] if by_column else []),
    )


def merge_condition_sql(plan: TablePlan, columns: dict[str, str], reach: list[str] = ()) -> str:
    """The MERGE condition of ``plan``'s table (target ``t``, source ``s`` with columns
    ``_c<i>`` in ``columns`` order): the key columns equal (null-safe; every column for a table
    without a key) and, when the batch gives one, :func:`key_range_sql` on ``t``, so that Delta
    skips the files whose key range lies outside the batch's (tables written in key order, e.g.
    auto-increment keys); ``reach``: keys (JSON) outside the batch that the source may also
    hold (:func:`follow_moves`), which the range must hold too."""
    key = plan.key or list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(columns)}
    cond = " AND ".join(f"t.{q(k)} <=> s.{alias[k]}" for k in key)
    rng = key_range_sql(plan, columns, "t.", reach)
    return cond if rng is None else f"{cond} AND {rng}"


#: the values an integer column holds (a key range beyond them gives no range)
_INT_BOUNDS = {"tinyint": (-(2**7), 2**7 - 1), "smallint": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}


def key_range_sql(plan: TablePlan, columns: dict[str, str], prefix: str = "", reach: list[str] = ()) -> str | None:
    """SQL: the table's first key column (``prefix`` + its name) within the range of the
    batch's values of it, before and after images (:meth:`KeyStats.range_for`), or None when
    the batch gives no safe range. The range comes from the planning aggregate: no job of its
    own. ``reach``: more keys (JSON objects, :data:`KEY_JSON`) the range must hold; only
    integer, decimal and string columns widen by them (another type gives no range)."""
    k0 = plan.key[0] if plan.key else None
    rng = plan.key_stats.range_for(k0, T.normalize(columns[k0])) if k0 is not None else None
    if rng is None:
        return None
    t = T.normalize(columns[k0])
    if reach:
        rng = _widened(rng, t, [json.loads(j, parse_float=Decimal).get(k0) for j in reach])
        if rng is None:
            return None
    if t in _INT_BOUNDS and isinstance(rng[0], int) and not (_INT_BOUNDS[t][0] <= rng[0] and rng[1] <= _INT_BOUNDS[t][1]):
        return None  # a value the column cannot hold (bad data): the CAST would wrap (ANSI off)
    if t.startswith("decimal"):  # the floor/ceiling may not fit the column's own precision
        lo, hi = (f"{v}BD" for v in rng)
    elif isinstance(rng[0], int):
        lo, hi = (f"CAST({v} AS {t})" for v in rng)
    else:
        lo, hi = (f"CAST({sql_str(v)} AS {t})" for v in rng)
    return f"{prefix}{q(k0)} >= {lo} AND {prefix}{q(k0)} <= {hi}"


def _widened(rng: tuple, t: str, values: list) -> tuple | None:
    """``rng`` (:meth:`KeyStats.range_for` of a column of normalized type ``t``) widened to
    hold ``values`` (as JSON reads them), or None when it cannot be (a null, a value of
    another kind, a type compared here only as text: date, timestamp)."""
    lo, hi = rng
    for v in values:
        if isinstance(v, bool) or v is None:
            return None
        if isinstance(rng[0], int) and isinstance(v, (int, Decimal)) and (t in _INT_BOUNDS or t.startswith("decimal")):
            lo, hi = min(lo, math.floor(v)), max(hi, math.ceil(v))
        elif t == "string" and isinstance(v, str):
            lo, hi = min(lo, v), max(hi, v)
        else:
            return None
    return lo, hi


def _merge(
    spark: SparkSession, path: str, src: DataFrame, plan: TablePlan, columns: dict[str, str], result: ApplyResult, by_column: bool = False,
    reach: list[str] = (),
) -> bool:
    """MERGE ``src`` into the table; the metrics go to ``result``. False when Delta skipped the
    MERGE: the session's transaction identity was already committed to the table.

    ``by_column``: the table keeps per-column positions (:data:`COLUMN_ORDERS`; ``src`` has
    :func:`_fold_partial`'s ``_o_c<i>`` and ``_orders``): see :func:`_by_column_sets`.
    ``reach``: keys (JSON) outside the batch that ``src`` may hold (:func:`follow_moves`), for
    the condition's key range (:func:`merge_condition_sql`)."""
    key = plan.key or list(columns)
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    cond = F.expr(merge_condition_sql(plan, columns, reach))
    wins = f"({order_of_change('s._ord')} > {_order_of_row('t', plan.snapshot_by_position)})"
    meta = {
        "_cdc_position": "s._ord.pos",
        "_cdc_position_text": "s._pos_text",
        "_cdc_op": "s._op",
        "_cdc_event_time_ms": "s._etime",
        "_cdc_record": record_of_sql("s._ord"),
    }
    insert = {q(n): f"s.{alias[n]}" for n in names}
    insert.update({q(k): v for k, v in meta.items()})
    if by_column:
        insert[q(COLUMN_ORDERS)] = "s._orders"
        update, changes = _by_column_sets(plan, names, alias, meta, wins)
    elif plan.partial:
        update = {
            q(n): f"s.{alias[n]}" if n in key else f"CASE WHEN s._p{alias[n]} THEN s.{alias[n]} ELSE t.{q(n)} END"
            for n in names
        }
    else:
        update = {q(n): f"s.{alias[n]}" for n in names}
    if not by_column:
        update.update({q(k): v for k, v in meta.items()})
        changes = wins
    metrics = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(src.alias("s"), cond)
        .whenMatchedDelete(condition=f"s._op = 'd' AND {wins}")
        .whenMatchedUpdate(condition=f"s._op != 'd' AND ({changes})", set=update)
        .whenNotMatchedInsert(condition="s._op != 'd'", values=insert)
        .execute()
        .first()
    )
    if metrics is None:  # Delta returns no metrics row for a skipped (already committed) MERGE
        return False
    result.inserted = int(metrics["num_inserted_rows"] or 0)
    result.updated = int(metrics["num_updated_rows"] or 0)
    result.deleted = int(metrics["num_deleted_rows"] or 0)
    return True


def _by_column_sets(plan: TablePlan, names: list[str], alias: dict[str, str], meta: dict[str, str], wins: str) -> tuple[dict[str, str], str]:
    """Per-column positions in the MERGE (:data:`COLUMN_ORDERS`): the update's SET and its
    condition (SQL), for a source ``s`` folded with per-column orders (``s._o_c<i>``, null for
    a column the batch does not carry; :func:`_fold_partial`) and a row ``t``.

    A column of the row has the order its map gives it (a column rename renames the map's
    entry: :func:`_rename_in_column_orders`), the row's own order when the map is null, else
    the lowest order (:data:`_LOWEST_ORDER`: a column no change has set yet, or one added by
    DDL, keeps its value until a change sets it). Each column takes the source's value where the
    source's order for it is greater; the row's ``_cdc_`` columns follow the source only where
    the source's change is newer than the row's (``wins``); the map is written again (null when
    every column has the row's order). The update applies where the source is newer than the
    row or sets a column: an older insert arriving after a partial update fills the columns the
    update did not carry, and an older change never undoes a newer one's column."""
    row = ord_struct_sql(rank_sql("t._cdc_op", plan.snapshot_by_position), "t._cdc_position", "1", "t._cdc_record")
    m = f"t.{q(COLUMN_ORDERS)}"
    update: dict[str, str] = {}
    takes: list[str] = []
    orders: list[tuple[str, str]] = []
    for n in names:
        a = alias[n]
        if n in plan.key:
            update[q(n)] = f"s.{a}"
            continue
        has = f"({column_order_sql(m, n, row)})"
        take = f"(s._o{a} IS NOT NULL AND s._o{a} > {has})"
        takes.append(take)
        update[q(n)] = f"CASE WHEN {take} THEN s.{a} ELSE t.{q(n)} END"
        orders.append((n, f"(CASE WHEN {take} THEN s._o{a} ELSE {has} END)"))
    for k, v in meta.items():
        update[q(k)] = f"CASE WHEN {wins} THEN {v} ELSE t.{q(k)} END"
    new_row = f"(CASE WHEN {wins} THEN CAST(s._ord AS {ORDER_TYPE}) ELSE {row} END)"
    update[q(COLUMN_ORDERS)] = _orders_map_sql(orders, new_row)
    return update, " OR ".join([wins, *takes])


def table_events(events: DataFrame, plan: TablePlan) -> DataFrame:
    """The batch's data events of ``plan``'s table (truncates included)."""
    def same(c: str, v: str | None) -> str:
        return f"`{c}` IS NULL" if v is None else f"`{c}` <=> {sql_str(v)}"

    # (one SQL text: a py4j call, not one per operator)
    return events.where(f"`kind` = 'data' AND {same('database', plan.database)} AND {same('schema', plan.schema)} AND `table` = {sql_str(plan.table)}")


def _applicable(ev: DataFrame) -> DataFrame:
    """Changes that have the image they need (decoders reject records without it)."""
    return ev.where("CASE WHEN op = 'd' THEN before IS NOT NULL ELSE after IS NOT NULL END")


def ord_struct_sql(rank: str, pos: str, sub: str, record: str) -> str:
    """SQL: an order struct (:data:`ORDER_TYPE`) from a record struct ``record`` (file, line,
    partition, offset)."""
    return (
        f"CAST(named_struct('_rank', {rank}, 'pos', {pos}, '_sub', {sub}, 'file', {record}.file, 'line', {record}.line,"
        f" 'part', {record}.partition, 'off', {record}.offset) AS {ORDER_TYPE})"
    )


def position_literal_sql(order: list) -> str:
    """SQL literal of a ``position.order`` (array<decimal(38,0)>; a None element is null)."""
    return "array(" + ", ".join(f"cast({'null' if v is None else v} as decimal(38,0))" for v in order) + ")"


def _names_of(plan: TablePlan, n: str) -> list[str]:
    """Column ``n``'s names in the batch: its own, then (an event written before the batch's DDL
    renamed it) each earlier one of its chain of renames."""
    if n not in plan.renames:
        return [n]
    return [n, *plan.rename_from.get(n, [plan.renames[n]])]


def _value_sql(plan: TablePlan, img: str, n: str) -> str:
    """SQL: column ``n``'s text in the image map ``img`` (under the name it had at the event)."""
    each = [f"element_at({img}, {sql_str(m)})" for m in _names_of(plan, n)]
    return each[0] if len(each) == 1 else f"coalesce({', '.join(each)})"


def _carried_sql(plan: TablePlan, n: str) -> str:
    """SQL: the event carries column ``n`` (or an earlier name of it) in ``present``."""
    each = [f"array_contains(present, {sql_str(m)})" for m in _names_of(plan, n)]
    return each[0] if len(each) == 1 else f"({' OR '.join(each)})"


def _has(plan: TablePlan, n: str):
    """Column: the before image names column ``n`` (or an earlier name of it)."""
    return F.expr(" OR ".join(f"map_contains_key(before, {sql_str(m)})" for m in _names_of(plan, n)))


def _paired(ev: DataFrame) -> DataFrame:
    """:func:`change_rows`' events with their update halves paired (``_sub`` added): a before half
    whose after half is not in the batch (it came in an earlier batch or comes in a later one)
    deletes its row, ordered before every change of its position (``_sub`` 0): it removes the
    old key's row of a key change and never the row its after half writes."""
    lone = (F.col("op") == "u") & F.col("after").isNull() & F.col("before").isNotNull() & F.col("present").isNull()
    return (
        pair_update_halves(ev, keep_lone_before=True)
        .withColumn("_sub", F.when(lone, 0).otherwise(1))
        .withColumn("op", F.when(lone, F.lit("d")).otherwise(F.col("op")))
    )


def _completed_partials(ev: DataFrame, plan: TablePlan, names: list[str]) -> DataFrame:
    """:func:`change_rows`' events with each partial update whose before image holds every
    column made a full one: its after image is the before image with the carried columns
    replaced. It is then matched and moved like a full update: on a table without a key (the
    whole before image is the match), and when it changes the key (the old key's row is
    deleted). On a table without a key every partial update with a before image is: that image
    is the row's identity, so a column it lacks reads as NULL, as in a full image. Right for a
    column added by DDL after the change was written; a producer that leaves a column of the
    row out of the before image (LOBs) makes the match miss, as it did before."""
    complete = (F.col("op") == "u") & F.col("present").isNotNull() & F.col("before").isNotNull()
    if plan.key:
        for n in names:
            complete = complete & _has(plan, n)
    whole = F.map_from_arrays(
        F.array(*[F.lit(n) for n in names]),
        F.array(*[F.when(F.expr(_carried_sql(plan, n)), F.expr(_value_sql(plan, "after", n)))
                  .otherwise(F.expr(_value_sql(plan, "before", n))) for n in names]),
    )
    return ev.withColumn("after", F.when(complete, whole).otherwise(F.col("after"))).withColumn(
        "present", F.when(complete, F.lit(None).cast("array<string>")).otherwise(F.col("present"))
    )


def change_rows(
    events: DataFrame, plan: TablePlan, columns: dict[str, str], truncate: tuple | None, every_update_moves: bool = False,
    rank: str | None = None,
) -> DataFrame:
    """The batch's changes of ``plan``'s table, one row per change, typed as the table's
    columns: ``_c<i>`` (column ``i`` of ``columns``, the image's value), ``_p_c<i>`` (boolean:
    the image carries the column), ``_op`` (``c``/``u``/``r``/``d``), ``_present``
    (array<string>, the event's ``present``), ``_ord`` (the order struct: ``_rank`` int,
    ``pos`` array<decimal(38,0)>, ``_sub`` int, ``file``, ``line``, ``part``, ``off``),
    ``_pos_text`` string, ``_etime`` bigint (ms). Update halves are paired (a lone before half
    becomes a delete with ``_sub`` 0); a partial update whose before image holds every column
    becomes a full one (its before image with the carried columns replaced), and so does every
    partial update with a before image of a table without a key; an update that
    changes the key adds a delete of the old key's row (``_sub`` 0); truncates are left out, and so are changes not newer than
    ``truncate`` (a truncate point, :func:`truncate_sql`; None: keep all).

    When ``plan.moves`` (a keyed table), the rows also have ``_from``: the old key (a struct of
    the key's ``_c<i>``) of a partial update that changes the key, else null; the caller passes
    them through :func:`fill_moves`, which completes those updates and drops ``_from``.

    ``every_update_moves``: every full update with a before image adds the delete of its
    before image, also one whose images are equal (:mod:`cdclake.apply.keyless`: an update
    of a table without a key is a copy taken and one made). ``rank``: SQL over an event of its
    stream rank (``op``, ``position.order``); None: :func:`rank_sql` (a table without a key
    ranks a snapshot read a rename moved in as streamed: :func:`cdclake.apply.keyless.rank_of`)."""
    key = plan.key or list(columns)
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    ev = table_events(events, plan).where(F.col("op") != "t")
    ev = _paired(ev) if plan.halves else ev.withColumn("_sub", F.lit(1))
    ev = _applicable(ev).withColumn("_rank", F.expr(rank or rank_sql("op", plan.snapshot_by_position)).cast("int"))
    if truncate is not None:
        change = order_sql("_rank", "position.order", "_sub", *(f"source_record.{f}" for f in RECORD_FIELDS))
        ev = ev.where(F.expr(f"{change} > {truncate_sql(truncate)}"))

    if plan.partial:
        ev = _completed_partials(ev, plan, names)

    # An update that changes the key first deletes the row of the old key (same position).
    key_after = F.struct(*[F.expr(cast_sql(_value_sql(plan, "after", k), columns[k])).alias(alias[k]) for k in key])
    key_before = F.struct(*[F.expr(cast_sql(_value_sql(plan, "before", k), columns[k])).alias(alias[k]) for k in key])
    moves = bool(plan.moves and plan.key)
    # a partial update that moves its row (plan.moves): its before image names every key
    # column, with another key; the columns it does not carry come from the old key's row
    # (fill_moves), which it names in ``_from``
    changes_key = (F.col("op") == "u") & F.col("before").isNotNull()
    if not every_update_moves:
        changes_key = changes_key & ~key_before.eqNullSafe(key_after)
    moving = F.lit(False)
    if moves:
        moving = changes_key & F.col("present").isNotNull()
        for k in key:  # (both images name the key: a partial image without it is no move)
            moving = moving & _has(plan, k) & F.expr(_carried_sql(plan, k))
        ev = ev.withColumn("_from", F.when(moving, key_before))
    rows = ev
    if plan.counts.get("u"):
        moved = ev.where(changes_key & F.col("present").isNull() | moving)
        moved = moved.withColumn("op", F.lit("d")).withColumn("after", F.lit(None)).withColumn("_sub", F.lit(0))
        if moves:
            moved = moved.withColumn("_from", F.when(F.lit(False), key_before))
        rows = rows.unionByName(moved)
    # (SQL texts: about two py4j round trips per column, the list passed element by element;
    # a Column built per operator cost ~10 per column, ~15 % of a batch's py4j calls)
    rows = rows.withColumn("_img", F.expr("CASE WHEN op = 'd' THEN before ELSE after END"))
    return rows.selectExpr(
        "op AS _op",
        "present AS _present",
        "named_struct('_rank', _rank, 'pos', position.order, '_sub', _sub, 'file', source_record.file, 'line', source_record.line,"
        " 'part', source_record.partition, 'off', source_record.offset) AS _ord",
        "position.text AS _pos_text",
        "event_time_ms AS _etime",
        *[f"{cast_sql(_value_sql(plan, '_img', n), columns[n])} AS {alias[n]}" for n in names],
        *[f"_img IS NOT NULL AND (present IS NULL OR {_carried_sql(plan, n)}) AS _p{alias[n]}" for n in names],
        *(["_from"] if moves else []),
    )


#: the columns of a change row (:func:`change_rows`) besides the table's ``_c<i>``/``_p_c<i>``
_ROW_META = ["_op", "_present", "_ord", "_pos_text", "_etime"]


def _before_the_move(df: DataFrame, want: DataFrame, keys: list[str]) -> DataFrame:
    """The changes of ``df`` (change rows) of each move's old key (``want``: ``_m_from``, the
    old key as a struct of ``keys``; ``_m_ord``, the move's order) older than the move, joined
    with it (broadcast); not the update's own delete of the old key's row (same record, sub 0)."""
    w = F.broadcast(want)
    cond = F.col("_ord") < w["_m_ord"]
    for a in keys:
        cond = cond & df[a].eqNullSafe(w["_m_from"][a])
    own_delete = F.col("_ord").withField("_sub", F.lit(0)).eqNullSafe(w["_m_ord"].withField("_sub", F.lit(0)))
    return df.join(w, cond & ~own_delete)


def _carried_orders(df: DataFrame, values: list[str]) -> list:
    """``_o_c<i>`` per column of ``values`` (``_c<i>`` names): a change's order for each column
    it carries (its own ``_o_c<i>`` where ``df`` has one, else its ``_ord``), null for the others."""
    return [F.when(F.col("_p" + a), F.coalesce(*([F.col("_o" + a)] if "_o" + a in df.columns else []), F.col("_ord").cast(ORDER_TYPE)))
            .alias("_o" + a) for a in values]


def _truncate_points(truncates: DataFrame, want: DataFrame, types: ST.StructType, values: list[str], history: bool) -> DataFrame:
    """:func:`fill_moves`' points of the batch's truncates (``truncates``: ``_ord``) older than
    each move (``want``: ``_m_from``, ``_m_ord``): a truncate ends every key, its point has no
    values (``types``: the rows' schema)."""
    ended = truncates.select(F.col("_ord").cast(ORDER_TYPE).alias("_ord")).join(F.broadcast(want), F.col("_ord") < F.col("_m_ord"))
    return ended.select(*[F.lit(None).cast(types[a].dataType).alias(a) for a in values], *[F.lit(True).alias("_p" + a) for a in values],
                        F.lit("t").alias("_op"), F.lit(None).cast("array<string>").alias("_present"), "_ord",
                        F.lit(None).cast(types["_pos_text"].dataType).alias("_pos_text"),
                        F.lit(None).cast(types["_etime"].dataType).alias("_etime"), *[F.col("_ord").alias("_o" + a) for a in values],
                        "_m_from", "_m_ord", *([F.lit(1).alias("_src")] if history else []))


def _one_point_per_order(points: DataFrame, values: list[str], flags: list[str], orders: list[str]) -> DataFrame:
    """:func:`fill_moves`' points of a history table, per move (``_m_from``, ``_m_ord``): one
    point per order (the lower ``_src``: a stored version before the batch's change of the same
    order); the oldest, when stored, carries every column (the versions before it were not read)."""
    per_move = Window.partitionBy("_m_from", "_m_ord")
    points = points.withColumn("_n", F.row_number().over(per_move.orderBy("_ord", "_src")))
    points = points.withColumn("_dup", F.lag("_ord").over(per_move.orderBy("_ord", "_src")).eqNullSafe(F.col("_ord"))).where(~F.col("_dup"))
    whole = (F.col("_n") == 1) & (F.col("_src") == 0) & ~F.col("_op").isin("d", "t")
    return points.select(
        *values, *[(F.col(f) | whole).alias(f) for f in flags], "_op",
        F.when(whole, F.lit(None).cast("array<string>")).otherwise(F.col("_present")).alias("_present"), "_ord", "_pos_text", "_etime",
        *[F.when(whole & F.col(o).isNull(), F.col("_ord").cast(ORDER_TYPE)).otherwise(F.col(o)).alias(o) for o in orders], "_m_from", "_m_ord")


def _with_filled(rows: DataFrame, state: DataFrame, names: list[str], alias: dict[str, str], keys: list[str], given: list[str],
                 history: bool) -> DataFrame:
    """:func:`fill_moves`' last step: each moving row of ``rows`` (``_from`` set) joined with its
    old key's ``state`` (the fold before the move: ``_s_op``, ``_s_c<i>``, ``_s_p_c<i>``,
    ``_s_o_c<i>``) takes the values it does not carry from it (``_o_c<i>``: the order of the
    change a filled column took); the other rows are kept as they are (``_o_c<i>`` null)."""
    values = [alias[n] for n in names]
    flags = ["_p" + a for a in values]
    moving = F.col("_from").isNotNull()
    m = rows.where(moving).join(state, F.col("_from").eqNullSafe(F.col("_m_from")) & F.col("_ord").eqNullSafe(F.col("_m_ord")), "left")
    filled_cols, filled_flags, filled_orders = [], [], []
    for a in values:
        if a in keys:
            filled_cols.append(F.col(a))
            filled_flags.append(F.col("_p" + a))
            continue
        use = F.coalesce(~F.col("_p" + a) & ~F.col("_s_op").isin("d", "t") & F.col("_s_p" + a), F.lit(False))
        filled_cols.append(F.when(use, F.col("_s" + a)).otherwise(F.col(a)))
        filled_flags.append(F.col("_p" + a) | use)
        filled_orders.append(F.when(use, F.col("_s_o" + a)).otherwise(F.col("_o" + a) if "_o" + a in given else F.lit(None)).alias("_o" + a))
    whole = F.lit(True)
    for f in filled_flags:
        whole = whole & f
    keep = [] if history else ["_from"]
    other = [c for c in rows.columns if c not in values + flags + ["_present"] + keep + given]
    filled = m.select(
        *[c.alias(a) for c, a in zip(filled_cols, values)],
        *[f.alias(n) for f, n in zip(filled_flags, flags)],
        F.when(whole, F.lit(None).cast("array<string>"))
        .otherwise(F.array_compact(F.array(*[F.when(f, F.lit(n)) for n, f in zip(names, filled_flags)]))).alias("_present"),
        *other,
        *filled_orders,
    )
    kept = rows.where(~moving).drop(*keep).select(
        "*", *[F.lit(None).cast(ORDER_TYPE).alias("_o" + a) for a in values if a not in keys and "_o" + a not in given])
    return kept.unionByName(filled)


def fill_moves(
    rows: DataFrame, prior: DataFrame | None, plan: TablePlan, columns: dict[str, str], truncates: DataFrame | None = None,
    history: bool = False, read_from: DataFrame | None = None,
) -> DataFrame:
    """Complete the partial updates that move their row to a new key (``rows`` of
    :func:`change_rows` with its ``_from`` column, the old key as a struct of ``_c<i>``
    fields; present when ``plan.moves``): a column such an update does not carry takes the
    old key's value as of just before the update, folded as :func:`_fold_partial` folds (the
    old key's last full image before it, then each column's latest carried value) from the
    batch's own changes of the old key and ``prior``. Returns ``rows`` without ``_from``.

    ``prior``: the table's rows as full images in the shape of change rows (``_c<i>``,
    ``_op``, ``_ord`` (:data:`ORDER_TYPE`; a union ignores its fields' nullability), ``_pos_text``, ``_etime``: every column counts as carried at the row's
    order; with ``_o_c<i>``, ``_p_c<i>`` and ``_present`` as well, per-column orders of a table
    with :data:`COLUMN_ORDERS`, :func:`_table_points`), or None for a new table; it is joined
    with the moved keys (broadcast). ``truncates``: ``_ord`` of the
    batch's truncates that ``rows`` still hold changes older than (SCD type 2; SCD type 1
    truncates the table and drops those changes first), or None.

    A column whose old value is unknown (no change of the old key before the update is known,
    or the last one is a delete or a truncate, or no change has set the column) stays not
    carried: the update then changes only the columns it carries, as before, and its
    ``_present`` lists the columns it now carries. Returns ``rows`` also with ``_o_c<i>`` per
    non-key column (:data:`ORDER_TYPE`): the order of the change whose value a filled column
    took (null for the others: the row's own), which :func:`_fold_partial` keeps, so that a
    change of the old key older than the move but newer than that value, arriving later,
    still sets the column in the new key's row (:func:`follow_moves`). Limits: a move of a row that another partial move of the same batch
    wrote (a chain of key changes) takes only the columns that move carried (unless filled by
    passes with ``read_from``, as history tables do); a move older than
    the table's row of the old key (which a later change overwrote) knows only the batch's
    changes of the old key.

    ``history`` (SCD type 2, :mod:`cdclake.apply.history`): ``rows`` and ``prior`` (the
    table's versions as points) have ``_src`` (-1 a move made again, 0 a stored point, 1 the
    batch's); ``prior`` keeps its own ``_p_c<i>`` and ``_present`` (a version carries what its
    change carried), but the oldest point of an old key, when stored, carries every column (the
    versions before it were not read), as :func:`cdclake.apply.history._versions` reads them;
    of two points with one order the one with the lower ``_src`` counts. ``rows`` keep
    ``_from``. ``read_from``: the rows the old keys' changes are read from (default ``rows``):
    a chain of moves is filled by passes, each reading the previous pass's filled rows."""
    if "_from" not in rows.columns:
        return rows
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    keys = [alias[k] for k in plan.key]
    values = [alias[n] for n in names]
    flags = ["_p" + a for a in values]
    moving = F.col("_from").isNotNull()
    want = rows.where(moving).select(F.col("_from").alias("_m_from"), F.col("_ord").alias("_m_ord")).distinct()

    orders = ["_o" + a for a in values]
    given = [c for c in rows.columns if c.startswith("_o_c")]  # (follow_moves' copies: their columns' own orders)
    src = ["_src"] if history else []
    own = _before_the_move((rows if read_from is None else read_from).select(*values, *flags, *_ROW_META, *given, *src), want, keys)
    parts = [own.select(*values, *flags, *_ROW_META, *_carried_orders(own, values), "_m_from", "_m_ord", *src)]
    if prior is not None and history:  # versions as points: each carries what its change carried
        old = _before_the_move(prior.select(*values, *flags, *_ROW_META, "_src"), want, keys)
        parts.append(old.select(*values, *flags, *_ROW_META, *_carried_orders(old, values), "_m_from", "_m_ord", "_src"))
    elif prior is not None:
        if orders[0] not in prior.columns:  # full images: every column has the row's order
            prior = prior.select(*values, *[F.lit(True).alias(f) for f in flags], "_op", F.lit(None).cast("array<string>").alias("_present"),
                                 F.col("_ord").cast(ORDER_TYPE).alias("_ord"), "_pos_text", "_etime")
            prior = prior.select("*", *_carried_orders(prior, values))
        parts.append(_before_the_move(prior, want, keys).select(*values, *flags, *_ROW_META, *orders, "_m_from", "_m_ord"))
    if truncates is not None:  # a truncate ends every key: its point has no values
        parts.append(_truncate_points(truncates, want, rows.schema, values, history))
    points = reduce(DataFrame.unionByName, parts)
    if history:  # one point per order (the lower _src); the oldest, when stored, carries every column
        points = _one_point_per_order(points, values, flags, orders)
    state = _fold_partial(points, ["_m_from", "_m_ord"], names, alias, given=True).select(
        "_m_from", "_m_ord", F.col("_op").alias("_s_op"), *[F.col(c).alias("_s" + c) for c in values + flags],
        *[F.col("_o" + a).alias("_s_o" + a) for a in values if a not in keys],
    )
    return _with_filled(rows, state, names, alias, keys, given, history)


#: a remembered move (``_cdclake/deletes`` ``op``): a partial update moved the row of ``key`` to
#: the key ``to`` (:func:`follow_moves`)
MOVED = "m"


def moves_to_remember(rows: DataFrame, plan: TablePlan, columns: dict[str, str]) -> DataFrame:
    """``_cdclake/deletes`` rows (``table``, ``key``, ``position``, ``position_text``,
    ``record``, ``sub`` 0, ``event_time_ms``, ``op`` :data:`MOVED`, ``to``, ``present``) of the
    batch's partial updates that move a row to a new key (``rows`` of :func:`change_rows` with
    ``_from``): ``key`` the old key, ``to`` the new one, both JSON as a delete's key
    (:data:`KEY_JSON`), at the move's position with ``sub`` 0, the order of the old key's
    delete it makes; ``present`` the columns the move itself carries (its event's
    ``present``). Every move of the batch, not only each key's last change: a change of the
    old key older than the move that arrives in a later batch follows it
    (:func:`follow_moves`; a history table recomputes the new key's versions from the move
    on, :func:`cdclake.apply.history.history_source`)."""
    alias = {n: f"_c{i}" for i, n in enumerate(columns)}
    moved = rows.where(F.col("_from").isNotNull() & (F.col("_op") != "d"))
    return moved.select(
        F.lit(plan.name).alias("table"),
        F.to_json(F.struct(*[F.col("_from").getField(alias[k]).alias(k) for k in plan.key]), KEY_JSON).alias("key"),
        F.col("_ord.pos").alias("position"),
        F.col("_pos_text").alias("position_text"),
        F.expr(record_of_sql("_ord")).alias("record"),
        F.lit(0).alias("sub"),
        F.col("_etime").alias("event_time_ms"),
        F.lit(MOVED).alias("op"),
        F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in plan.key]), KEY_JSON).alias("to"),
        F.col("_present").alias("present"),
    )


def _remembered_reach(spark: SparkSession, plan: TablePlan, columns: dict[str, str], deletes_path: str) -> tuple[list, object]:
    """:func:`follow_moves`' chains: the table's remembered moves not older than the batch's
    oldest change and the remembered deletes of the keys they touch (two small Spark jobs,
    none more when there is no such move), resolved on the driver
    (:func:`cdclake.apply.moves.resolve`). Returns the reaches (empty: nothing to follow) and
    the Spark type of their orders (None when empty)."""
    key_types = {k: columns[k] for k in plan.key}
    rem = read_deletes(spark, deletes_path, plan.name)
    rem = rem.where(F.col("key").isNotNull() & (F.col("op").isNull() | F.col("op").isin("d", MOVED)))
    if plan.min_data is not None:  # (an entry older than the batch's oldest change decides nothing)
        rank, order = plan.min_data
        rem = rem.where(F.expr(f"struct(1, position) >= struct({rank}, {position_literal_sql(order)})"))
    ent = rem.select(key_as_written_now("key", key_types, plan.column_history).alias("k"), F.expr(_ORDER_OF_DELETE).alias("o"),
                     F.when(F.col("op") == MOVED, key_as_written_now("to", key_types, plan.column_history)).alias("t"))
    moved = ent.where(F.col("t").isNotNull()).collect()
    if not moved:
        return [], None
    touched = sorted({r.k for r in moved} | {r.t for r in moved})
    ended = ent.where(F.col("t").isNull() & F.col("k").isin(touched)).collect()
    return resolve([Entry(r.k, r.o, order_sort_key(r.o), r.t) for r in moved + ended]), ent.schema["o"].dataType


def _uncut(cand: DataFrame, dels: DataFrame) -> DataFrame:
    """:func:`follow_moves`' candidate copies (``cand``: a change's key ``_kj`` and order
    ``_co`` joined with its reach, ``_i_hi``, ``_i_segs``) without those whose chain a delete of
    the batch cuts (``dels``: ``_dk`` key JSON, ``_do`` order): a delete inside any stretch of
    the chain, the first one beginning at the change itself."""
    first = F.struct(F.col("_kj").alias("k"), F.col("_co").alias("lo"), F.lit(True).alias("incl"), F.col("_i_hi").alias("hi"))
    stretches = cand.select(F.col("_kj").alias("_hk"), F.col("_co").alias("_hc"),
                            F.explode(F.concat(F.array(first), F.col("_i_segs"))).alias("_s"))
    s = F.col("_s")
    cut = stretches.join(dels, (s["k"] == F.col("_dk")) & F.when(s["incl"], F.col("_do") >= s["lo"]).otherwise(F.col("_do") > s["lo"])
                         & (s["hi"].isNull() | (F.col("_do") < s["hi"])), "left_semi").select("_hk", "_hc")
    return cand.join(cut, (F.col("_kj") == F.col("_hk")) & F.col("_co").eqNullSafe(F.col("_hc")), "left_anti")


def _moved_copies(cand: DataFrame, rows: DataFrame, plan: TablePlan, columns: dict[str, str], alias: dict[str, str],
                  key_schema: str) -> tuple[DataFrame, list[str]]:
    """:func:`follow_moves`' copies: each candidate change (``cand``, joined with its reach:
    ``_i_to`` the key it goes to, ``_i_via`` the move that brings it) as a partial update of
    that key (``rows``' columns, ``_ord`` the move's order), with ``_o_c<i>`` the change's own
    order per column it carries and ``_moved_in`` true. Returns the copies and the ``_o_c<i>``
    names."""
    carried = [n for n in columns if n not in plan.key]
    orders = ["_o" + alias[n] for n in carried]
    to = F.from_json(F.col("_i_to"), key_schema)
    via = F.struct(*[F.col("_i_via")[f].alias(g) for f, g in
                     (("rank", "_rank"), ("pos", "pos"), ("sub", "_sub"), ("file", "file"), ("line", "line"), ("part", "part"),
                      ("off", "off"))]).cast(ORDER_TYPE)
    made = {alias[k]: to.getField(k).cast(columns[k]) for k in plan.key}
    made.update({"_p" + alias[k]: F.lit(True) for k in plan.key})
    made.update({
        "_ord": via,
        "_op": F.lit("u"),
        "_present": F.array_compact(F.array(*[F.lit(k) for k in plan.key], *[F.when(F.col("_p" + alias[n]), F.lit(n)) for n in carried])),
    })
    if "_from" in rows.columns:
        made["_from"] = F.lit(None).cast(rows.schema["_from"].dataType)
    copies = cand.select(*[made.get(c, F.col(c)).alias(c) for c in rows.columns],
                         *[F.when(F.col("_p" + o[2:]), F.col("_ord").cast(ORDER_TYPE)).alias(o) for o in orders],
                         F.lit(True).alias("_moved_in"))
    return copies, orders


def follow_moves(
    spark: SparkSession, rows: DataFrame, plan: TablePlan, columns: dict[str, str], deletes_path: str
) -> tuple[DataFrame, list[str]]:
    """``rows`` of :func:`change_rows` (any ``_from`` kept) with, added, a copy of each change
    (not a delete) that a remembered move carries to another key (``_cdclake/deletes``,
    :func:`moves_to_remember`): the copy is the change as a partial update (op ``u``,
    ``_present`` the columns it carries, ``_from`` null) of the key the row was moved to last.
    All rows also get ``_o_c<i>`` per non-key column (:data:`ORDER_TYPE`): on a copy, the
    change's own order for each column it carries, while its ``_ord`` is the order of the move
    that brought it there (sub 0: before that move's own update of the new key); null on
    ``rows``' own changes (their ``_ord``). So a copy is its new key's change from that move
    on (the fold's last full image, :func:`fill_moves`' state before an older move of the key,
    the deletes check) while its values compete per column with their own positions
    (:func:`_fold_partial`, :func:`_by_column_sets`). ``_moved_in`` (boolean, true on a copy):
    :func:`_fold_partial` begins the key's row at a copy's move, as at a full image (the key's
    changes before it are of an earlier row of that key).

    A change of key A is followed when A's first delete or move not older than the change
    (remembered, or a delete of the batch; a move wins over its own delete of A, of the same
    order) is a move, to its new key B; there, B's first delete or move newer than that move
    decides again: a move goes on (up to :data:`cdclake.apply.moves.MOVE_HOPS` moves), a delete drops the copy,
    nothing makes the copy. So the old key's insert (or any change) that arrives in a later
    batch than the partial update that moved its row still sets, in the row the key went to,
    the columns no newer change has set, as it would have had it arrived first; the change
    itself, under the old key, is still dropped there by the remembered move
    (:func:`_drop_older_than_deletes`).

    How: the table's remembered moves not older than the batch's oldest change, then the
    remembered deletes of the keys they touch, are collected (two small Spark jobs; none more
    when there is no such move) and every chain is resolved once on the driver
    (:func:`cdclake.apply.moves.resolve`) into stretches of a key's history that lead to a
    key; the batch's changes meet them in one range join with that small table, and, when the
    batch holds deletes (:attr:`TablePlan.max_delete`, :attr:`TablePlan.moves`), one join with
    those drops the changes whose chain a delete of the batch cuts.

    Read only when the batch holds a change not newer than the table's latest remembered move
    (:func:`needs_move_check`), on a table with per-column positions. Returns the rows
    (unchanged, without ``_o_c<i>``, when no remembered move can be followed) and the keys
    (JSON, :data:`KEY_JSON`) copies may go to, which may lie outside the batch's key range
    (:func:`merge_condition_sql` widens the range with them).

    Limits: a chain longer than :data:`cdclake.apply.moves.MOVE_HOPS` moves is not followed; a move that itself
    arrives late carries only the columns it carries, not its old key's row, further along a
    chain applied before it; a partial change of the new key's earlier row (before a delete
    of it older than the move) that arrives in the same batch as a copy is not told apart
    from the new row's changes; the remembered moves newer than the batch's oldest change are
    read to the driver (a late batch behind very many key changes costs driver memory)."""
    reach, order_type = _remembered_reach(spark, plan, columns, deletes_path)
    if not reach:
        return rows, []
    key_schema = key_schema_sql(plan, columns)
    alias = {n: f"_c{i}" for i, n in enumerate(columns)}
    seg_type = ST.StructType([ST.StructField("k", ST.StringType()), ST.StructField("lo", order_type),
                              ST.StructField("incl", ST.BooleanType()), ST.StructField("hi", order_type)])
    reaches = spark.createDataFrame(
        [(r.key, r.lo, r.hi, r.to, r.via, [(s.key, s.lo, False, s.hi) for s in r.segments]) for r in reach],
        ST.StructType([ST.StructField("_i_key", ST.StringType()), ST.StructField("_i_lo", order_type),
                       ST.StructField("_i_hi", order_type), ST.StructField("_i_to", ST.StringType()),
                       ST.StructField("_i_via", order_type), ST.StructField("_i_segs", ST.ArrayType(seg_type))]),
    )
    key_json = F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in plan.key]), KEY_JSON)
    this = F.expr(order_of_change("_ord"))
    changes = rows.where(F.col("_op") != "d").withColumn("_kj", key_json).withColumn("_co", this)
    cand = changes.join(F.broadcast(reaches), (F.col("_kj") == F.col("_i_key")) & (F.col("_co") <= F.col("_i_hi"))
                        & (F.col("_i_lo").isNull() | (F.col("_co") > F.col("_i_lo"))))
    if plan.max_delete is not None or plan.moves:  # the batch holds deletes: one may cut a chain
        cand = _uncut(cand, rows.where(F.col("_op") == "d").select(key_json.alias("_dk"), this.alias("_do")))
    copies, orders = _moved_copies(cand, rows, plan, columns, alias, key_schema)
    out = rows.select("*", *[F.lit(None).cast(ORDER_TYPE).alias(o) for o in orders], F.lit(None).cast("boolean").alias("_moved_in"))
    return out.unionByName(copies), sorted({r.to for r in reach})


def _fold(
    spark: SparkSession,
    events: DataFrame,
    plan: TablePlan,
    columns: dict[str, str],
    truncate: tuple | None,
    state: TableState,
    deletes_path: str,
    path: str | None = None,
    by_column: bool = False,
) -> tuple[DataFrame, list[DataFrame], DataFrame | None, list[str]]:
    """The MERGE source: the batch's last change per key (folded column by column for partial
    images), typed as the table's columns ``_c<i>``, with ``_op``, ``_ord`` (the order struct),
    ``_pos_text``, ``_etime``, ``_p_c<i>`` (column carried) and ``_key_json``. Kept
    (:func:`cdclake.frames.keep`) unless small and of full images (:data:`SMALL_SOURCE_EVENTS`); returns
    it, the frames to release, the batch's moves to remember (:func:`moves_to_remember`,
    None when the batch moves no row) and the keys (JSON) changes may have followed remembered
    moves to (:func:`follow_moves`; empty: none), which the MERGE's key range must hold. ``path``: the existing table (None: created by this
    batch), read only for the rows that partial updates move to a new key (:func:`fill_moves`).
    A change older than a remembered move of its key goes to the move's new key first
    (:func:`follow_moves`; only on a table with per-column positions).
    ``by_column``: the table keeps :data:`COLUMN_ORDERS`: ``src`` also has ``_o_c<i>`` and
    ``_orders`` (:func:`_fold_partial`), which the MERGE compares with the row's."""
    key = plan.key or list(columns)
    names = list(columns)
    alias = {n: f"_c{i}" for i, n in enumerate(names)}
    rows = change_rows(events, plan, columns, truncate)
    kept = []
    followed: list[str] = []
    if by_column and plan.key and needs_move_check(plan, state) and DeltaTable.isDeltaTable(spark, deletes_path):
        rows, followed = follow_moves(spark, rows, plan, columns, deletes_path)
    moves = None
    if "_from" in rows.columns:  # read four times by fill_moves: once
        rows = frames.keep(rows)
        kept.append(rows)
        moves = moves_to_remember(rows, plan, columns)
        rows = fill_moves(rows, _table_points(spark, path, plan, columns, by_column) if path else None, plan, columns)
    keys = [alias[k] for k in key]
    if by_column or plan.partial:
        src = _fold_partial(rows, keys, names, alias, orders=by_column)
    else:
        payload = [c for c in rows.columns if c not in keys]
        src = rows.groupBy(*keys).agg(F.max_by(F.struct(*payload), "_ord").alias("w")).select(*keys, "w.*")
    src = src.withColumn("_key_json", F.to_json(F.struct(*[F.col(alias[k]).alias(k) for k in key]), KEY_JSON))
    if needs_delete_check(plan, state) and DeltaTable.isDeltaTable(spark, deletes_path):
        src = _drop_older_than_deletes(spark, src, plan.name, deletes_path, {k: columns[k] for k in key}, plan.column_history)
    elif not (by_column or plan.partial or kept) and sum(plan.counts.values()) <= SMALL_SOURCE_EVENTS:
        return src, kept, moves, followed  # computed again by the MERGE's two passes: cheaper than keeping
    src = frames.keep(src)
    return src, [src, *kept], moves, followed


#: a MERGE source of full images folded from at most this many events of the table is not kept
#: (:func:`cdclake.frames.keep`): Delta's MERGE computes its source in both of its passes (the
#: scan for matching files, the write) and the deletes append once more, over the batch's kept
#: events, which for a small batch costs less than keeping it, a Spark job before the MERGE
#: (issue 51's budget: 2 actions before the MERGEs). Partial images (the column fold's windows),
#: per-column positions, moves and the check against remembered deletes keep theirs.
SMALL_SOURCE_EVENTS = 20_000


def _table_points(spark: SparkSession, path: str, plan: TablePlan, columns: dict[str, str], by_column: bool = False) -> DataFrame:
    """The rows of the table at ``path`` as change rows (``_c<i>`` in ``columns`` order,
    ``_op``, ``_ord`` (:data:`ORDER_TYPE`), ``_pos_text``, ``_etime``) for
    :func:`fill_moves`: only those within the batch's key range (:func:`key_range_sql`, which
    holds the moved old keys: before images count), so that Delta skips the files outside it.

    ``by_column`` (the table keeps :data:`COLUMN_ORDERS`): also ``_o_c<i>`` (the column's
    order: the map's, the row's when the map is null, as :func:`_by_column_sets` reads it;
    null for a column no change has set, :data:`_LOWEST_ORDER`), ``_p_c<i>`` (the column has
    an order) and ``_present`` (null when the map is; a row with a map is a partial image, op
    ``u``), so that a change of the batch older than the row but newer than one of its columns
    still sets that column (an insert arriving after a partial update), and a column no change
    had set is not read as a known NULL (a move does not fill it: a later-arriving change can).
    Without it every row is a full image at the row's order."""
    row = ord_struct_sql(rank_sql("_cdc_op", plan.snapshot_by_position), "_cdc_position", "1", "_cdc_record")
    table = spark.read.format("delta").load(path)
    rng = key_range_sql(plan, columns)
    if rng is not None:
        table = table.where(rng)
    alias = {n: f"_c{i}" for i, n in enumerate(columns)}
    per_column = []
    if by_column:
        m = q(COLUMN_ORDERS)
        for n in columns:
            if n in plan.key:
                order = row
            else:
                order = column_order_sql(m, n, row)
            known = F.expr(f"({order})._rank >= 0")  # (not a column no change has set: _LOWEST_ORDER)
            per_column += [known.alias("_p" + alias[n]), F.when(known, F.expr(order)).alias("_o" + alias[n])]
        per_column.append(F.expr(f"CASE WHEN {m} IS NOT NULL THEN array() END").cast("array<string>").alias("_present"))
    op = F.col("_cdc_op")
    if by_column:
        op = F.when(F.col(q(COLUMN_ORDERS)).isNotNull(), F.lit("u")).otherwise(op)
    return table.select(
        *[F.col(q(n)).alias(alias[n]) for n in columns],
        op.alias("_op"),
        F.expr(row).alias("_ord"),
        F.col("_cdc_position_text").alias("_pos_text"),
        F.col("_cdc_event_time_ms").alias("_etime"),
        *per_column,
    )


def needs_delete_check(plan: TablePlan, state: TableState) -> bool:
    """Whether some change of the batch may be older than a delete of an earlier batch: only
    then is the deletes table read (an in-order stream never reads it)."""
    return may_be_older(plan, state.delete_position)


def needs_move_check(plan: TablePlan, state: TableState) -> bool:
    """Whether some change of the batch may be older than a move an earlier batch remembered
    (:func:`follow_moves`): an in-order stream, and a table no partial update moved a row of,
    never follow."""
    return may_be_older(plan, state.move_position)


def may_be_older(plan: TablePlan, position) -> bool:
    """Whether the batch's oldest change may be older than an earlier batch's change at
    ``position`` (a ``position.order``; None: none): not newer by position (equal: the record
    decides, which the check itself compares)."""
    if position is None or plan.min_data is None:
        return False
    return ranked_key(*plan.min_data) <= ranked_key(1, position)


def _drop_older_than_deletes(
    spark: SparkSession, src: DataFrame, table: str, deletes_path: str, key_types: dict[str, str], history: list = ()
) -> DataFrame:
    """Drop the batch's winners that are older than a delete of the same key remembered from
    earlier batches.

    A remembered key is JSON written with the key's types *of its batch*; it is read back with
    the table's types now (``key_types``: key column -> Spark type) and written again, so it
    matches the batch's ``_key_json`` after a key column widened (``1`` -> ``1.00`` for int ->
    decimal(12,2), a date -> its midnight timestamp) or, for a keyless table (whole-image key),
    after a column was added (a missing field reads as null, which ``to_json`` leaves out on
    both sides), and with the names now (``history``: the table's column DDL,
    :func:`key_as_written_now`: a key column renamed after the delete)."""
    # (a record null, written before deletes kept it: a tie wins, null sorts first, as before;
    # a sub null, written before deletes kept it: read as 1)
    remembered = read_deletes(spark, deletes_path, table)
    # a table without a key also remembers copies taken (op c, r, u); a move, op m, deletes its
    # old key's row at its order (the delete itself may not have been remembered, when the
    # key's last change of the move's batch was a later one)
    remembered = remembered.where(F.col("op").isNull() | F.col("op").isin("d", MOVED))
    deletes = (
        remembered.where(F.col("key").isNotNull())  # (null: a history table's truncate)
        .groupBy(key_as_written_now("key", key_types, history).alias("_key_json"))
        .agg(F.max(F.expr(_ORDER_OF_DELETE)).alias("_tomb"))
    )
    newer = F.expr(order_of_change("_ord"))
    return src.join(deletes, "_key_json", "left").where(F.col("_tomb").isNull() | (newer > F.col("_tomb"))).drop("_tomb")


def _fold_partial(
    rows: DataFrame, keys: list[str], names: list[str], alias: dict[str, str], orders: bool = False, given: bool = False
) -> DataFrame:
    """Fold a key's events into one row: from the key's last full image (insert, snapshot,
    delete or full update) on, each column takes the value of the latest event carrying it.

    ``given``: ``rows`` also have ``_o_c<i>`` per non-key column (:data:`ORDER_TYPE`, null where
    the row does not carry it): the order of the column's value, which may be older than the
    row's ``_ord`` (a table row with :data:`COLUMN_ORDERS`); a column takes the value of the
    greatest, and the result keeps it as ``_o_c<i>``. Without ``given``, ``rows`` may still
    have ``_o_c<i>`` (:func:`fill_moves`): where not null, the order of a carried column's
    value in place of the row's.

    ``orders`` (per-column positions, :data:`COLUMN_ORDERS`): the row also gets ``_o_c<i>``
    per non-key column (:data:`ORDER_TYPE`: the order of the change whose value it took; null
    when no change of the batch carries it) and ``_orders`` (those as a map by column name,
    null when every column's is the row's ``_ord``)."""
    w = Window.partitionBy(*keys)
    full = F.col("_op").isin("c", "r", "d") | F.col("_present").isNull()
    if "_moved_in" in rows.columns:  # a copy follow_moves made begins its key's row at its move: older changes are of an earlier row
        full = full | F.coalesce(F.col("_moved_in"), F.lit(False))
    seg = rows.withColumn("_last_full", F.max(F.when(full, F.col("_ord"))).over(w)).where(
        F.col("_last_full").isNull() | (F.col("_ord") >= F.col("_last_full"))
    )
    aggs = [
        F.max_by("_op", "_ord").alias("_op"),
        F.max("_ord").alias("_ord"),
        F.max_by("_pos_text", "_ord").alias("_pos_text"),
        F.max_by("_etime", "_ord").alias("_etime"),
    ]
    values = [n for n in names if alias[n] not in keys]
    for n in values:
        a = alias[n]
        if given:
            at = F.col("_o" + a)
        elif "_o" + a in rows.columns:  # (fill_moves: a filled column's own order)
            at = F.when(F.col("_p" + a), F.coalesce(F.col("_o" + a), F.col("_ord").cast(ORDER_TYPE)))
        else:
            at = F.when(F.col("_p" + a), F.col("_ord").cast(ORDER_TYPE))
        aggs.append(F.max_by(a, at).alias(a))
        aggs.append(F.bool_or("_p" + a).alias("_p" + a))
        if orders or given:
            aggs.append(F.max(at).alias("_o" + a))
    folded = seg.groupBy(*keys).agg(*aggs)
    if not orders:
        return folded
    return folded.withColumn("_orders", F.expr(_orders_map_sql([(n, f"_o{alias[n]}") for n in values], f"CAST(_ord AS {ORDER_TYPE})")))


def _orders_map_sql(orders: list[tuple[str, str]], row: str) -> str:
    """SQL: the :data:`COLUMN_ORDERS` value of a row whose non-key columns have the orders
    ``orders`` (column name, SQL of its :data:`ORDER_TYPE` order, null or :data:`_LOWEST_ORDER`
    for a column not known): null when every column's order is the row's (``row``, SQL), else
    the map of the known ones."""
    if not orders:
        return f"CAST(NULL AS {PARTIAL_COLUMNS[COLUMN_ORDERS]})"
    same = " AND ".join(f"{o} <=> {row}" for _, o in orders)
    entries = ", ".join(f"CASE WHEN {o}._rank >= 0 THEN named_struct('key', {sql_str(n)}, 'value', {o}) END" for n, o in orders)
    return f"CAST(CASE WHEN {same} THEN NULL ELSE map_from_entries(array_compact(array({entries}))) END AS {PARTIAL_COLUMNS[COLUMN_ORDERS]})"


def column_order_sql(m: str, n: str, row: str) -> str:
    """SQL: the order (:data:`ORDER_TYPE`) of the change that set column ``n`` of a stored row
    whose :data:`COLUMN_ORDERS` is ``m`` and whose own order is ``row`` (both SQL): the map's
    entry; the row's order when the map is null (its latest change set every column); else
    :data:`_LOWEST_ORDER` (a column no change has set yet, or one added by DDL)."""
    return f"CASE WHEN {m} IS NULL THEN {row} ELSE coalesce(element_at({m}, {sql_str(n)}), {_LOWEST_ORDER}) END"


#: SQL: an order below every change's (rank -1): what a stored row's column that its
#: :data:`COLUMN_ORDERS` map does not name counts as
_LOWEST_ORDER = f"CAST(named_struct('_rank', -1, 'pos', array(), '_sub', 0, 'file', NULL, 'line', NULL, 'part', NULL, 'off', NULL) AS {ORDER_TYPE})"


def truncate_sql(point: tuple) -> str:
    """SQL: :func:`order_sql` of a truncate point ``(position.order, record)`` (record: ``(file,
    line, partition, offset)`` or None), comparable with a change's and a row's: a change or
    row of the truncate's own position is older than it when its record is (arrival order;
    a null record first)."""
    order, record = point
    rec = [None] * 4 if record is None else list(record)
    file, line, part, off = (("NULL" if v is None else sql_str(v) if isinstance(v, str) else str(int(v))) for v in rec)
    return order_sql("1", position_literal_sql(order), "1", f"CAST({file} AS string)", f"CAST({line} AS bigint)",
                     f"CAST({part} AS int)", f"CAST({off} AS bigint)")


def _truncate(spark: SparkSession, path: str, point: tuple, by_position: bool = False) -> int:
    """Delete the rows older than a truncate at ``point`` (:func:`truncate_sql`); returns how
    many were deleted."""
    res = spark.sql(f"DELETE FROM delta.{q(path)} WHERE {_order_of_row('', by_position)} < {truncate_sql(point)}").first()
    return int(res[0] or 0) if res is not None else 0

