"""Planning: ONE small aggregate over a batch's events says, per target table, which columns
with which types it needs, which key, what kinds of change it holds and where its positions
lie, and, per source (file or Kafka partition), how far the batch goes.

Only this summary (a few rows per table and per source) reaches the driver; the events stay in
Spark. Everything else a batch decides (keys, column order and types, whether a table needs
the tombstone look-up, the progress rows) is pure Python over the summary, so it is tested
without Spark (``tests/apply/test_plan.py``).

The aggregate is one ``GROUPING SETS`` query over the events (EVENT_SCHEMA):

* set ``table``: ``(database, schema, table, columns, keys)``, where ``columns`` is the event's
  own column list (data and DDL events) and ``keys`` the key set of its image (data events):
  one row per distinct column declaration of a table (a handful per batch, not per event);
* set ``source``: ``(source, database, schema, table)``: last position, event time and
  heartbeat per source and table, for the progress;
* with ``records``, set ``error_code``: records and events per reject code (null: decoded);
* in a gated batch, set ``tx``: per transaction, what the transaction gate decides on
  (:mod:`cdclake.apply.transactions`), so a gated batch needs no aggregate of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.apply import types as T
from cdclake.apply.ddl import column_changes, table_end, table_renames
from cdclake.formats import snapshot_position_formats, update_halves_formats
from cdclake.formats.sqltypes import untyped_spark_type
from cdclake.model import qualified_name
from cdclake.routing import glob_case_sql, glob_match, is_glob
from cdclake.sqltext import sql_str

#: a position as the driver compares it: ``position.order`` (decimals, compared like Spark
#: compares arrays) and ``position.text``
Order = list


def order_key(order) -> tuple:
    """A sort key for ``position.order`` (list of Decimal or None) comparing as Spark compares
    ``array<decimal(38,0)>``: element by element, a null element first, a shorter prefix first."""
    if order is None:
        return (0,)
    return (1, *[(0, Decimal(0)) if v is None else (1, Decimal(v)) for v in order])


def ranked_key(rank: int, order) -> tuple:
    """Sort key of ``struct(rank, position.order)``: the applier's order (snapshot rows, rank
    0, below every streamed change, rank 1)."""
    return (rank, order_key(order))


#: the fields of a record's coordinates, in the order that breaks ties of position
#: (``_cdc_record``, the deletes table's ``record``)
RECORD_FIELDS = ("file", "line", "partition", "offset")


def record_struct_sql(struct: str) -> str:
    """SQL: a struct of the :data:`RECORD_FIELDS` of ``struct`` (SQL of a struct that has them:
    ``source_record``, ``_cdc_record``, ``_cdc_end.record``), those fields only."""
    return "named_struct(" + ", ".join(f"'{f}', {struct}.{f}" for f in RECORD_FIELDS) + ")"


def record_key(record) -> tuple:
    """A sort key of record coordinates (``(file, line, partition, offset)`` or None) that
    orders as Spark orders the struct: a null (field or whole) first."""
    if record is None:
        return ()
    return tuple((0,) if v is None else (1, v) for v in record)


def record_tuple(record) -> tuple | None:
    """Record coordinates as read back (a Row or tuple: file, line, partition, offset) as a
    tuple, None for None."""
    return None if record is None else tuple(record)


def truncate_key(order, record) -> tuple:
    """A sort key of a truncate: its ``position.order``, then its record (:func:`record_key`)."""
    return (order_key(order), record_key(record))


@dataclass
class KeyStats:
    """The range of the first key column's values over a table's data events (before and after
    images), from the planning aggregate, for the MERGE condition (Delta skips the files whose
    key range lies outside it).

    names: the key column names the events were measured by (the configured key, else each
    event's own ``primary_key``; more than one name, or none, gives no range).
    missing: images without a value of that column. bad_num: values that are not numbers.
    num_lo / num_hi: least and greatest value read as ``decimal(38,10)``; text_lo / text_hi:
    as text; ts_lo / ts_hi: as timestamps, in text ``yyyy-MM-dd HH:mm:ss.SSSSSS`` (None where no
    value reads so).
    """

    names: set = field(default_factory=set)
    missing: int = 0
    bad_num: int = 0
    bad_ts: int = 0
    num_lo: Decimal | None = None
    num_hi: Decimal | None = None
    text_lo: str | None = None
    text_hi: str | None = None
    ts_lo: str | None = None
    ts_hi: str | None = None

    def add(self, r: dict) -> None:
        """Fold in one aggregate row's ``k_*`` fields."""
        if r.get("k_name_lo") is not None:
            self.names.update({r["k_name_lo"], r["k_name_hi"]})
        self.missing += r.get("k_missing") or 0
        self.bad_num += r.get("k_bad_num") or 0
        self.bad_ts += r.get("k_bad_ts") or 0
        for f, pick in (("num_lo", min), ("num_hi", max), ("text_lo", min), ("text_hi", max), ("ts_lo", min), ("ts_hi", max)):
            v = r.get("k_" + f)
            if v is not None:
                cur = getattr(self, f)
                setattr(self, f, v if cur is None else pick(cur, v))

    def range_for(self, column: str, spark_type: str) -> tuple | None:
        """``(lo, hi)`` bounding ``column`` (of ``spark_type``) over the batch: ints for integer
        and decimal columns (the floor and ceiling), text for string, date and timestamp
        columns (to be cast to the column's type), or None when the batch gives no safe range (no value, a missing value, another key name,
        values that do not read as the type, a type without a reliable order here)."""
        if self.names != {column} or self.missing:
            return None
        t = spark_type.lower().replace(" ", "")
        if t in ("tinyint", "smallint", "int", "bigint") or t.startswith("decimal"):
            if self.bad_num or self.num_lo is None:
                return None
            return (int(self.num_lo.to_integral_value(rounding="ROUND_FLOOR")), int(self.num_hi.to_integral_value(rounding="ROUND_CEILING")))
        if t == "string":
            return None if self.text_lo is None else (self.text_lo, self.text_hi)
        if t in ("date", "timestamp"):
            return None if self.bad_ts or self.ts_lo is None else (self.ts_lo, self.ts_hi)
        return None


@dataclass
class TablePlan:
    """What one batch does to one target table.

    columns: source columns in first-seen order, name -> Spark type (widened over the batch).
    untyped: the columns no event of the batch states a type for (every ``spark_type`` null:
        a format whose type comes from the value, and every value was NULL, e.g. DTS DECIMAL,
        DataHub TUPLE); ``columns`` has :func:`cdclake.formats.sqltypes.untyped_spark_type`
        of their source type for them, used only to create the column: a column the table
        has keeps its type.
    key: key columns chosen for the table (configuration > message, whose key may be a producer row id the decoder chose); empty
        means "no key: match on the whole before image".
    counts: data events per op code (``c``, ``u``, ``d``, ``r``, ``t``) in the batch.
    partial: the batch holds images that carry only some columns (``present`` set).
    halves: update halves (one image only, DataWorks/TUPLE) to pair before applying.
    moves: partial updates (``present`` set) whose before image gives a key column another
        value than the after image: they move the row to a new key, and the columns they do
        not carry come from the old key's row (:func:`cdclake.apply.delta_table.fill_moves`).
    rekeys: updates with a before image whose key columns (the key each event has, configured
        or stated) it gives another value than the after image, or may: they delete the old
        key's row, which is remembered (``_cdclake/deletes``). ``event_keys``: the key column
        lists the batch's events have (None: none); see :meth:`may_rekey`.
    truncate: ``(order, text)`` of the batch's latest truncate, else None.
    truncate_record: the record coordinates of that truncate (:func:`record_key` order:
        ``(file, line, partition, offset)``; None for a DDL statement's), which order it
        among changes of its own position (equal positions keep arrival order).
    min_data: ``(rank, order)`` of the batch's oldest data change (rank 0 for snapshot reads,
        but for formats whose snapshot positions order with streamed ones).
    last_streamed: ``order`` of the batch's latest event of the table that ranks with the
        stream (data, DDL, end of a snapshot; not a snapshot read ranked below the stream, see
        :attr:`snapshot_by_position`), else None.
    ranked_events: data events whose format ranks snapshot rows below streamed changes (see
        :attr:`snapshot_by_position`).
    max_delete: ``order`` of the batch's latest delete or full-image update (which may change the
        key, deleting the old key's row), else None.
    max_move: ``order`` of the batch's latest partial update that moves its row (see ``moves``),
        else None: kept per table in the progress (``move_position``), it says whether a later
        batch may hold a change older than a remembered move
        (:func:`cdclake.apply.delta_table.follow_moves`).
    ddl: ``(order, text, ddl)`` of each DDL event of the table in the batch.
    drops: columns the batch's DDL drops (and no later event of the batch declares), in order.
    renames: new name -> old name of the columns the batch's DDL renames (see
        :mod:`cdclake.apply.ddl`); ``columns`` already holds the new name in the old one's place.
    rename_from: new name -> every earlier name of the column in the batch's chain of renames
        (``a -> b``, then ``b -> c``: ``c: [b, a]``), newest first: an event names the column by
        the one in force at its position (:func:`cdclake.apply.delta_table.change_rows`).
    ended: a line per ``DROP TABLE`` / ``TRUNCATE TABLE`` statement of the batch's DDL and per
        end of a full snapshot (:attr:`snapshot_end`), which the applier follows as a truncate
        at its position (``truncate`` holds the latest), for the schema history.
    ends: ``(order, text, event time ms)`` of each of those statements (event time None: the
        plan keeps none for DDL) and of :attr:`snapshot_end` (an SCD type 2 table ends every
        row's history at each of them, see :mod:`cdclake.apply.history`).
    snapshot_end: ``(order, text, event time ms)`` of the batch's latest ``snapshot_end`` event of the table
        (:attr:`cdclake.model.Kind.SNAPSHOT_END`), else None: followed like a ``TRUNCATE TABLE``
        statement there (``truncate``, ``ends``, ``ended``), so the rows the snapshot did not
        read, all older than it, are removed and every row it read (same position, a record
        after the truncate's null one) stays; only when :attr:`snapshot_by_position` (else a
        line of ``unapplied``). ``snapshot_ends``: how many such events the batch holds.
    unapplied: the batch's DDL that is not followed, with the reason (``not applied: ...``),
        for ``_cdclake/schema_history``.
    renamed: ``(point, record, (database, schema, table))`` of each table rename step that
        ended this table (set by :mod:`cdclake.apply.renames`; kept in the progress).
    lasts: column name -> the order key of the last event of the batch that declares it (a
        column declared after the DDL that drops or renames it was added again).
    earlier_renames: the new names of :attr:`renames` that an earlier batch's DDL renamed (read
        from the old name; the table has them already: :func:`follow_past_column_ddl`).
    rename_orders: new name -> ``order`` of the DDL statement that renamed the column.
    rename_steps: new name -> the steps of its chain of renames, oldest first, as ``(old name,
        new name, order of the statement)``: a table that holds a name between the first and the
        last (events of each name arrived before the statements) merges them one step at a time
        (:func:`cdclake.apply.delta_table.evolve_table`).
    column_history: ``(order, text, ddl)`` of every DDL statement that dropped or renamed a
        column of the table, earlier batches' and the batch's, in position order (set by
        :func:`follow_past_column_ddl`): what :func:`names_back` reads a remembered image with.
    carried_column_ddl: ``(order, text, ddl)`` of the column DDL of the table renamed into this
        one (set by :mod:`cdclake.apply.renames`, each order the rename's point followed by the
        statement's own): kept in the progress's ``column_ddl`` with the table's own, so a
        late event of the old table moved here is read with the columns in force at its
        position there.
    moved_into: the points of the table renames whose moved rows the batch brings into this
        table (set by :mod:`cdclake.apply.renames` for the move's own apply, before the
        progress names them: :attr:`TableState.moved_in`).
    """

    database: str | None
    schema: str | None
    table: str
    columns: dict[str, str] = field(default_factory=dict)
    untyped: list[str] = field(default_factory=list)
    message_key: list[str] | None = None
    key: list[str] = field(default_factory=list)
    key_source: str = "none"
    counts: dict[str, int] = field(default_factory=dict)
    partial: bool = False
    halves: int = 0
    moves: int = 0
    rekeys: int = 0
    event_keys: set = field(default_factory=set)
    truncate: tuple[Order, str] | None = None
    truncate_record: tuple | None = None
    min_data: tuple[int, Order] | None = None
    last_streamed: Order | None = None
    max_delete: Order | None = None
    max_move: Order | None = None
    ddl: list[tuple[list, str, str]] = field(default_factory=list)
    drops: list[str] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    rename_from: dict[str, list[str]] = field(default_factory=dict)
    unapplied: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    ends: list[tuple[Order, str, int | None]] = field(default_factory=list)
    snapshot_end: tuple[Order, str, int | None] | None = None
    snapshot_ends: int = 0
    ranked_events: int = 0
    renamed: list[tuple] = field(default_factory=list)
    key_stats: "KeyStats" = field(default_factory=lambda: KeyStats())
    lasts: dict[str, tuple] = field(default_factory=dict)
    earlier_renames: list[str] = field(default_factory=list)
    rename_orders: dict[str, list] = field(default_factory=dict)
    rename_steps: dict[str, list[tuple[str, str, list]]] = field(default_factory=dict)
    column_history: list[tuple[list, str, str]] = field(default_factory=list)
    carried_column_ddl: list[tuple[list, str, str]] = field(default_factory=list)
    moved_into: list[list] = field(default_factory=list)
    #: ``(columns, untyped, key, lasts)`` as the batch's events declare them, before its column
    #: DDL was followed: :func:`follow_past_column_ddl` follows it again together with an
    #: earlier batch's, in position order
    declared: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return qualified_name(self.database, self.schema, self.table)

    @property
    def drops_or_renames_columns(self) -> bool:
        """The batch's DDL drops or renames a column of the table (not one an earlier batch
        applied): a table without a key then counts its images again, all of them
        (:mod:`cdclake.apply.keyless`), since events written after the DDL may have been
        matched before it with the columns of their batch."""
        return bool(self.drops) or any(n not in self.earlier_renames for n in self.renames)

    @property
    def snapshot_by_position(self) -> bool:
        """Every data event of the table in the batch comes from a format whose snapshot rows
        order with streamed changes by position (``Capabilities.snapshot_positions``,
        Debezium): the applier then gives snapshot rows (``r``) stream rank 1, like any change."""
        return sum(self.counts.values()) > 0 and self.ranked_events == 0

    @property
    def has_changes(self) -> bool:
        """The batch holds data events (other than truncates) for the table."""
        return any(self.counts.get(op) for op in "cudr")


@dataclass
class SourceProgress:
    """How far the batch goes in one source (file, or ``topic:partition``) for one table
    (``table`` None: the source as a whole, heartbeats included)."""

    source: str | None
    table: str | None
    last_position: Order | None
    last_position_text: str | None
    last_event_time_ms: int | None
    last_heartbeat_ms: int | None


@dataclass
class TableRename:
    """One table rename of the batch's DDL (:func:`cdclake.apply.ddl.table_renames`), applied
    after the batch's tables by :mod:`cdclake.apply.renames`.

    order, text: the DDL event's position (``position.order``, ``position.text``).
    event_time_ms: its event time (ms since the epoch, UTC; may be None).
    record: its source record coordinates (:func:`record_tuple`), format: its format's name.
    ddl: the statement's text. step: the rename's place among the batch's renames of its
        position and of its DDL event's database and schema (1-based, in record order, then
        statement order: ``RENAME TABLE a TO b, b TO c`` is two steps, done in order); another
        source's rename at the same position does not move it.
    old, new: ``(database, schema, table)`` of the table renamed and of its new name.
    source: ``(database, schema)`` of the DDL event (the namespace its steps are numbered in).
    """

    order: Order
    text: str | None
    event_time_ms: int | None
    record: tuple | None
    format: str | None
    ddl: str
    step: int
    old: tuple
    new: tuple
    source: tuple | None = None

    @property
    def old_name(self) -> str:
        return qualified_name(*self.old)

    @property
    def new_name(self) -> str:
        return qualified_name(*self.new)


@dataclass
class BatchPlan:
    """The driver's view of a batch: one plan per table with data or DDL, and progress rows."""

    tables: list[TablePlan]
    progress: list[SourceProgress]
    #: per error code (None: decoded records), ``(records, events)``; filled only when the
    #: plan was made over records (:func:`plan_batch` with ``records``)
    records: dict[str | None, tuple[int, int]] = field(default_factory=dict)
    #: the table renames of the batch's DDL, in position order (then record, then step)
    renames: list[TableRename] = field(default_factory=list)


def configured_key_sql(primary_keys: dict[str, list[str]] | None) -> str:
    """SQL over an event: the first configured key column of its table (the names
    :func:`choose_key` looks up: qualified name, ``database.table``, bare table, then the
    globs), else NULL."""
    firsts = {n: k[0] for n, k in (primary_keys or {}).items() if k}
    if not firsts:
        return "cast(null as string)"
    return _configured_sql(firsts, sql_str)


def configured_keys_sql(primary_keys: dict[str, list[str]] | None) -> str:
    """SQL over an event: its table's configured key columns (array<string>, looked up as by
    :func:`configured_key_sql`), else NULL."""
    keys = {n: k for n, k in (primary_keys or {}).items() if k}
    if not keys:
        return "cast(null as array<string>)"
    return _configured_sql(keys, lambda k: f"array({', '.join(sql_str(c) for c in k)})")


#: SQL over an event: its table's qualified name (:func:`cdclake.model.qualified_name`)
QUALIFIED_NAME_SQL = "concat_ws('.', nullif(database, ''), nullif(schema, ''), `table`)"


def update_half_sql() -> str:
    """SQL over an event: it is one half of an update that its format writes as two records of
    one position (:attr:`cdclake.formats.base.Capabilities.update_halves`: DataWorks
    ``UPDATE_BEFOR``/``UPDATE_AFTER``, TUPLE; a ``u`` event with one image and no ``present``,
    paired by :func:`cdclake.normalize.pair_update_halves`), in no transaction. An update with
    only its after image in another format (Debezium for PostgreSQL without a full replica
    identity) is a whole update, not a half."""
    fmts = ", ".join(sql_str(f) for f in update_halves_formats()) or "''"
    return (f"(tx_id IS NULL AND kind = 'data' AND op = 'u' AND present IS NULL AND format IN ({fmts})"
            " AND ((before IS NULL) <> (after IS NULL)))")


#: the start of the transaction gate's key of an update's two halves (:func:`tx_key_sql`)
UPDATE_HALVES_TX = "cdclake-update-halves:"


def tx_key_sql(every_kind: bool = False) -> str:
    """SQL over an event: what the transaction gate groups it by (:mod:`cdclake.apply.transactions`):
    its transaction id (data, DDL and markers; with ``every_kind``, any event that has one: what
    is held with an open transaction), else, for an update half (:func:`update_half_sql`), its
    update (:data:`UPDATE_HALVES_TX` and, as JSON, the format, the three parts of the table's
    name and the position: what :func:`cdclake.normalize.pair_update_halves` pairs by, so
    that names with dots in them stay apart; the two halves are a transaction of two), else
    NULL (never held)."""
    kinds = "" if every_kind else " AND kind IN ('data', 'ddl', 'tx_begin', 'tx_end')"
    return (
        f"CASE WHEN tx_id IS NOT NULL{kinds} THEN tx_id"
        f" WHEN {update_half_sql()} THEN concat({sql_str(UPDATE_HALVES_TX)},"
        " to_json(named_struct('format', format, 'database', database, 'schema', schema, 'table', `table`, 'position', position))) END"
    )


def _configured_sql(configured: dict, value) -> str:
    """SQL: the ``value`` (a function of a configured entry -> SQL) of ``configured`` (table
    name or glob -> entry) for an event's table, by qualified name, then ``database.table``,
    then bare table name, then the first glob (:func:`cdclake.routing.glob_sql`) its qualified
    name matches, else NULL."""
    exact = {n: v for n, v in configured.items() if not is_glob(n)}
    globs = [(n, v) for n, v in configured.items() if is_glob(n)]
    qual = QUALIFIED_NAME_SQL
    found = []
    if exact:
        m = "map(" + ", ".join(f"{sql_str(n)}, {value(v)}" for n, v in exact.items()) + ")"
        found += [f"try_element_at({m}, {qual})",
                  f"case when nullif(database, '') is not null then try_element_at({m}, concat(database, '.', table)) end",
                  f"try_element_at({m}, table)"]
    if globs:
        found.append(glob_case_sql([(n, value(v)) for n, v in globs], qual))
    return f"coalesce({', '.join(found)})" if len(found) > 1 else found[0]


def open_condition():
    """The SQL condition (a Column over the aggregate of one transaction's events: ``n_seq``,
    ``size``, ``last_seq``, ``begun``, ``ended``, ``said_last``, ``said_not_last``) that the
    transaction is still open (see :mod:`cdclake.apply.transactions`)."""
    expected = F.coalesce(F.col("size"), F.col("last_seq"))
    unsized = F.coalesce(F.col("begun") & ~F.col("ended"), F.lit(False)) | F.coalesce(
        F.col("said_not_last") & ~F.col("said_last"), F.lit(False)
    )
    return F.when(expected.isNotNull(), F.col("n_seq") < expected).otherwise(unsized)


def _tx_columns() -> list:
    """:func:`summarize`'s input columns for the transaction gate's grouping: ``tx`` (the
    transaction's key, :func:`tx_key_sql`), ``tx_change`` (a change's place in its transaction:
    ``tx_seq``, else its position; an update half: which half it is; counted distinct),
    ``tx_seq``, ``tx_size`` (an update's two halves: a transaction of two), ``tx_last``,
    ``from_held``, ``held_at_ms``."""
    in_tx = F.col("tx_id").isNotNull() & F.col("kind").isin("data", "ddl", "tx_begin", "tx_end")
    half = F.expr(update_half_sql())
    seq = F.coalesce(F.col("tx_seq").cast("string"), F.col("position.text"))
    return [
        F.expr(tx_key_sql()).alias("tx"),
        # a change's place in its transaction (tx_seq, else its position; an update half:
        # which half it is): counted distinct
        F.when(in_tx & F.col("kind").isin("data", "ddl"), seq)
         .when(half, F.when(F.col("before").isNotNull(), F.lit("before")).otherwise(F.lit("after"))).alias("tx_change"),
        # an update's two halves: a transaction of two
        "tx_seq", F.when(half, F.lit(2).cast("bigint")).otherwise(F.col("tx_size")).alias("tx_size"), "tx_last",
        "from_held", "held_at_ms",
    ]


def _summary_input(events: DataFrame, primary_keys: dict[str, list[str]] | None, records: bool, tx_cols: list, tabled, is_data,
                   rank, has_event) -> DataFrame:
    """:func:`summarize`'s input: one row per event with what the aggregate groups and reads
    (``source``, ``cols``, ``rec``, ``ddl_rec``, ``keys``, ``rank``, ``k_name``, ``k_names``
    besides the event's own columns)."""
    return events.select(
        *(["error_code", "pos"] if records else []),
        *tx_cols,
        "database",
        "schema",
        "table",
        "kind",
        "op",
        "present",
        "primary_key",
        "position",
        "event_time_ms",
        "before",
        "after",
        "ddl",
        "format",
        F.when(
            has_event,
            F.coalesce(
                F.col("source_record.file"),
                F.concat_ws(":", F.col("source_record.topic"), F.col("source_record.partition").cast("string")),
            ),
        ).alias("source"),
        F.when(tabled, F.col("columns")).alias("cols"),
        F.when(tabled & (F.col("op") == "t"), F.struct(*[F.col(f"source_record.{f}").alias(f) for f in RECORD_FIELDS])).alias("rec"),
        F.when(tabled & (F.col("kind") == "ddl"), F.struct(*[F.col(f"source_record.{f}").alias(f) for f in RECORD_FIELDS])).alias("ddl_rec"),
        F.when(is_data & F.col("table").isNotNull(), F.map_keys(F.coalesce("after", "before"))).alias("keys"),
        rank.alias("rank"),
        F.expr(f"coalesce({configured_key_sql(primary_keys)}, primary_key[0])").alias("k_name"),
        F.expr(f"coalesce({configured_keys_sql(primary_keys)}, primary_key)").alias("k_names"),
    )


def _key_aggregates(keyed, changed) -> list:
    """:func:`summarize`'s aggregates of the key column ``k_name`` (:class:`KeyStats`): its
    names, the changes that miss it (``changed``: a table's data changes but truncates), and its
    range as numbers, text and timestamps over both images of the ``keyed`` changes."""
    kv = F.expr("try_element_at(after, k_name)")
    kb = F.expr("try_element_at(before, k_name)")
    dec = lambda c: F.expr(f"try_cast({c} as decimal(38,10))")  # noqa: E731
    ts = lambda c: F.expr(f"try_cast({c} as timestamp)")  # noqa: E731
    kv_s, kb_s = "try_element_at(after, k_name)", "try_element_at(before, k_name)"
    return [
        F.min(F.when(keyed, F.col("k_name"))).alias("k_name_lo"),
        F.max(F.when(keyed, F.col("k_name"))).alias("k_name_hi"),
        F.count_if(changed & (F.col("k_name").isNull()
                   | (F.col("after").isNotNull() & kv.isNull()) | (F.col("before").isNotNull() & kb.isNull()))).alias("k_missing"),
        F.count_if(keyed & ((kv.isNotNull() & dec(kv_s).isNull()) | (kb.isNotNull() & dec(kb_s).isNull()))).alias("k_bad_num"),
        F.count_if(keyed & ((kv.isNotNull() & ts(kv_s).isNull()) | (kb.isNotNull() & ts(kb_s).isNull()))).alias("k_bad_ts"),
        F.min(F.when(keyed, F.least(dec(kv_s), dec(kb_s)))).alias("k_num_lo"),
        F.max(F.when(keyed, F.greatest(dec(kv_s), dec(kb_s)))).alias("k_num_hi"),
        F.min(F.when(keyed, F.least(kv, kb))).alias("k_text_lo"),
        F.max(F.when(keyed, F.greatest(kv, kb))).alias("k_text_hi"),
        # timestamps reach the driver as text (session time zone), not as Python datetimes
        F.date_format(F.min(F.when(keyed, F.least(ts(kv_s), ts(kb_s)))), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("k_ts_lo"),
        F.date_format(F.max(F.when(keyed, F.greatest(ts(kv_s), ts(kb_s)))), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("k_ts_hi"),
    ]


def _update_aggregates(tabled, is_data, count) -> list:
    """:func:`summarize`'s aggregates of a table's updates (``tabled``: the event is a table's;
    ``count``: a count of those): update halves, the partial updates that move their row to
    another key (and the latest one's order), the updates that may change their key, and the
    least and greatest key column list of the events."""
    op = F.col("op")
    half = is_data & (op == "u") & F.col("present").isNull() & (F.col("before").isNull() != F.col("after").isNull())
    # a partial update whose before image names a key column with another value moves its row
    # to a new key (the lambda runs on partial updates with both images only)
    moving = (is_data & (op == "u") & F.col("present").isNotNull() & F.col("before").isNotNull() & F.col("after").isNotNull()
              & F.expr("exists(k_names, k -> map_contains_key(before, k) AND map_contains_key(after, k) AND NOT (before[k] <=> after[k]))"))
    # an update with a before image that may change its key: a key column it does not show in
    # both images counts too
    rekeying = (is_data & (op == "u") & F.col("before").isNotNull()
                & (F.col("k_names").isNull() | F.col("after").isNull() | F.expr(
                    "exists(k_names, k -> NOT (try_element_at(before, k) <=> try_element_at(after, k)))")))
    keys = F.when(tabled & is_data, F.coalesce(F.col("k_names"), F.array()))
    return [
        count(half).alias("halves"),
        count(moving).alias("moves"),
        F.max(F.when(tabled & moving, F.col("position.order"))).alias("max_move"),
        count(rekeying).alias("rekeys"),
        F.min(keys).alias("k_names_lo"),
        F.max(keys).alias("k_names_hi"),
    ]


def _change_aggregates(tabled, is_data, count) -> list:
    """:func:`summarize`'s aggregates of a table's truncates, oldest change, snapshot ends,
    deletes and DDL (``tabled``: the event is a table's; ``count``: a count of those)."""
    op, order = F.col("op"), F.col("position.order")
    return [
        # the latest truncate: by position, then by its record (equal positions: arrival order)
        F.max(F.when(tabled & is_data & (op == "t"), F.struct(
            F.col("position.order").alias("order"),
            F.col("rec").alias("record"),
            F.col("position.text").alias("text"),
        ))).alias("truncate"),
        F.min(F.when(tabled & is_data & (op != "t"), F.struct(F.col("rank"), order.alias("order")))).alias("min_data"),
        # the latest end of a full snapshot (--snapshot-removes-missing): a truncate there
        F.max(F.when(tabled & (F.col("kind") == "snapshot_end"), F.struct(
            order.alias("order"), F.col("position.text").alias("text"), F.col("event_time_ms").alias("etime")))).alias("snapshot_end"),
        count(F.col("kind") == "snapshot_end").alias("n_snapshot_end"),
        # an update with a full before image may change the key (always, for a keyless table):
        # it deletes the old key's row, so it counts as a delete here. A partial update with a
        # before image counts too: the applier completes one whose before image holds every
        # column into a full update (delta_table.change_rows), which then moves the row like
        # any other (counting the rest only costs a look at the deletes table)
        F.max(F.when(tabled & is_data & ((op == "d") | ((op == "u") & F.col("before").isNotNull())), order)).alias("max_delete"),
        F.collect_list(
            F.when(tabled & (F.col("kind") == "ddl"), F.struct(
                order.alias("order"), F.col("position.text").alias("text"), F.col("ddl"),
                # for a table rename (cdclake.apply.renames): when and where it was written
                F.col("event_time_ms").alias("etime"), F.col("format"),
                F.col("ddl_rec").alias("record")))
        ).alias("ddls"),
    ]


def _tx_aggregates(has_event) -> list:
    """:func:`summarize`'s aggregates of the set ``tx``: per transaction what
    :func:`open_condition` and the gate read (:mod:`cdclake.apply.transactions`)."""
    return [
        F.size(F.collect_set("tx_change")).alias("n_seq"),
        F.max("tx_size").alias("size"),
        F.max(F.when(F.col("tx_last"), F.col("tx_seq"))).alias("last_seq"),
        F.max(F.col("kind") == "tx_begin").alias("begun"),
        F.max(F.col("kind") == "tx_end").alias("ended"),
        F.max(F.col("tx_last")).alias("said_last"),
        F.max(~F.col("tx_last")).alias("said_not_last"),
        F.count_if(has_event).alias("n_tx"),
        F.count_if(F.col("from_held")).alias("n_held"),
        F.min("held_at_ms").alias("held_at_ms"),
        F.grouping("tx").alias("by_tx"),
    ]


def summarize(
    events: DataFrame, primary_keys: dict[str, list[str]] | None = None, records: bool = False, transactions: bool = False
) -> list:
    """Run the batch's one planning aggregate over ``events`` (EVENT_SCHEMA); returns its rows
    (see the module docstring; ``by_table`` is 1 on rows of the set ``table``, 0 on rows of ``source``).
    ``primary_keys`` (as for :func:`plan_batch`) names the key column whose range is measured
    (:class:`KeyStats`). ``records``: see :func:`plan_batch`; a row whose ``pos`` is -1 (a held
    event, see ``transactions``) is counted as neither a record nor an event.

    ``transactions``: the transaction gate's grouping in the same query
    (:mod:`cdclake.apply.transactions`): ``events`` also have ``from_held`` (boolean) and
    ``held_at_ms`` (bigint), and a set ``tx`` adds one row per transaction (``by_tx`` 0; 1 on
    every other row): ``tx``, ``open`` (the transaction is still open, before the timeout),
    ``n_seq``, ``size``, ``last_seq``, ``begun``, ``ended``, ``said_last``, ``said_not_last``,
    ``n_tx`` (its events), ``n_held`` (of them from the held table), ``held_at_ms`` (least) and
    ``last_event_time_ms``. Only transactions that are open or have held events are returned."""
    is_data = F.col("kind") == "data"
    tabled = F.col("table").isNotNull() & F.col("kind").isin("data", "ddl", "snapshot_end")
    op = F.col("op")
    order = F.col("position.order")
    by_position = F.col("format").isin(*snapshot_position_formats())
    rank = F.when((op == "r") & ~by_position, 0).otherwise(1)
    has_event = F.col("kind").isNotNull()
    tx_cols = _tx_columns() if transactions else []
    df = _summary_input(events, primary_keys, records, tx_cols, tabled, is_data, rank, has_event)
    keyed = tabled & is_data & (op != "t") & F.col("k_name").isNotNull()
    count = lambda cond: F.count_if(cond & tabled)  # noqa: E731
    aggs = [
        F.min(F.when(tabled, order)).alias("first_order"),
        F.max(F.when(tabled, order)).alias("last_order"),
        F.max(F.when(tabled & (F.col("rank") == 1), order)).alias("last_streamed"),
        *[count(is_data & (op == o)).alias(f"n_{o}") for o in "cudrt"],
        count(is_data & ~by_position).alias("n_ranked"),
        count(F.col("present").isNotNull()).alias("partial"),
        *_update_aggregates(tabled, is_data, count),
        F.max_by("primary_key", F.when(tabled & F.col("primary_key").isNotNull(), order)).alias("pk"),
        F.max(F.when(tabled & F.col("primary_key").isNotNull(), order)).alias("pk_order"),
        *_change_aggregates(tabled, is_data, count),
        # positions of data and DDL only: a heartbeat's or transaction marker's position is
        # another coordinate (Debezium: a bare ts_ms) that does not order with them; their
        # event times do move the source's event time (and so its lag)
        F.max(F.when(F.col("kind").isin("data", "ddl"), F.col("position"))).alias("last_position"),
        F.max("event_time_ms").alias("last_event_time_ms"),
        F.max(F.when(F.col("kind") == "heartbeat", F.col("event_time_ms"))).alias("last_heartbeat_ms"),
        F.grouping("source").alias("by_table"),
        *_key_aggregates(keyed, tabled & is_data & (op != "t")),
    ]
    ident = [F.col("database"), F.col("schema"), F.col("table")]
    sets = [[*ident, F.col("cols"), F.col("keys")], [F.col("source"), *ident]]
    by = [F.col("source"), *ident, F.col("cols"), F.col("keys")]
    if records:
        sets.append([F.col("error_code")])
        by.append(F.col("error_code"))
        aggs += [
            F.count_if(F.col("pos").isNull() | (F.col("pos") == 0)).alias("n_records"),
            F.count_if(has_event & (F.coalesce(F.col("pos"), F.lit(0)) >= 0)).alias("n_events"),
            F.grouping("error_code").alias("by_code"),
        ]
    if not transactions:
        return df.groupingSets(sets, *by).agg(*aggs).collect()
    sets.append([F.col("tx")])
    by.append(F.col("tx"))
    aggs += _tx_aggregates(has_event)
    out = df.groupingSets(sets, *by).agg(*aggs)
    is_tx = (F.col("by_tx") == 0) & F.col("tx").isNotNull()
    out = out.select("*", F.when(is_tx, open_condition()).alias("open"))
    # a transaction's row matters when it is open or has held events; the tx set's row of the
    # events outside transactions (tx null) does not
    return out.where((F.col("by_tx") == 1) | (is_tx & (F.col("open") | (F.col("n_held") > 0)))).collect()


def plan_batch(events: DataFrame, primary_keys: dict[str, list[str]] | None = None, records: bool = False) -> BatchPlan:
    """Summarise ``events`` (EVENT_SCHEMA rows) per target table and per source.

    ``primary_keys`` maps a qualified name (``db.table``, ``db.schema.table``) or a bare table
    name to key columns (from ``--primary-key``); it wins over the key a message states.
    ``records``: ``events`` are a batch's records flattened (EVENT_SCHEMA's columns, null where a
    record has no event, plus ``error_code`` and ``pos``, the event's index in its record, null
    for a record without events): the same aggregate then also counts records and events per
    error code (:attr:`BatchPlan.records`), so that a batch needs no counting job of its own.
    Runs one aggregation (:func:`summarize`); the rest is :func:`build_plan`.
    """
    return build_plan([r.asDict(recursive=False) for r in summarize(events, primary_keys, records)], primary_keys)


def _add_orders(p: TablePlan, r: dict) -> None:
    """:func:`build_plan`: the orders of one aggregate row ``r`` of ``p``'s table (its latest
    truncate, snapshot end, delete and move, its oldest change) merged into ``p``."""
    if r["truncate"] is not None:
        t = (_order(r["truncate"]), _text(r["truncate"]))
        rec = record_tuple(r["truncate"]["record"])
        if p.truncate is None or truncate_key(t[0], rec) > truncate_key(p.truncate[0], p.truncate_record):
            p.truncate, p.truncate_record = t, rec
    p.snapshot_ends += r.get("n_snapshot_end") or 0
    if r.get("snapshot_end") is not None:
        e = (_list(r["snapshot_end"]["order"]), r["snapshot_end"]["text"], r["snapshot_end"]["etime"])
        if p.snapshot_end is None or order_key(e[0]) > order_key(p.snapshot_end[0]):
            p.snapshot_end = e
    if r["min_data"] is not None:
        m = (r["min_data"]["rank"], _list(r["min_data"]["order"]))
        if p.min_data is None or ranked_key(*m) < ranked_key(*p.min_data):
            p.min_data = m
    if r["max_delete"] is not None:
        d = _list(r["max_delete"])
        if p.max_delete is None or order_key(d) > order_key(p.max_delete):
            p.max_delete = d
    if r.get("max_move") is not None:
        d = _list(r["max_move"])
        if p.max_move is None or order_key(d) > order_key(p.max_move):
            p.max_move = d


def _add_columns(p: TablePlan, r: dict, firsts: dict, types: dict, sources: dict, lasts: dict) -> None:
    """:func:`build_plan`: the columns one aggregate row ``r`` of ``p``'s table declares or its
    images name: where each is first seen (``firsts``), its declared types (``types``), first
    source type (``sources``), and the order of the last event that declares it (``lasts``); and
    ``p.last_streamed``."""
    first = order_key(r["first_order"])
    last = order_key(r.get("last_order") or r["first_order"])
    if r.get("last_streamed") is not None and (p.last_streamed is None or order_key(r["last_streamed"]) > order_key(p.last_streamed)):
        p.last_streamed = _list(r["last_streamed"])
    declared = [dict(c.asDict() if hasattr(c, "asDict") else c) for c in (r["cols"] or [])]
    names = set()
    for i, c in enumerate(declared):
        if c.get("name") is None:
            continue
        names.add(c["name"])
        _first_seen(firsts, c["name"], (first, 0, i))
        types.setdefault(c["name"], []).append(c.get("spark_type"))
        sources.setdefault(c["name"], c.get("source_type"))
    for i, n in enumerate(r["keys"] or []):
        if n not in names:
            _first_seen(firsts, n, (first, 1, i))
            types.setdefault(n, []).append("string")
    for n in names | set(r["keys"] or []):
        if n not in lasts or last > lasts[n]:
            lasts[n] = last


def _finish_table(p: TablePlan, firsts: dict, types: dict, sources: dict, message_key: list | None, lasts: dict,
                  primary_keys: dict[str, list[str]]) -> None:
    """:func:`build_plan`: ``p``'s columns in first-seen order, each typed the widest of its
    declarations (an untyped one from its source type name), its DDL in order, its key
    (configuration > message), and the batch's column DDL and table ends followed."""
    for n in sorted(firsts, key=lambda n: firsts[n]):
        t = None
        for cand in types[n]:
            if cand is not None:
                t = T.normalize(cand) if t is None else T.widen(t, cand)
        if t is None:  # no event of the batch types it: a new column's type from its source type name
            p.untyped.append(n)
            t = untyped_spark_type(sources.get(n))
        p.columns[n] = t
    p.ddl.sort(key=lambda d: order_key(d[0]))
    p.message_key = message_key
    choose_key(p, primary_keys)
    p.lasts = lasts
    p.declared = (dict(p.columns), list(p.untyped), list(p.key), dict(p.lasts))
    _follow_drops_and_renames(p, p.lasts)
    _follow_table_ends(p)


def _source_rows(by_source: dict) -> list[SourceProgress]:
    """:func:`build_plan`: one :class:`SourceProgress` per source (file, or topic and
    partition) over its tables' rows: its latest position, event time and heartbeat."""
    out = []
    for src, rs in by_source.items():
        best = max(rs, key=lambda r: (order_key(_order(r["last_position"])), _text(r["last_position"]) or ""))
        times = [r["last_event_time_ms"] for r in rs if r["last_event_time_ms"] is not None]
        beats = [r["last_heartbeat_ms"] for r in rs if r["table"] is None and r["last_heartbeat_ms"] is not None]
        out.append(SourceProgress(src, None, _order(best["last_position"]), _text(best["last_position"]),
                                  max(times) if times else None, max(beats) if beats else None))
    return out


def build_plan(rows: list[dict], primary_keys: dict[str, list[str]] | None = None) -> BatchPlan:
    """The :class:`BatchPlan` of :func:`summarize`'s rows (dicts). Pure Python.

    Column types: every declaration of a column in the batch is widened into one type
    (:func:`cdclake.apply.types.widen`); a declared type that is null (a TUPLE value that was
    null) counts only when no declaration has a type (then :attr:`TablePlan.untyped`); an image key that its
    event does not declare is a ``string`` column. Columns are ordered by the position of the
    first event that names them, then by their place in that event.
    """
    primary_keys = primary_keys or {}
    plans: dict[tuple, TablePlan] = {}
    firsts: dict[tuple, dict[str, tuple]] = {}
    types: dict[tuple, dict[str, list]] = {}
    sources: dict[tuple, dict[str, str | None]] = {}  # column -> its first declared source type
    lasts: dict[tuple, dict[str, tuple]] = {}  # column -> order key of its last declaring event
    pk_best: dict[tuple, tuple] = {}
    renames: dict[tuple, TableRename] = {}
    progress: list[SourceProgress] = []
    by_source: dict[str | None, list[dict]] = {}
    records: dict[str | None, tuple[int, int]] = {}
    for r in rows:
        if r.get("by_tx", 1) == 0:  # set ``tx``: the transaction gate's (cdclake.apply.transactions)
            continue
        if r.get("by_code", 1) == 0:  # set ``error_code``: record and event counts
            records[r["error_code"]] = (int(r["n_records"]), int(r["n_events"]))
            continue
        k = (r["database"], r["schema"], r["table"])
        if not r["by_table"]:  # set ``source``
            if r["source"] is None:  # the records without events
                continue
            name = qualified_name(*k) if r["table"] is not None else None
            sp = SourceProgress(
                r["source"],
                name,
                _order(r["last_position"]),
                _text(r["last_position"]),
                r["last_event_time_ms"],
                r["last_heartbeat_ms"] if name is None else None,
            )
            by_source.setdefault(r["source"], []).append(r)
            if name is not None:
                progress.append(sp)
            continue
        if r["table"] is None:
            continue
        p = plans.get(k)
        if p is None:
            p = plans[k] = TablePlan(*k)
            p.counts = {o: 0 for o in "cudrt"}
            firsts[k], types[k], sources[k] = {}, {}, {}
        for o in "cudrt":
            p.counts[o] += r[f"n_{o}"]
        p.ranked_events += r["n_ranked"]
        p.partial = p.partial or r["partial"] > 0
        p.key_stats.add(r)
        p.halves += r["halves"]
        p.moves += r.get("moves") or 0
        p.rekeys += r.get("rekeys") or 0
        p.event_keys.update(tuple(r[f]) for f in ("k_names_lo", "k_names_hi") if r.get(f) is not None)
        if r["pk"] is not None:
            cand = (order_key(r["pk_order"]), list(r["pk"]))
            if k not in pk_best or cand[0] > pk_best[k][0]:
                pk_best[k] = cand
        _add_orders(p, r)
        for x in r["ddls"] or []:
            p.ddl.append((_list(x["order"]), x["text"], x["ddl"]))
            _read_table_renames(renames, k, x)
        _add_columns(p, r, firsts[k], types[k], sources[k], lasts.setdefault(k, {}))
    for k, p in plans.items():
        _finish_table(p, firsts[k], types[k], sources[k], pk_best[k][1] if k in pk_best else None, lasts.get(k, {}), primary_keys)
    progress += _source_rows(by_source)
    steps = sorted(renames.values(), key=lambda m: (order_key(m.order), record_key(m.record), m.step))
    # numbered per position and source namespace, not per statement: two statements of one
    # position (Canal's coarse positions) get distinct points, in record order; a rename of
    # another database at the same position (another source) does not change a step's point
    last: dict[tuple, int] = {}
    for m in steps:
        at = (tuple(order_key(m.order)), m.source)
        m.step = last[at] = last.get(at, 0) + 1
    return BatchPlan(sorted(plans.values(), key=lambda p: p.name), progress, records, steps)


def _field(x, name: str):
    """Field ``name`` of an aggregate's struct (a Row, or a dict in tests), else None."""
    try:
        return x[name]
    except (KeyError, ValueError, IndexError):
        return None


def _read_table_renames(renames: dict, table: tuple, x) -> None:
    """Add the table renames of DDL event ``x`` (an entry of the aggregate's ``ddls``) of table
    ``table`` (database, schema, table) to ``renames``, known by (order, record, ddl, step, the
    names it resolves to): a statement read as an event of both tables counts once, and one
    text of two sources (an unqualified ``RENAME TABLE t TO u`` of two databases, whose records
    may share coordinates: two topics' partition and offset) counts for each. A name of one part is in the DDL
    event's database (and schema); of two parts, ``database.table`` where the source has no
    schemas (the event's schema is null), else ``schema.table`` in the event's database."""
    def resolve(name: tuple) -> tuple:
        db, schema, _ = table
        if len(name) == 1:
            return (db, schema, name[0])
        if len(name) == 2:
            return (db, name[0], name[1]) if schema is not None else (name[0], None, name[1])
        return tuple(name[-3:])

    order, record = _list(x["order"]), record_tuple(_field(x, "record"))
    for step, (old, new) in enumerate(table_renames(x["ddl"]), start=1):
        m = TableRename(order, x["text"], _field(x, "etime"), record, _field(x, "format"), x["ddl"], step, resolve(old), resolve(new),
                        tuple(table[:2]))
        renames.setdefault((tuple(order_key(order)), record_key(record), x["ddl"], step, m.old, m.new), m)


def _first_seen(firsts: dict, name: str, at: tuple) -> None:
    if name not in firsts or at < firsts[name]:
        firsts[name] = at


def _list(order) -> list | None:
    return None if order is None else list(order)


def _order(position) -> list | None:
    return None if position is None else _list(position["order"])


def _text(position) -> str | None:
    return None if position is None else position["text"]


def column_ddl(p: TablePlan) -> list[tuple[list, str, str]]:
    """``(order, text, ddl)`` of the batch's DDL statements of table ``p`` that drop or rename a
    column (kept in the progress's ``column_ddl``, :func:`follow_past_column_ddl`). Pure
    Python."""
    return [d for d in p.ddl if any(c[0] in ("drop", "rename") for c in column_changes(d[2]))]


def follow_past_column_ddl(plan: BatchPlan, past: dict[str, list]) -> None:
    """Read the batch's events written before a column drop or rename of an earlier batch with
    the schema in force at their position: ``past`` (table name -> ``(order, text, ddl)`` of
    its earlier batches' column DDL, the progress's ``column_ddl``). A column that the
    batch's events declare, the last of them older than such a DDL statement (a late or
    re-delivered event naming a column by its old name), is renamed in ``p.columns`` (and read
    from its old name: ``p.renames``) or dropped from them, as that statement did; without
    this it would be added to the table again and the renamed column's value lost. A column
    declared by an event newer than the statement (added again at the source) stays. The
    batch's own statements and the earlier ones are followed together, in position order, so
    a chain of renames whose steps arrive in different batches, in any order, ends in one
    column (a rename of this batch that an applied statement renames on or drops is applied
    to the chain's end). Changes ``plan``'s table plans in place; an earlier statement is not
    recorded as a schema change (the table has the columns already). Pure Python."""
    for p in plan.tables:
        known = past.get(p.name, [])
        # (each statement once: a re-delivered one is in the batch twice, or known already)
        each = {(tuple(order), text, ddl): (order, text, ddl) for order, text, ddl in [*known, *column_ddl(p)]}
        p.column_history = sorted(each.values(), key=lambda d: order_key(d[0]))
        if known and p.declared is not None:
            # the batch's statements and the earlier batches' (the batch's own applied before
            # too: a re-delivered batch), in one pass in position order: the columns as the
            # events declare them, followed again. A statement applied before is followed to
            # read the events, never applied to the table again (the source may have added the
            # name again), unless it goes on with a rename of this batch (a chain whose steps
            # arrive in any order: a -> b applied, b -> c now with events declaring a; or
            # b -> c applied, then a -> b)
            columns, untyped, key, lasts = p.declared
            p.columns, p.untyped, p.key, p.lasts = dict(columns), list(untyped), list(key), dict(lasts)
            p.drops, p.renames, p.rename_from, p.rename_orders, p.earlier_renames = [], {}, {}, {}, []
            p.rename_steps = {}
            _follow_drops_and_renames(p, p.lasts, p.column_history, applied={_statement(d) for d in known}, report=False)


def _statement(d: tuple) -> tuple:
    """A column DDL statement ``(order, text, ddl)`` as a hashable key."""
    return (tuple(d[0]), d[1], d[2])


def names_back(columns: list[str], history: list[tuple[list, str, str]]) -> dict[str, tuple[list | None, list[tuple[str, list]]]]:
    """The names each of ``columns`` (the table's now) had before the column DDL of
    ``history`` (``(order, text, ddl)``, :attr:`TablePlan.column_history`), as
    ``{column: (since, [(old name, until), ...])}``, newest first: before the rename at
    ``until`` the column was named ``old``. ``since``: the ``order`` before which no column of
    this name was this one (a column of the name dropped, or renamed to another name, there:
    this one was added later), None when it reaches back to the start.

    A remembered image (``_cdclake/deletes``' JSON ``key``) is written with the names of its
    batch; read back with the names now, a change older than a rename may name the column by
    its old name (:func:`cdclake.apply.delta_table.remembered_struct_sql`). Pure Python.

    >>> names_back(["kid", "a"], [([5], "5", "ALTER TABLE t RENAME COLUMN id TO kid")])
    {'kid': (None, [('id', [5])]), 'a': (None, [])}

    Each statement of ``history`` is read once (a statement twice would read as the column's
    name renamed away).
    """
    steps = [(order, change) for order, _text, ddl in history for change in column_changes(ddl)]
    out = {}
    for c in columns:
        name, since, hops = c, None, []
        for order, change in reversed(steps):
            if change[0] == "rename" and change[2] == name:
                hops.append((change[1], list(order)))
                name = change[1]
            elif (change[0] == "rename" or change[0] == "drop") and change[1] == name:
                since = list(order)
                break
        out[c] = (since, hops)
    return out


def _follow_drop(p: TablePlan, old: str, chained: bool, earlier: bool) -> None:
    """:func:`_follow_drops_and_renames` of a ``DROP COLUMN old``: the column leaves ``p``'s
    columns and renames; it is recorded in ``p.drops`` unless an earlier batch dropped it (a
    column of that name in the table now was added again, and stays). ``chained``: the drop
    ends a chain of the batch's renames (the batch's old name is dropped in the end)."""
    if chained and p.renames[old] not in p.key and p.renames[old] not in p.drops:
        p.drops.append(p.renames[old])
    p.columns.pop(old, None)
    p.untyped = [n for n in p.untyped if n != old]
    p.renames = {n: o for n, o in p.renames.items() if n != old}
    p.rename_from.pop(old, None)
    p.rename_steps.pop(old, None)
    if chained:
        p.rename_orders.pop(old, None)
    if old not in p.drops and not earlier:
        p.drops.append(old)


def _rename_column_type(p: TablePlan, old: str, new: str) -> None:
    """``p.columns`` with ``old`` renamed to ``new`` in its place, typed the wider of the two
    (an untyped side, :attr:`TablePlan.untyped`, has a stand-in type only: the other side's
    wins); nothing when the batch declares no ``old``."""
    t_old, t_new = p.columns.get(old), p.columns.get(new)
    if t_old is None:
        return
    if t_new is None or new in p.untyped:
        wide = t_old
    elif old in p.untyped:
        wide = t_new
    else:
        wide = T.widen(t_old, t_new)
    untyped = old in p.untyped and (t_new is None or new in p.untyped)
    p.columns = {(new if n == old else n): (wide if n == old else t) for n, t in p.columns.items() if n != new}
    p.untyped = [n for n in p.untyped if n not in (old, new)] + ([new] if untyped else [])


def _follow_drops_and_renames(p: TablePlan, lasts: dict[str, list], ddl: list | None = None, applied=frozenset(),
                              report: bool = True) -> None:
    """Apply the column drops and renames of the batch's DDL (in position order) to
    ``p.columns`` and record them in ``p.drops``/``p.renames`` (new name -> the name the table
    has now). ``lasts``: column name -> the order key of the last event of the batch that
    declares it; a column declared after the DDL that drops or renames it was added again and
    stays. ``ddl``: the statements instead of the batch's (``(order, text, ddl)``, in position
    order); those in ``applied`` (:func:`_statement` keys) are an earlier batch's, already
    applied to the table: only a column the batch declares is followed (or the new name of one
    of the batch's renames: a chain), and recorded in ``p.earlier_renames``. ``report``: say
    in ``p.unapplied`` what the batch's statements cannot do."""
    done = set()
    for statement in p.ddl if ddl is None else ddl:
        if _statement(statement) in done:  # (a statement delivered twice in the batch: once; again, a
            continue  # rename would follow its own new name and cut the chain before it)
        done.add(_statement(statement))
        order, ddl_text = statement[0], statement[2]
        earlier = _statement(statement) in applied
        at = order_key(order)
        for change in column_changes(ddl_text):
            if change[0] == "unknown":
                if report and not earlier:
                    p.unapplied.append(f"not applied: {change[1]} (not understood)")
                continue
            old = change[1]
            if change[0] == "drop" and old in p.key:
                if report and not earlier:
                    p.unapplied.append(f"not applied: drop column {old} (a key column of the table)")
                continue
            # an earlier batch's statement that renames on or drops the new name of one of this
            # batch's renames, later than it (a chain of renames whose later step arrived
            # first): the batch's rename goes on to the chain's end, and is applied as this
            # batch's (the table still has the batch's old name, from events older than it)
            chained = (earlier and old in p.renames and old not in p.earlier_renames and old in p.rename_orders
                       and order_key(p.rename_orders[old]) < at)
            if old in lasts and lasts[old] > at or earlier and old not in lasts and not chained:
                continue
            if change[0] == "drop":
                _follow_drop(p, old, chained, earlier)
                continue
            new = change[2]
            _rename_column_type(p, old, new)
            if not earlier and old in p.earlier_renames:  # the table has old (an earlier batch named it)
                p.renames.pop(old, None)
                p.rename_orders.pop(old, None)
                p.earlier_renames.remove(old)
                p.renames[new] = old
                p.rename_steps.pop(old, None)
                p.rename_steps[new] = [(old, new, list(order))]
            else:
                p.renames[new] = p.renames.pop(old, old)
                p.rename_steps[new] = [*p.rename_steps.pop(old, []), (old, new, list(order))]
            p.rename_from[new] = [old, *(n for n in p.rename_from.pop(old, []) if n not in (old, new))]
            # (a chained rename keeps the batch statement's order: a row set before it takes the
            # old name's value when the two are merged)
            p.rename_orders[new] = p.rename_orders.pop(old) if chained else list(order)
            p.key = [new if k == old else k for k in p.key]
            if chained:
                if old in lasts:
                    lasts.setdefault(new, lasts[old])
            elif earlier:
                p.earlier_renames.append(new)
                if old in lasts:  # a later statement of the chain (b -> c after a -> b) follows it
                    lasts.setdefault(new, lasts[old])
            if new in p.drops:
                p.drops.remove(new)


def _follow_table_ends(p: TablePlan) -> None:
    """A ``DROP TABLE`` or ``TRUNCATE TABLE`` statement of the batch's DDL (read by
    :func:`cdclake.apply.ddl.table_end`) ends the table's rows at its position: it becomes the
    batch's truncate when it is the latest, and says so in ``p.ended`` (schema history). So
    does the end of a full snapshot (:attr:`TablePlan.snapshot_end`)."""
    found = [(order, text, None, f"table {'dropped' if verb == 'drop' else 'truncated'} at the source")
             for order, text, verb in ((o, t, table_end(d, p.table)) for o, t, d in p.ddl) if verb is not None]
    if p.snapshot_end is not None and p.snapshot_by_position:
        found.append((*p.snapshot_end, "full snapshot of the table completed"))
    elif p.snapshot_end is not None:  # snapshot rows rank below every streamed change: no point to end them at
        p.unapplied.append(f"not applied: end of a full snapshot at position {p.snapshot_end[1]}, from events whose"
                           " snapshot rows do not order with streamed changes by position")
    for order, text, etime, what in found:
        if p.truncate is None or truncate_key(order, None) > truncate_key(p.truncate[0], p.truncate_record):
            p.truncate, p.truncate_record = (order, text), None
        p.ends.append((order, text, etime))
        p.ended.append(f"{what} (position {text}): its older rows removed, as by a truncate")


def may_rekey(p: TablePlan) -> bool:
    """Whether an update of the batch may move a row of ``p``'s table to another key (its old
    key's row is then deleted and remembered): some update shows another value of a key column
    (:attr:`TablePlan.rekeys`), or the events' keys are not the table's (another key stated by
    some events, a key column renamed in the batch): then it cannot be told from the plan."""
    if p.rekeys:
        return True
    return bool(p.counts.get("u")) and p.event_keys - {tuple(p.key)} != set()


def choose_key(p: TablePlan, configured: dict[str, list[str]]) -> None:
    """Set ``p.key`` and ``p.key_source``: the key configured for the table (by qualified name,
    ``database.table`` or bare table name, then the first glob its qualified name matches:
    :func:`cdclake.routing.glob_match`; ``configured``: name -> key columns), else the key its
    messages carry (:attr:`TablePlan.message_key`), else none (rows match on the whole before
    image)."""
    for name in (p.name, f"{p.database}.{p.table}" if p.database else None, p.table):
        if name and name in configured:
            p.key, p.key_source = list(configured[name]), "configuration"
            return
    glob = next((g for g in configured if is_glob(g) and glob_match(g, p.name)), None)
    if glob is not None:
        p.key, p.key_source = list(configured[glob]), "configuration"
        return
    if p.message_key:
        p.key, p.key_source = list(p.message_key), "message"
        return
    p.key, p.key_source = [], "none (whole before image)"
