"""Table renames: ``RENAME TABLE a TO b`` (and ``ALTER TABLE a RENAME TO b``) at position P moves
``a``'s rows to ``b``, after the batch's own changes are applied.

A rename is read from the DDL text (:func:`cdclake.apply.ddl.table_renames`, planned as
:class:`cdclake.apply.plan.TableRename`). Step ``i`` of the statement (``RENAME TABLE a TO b, b
TO c`` has two, done in order) is given the point ``P + [i]`` (``position.order`` with one more
element: after P, before every later position, after the statement's earlier steps). At that
point:

* ``b`` is emptied (a truncate at the point: MySQL renames onto no existing table, so rows
  ``b`` holds from before are from an earlier table of that name), then gets, as inserts (op
  ``c``) at positions ``P + [i, n]``, every row ``a`` held just before the point: its rows
  ordered before the point (a table of current rows), or its versions begun before the point
  and not ended by it (a history table, SCD type 2). So ``b``'s own changes after P, applied
  by the batch before, stay (they are newer), and so do its deletes after P (remembered in
  ``_cdclake/deletes``); a table without a key keeps its identical rows apart (each moved row
  has its own position). A snapshot read ranked below the stream (Canal/DTS ``INIT``, Qlik
  ``REFRESH``) goes at ``P + [i, -1]``, before them; into a table without a key (of current
  rows or history) it stays a read (op ``r``), which caps its image there as in ``a``
  (:func:`reads_stay`, :func:`cdclake.apply.keyless.rank_of`,
  :func:`cdclake.apply.history._copy_ends`). A row with per-column positions (``_cdc_column_orders``) moves as
  partial updates at ``P + [i] +`` each column's position (:func:`_moved_by_column`), so it
  keeps them in ``b``.
* ``a`` is ended at the point, as a truncate: its rows ordered before it are removed (a
  history table: its versions end there), rows of a table created again under the old name
  after P stay.

Both are canonical events applied by :func:`cdclake.apply.batch.apply_batch` like any batch
(history tables, keyless tables, schema evolution, the deletes table and the progress), without
the transaction gate and without a changelog append (they are not the source's changes). The
schema history says ``table renamed to b ...`` / ``... renamed from a ...``.

Exactly once: each step is two applies, ``b``'s first, then ``a``'s, each under its own
identity (``<appId>.rename.<n>.to`` / ``.from``, the batch's version; ``n`` counts the batch's
steps). A batch replayed after a crash skips what committed; the source rows are read when
``b``'s apply runs, and ``a`` is not ended before ``b`` committed, so a replay reads the same
rows.

An event of ``a`` older than P that arrives after the rename was applied goes to ``b``
(:func:`relabel_late`, with ``a``'s remembered deletes and truncate carried to ``b``, and its
column drops and renames before P: :attr:`TablePlan.carried_column_ddl`). When
``a`` or ``b`` keeps its history (SCD type 2), the event also goes into ``a``'s history at its
place (ended by the rename), and ``b``'s history keeps per key only the newest change moved in
at P (:func:`cdclake.apply.history._versions`' regions, from the progress's
``renamed``: :attr:`TableState.moved_in`); of a table without a key, a copy's version that
begins and ends in that region is none of ``b``'s (it ended in ``a`` before P).

A key configured for ``a`` goes on to ``b`` when ``b`` has none configured
(:func:`keys_through_renames`: the moved rows, ``b``'s events and ``a``'s late ones take it).
Limits (README, NOTES.md): the key of the moved rows is the
batch's (configured, else the one the batch's events of ``b`` or ``a`` state), else none (the
rows then land as rows without a key, which later keyed changes of ``b`` match by key); a
history table's moved rows begin new versions at the rename (``b`` holds no version of
``a``'s past: ``a`` keeps it, ended at P); a rename whose old table was never written under the
target moves nothing and says so in the schema history; snapshot reads ranked below the
stream (Canal/DTS ``INIT``, Qlik ``REFRESH``) all count as older than P, so those of a table
created again move too.

Events of ``a`` after P in the rename's own batch (a table created again under the old name,
or given it by a later step of a swap) are applied after the renames, apart
(:func:`written_after_rename`, in :func:`cdclake.apply.batch.apply_batch`): the batch without
them first, then them under their own identity (``<appId>.after-rename.<step>``), so the move
reads ``a`` as it was at P (a new row of a key ``a`` held, a truncate or drop of the new
``a``, do not touch the rows that move). Such events that arrive in a batch before the
rename's are applied to ``a`` as it is then (nothing says yet that the name changed tables):
one of a key ``a`` held replaces the old row, a truncate or drop removes the old rows, before
the rename moves them; so when the rename arrives (:func:`written_before_rename`), ``a``'s
changes are read again from the changelog and applied as a re-delivery (:func:`_apply_again`),
which takes those older than P to ``b``; the moved rows declare ``a``'s columns at P, not
those the new ``a`` added, widened or renamed (:func:`columns_at_point`). A change of
``b`` at exactly P (a format whose
positions are coarse: Canal's ``es`` and batch ``id``) is older than the rename's point
whatever its record, so the move replaces it; renames of one position and one source
namespace (the DDL event's database and schema) are numbered in one batch, not across
batches (two such statements delivered in different batches can get the same point).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache, reduce

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake import frames
from cdclake.apply import audit
from cdclake.apply.ddl import column_changes, table_end
from cdclake.apply.delta_table import (
    ApplyResult,
    COLUMN_ORDERS,
    KEY_JSON,
    META_COLUMNS,
    TableState,
    column_order_sql,
    create_empty,
    ord_struct_sql,
    order_sql,
    position_literal_sql,
    q,
    rank_sql,
    source_column_types,
    sql_str,
)
from cdclake.apply.keyless import after_truncate_sql, moved_read_sql, rank_of
from cdclake.apply.plan import (
    BatchPlan,
    QUALIFIED_NAME_SQL,
    RECORD_FIELDS,
    TablePlan,
    TableRename,
    choose_key,
    names_back,
    order_key,
    plan_batch,
    ranked_key,
    record_struct_sql,
    summarize,
    tx_key_sql,
)
from cdclake.apply.tasks import TableFailed, guarded, table_path
from cdclake.apply.transactions import read_held
from cdclake.apply.types import normalize, widen
from cdclake.formats import snapshot_position_formats
from cdclake.model import EVENT_SCHEMA, Kind, Op, qualified_name
from cdclake.routing import Routing, TableLayout
from cdclake.sqltext import quote_ident
from cdclake.values import TS_FORMAT

#: applies canonical events as a batch of their own: :func:`cdclake.apply.batch.apply_batch`
#: (``spark, events, target, primary_keys, txn, plan=, fmt=, changelog=``), handed in by the batch
Apply = Callable[..., list[ApplyResult]]
#: applies events read again from the changelog as a re-delivery: :func:`cdclake.apply.batch.reapply`
#: (``spark, events, target, primary_keys, txn, plan, fmt, progress``)
Reapply = Callable[..., list[ApplyResult]]


def rename_point(rename: TableRename) -> list:
    """``position.order`` of a rename step: the DDL's position with the step appended."""
    from decimal import Decimal

    return [*rename.order, Decimal(rename.step)]


def canonical_text_sql(column: str, spark_type: str) -> str:
    """SQL: the typed column ``column`` (a quoted name) as the canonical text of its Spark type
    (:mod:`cdclake.model`): what :func:`cdclake.values.cast_sql` reads back into the same value.
    Binary as base64, timestamps as ``yyyy-MM-dd HH:mm:ss.SSSSSS`` (UTC: the session time
    zone), strings as they are, everything else as Spark casts it to a string."""
    t = spark_type.lower()
    if t == "string":
        return column
    if t == "binary":
        return f"base64({column})"
    if t.startswith("timestamp"):
        return f"date_format({column}, '{TS_FORMAT}')"
    return f"cast({column} as string)"


def source_rows(spark: SparkSession, path: str, point: list, by_position: bool,
                moved_in: list = ()) -> tuple[DataFrame, dict[str, str], bool]:
    """The rows the table at ``path`` held just before ``point`` (a ``position.order``): a
    table of current rows, its rows ordered before the point (snapshot reads of a format that
    ranks them below the stream always are, but for those a rename moved in, at ``moved_in``:
    :func:`cdclake.apply.keyless.rank_of`); a history table, its versions begun before the
    point and not ended by it. Returns ``(rows, source columns name -> Spark type, history)``;
    ``rows`` has the table's columns."""
    df = DeltaTable.forPath(spark, path).toDF()
    columns = source_column_types(spark, path)  # (a generated partition column is not one)
    history = "_cdc_is_current" in df.columns
    rank = rank_of('_cdc_op', '_cdc_position', by_position, list(moved_in))
    before = (f"{order_sql(rank, '_cdc_position', '1', *(f'_cdc_record.{f}' for f in RECORD_FIELDS))}"
              f" < {order_sql('1', position_literal_sql(point), '0', *(['null'] * len(RECORD_FIELDS)))}")
    cond = f"({before})"
    if history:
        cond += f" AND (_cdc_end IS NULL OR _cdc_end.position >= {position_literal_sql(point)})"
    return df.where(cond), columns, history


def _str(v) -> str:
    """SQL string literal of ``v`` (None: a null string; else :func:`delta_table._lit`)."""
    return "cast(null as string)" if v is None else sql_str(str(v))


def record_sql(rec: tuple | None) -> str:
    """SQL of a struct of a record's coordinates (``file`` string, ``line`` bigint,
    ``partition`` int, ``offset`` bigint: :data:`RECORD_FIELDS`), from ``rec`` (those four
    values, any None; None: all null)."""
    rec = rec or (None,) * len(RECORD_FIELDS)
    num = lambda v, t: f"cast({'null' if v is None else int(v)} as {t})"  # noqa: E731
    return (f"named_struct('file', {_str(rec[0])}, 'line', {num(rec[1], 'bigint')}, 'partition', {num(rec[2], 'int')},"
            f" 'offset', {num(rec[3], 'bigint')})")


def _event_sql(rename: TableRename, table: tuple, op: str, position: str, columns: dict[str, str], key: list[str] | None,
               after: str = "cast(null as map<string,string>)", record: str | None = None,
               present: str = "cast(null as array<string>)", op_sql: str | None = None) -> list:
    """The columns of one canonical event (EVENT_SCHEMA) of a rename step, as SQL. ``record``:
    SQL of a struct with the record's fields (:func:`record_sql`); None: the DDL's.
    ``present``: SQL of the columns a partial image carries (null: a full image). ``op_sql``:
    SQL of the op, in place of ``op``."""
    lit = _str
    cols = ", ".join(
        f"named_struct('name', {lit(n)}, 'source_type', {lit(t)}, 'spark_type', {lit(t)}, 'precision', cast(null as int),"
        f" 'scale', cast(null as int), 'nullable', {'false' if key and n in key else 'true'})"
        for n, t in columns.items()
    )
    r_file, r_line, r_part, r_off = (f"{record or record_sql(rename.record)}.{f}" for f in RECORD_FIELDS)
    return [
        F.expr(lit(rename.format or "canonical")).alias("format"),
        F.lit(Kind.DATA.value).alias("kind"),
        (F.expr(op_sql) if op_sql else F.lit(op)).alias("op"),
        F.expr(lit(table[0])).alias("database"),
        F.expr(lit(table[1])).alias("schema"),
        F.expr(lit(table[2])).alias("table"),
        F.expr("cast(null as map<string,string>)").alias("before"),
        F.expr(after).alias("after"),
        F.expr(present).alias("present"),
        F.expr(f"array({', '.join(lit(k) for k in key)})" if key else "cast(null as array<string>)").alias("primary_key"),
        F.expr(f"array({cols})").alias("columns"),
        F.expr(f"named_struct('order', {position}, 'text', {lit(rename.text)})").alias("position"),
        F.expr("cast(null as string)").alias("tx_id"),
        F.expr("cast(null as bigint)").alias("tx_seq"),
        F.expr("cast(null as boolean)").alias("tx_last"),
        F.expr("cast(null as bigint)").alias("tx_size"),
        F.expr("cast(null as string)").alias("ddl"),
        F.expr(f"cast({'null' if rename.event_time_ms is None else int(rename.event_time_ms)} as bigint)").alias("event_time_ms"),
        F.expr(
            f"named_struct('topic', cast(null as string), 'partition', {r_part}, 'offset', {r_off}, 'timestamp_ms', cast(null as bigint),"
            f" 'file', {r_file}, 'line', {r_line}, 'headers', cast(null as array<struct<key:string,value:binary>>))"
        ).alias("source_record"),
    ]


def _events(df: DataFrame, cols: list) -> DataFrame:
    return df.select(*cols).select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in EVENT_SCHEMA.fields])


def _with_lines(plan: BatchPlan, lines: dict[str, str], wave: list[TableRename], renamed: dict | None = None,
                max_delete: dict | None = None, max_move: dict | None = None, column_ddl: dict | None = None,
                moved_into: dict | None = None) -> BatchPlan:
    """``plan`` whose tables say ``lines[name]`` in the schema history, with their rename's
    DDL, ``renamed[name]`` (the step that ended the table, for the progress),
    ``max_delete[name]`` / ``max_move[name]`` (the deletes and remembered moves carried to it),
    ``column_ddl[name]`` (the old table's column DDL carried to it) and ``moved_into[name]``
    (the point of the step that moves rows into it), and without source progress rows (the
    events are not the source's)."""
    ddl = {n: r for r in wave for n in (r.old_name, r.new_name)}
    tables: list[TablePlan] = []
    for p in plan.tables:
        if p.name in lines:
            r = ddl[p.name]
            p = replace(p, ended=[*p.ended, lines[p.name]], ddl=[(list(r.order), r.text, r.ddl)],
                        renamed=[renamed[p.name]] if renamed and p.name in renamed else [],
                        max_delete=max_delete.get(p.name, p.max_delete) if max_delete else p.max_delete,
                        max_move=max_move.get(p.name, p.max_move) if max_move else p.max_move,
                        carried_column_ddl=(column_ddl or {}).get(p.name, []),
                        moved_into=[(moved_into or {})[p.name]] if p.name in (moved_into or {}) else [])
        tables.append(p)
    return replace(plan, tables=tables, progress=[])


def configured_key(table: tuple, primary_keys: dict[str, list[str]] | None) -> list[str]:
    """The key configured for ``table`` ((database, schema, table)), as
    :func:`cdclake.apply.plan.plan_batch` looks it up; [] when none is."""
    p = TablePlan(*table)
    choose_key(p, primary_keys or {})
    return p.key if p.key_source == "configuration" else []


def keys_through_renames(primary_keys: dict[str, list[str]] | None, states: dict,
                         renames: list[TableRename] = ()) -> dict[str, list[str]]:
    """``primary_keys`` (``--primary-key``: qualified, ``database.table`` or bare names) with
    the key configured for a renamed table given to each of its later names that has none
    configured: the renames of earlier batches (the progress's ``renamed``, ``states``,
    followed through chains: :func:`rename_chains`) and then ``renames`` (the batch's, in
    order). So the old table's late events moved to the new name (:func:`relabel_late`) and
    the new name's own events are applied with the key the user gave the table, as its moved
    rows were (:func:`apply_renames`). A configured key wins over a message's
    (:func:`cdclake.apply.plan.plan_batch`), so does one given on this way. Pure Python;
    returns ``primary_keys`` itself when nothing is added."""
    keys = primary_keys or {}
    if not keys:
        return keys
    out = dict(keys)

    def by_name(name: str) -> list[str]:  # (a qualified name: the names plan_batch looks up)
        parts = name.split(".")
        return configured_key((parts[0] if len(parts) > 1 else None, parts[1] if len(parts) > 2 else None, parts[-1]), out)

    steps = [(old, [qualified_name(*h[0]) for h in hops]) for old, _point, hops in rename_chains(states)]
    steps += [(qualified_name(*r.old), [qualified_name(*r.new)]) for r in renames if r.old != r.new]
    for old, news in steps:
        key = by_name(old)
        for new in news:
            if key and not by_name(new):
                out[new] = list(key)
    return out if out != keys else keys


def reads_stay(r: TableRename, key: list[str] | None, primary_keys: dict[str, list[str]] | None) -> bool:
    """A snapshot read ranked below the stream (Canal/DTS ``INIT``, Qlik ``REFRESH``) of the
    step's old table moves to the new table as a read (op ``r``), not as an insert: the new
    table will have no key (``key``: the moved rows', none configured for it), and the
    rename's format ranks such reads below the stream. There the read keeps its image capped
    (one row or none: :mod:`cdclake.apply.keyless`, :func:`cdclake.apply.history._copy_ends`)
    as it was in the old table. Pure Python."""
    return not (key or configured_key(r.new, primary_keys) or (r.format or "") in snapshot_position_formats())


def step_done(r: TableRename, states: dict) -> bool:
    """The step was applied before (a re-delivered or replayed batch): its old table's
    progress keeps the step's point in ``renamed``, or its latest truncate is at the point (a
    rename applied before ``renamed`` was kept). The old table is ended only after the new one
    committed the move, in the commit that records both, so the move is done too. A truncate
    after the point does not say so: a table created again under the old name, truncated or
    dropped, whose changes arrived before the rename (the step is applied, and
    :func:`_apply_again` gives the new name the rows)."""
    st = states.get(r.old_name)
    if st is None:
        return False
    point = order_key(rename_point(r))
    return (any(order_key(step[0]) == point for step in st.renamed)
            or st.truncate_position is not None and order_key(st.truncate_position) == point)


def waves(renames: list[TableRename]) -> list[list[TableRename]]:
    """The steps in groups applied together, in order: a step joins the last group unless a
    table of the group is its old or new table (``RENAME TABLE a TO b, b TO c`` and swaps need
    the earlier step done first). Pure Python."""
    out: list[list[TableRename]] = []
    touched: set[str] = set()
    for r in renames:
        names = {r.old_name, r.new_name}
        if not out or names & touched:
            out.append([])
            touched = set()
        out[-1].append(r)
        touched |= names
    return out


def _not_applied(spark: SparkSession, target: str, r: TableRename, why: str) -> None:
    """Record in ``_cdclake/schema_history`` (under the old name) that rename step ``r`` was not
    applied, and ``why``."""
    audit.record_schema_changes(spark, target, [(r.old_name, None, None, f"not applied: table renamed to {r.new_name} at the source"
                                                 f" (position {r.text}): {why}", r.ddl, r.text)])


def _new_table(spark: SparkSession, target: str, r: TableRename, columns: dict[str, str], history: bool,
               caps: bool, layout: TableLayout) -> bool | ApplyResult:
    """Step ``r``'s new table: created (empty, ``columns``) when missing, of the old one's kind
    (a history table when ``history``), laid out as its new name asks (``layout``:
    ``--partition-by``, ``--table-property``); an existing one keeps its own kind and layout. Returns whether the
    caps of the old table's ended reads go on there (``caps``, in a history table), or the
    failed :class:`ApplyResult` when the file system or Delta refuses the new table: the old
    one keeps its rows, and the step is tried again with the next delivery."""
    new = r.new_name
    if DeltaTable.isDeltaTable(spark, table_path(target, new)):
        return caps and "_cdc_is_current" in spark.read.format("delta").load(table_path(target, new)).columns
    made = guarded(new, lambda: create_empty(spark, table_path(target, new), columns, history, layout))
    if isinstance(made, TableFailed):
        _not_applied(spark, target, r, f"table {new} could not be created here: {made.reason}")
        return ApplyResult(new, failed=f"{made.code}: {made.reason}")
    return caps


@dataclass
class _Wave:
    """What :func:`apply_renames` gathers for one wave of rename steps: per step its moved rows
    (``moves``) and the ends of the old table's rows (``ends``), the old tables' remembered
    deletes to carry (``carried``: step, index, :func:`_carry_deletes` arguments) and, by new or
    old name, what the two applies' plans carry (:func:`_with_lines`)."""

    moves: list = field(default_factory=list)
    ends: list = field(default_factory=list)
    carried: list = field(default_factory=list)
    lines_to: dict = field(default_factory=dict)
    lines_from: dict = field(default_factory=dict)
    renamed: dict = field(default_factory=dict)
    max_delete: dict = field(default_factory=dict)
    max_move: dict = field(default_factory=dict)
    column_ddl: dict = field(default_factory=dict)
    moved_into: dict = field(default_factory=dict)

    def add(self, r: TableRename, i: int, m: DataFrame, e: DataFrame, state: TableState, how: dict, early) -> None:
        """Step ``r`` (its ``i``-th place in the batch's renames): its moved rows ``m`` and ends
        ``e``, the old table's ``state``, how its deletes are carried (``how``), ``early``: the
        latest position an earlier batch wrote the old name after the rename, else None."""
        old, new = r.old_name, r.new_name
        self.moves.append(m)
        self.ends.append(e)
        if state.delete_position is not None or how["caps"]:  # (deletes, or caps to carry)
            self.carried.append((r, i, how))
        point = rename_point(r)
        if state.delete_position is not None:
            self.max_delete[new] = [*point, *state.delete_position]
            if state.move_position is not None:  # (a move is remembered with its delete)
                self.max_move[new] = [*point, *state.move_position]
        self.renamed[old] = (point, r.record, r.new, r.text, r.event_time_ms)
        self.moved_into[new] = list(point)
        # the old table's column drops and renames before the point go on as the new one's,
        # at the point followed by their own order: a late event of the old table moved
        # there is read with the columns in force at its position
        self.column_ddl[new] = [([*point, *order], text, ddl) for order, text, ddl in state.column_ddl
                                if order_key(order) < order_key(point)]
        self.lines_to[new] = (f"table renamed from {old} at the source (position {r.text}): its rows moved here;"
                              " rows held before removed, as by a truncate")
        self.lines_from[old] = (f"table renamed to {new} at the source (position {r.text}): its rows moved there and removed"
                                " here, as by a truncate")
        if early is not None:
            self.lines_to[new] += (f"; {old} was written at position {early} (after the rename) by an earlier batch, a table"
                                   " created again under that name: its changes before the rename were read again from the"
                                   " changelog and applied here")


def _apply_wave(spark: SparkSession, target: str, wave: list[TableRename], parts: _Wave, to_txn: audit.Txn | None,
                from_txn: audit.Txn | None, txn: audit.Txn | None, primary_keys: dict[str, list[str]] | None, fmt: str,
                apply_events: Apply) -> list[ApplyResult]:
    """One wave of :func:`apply_renames`: the old tables' deletes carried, then one apply of the
    moved rows into the new tables (``to_txn``), then one of the old tables' ends (``from_txn``)
    for the steps whose new table took its rows. Returns the applies' results."""
    for r, i, how in parts.carried:
        _carry_deletes(spark, target, r, _txn(txn, str(i), "deletes"), **how)
    events = frames.keep(reduce(DataFrame.unionByName, parts.moves))
    try:
        to_plan = _with_lines(plan_batch(events, primary_keys), parts.lines_to, wave, max_delete=parts.max_delete,
                              max_move=parts.max_move, column_ddl=parts.column_ddl, moved_into=parts.moved_into)
        moved = apply_events(spark, events, target, primary_keys, to_txn, plan=to_plan, fmt=fmt, changelog=False)
    finally:
        frames.release(events)
    out = list(moved)
    # a new table that could not take the rows (TABLE_FAILED: its events went to the
    # rejects) keeps the old one as it is: the step is applied again with the next delivery
    failed = {m.table for m in moved if m.failed}
    ends = [e for r, e in zip([r for r in wave if r.old_name in parts.lines_from], parts.ends) if r.new_name not in failed]
    if ends:
        ended = reduce(DataFrame.unionByName, ends)
        from_plan = _with_lines(plan_batch(ended, primary_keys), parts.lines_from, wave, renamed=parts.renamed)
        out += apply_events(spark, ended, target, primary_keys, from_txn, plan=from_plan, fmt=fmt, changelog=False)
    return out


def apply_renames(
    spark: SparkSession,
    target: str,
    plan: BatchPlan,
    txn: audit.Txn | None,
    primary_keys: dict[str, list[str]] | None = None,
    fmt: str = "canonical",
    earlier: list[dict] | None = None,
    *,
    apply_events: Apply,
    reapply: Reapply,
    routing: Routing | None = None,
) -> list[ApplyResult]:
    """Apply the table renames of a batch (``plan.renames``), after the batch's own tables,
    in order (see the module docstring): the steps not applied before, grouped by
    :func:`waves`; per group one apply of the new tables (the moves), then one of the old
    (their ends). ``txn``: the batch's identity, from which each apply takes its own.
    ``earlier``: the progress rows as they were before the batch (for
    :func:`written_before_rename`; None: as read now). ``apply_events``: applies canonical
    events as a batch (:func:`cdclake.apply.batch.apply_batch`); ``reapply``: applies events
    read again from the changelog as a re-delivery (:func:`cdclake.apply.batch.reapply`); both
    handed in by the batch, which this module sits below; ``routing`` lays new tables out. Returns the :class:`ApplyResult` of
    each apply's tables.

    Cost: two applies (each a planning aggregate, a MERGE or write per table, the deletes and
    progress commits) per group; none for a batch whose renames were all applied before; one
    changelog scan and one apply more when an earlier batch wrote an old name after its
    rename (:func:`_apply_again`).

    Raises what :func:`cdclake.apply.batch.apply_batch` raises."""
    routing = routing or Routing()
    first = audit.read_progress(spark, target)
    progress_rows, states = first.rows, first.table_states()
    todo = [r for r in plan.renames if r.old_name != r.new_name and not step_done(r, states)]
    # per step: the latest position at which an earlier batch wrote its old name after it (a
    # table created again under that name), else None (written_before_rename)
    early_at = {id(r): written_before_rename(earlier if earlier is not None else progress_rows, r)
                for r in plan.renames if r.old_name != r.new_name}
    keys = {p.name: p.key for p in plan.tables if p.key}
    out: list[ApplyResult] = []
    index = {id(r): i for i, r in enumerate(plan.renames, start=1)}
    for wave in waves(todo):
        # the wave's identity names its steps (their places in the batch's renames): a replay
        # that groups the steps left otherwise gets other identities, never a finished wave's
        n = "-".join(str(index[id(r)]) for r in wave)
        progress = audit.read_progress(spark, target)  # as the wave before left it
        states = progress.table_states()
        parts = _Wave()
        for r in wave:
            old, new = r.old_name, r.new_name
            if not DeltaTable.isDeltaTable(spark, table_path(target, old)):
                _not_applied(spark, target, r, f"no table {old} was written here")
                continue
            state = states.get(old, TableState())
            key = keys.get(new) or keys.get(old)
            # an earlier batch wrote the old name after the point: its columns now may be the
            # table created again's; the moved rows declare those of the point
            at_point = (None if early_at[id(r)] is None else
                        columns_at_point(spark, target, r, states, source_column_types(spark, table_path(target, old)), key))
            stay = reads_stay(r, key, primary_keys)
            m, e, columns, history = _step_events(spark, table_path(target, old), r, key, state, at_point, stay)
            caps = _new_table(spark, target, r, columns, history, history and not key and stay, routing.layout(new))
            if isinstance(caps, ApplyResult):  # the new table could not be created: the step waits
                out.append(caps)
                continue
            parts.add(r, index[id(r)], m, e, state, dict(reads_stay=stay, moved_in=state.moved_in, copies=history and not key,
                                                       caps=caps, truncate=state.truncate_position), early_at[id(r)])
        if parts.moves:
            out += _apply_wave(spark, target, wave, parts, _txn(txn, n, "to"), _txn(txn, n, "from"), txn, primary_keys, fmt,
                               apply_events)
    # the steps whose old name an earlier batch wrote after them: also those done before (a
    # batch applied again after a crash between the move and this apply; its identity makes it
    # once), not only those done now
    refeed = [(r, index[id(r)]) for r in plan.renames if early_at.get(id(r)) is not None]
    if refeed:
        done = audit.read_progress(spark, target).table_states()
        refeed = [(r, i) for r, i in refeed if step_done(r, done)]
    if refeed:
        out += _apply_again(spark, target, refeed, txn, primary_keys, fmt, reapply)
    return out


def _apply_again(spark: SparkSession, target: str, steps: list[tuple[TableRename, int]], txn: audit.Txn | None,
                 primary_keys: dict[str, list[str]] | None, fmt: str, reapply: Reapply) -> list[ApplyResult]:
    """The old tables' changes (``steps``: the steps, applied now, and their places in the
    batch's renames), read again from ``_cdclake/changelog`` and applied as a re-delivery:
    :func:`relabel_late` takes those older than the rename to the new names, the others stay.
    For a rename that arrives after an earlier batch applied changes of a table created again
    under the old name: those replaced or removed old rows before the move could read them (a
    key the new table wrote again, a truncate or drop of it), and a change delivered again
    changes nothing where it landed already, so the new name gets every row the old table held
    at the rename; the old name's later changes, counted again after the rename ended its old
    rows, no longer take an old table's copy (a table without a key).

    The events of transactions still held and never applied (``_cdclake/held``:
    :func:`_still_open`) stay out (the batch that completes them applies them); a held part
    delivered again of a transaction applied before does not keep the transaction's changes
    out. Cost: one scan of the changelog (filtered by table) and one more apply, only in such a
    batch; with transactions held, one more scan and aggregate. Returns the apply's results."""
    path = f"{target}/{audit.CHANGELOG}"
    if not DeltaTable.isDeltaTable(spark, path):
        return []
    progress = audit.read_progress(spark, target)
    states = progress.table_states()
    names = ", ".join(sorted({_str(n) for r, _i in steps for n in renamed_into(states, r.old_name, rename_point(r))}))
    events = _read_changelog(spark, target).where(f"kind = 'data' AND {QUALIFIED_NAME_SQL} IN ({names})")
    if progress.held_version() is not None:  # an open transaction's changes wait for the rest of it
        events = events.join(F.broadcast(_still_open(spark, target, progress.held_version())),
                             F.expr(tx_key_sql(every_kind=True)) == F.col("_open_tx"), "left_anti")
    events = frames.keep(events)
    try:
        name = "-".join(str(i) for _r, i in steps)
        return reapply(spark, events, target, primary_keys, _txn(txn, name, "again"), plan_batch(events, primary_keys), fmt, progress)
    finally:
        frames.release(events)


def _read_changelog(spark: SparkSession, target: str) -> DataFrame:
    """``_cdclake/changelog`` of ``target`` as :data:`cdclake.model.EVENT_SCHEMA` events (every
    delivery of every table; the caller filters)."""
    return (spark.read.format("delta").load(f"{target}/{audit.CHANGELOG}")
            .select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in EVENT_SCHEMA.fields]))


def _still_open(spark: SparkSession, target: str, held_version: int) -> DataFrame:
    """The held transactions (``_cdclake/held`` at ``held_version``) that were never applied:
    one column ``_open_tx`` (their :func:`cdclake.apply.plan.tx_key_sql` keys). A transaction
    is held until a batch brings the rest of it, so one whose events in ``_cdclake/changelog``
    (every table's, every delivery) make it whole was applied, and what is held of it is a part
    delivered again (held until the timeout: :mod:`cdclake.apply.transactions`); its changes
    are not left out of a re-feed. Whole as the gate tells it
    (:func:`cdclake.apply.plan.open_condition`, by the planning aggregate with
    ``transactions``, over the changelog's events of the held transactions). One scan of the
    changelog and one aggregate, collected on the driver."""
    key = F.expr(tx_key_sql(every_kind=True))
    held = read_held(spark, target, held_version).select(key.alias("_held_tx")).where("_held_tx IS NOT NULL").distinct()
    mine = _read_changelog(spark, target).join(F.broadcast(held), key == F.col("_held_tx"), "left_semi").select(
        "*", F.lit(False).alias("from_held"), F.lit(None).cast("bigint").alias("held_at_ms"))
    open_ids = [r["tx"] for r in summarize(mine, transactions=True) if r["by_tx"] == 0 and r["open"] and r["tx"] is not None]
    return spark.createDataFrame([(i,) for i in open_ids], "_open_tx string")


def renamed_into(states: dict, name: str, point: list) -> list[str]:
    """``name`` and every table whose rows a rename moved into it before ``point`` (a
    ``position.order``), through earlier renames into those (``t`` renamed to ``n``, then ``n``
    to ``m``: ``m``'s rows at a later point are ``t``'s and ``n``'s changes), from the progress
    table's ``renamed`` (``states``: :meth:`Progress.table_states`). Pure Python."""
    out, todo = [name], [(name, order_key(point))]
    while todo:
        into, before = todo.pop()
        for other, st in states.items():
            for step in st.renamed:
                if qualified_name(*step[2]) == into and order_key(step[0]) < before and other not in out:
                    out.append(other)
                    todo.append((other, order_key(step[0])))
    return out


def written_before_rename(progress_rows: list[dict], r: TableRename) -> str | None:
    """``position.text`` of the latest event of the step's old table that an earlier batch
    applied at a position after the step's point (a table created again under the old name,
    whose changes arrived before the rename), else None. Its changes may have replaced or
    removed rows of the old table before they could move (a limit, said in the new table's
    schema history line). Pure Python, from the progress rows (``source`` set, the
    table's latest position per source; the rename's own batch holds no such event yet:
    :func:`written_after_rename` applies them after the renames)."""
    point = order_key(rename_point(r))
    later = [x for x in progress_rows if x.get("source") is not None and x.get("table") == r.old_name
             and x.get("last_position") is not None and order_key(list(x["last_position"])) > point]
    if not later:
        return None
    best = max(later, key=lambda x: order_key(list(x["last_position"])))
    return best.get("last_position_text") or str([int(v) for v in best["last_position"]])


def written_after_rename(plan: BatchPlan, skip=frozenset()) -> tuple[int, str, tuple] | None:
    """The batch's first table rename step (in :attr:`BatchPlan.renames` order) whose old table
    has an event in the batch after the step's point: a table created again under the old name
    (or given it by a later step, a swap's), written to after the rename. Returns ``(the step's
    place, 1-based; SQL condition over events, true for the old table's events after the
    point; the step's ``(old name, point)``)``, else None (the usual case; told on the driver from the plan's
    :attr:`TablePlan.last_streamed`, no Spark job). Snapshot reads that rank below the stream
    count as older than every rename, as :func:`source_rows` reads them. The caller applies
    the batch without those events first (its renames then move the old table's rows as they
    were at the point), then those events."""
    tables = {p.name: p for p in plan.tables}
    for i, r in enumerate(plan.renames, start=1):
        p = tables.get(r.old_name)
        point = rename_point(r)
        key = (r.old_name, tuple(point))
        if (r.old_name == r.new_name or key in skip or p is None or p.last_streamed is None
                or order_key(p.last_streamed) <= order_key(point)):
            continue
        fmts = ", ".join(_str(f) for f in snapshot_position_formats()) or "''"
        # ranked below the stream exactly as the planning aggregate ranks (plan.summarize)
        cond = (f"coalesce({QUALIFIED_NAME_SQL} = {_str(r.old_name)} AND kind IN ('data', 'ddl', 'snapshot_end')"
                f" AND NOT coalesce(op = 'r' AND format NOT IN ({fmts}), false)"
                f" AND position.order > {position_literal_sql(point)}, false)")
        return i, cond, key
    return None


def _carry_deletes(spark: SparkSession, target: str, r: TableRename, txn: audit.Txn | None, reads_stay: bool = False,
                   moved_in: list = (), copies: bool = False, caps: bool = False, truncate: list | None = None) -> None:
    """Append to ``_cdclake/deletes`` the deletes remembered for the step's old table before
    its point, as the new table's, at the point followed by their own position: an event of
    the old table older than them that arrives later (moved to the new table by
    :func:`relabel_late`) stays out there as it would have in the old table. ``reads_stay``
    (:func:`reads_stay`): a remembered snapshot read (op ``r``, a table without a key) goes at
    the point followed by -1, where the move puts the rows of such reads (one an earlier rename
    moved into the old table, at ``moved_in``, keeps its position, as the move keeps it).
    ``copies`` (the old table keeps its history and has no key): a delete that ended a copy's
    version there (the version's end is its change) stays behind, as its copy does (the move
    takes the current versions only): carried, it would end a copy the old table still held at
    the point. ``caps`` (both tables keep their history, the old one has no key, and its
    snapshot reads rank below the stream: ``reads_stay``): the images whose reads ended there
    before the point (deleted, or inserted again, which the cap takes as the read's row) and
    after the old table's ``truncate`` stay capped in the new table, as op ``r`` rows (``key``
    the image) at the point followed by -2, before the reads the move puts at -1
    (:func:`cdclake.apply.history._carried_caps` reads them). One commit, under the step's own
    identity (``txn``)."""
    path = f"{target}/{audit.DELETES}"
    point = position_literal_sql(rename_point(r))
    old = spark.read.format("delta").load(table_path(target, r.old_name)) if copies else None  # (its history)
    rows = None
    if DeltaTable.isDeltaTable(spark, path):
        rem = spark.read.format("delta").load(path)
        # (a deletes table only history tables wrote has no op: it remembers no reads)
        own = (f"CASE WHEN op = 'r' AND NOT {moved_read_sql('op', 'position', list(moved_in))} THEN array(cast(-1 as decimal(38,0)))"
               " ELSE position END") if reads_stay and "op" in rem.columns else "position"
        rows = rem.where(F.col("table") == F.lit(r.old_name)).where(f"position < {point}")
        if copies:
            took = (old.where("_cdc_end.op = 'd'")
                    .select(F.col("_cdc_end.position").alias("_p"), F.col("_cdc_end.sub").alias("_s"), F.col("_cdc_end.record").alias("_r")))
            taken = F.expr("key IS NOT NULL AND position <=> _p AND coalesce(sub, 1) <=> coalesce(_s, 1) AND record <=> _r")
            rows = rows.join(took, taken, "left_anti")
        rows = rows.withColumn("table", F.lit(r.new_name)).withColumn("position", F.expr(f"concat({point}, {own})"))
    if caps:
        ended = f"_cdc_op = 'r' AND _cdc_end IS NOT NULL AND _cdc_end.position < {point}"
        if truncate is not None and order_key(list(truncate)) < order_key(rename_point(r)):  # (a cap ends at a truncate)
            ended += f" AND {after_truncate_sql('_cdc_op', '_cdc_position', False, list(moved_in), list(truncate))}"
        own = source_column_types(spark, table_path(target, r.old_name))  # (a generated partition column is not one)
        image = F.to_json(F.struct(*[F.col(q(c)) for c in old.columns if c in own]), KEY_JSON)
        capped = old.where(ended).select(image.alias("key")).distinct().select(
            F.lit(r.new_name).alias("table"), "key", F.expr(f"concat({point}, array(cast(-2 as decimal(38,0))))").alias("position"),
            F.lit(r.text).alias("position_text"), F.lit(None).cast(META_COLUMNS["_cdc_record"]).alias("record"),
            F.lit(None).cast("int").alias("sub"), F.lit(r.event_time_ms).cast("bigint").alias("event_time_ms"), F.lit("r").alias("op"))
        rows = capped if rows is None else rows.unionByName(capped, allowMissingColumns=True)
    if rows is not None:
        audit.append(rows, path, txn, evolve=True)


def rename_chains(states: dict) -> list[tuple]:
    """Every remembered rename step of the target, followed through the later renames of its
    new name: ``(old name, point, hops)`` per step, ordered by old name then point; ``hops``
    lists each table the step's rows went on to, in order, as ``(its (database, schema,
    table), position prefix, the position text and event time of the rename into it)``: an event of the old table older than the point, and not older
    than an earlier point of the same table, belongs at a hop at the prefix followed by its
    own position (the last hop is the final name). Pure Python, from the progress's
    ``renamed``.

    A moved position ``point + o`` compares with another table's rename point ``q`` as
    ``point`` does (points are DDL positions followed by a step number, so neither is a prefix
    of the other, and ``point + o`` is after ``point`` itself): the chain does not depend on
    the event's own position."""
    def about(step) -> tuple:  # the step's DDL position text and event time (None: not kept)
        return (step[3] if len(step) > 3 else None, step[4] if len(step) > 4 else None)

    by_table = {name: st.renamed for name, st in states.items() if st.renamed}
    out = []
    for name in sorted(by_table):
        for step in by_table[name]:
            point, to = step[0], step[2]
            prefix, dest, seen = list(point), tuple(to), 0
            hops = [(dest, prefix, *about(step))]
            while seen < 64:  # a rename chain can not be longer than the renames there are; a guard
                nxt = next((s for s in by_table.get(qualified_name(*dest), []) if order_key(prefix) < order_key(s[0])), None)
                if nxt is None:
                    break
                prefix, dest, seen = [*nxt[0], *prefix], tuple(nxt[2]), seen + 1
                hops.append((dest, prefix, *about(nxt)))
            out.append((name, list(point), hops))
    return out


def follow_renames(states: dict) -> list[tuple]:
    """:func:`rename_chains` to the final names: ``(old name, point, final (database, schema,
    table), position prefix)`` per step."""
    return [(name, point, *hops[-1][:2]) for name, point, hops in rename_chains(states)]


#: the relabel's column of an event's qualified table name (dropped before it returns)
_NAME = "_cdclake_relabel_name"


def _late_in_batch(plan: BatchPlan, states: dict) -> tuple[bool, list]:
    """:func:`relabel_late`'s test on the driver: whether the batch holds a data change or
    truncate of a renamed table older than its latest rename (``late``), and ``ended``:
    ``(table, order, the statement ends the table)`` of the batch's DROP TABLE / TRUNCATE TABLE
    statements and column drops and renames older than a rename of the table."""
    late, ended = False, []
    for p in plan.tables:
        renamed = states[p.name].renamed if p.name in states else []
        if not renamed:
            continue
        last = ranked_key(1, renamed[-1][0])
        if (p.min_data is not None and ranked_key(*p.min_data) < last) or (
                p.truncate is not None and ranked_key(1, p.truncate[0]) < last):
            late = True
        for order, _text, ddl in p.ddl:
            if ranked_key(1, order) < last:
                ends = table_end(ddl, p.table) is not None
                if ends or column_changes(ddl):
                    ended.append((p.name, order, ends))
    return late, ended


def _relabelled(named: DataFrame, conds: list, rank0: str, keyless: str, as_read) -> DataFrame:
    """:func:`relabel_late` without history tables on the way: one projection, a CASE per
    column over the original columns (no nesting to blow up), the event's table by its
    qualified name (``named``), computed once beneath them. ``conds``: per chain its SQL
    condition and destinations; ``as_read(to)``: a moved read stays a read there."""
    def case(value_of, otherwise):
        return "CASE " + " ".join(f"WHEN {c} THEN {value_of(*dests[-1][:2])}" for c, dests, _p in conds) + f" ELSE {otherwise} END"

    # (a snapshot read ranked below the stream goes as the move made it: op c at the prefix
    # followed by -1; as op r it would rank below the new table's truncate at the point)
    moved_order = f"CASE WHEN {rank0} THEN array(cast(-1 as decimal(38,0))) ELSE position.order END"
    out = named.withColumns({
        "position": F.expr(case(lambda to, pre: f"named_struct('order', concat({position_literal_sql(pre)}, {moved_order}), 'text', position.text)",
                                "position")),
        "op": F.expr(case(lambda to, pre: f"CASE WHEN {rank0} AND NOT {keyless if as_read(to) else 'false'} THEN 'c' ELSE op END",
                          "op")),
        "database": F.expr(case(lambda to, pre: _str(to[0]), "database")),
        "schema": F.expr(case(lambda to, pre: _str(to[1]), "schema")),
        "table": F.expr(case(lambda to, pre: _str(to[2]), "`table`")),
    })
    return out


def _relabelled_with_history(named: DataFrame, plan: BatchPlan, states: dict, target: str | None, conds: list,
                             hist, rank0: str, keyless: str, as_read) -> DataFrame:
    """:func:`relabel_late` with history tables on the way: one ``explode`` of each event's
    destinations (the old table itself when it keeps its history, the history tables of the
    chain, the last name); a keyless change whose copy was gone at the point goes to none
    (:func:`_copies_gone`)."""
    def dest_sql(to, pre, h, text, etime) -> str:
        if pre is None:
            return ("named_struct('db', cast(null as string), 'sc', cast(null as string), 'tb', cast(null as string),"
                    " 'pre', cast(null as array<decimal(38,0)>), 'hist', false, 'text', cast(null as string),"
                    " 'etime', cast(null as bigint), 'read', false)")
        return (f"named_struct('db', {_str(to[0])}, 'sc', {_str(to[1])}, 'tb', {_str(to[2])}, 'pre', {position_literal_sql(pre)},"
                f" 'hist', {'true' if h else 'false'}, 'text', {_str(text if h else None)},"
                f" 'etime', cast({'null' if etime is None or not h else int(etime)} as bigint),"
                f" 'read', {'true' if as_read(to) else 'false'})")

    keep = dest_sql(None, None, False, None, None)
    dests_sql = ("CASE " + " ".join(f"WHEN {c} THEN array({', '.join(dest_sql(*d) for d in dests)})" for c, dests, _p in conds)
                 + f" ELSE array({keep}) END")
    d = "_cdclake_relabel_dest"
    spread = named.withColumn(d, F.explode(F.expr(dests_sql)))
    keyless_tables = {p.name for p in plan.tables if not p.key}  # (the batch's changes of the table have no key)
    gone = _copies_gone(named.sparkSession, target, [(name, point) for name, point, _h in rename_chains(states)
                                                      if name in keyless_tables and hist(name)], states, named) if target else None
    if gone is not None:
        # (the step's point of the event's chain, as the CASE above chooses it)
        pt = "_cdclake_relabel_point"
        spread = spread.withColumn(pt, F.expr("CASE " + " ".join(f"WHEN {c} THEN {position_literal_sql(point)}" for c, _d, point in conds)
                                              + " END"))
        same = " AND ".join(f"source_record.{f} <=> _gr.{f}" for f in RECORD_FIELDS)
        match = F.expr(f"{d}.pre IS NOT NULL AND {d}.read AND {keyless} AND {_NAME} = _gn AND position.order = _go AND {same}"
                       f" AND _ge < {pt}")
        # (no broadcast hint: an old table's history may be large; Spark picks the join)
        spread = spread.join(gone, match, "left_anti").drop(pt)
    as_moved = rank0  # a snapshot read ranked below the stream, as the move made it
    # (a history table takes the rename's position text and event time, as its moved
    # versions have them; a table of current rows the event's own, as before)
    out = spread.withColumns({
        "position": F.expr(f"CASE WHEN {d}.pre IS NULL THEN position ELSE named_struct('order', concat({d}.pre,"
                           f" CASE WHEN {as_moved} THEN array(cast(-1 as decimal(38,0))) ELSE position.order END),"
                           f" 'text', coalesce({d}.text, position.text)) END"),
        "event_time_ms": F.expr(f"CASE WHEN {d}.pre IS NULL THEN event_time_ms ELSE coalesce({d}.etime, event_time_ms) END"),
        "op": F.expr(f"CASE WHEN {d}.pre IS NOT NULL AND {as_moved} AND NOT ({d}.read AND {keyless}) THEN 'c' ELSE op END"),
        "database": F.expr(f"CASE WHEN {d}.pre IS NULL THEN database ELSE {d}.db END"),
        "schema": F.expr(f"CASE WHEN {d}.pre IS NULL THEN schema ELSE {d}.sc END"),
        "table": F.expr(f"CASE WHEN {d}.pre IS NULL THEN `table` ELSE {d}.tb END"),
    })
    return out


def relabel_late(events: DataFrame, plan: BatchPlan, states: dict, is_history=None,
                 primary_keys: dict[str, list[str]] | None = None, target: str | None = None) -> DataFrame | None:
    """``events`` with the data events of renamed tables that are older than a rename of
    their table (the progress's ``renamed``) moved to the new name, at the rename's point
    followed by their own position (as the rows moved there: :func:`apply_renames`), through
    every later rename of the new name too; None when the batch holds no such event (told on
    the driver from ``plan``: each table's oldest change and truncate). The chains are
    followed on the driver (:func:`rename_chains`); the caller plans the result again.

    ``is_history`` (qualified name -> bool): which tables keep their history (SCD type 2). A
    history table the event's rows passed through keeps a copy of the event too: the old
    table at its own position (its history gets the version it would have had, ended by the
    rename), and each later name of the chain but the last at its prefix, as the last one
    gets it, with the rename's position text and event time (kept in ``renamed`` since session
    31; else its own). A snapshot read ranked below the stream (Canal/DTS ``INIT``, Qlik
    ``REFRESH``) goes to the new names as the move made it (op ``c``, the prefix followed by -1:
    below the old table's moved rows and carried deletes, above the new table's truncate at
    the point; as op ``r`` it would rank below that truncate and be lost), but as a read (op ``r``)
    when the event has no key and the new name has no key configured (``primary_keys``): a
    table without a key ranks such a moved read as streamed and keeps its image capped
    (:func:`reads_stay`, :mod:`cdclake.apply.keyless`, :func:`cdclake.apply.history._copy_ends`). A late
    ``DROP TABLE`` / ``TRUNCATE TABLE`` statement of the old table goes on as a truncate, a late
    column drop or rename as that statement (:func:`_late_ddl`). Those tables' histories keep, per key, only
    the newest change moved in at each rename (:func:`cdclake.apply.history._versions`).
    ``target`` (the lake's folder): a change without a key of an old table that keeps its
    history, which began a version there that a change the batch does not hold ended before the
    point (a re-delivered change applied there before the rename: its copy was gone at the
    point, and the delete that ended it stays behind, :func:`_carry_deletes`' ``copies``), goes
    to none of the new names (:func:`_copies_gone`); else it would begin a copy there that
    nothing ends.
    Without history tables on the way: one projection; with them, one ``explode`` of the
    event's destinations."""

    late, ended = _late_in_batch(plan, states)
    if not late and not ended:
        return None
    fmts = ", ".join(_str(f) for f in snapshot_position_formats()) or "''"
    rank0 = f"(op = 'r' AND format NOT IN ({fmts}))"
    # (each table's log read once: the destinations and as_read ask again)
    hist = cache(is_history or (lambda name: False))
    keyless = "(primary_key IS NULL OR size(primary_key) = 0)"

    def as_read(to: tuple) -> bool:  # a moved read stays a read there (reads_stay)
        return not configured_key(to, primary_keys)

    conds = []
    batch_tables = {p.name for p in plan.tables}
    for name, point, hops in rename_chains(states):
        if name not in batch_tables:  # (no event of the batch can match: no branch, no kind read)
            continue
        cond = (f"kind = 'data' AND {_NAME} = {_str(name)}"
                f" AND ({rank0} OR position.order < {position_literal_sql(point)})")
        # (to, prefix, the destination keeps its history, the rename's text and event time):
        # the old table itself when it does (prefix None: the event as it is), the history
        # tables of the chain, the last name
        dests = [(None, None, True, None, None)] if hist(name) else []
        dests += [(to, pre, hist(qualified_name(*to)), text, etime) for i, (to, pre, text, etime) in enumerate(hops)
                  if i == len(hops) - 1 or hist(qualified_name(*to))]
        conds.append((cond, dests, point))
    named = events.withColumn(_NAME, F.expr(QUALIFIED_NAME_SQL))
    if not any(d[2] for _c, dests, _p in conds for d in dests):
        out = _relabelled(named, conds, rank0, keyless, as_read)
    else:
        out = _relabelled_with_history(named, plan, states, target, conds, hist, rank0, keyless, as_read)
    cols = [*[F.col(f.name).cast(f.dataType).alias(f.name) for f in EVENT_SCHEMA.fields],
            *[c for c in events.columns if c not in EVENT_SCHEMA.fieldNames()]]
    return reduce(DataFrame.unionByName, [out.select(*cols), *[e.select(*cols) for e in _late_ddl(named, ended, states, hist)]])


def _copies_gone(spark: SparkSession, target: str, steps: list[tuple[str, list]], states: dict, named: DataFrame) -> DataFrame | None:
    """For :func:`relabel_late`: the changes of each old table of ``steps`` (``(qualified name,
    point)``, tables that keep their history; the caller matches changes without a key only)
    that began a version there which a change of that table ended before the point, when the
    batch (``named``: its events with :data:`_NAME`) does not hold that ending change: as
    ``_gn`` (the table), ``_go`` (the change's ``position.order``), ``_gr`` (its record
    coordinates, :data:`RECORD_FIELDS`) and ``_ge`` (where its version ended). A late copy of
    such a change is none of the new table's: its copy was gone at the point, and the delete
    that ended it stays behind (:func:`_carry_deletes`' ``copies``), so nothing would end it
    there. (With the ending change in the batch both go on, as before, and end the copy in the
    new table's region: :func:`cdclake.apply.history._versions`.) None when no such table
    exists. Each table is read once, as the last batch left it (:attr:`TableState.version`,
    ``states``): not with this batch's own changes, whose late ones go on to the new table (the
    plan may be evaluated again after the old table's apply, and a batch applied again after a
    crash finds the old table's commit of it). Not small: every version of the old tables'
    histories that ended before the point."""

    out = []
    for name in sorted({n for n, _p in steps}):
        path = table_path(target, name)
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        version = states[name].version if name in states else None
        h = (spark.read.format("delta") if version is None else spark.read.format("delta").option("versionAsOf", version)).load(path)
        if "_cdc_end" not in h.columns or "_cdc_record" not in h.columns:
            continue
        last = max((p for n, p in steps if n == name), key=order_key)
        out.append(h.where(f"_cdc_end IS NOT NULL AND _cdc_end.position < {position_literal_sql(last)}").selectExpr(
            f"{_str(name)} AS _gn", "_cdc_position AS _go", f"{record_struct_sql('_cdc_record')} AS _gr", "_cdc_end.position AS _ge",
            f"{record_struct_sql('_cdc_end.record')} AS _fr"))
    if not out:
        return None
    held = named.where("kind = 'data'").selectExpr(f"{_NAME} AS _fn", "position.order AS _fo", f"{record_struct_sql('source_record')} AS _fs")
    ending = " AND ".join(f"_fr.{f} <=> _fs.{f}" for f in RECORD_FIELDS)
    return (reduce(DataFrame.unionByName, out)
            .join(held, F.expr(f"_gn = _fn AND _ge = _fo AND {ending}"), "left_anti").drop("_fr"))


def _late_ddl(named: DataFrame, ended: list[tuple[str, list, bool]], states: dict, hist) -> list[DataFrame]:
    """For :func:`relabel_late`: DDL of a renamed table older than its rename that arrives after
    the rename (``ended``: ``(table, order, the statement ends the table)``, found on the
    driver) changed rows or columns that moved on, so it goes on to the new name (and each
    history table of the chain, as data events do) at the prefix followed by its position: a
    ``DROP TABLE`` or ``TRUNCATE TABLE`` statement as a truncate (op ``t``, no record
    coordinates, as a statement's end has none), a column drop or rename as the statement
    itself (its column list left out: the new table's columns are its own; the plan follows
    the statement as an earlier batch's, :func:`cdclake.apply.plan.follow_past_column_ddl`).
    The statement stays the old table's too. ``named``: the batch's events with
    :data:`_NAME`. One filtered projection of the batch per statement and destination, only
    for such a statement."""
    out = []
    chains = rename_chains(states)
    for name, order, ends in ended:
        chain = next((hops for old, point, hops in chains if old == name and order_key(order) < order_key(point)), None)
        for i, (to, pre, _text, _etime) in enumerate(chain or []):
            if i != len(chain) - 1 and not hist(qualified_name(*to)):
                continue
            moved = {
                "database": F.expr(_str(to[0])), "schema": F.expr(_str(to[1])), "table": F.expr(_str(to[2])),
                "position": F.expr(f"named_struct('order', concat({position_literal_sql(pre)}, position.order), 'text', position.text)"),
                "columns": F.lit(None),
            }
            if ends:
                moved.update({
                    "kind": F.lit(Kind.DATA.value), "op": F.lit(Op.TRUNCATE.value), "ddl": F.expr("cast(null as string)"),
                    "before": F.expr("cast(null as map<string,string>)"), "after": F.expr("cast(null as map<string,string>)"),
                    "present": F.expr("cast(null as array<string>)"),
                    "source_record": F.col("source_record").withField("file", F.lit(None).cast("string"))
                    .withField("line", F.lit(None).cast("bigint")).withField("partition", F.lit(None).cast("int"))
                    .withField("offset", F.lit(None).cast("bigint")),
                })
            out.append(named.where(f"kind = 'ddl' AND {_NAME} = {_str(name)} AND position.order = {position_literal_sql(order)}").withColumns(moved))
    return out


def columns_at_point(spark: SparkSession, target: str, r: TableRename, states: dict, columns: dict[str, str],
                     key: list[str] | None) -> dict[str, tuple[str, str]]:
    """The step's old table's columns as they were at its point, for a rename whose old name an
    earlier batch wrote after the point (:func:`written_before_rename`: a table created again
    under that name, whose columns are the old table's now too). ``columns``: the old table's
    source columns now (name -> Spark type). Returns ``{name now: (name at the point, Spark
    type at the point)}`` for each column the old table had at the point: a column is there
    when an event of the old name, or of a table renamed into it before (:func:`renamed_into`),
    older than the point declares it in ``_cdclake/changelog`` (a data change, or a DDL event
    whose column list is the table's after it; snapshot reads ranked below the
    stream count as older, as :func:`source_rows` reads them), by its name before the old
    table's column renames after the point (:func:`cdclake.apply.plan.names_back`); its type is
    the widest those events declare (:func:`cdclake.apply.types.widen`), the type now when
    they state none or it is not narrower. Key columns always stay. When the changelog holds
    no such event (none, or written by a cdclake without a changelog), every column stays as it
    is now. A column the old table dropped (or renamed away) before the point is not there
    unless an event after the drop declares it again (its own DDL, not that of a table renamed
    into it: such a column stays).

    Cost: one changelog scan (filtered by table) and a collect of its (column, type) pairs
    with their latest position, only for such a step."""
    path = f"{target}/{audit.CHANGELOG}"
    if not columns or not DeltaTable.isDeltaTable(spark, path):
        return {c: (c, t) for c, t in columns.items()}
    point = rename_point(r)
    names = ", ".join(sorted({_str(n) for n in renamed_into(states, r.old_name, point)}))
    fmts = ", ".join(_str(f) for f in snapshot_position_formats()) or "''"
    rank0 = f"coalesce(op = 'r' AND format NOT IN ({fmts}), false)"
    # per column and type: the latest position that declares it (a read ranked below the
    # stream: the lowest, as it ranks)
    declared = (_read_changelog(spark, target)
                .where(f"kind IN ('data', 'ddl') AND {QUALIFIED_NAME_SQL} IN ({names})"
                       f" AND (position.order < {position_literal_sql(point)} OR {rank0})")
                .select(F.explode("columns").alias("c"),
                        F.expr(f"CASE WHEN {rank0} THEN cast(array() as array<decimal(38,0)>) ELSE position.order END").alias("p"))
                .groupBy("c.name", "c.spark_type").agg(F.max("p").alias("p")).collect())
    if not declared:
        return {c: (c, t) for c, t in columns.items()}
    types: dict[str, str | None] = {}
    latest: dict[str, tuple] = {}
    for name, t, at in declared:
        types[name] = t if types.get(name) is None else (types[name] if t is None else widen(types[name], t))
        latest[name] = max(latest.get(name, ()), order_key(at or []))
    st = states.get(r.old_name, TableState())
    after = [d for d in st.column_ddl if order_key(d[0]) > order_key(point)]
    # the old table's own drops and renames before the point (not those carried from a table
    # renamed into it, whose orders begin with that rename's point): a column dropped or
    # renamed away there is not the table's at the point unless an event after it declares it
    gone: dict[str, tuple] = {}
    for order, _text, ddl in st.column_ddl:
        k = order_key(order)
        if k >= order_key(point) or any(list(order[:len(m)]) == list(m) and len(order) > len(m) for m in st.moved_in):
            continue
        for change in column_changes(ddl):
            if change[0] in ("drop", "rename"):
                gone[change[1]] = max(gone.get(change[1], ()), k)
    back = names_back(list(columns), after)
    out = {}
    for c, now in columns.items():
        since, hops = back[c]
        was = hops[-1][0] if hops else c
        if key and c in key:
            out[c] = (was, now)
        elif since is None and was in types and latest[was] > gone.get(was, ()):
            t = types[was]
            out[c] = (was, t if t is not None and normalize(widen(t, now)) == normalize(now) else now)
    return out


def _step_events(
    spark: SparkSession, src: str, r: TableRename, key: list[str] | None, state: TableState,
    at_point: dict[str, tuple[str, str]] | None = None, reads_stay: bool = False,
) -> tuple[DataFrame, DataFrame, dict[str, str], bool]:
    """The canonical events of one step: ``(the new table's truncate and moved rows, the old
    table's truncate, the old table's source columns name -> Spark type, the old table is a
    history table)``. ``state``: the old table's progress; its latest truncate before the
    point is carried to the new table (at the point followed by its position), so an event of
    the old table older than it that arrives later stays out there too. A moved row's position is the
    step's point followed by the row's own position (its record the row's), so a move
    applied again gives the same changes (re-delivery changes nothing, identical rows of a
    table without a key stay apart). ``reads_stay`` (the new table has no key,
    :func:`reads_stay`): a snapshot read ranked below the stream moves as a read (op ``r``), so
    its image stays capped there (:mod:`cdclake.apply.keyless`,
    :func:`cdclake.apply.history._copy_ends`); else as an insert. (A history table's read
    that ended before the point does not move; its cap does: :func:`_carry_deletes`.)"""
    point = rename_point(r)
    by_position = (r.format or "") in snapshot_position_formats()
    rows, now, history = source_rows(spark, src, point, by_position, state.moved_in)
    # the columns the moved rows declare: the old table's at the point (at_point: name now ->
    # its name and type then), read from the columns now
    at = at_point if at_point is not None else {c: (c, t) for c, t in now.items()}
    columns = {was: t for was, t in at.values()}
    source = {was: c for c, (was, _t) in at.items()}
    after = ("map(" + ", ".join(f"{_str(was)}, {canonical_text_sql(quote_ident(c), now[c])}" for c, (was, _t) in at.items()) + ")"
             if at else "cast(null as map<string,string>)")
    # a snapshot read that ranks below the stream (Canal/DTS INIT, Qlik REFRESH) has no stream
    # position: it goes first (-1), so a late streamed change of the old table, moved after it,
    # still wins over it as it would have there
    # (a read an earlier rename moved into the old table ranks as streamed: it keeps its
    # position, after the old table's truncate carried here; keyless.rank_of)
    rank0 = f"({rank_of('_cdc_op', '_cdc_position', by_position, state.moved_in)}) = 0"
    row_pos = (f"concat({position_literal_sql(point)}, CASE WHEN {rank0} THEN array(cast(-1 as decimal(38,0)))"
               " ELSE coalesce(_cdc_position, cast(array() as array<decimal(38,0)>)) END)")
    # the row's own record (a change of the old table delivered again, moved by relabel_late,
    # ties with it exactly); a row written before _cdc_record existed: the DDL's
    record = "_cdc_record" if "_cdc_record" in rows.columns else None
    op = f"CASE WHEN ({rank_sql('_cdc_op', by_position)}) = 0 THEN 'r' ELSE 'c' END" if reads_stay else None
    if COLUMN_ORDERS in rows.columns and key:
        moved = _events(rows.where(f"{COLUMN_ORDERS} IS NULL"), _event_sql(r, r.new, Op.CREATE.value, row_pos, columns, key, after, record))
        moved = moved.unionByName(_moved_by_column(rows.where(f"{COLUMN_ORDERS} IS NOT NULL"), r, point, columns, key, after, by_position,
                                                   source))
    else:
        moved = _events(rows, _event_sql(r, r.new, Op.CREATE.value, row_pos, columns, key, after, record, op_sql=op))
    empty_at, empty_record = point, None
    if state.truncate_position is not None and order_key(state.truncate_position) < order_key(point):
        # the old table's truncate, with its record (a change of its own position after it stays)
        empty_at = [*point, *state.truncate_position]
        empty_record = record_sql(state.truncate_record)
    empty_new = _events(spark.range(1), _event_sql(r, r.new, Op.TRUNCATE.value, position_literal_sql(empty_at), columns, key, record=empty_record))
    end_old = _events(spark.range(1), _event_sql(r, r.old, Op.TRUNCATE.value, position_literal_sql(point), columns, key))
    return empty_new.unionByName(moved), end_old, columns, history


def _moved_by_column(rows: DataFrame, r: TableRename, point: list, columns: dict[str, str], key: list[str], after: str,
                     by_position: bool, source: dict[str, str] | None = None) -> DataFrame:
    """The moved events of rows of a table that keeps per-column positions
    (:data:`cdclake.apply.delta_table.COLUMN_ORDERS`, non-null in ``rows``): per row, one
    partial update (op ``u``, ``present`` the key and the column) per non-key column, at the
    point followed by the position of the change that set the column (its record the change's;
    a column the map does not name, the lowest: ``-2``; a snapshot read ranked below the
    stream: ``-1``), and one carrying the key only at the row's own order. The new table folds
    them into the same row with the same per-column positions, so that a later-arriving older
    change of the old table, moved after them, still fills a column it is newer than.
    ``after``: SQL of the row's full image (column -> text). ``source``: column of ``columns``
    -> its name in the stored row's map, where they differ (:func:`columns_at_point`)."""
    row = ord_struct_sql(rank_sql("_cdc_op", by_position), "coalesce(_cdc_position, cast(array() as array<decimal(38,0)>))", "1", "_cdc_record")
    m = quote_ident(COLUMN_ORDERS)
    entries = [f"named_struct('c', cast(null as string), 'o', {row})"] + [
        f"named_struct('c', {_str(n)}, 'o', {column_order_sql(m, (source or {}).get(n, n), row)})" for n in columns if n not in key]
    keys = ", ".join(f"{_str(k)}, element_at(_all, {_str(k)})" for k in key)
    # (only the columns made here: a source column of any name cannot clash with them)
    split = rows.select(F.expr(after).alias("_all"), F.explode(F.expr(f"array({', '.join(entries)})")).alias("_e"))
    split = split.select(
        F.expr(f"CASE WHEN _e.c IS NULL THEN map({keys}) ELSE map_concat(map({keys}), map(_e.c, element_at(_all, _e.c))) END").alias("_after"),
        F.expr(f"CASE WHEN _e.c IS NULL THEN array({', '.join(map(_str, key))}) ELSE array({', '.join(map(_str, key))}, _e.c) END").alias("_present"),
        F.expr(f"concat({position_literal_sql(point)}, CASE WHEN _e.o._rank < 0 THEN array(cast(-2 as decimal(38,0)))"
               " WHEN _e.o._rank = 0 THEN array(cast(-1 as decimal(38,0))) ELSE _e.o.pos END)").alias("_pos"),
        F.expr("named_struct('file', _e.o.file, 'line', _e.o.line, 'partition', _e.o.part, 'offset', _e.o.off)").alias("_rec"),
    )
    return _events(split, _event_sql(r, r.new, Op.UPDATE.value, "_pos", columns, key, "_after", "_rec", "_present"))


def _txn(txn: audit.Txn | None, n: str, side: str) -> audit.Txn | None:
    return None if txn is None else audit.Txn(f"{txn.app_id}.rename.{n}.{side}", txn.version)
