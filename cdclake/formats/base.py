"""The decoder contract every format package implements.

A decoder is a class named after its format, registered explicitly in
:mod:`cdclake.formats` (``register(CanalJsonDecoder())``). What a format carries is data
(:class:`cdclake.formats.facts.Capabilities`), not ``if name == ...`` chains in the pipeline.

Where code runs: ``decode`` is called once on the driver and only *builds* a DataFrame plan
from Spark SQL expressions; the rows are decoded in the JVM on the executors. No Python code
touches rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from cdclake.model import DECODED_SCHEMA, EVENT_SCHEMA
from cdclake.formats.facts import Capabilities
from cdclake.routing import glob_case_sql, is_glob
from cdclake.sources.files import read_lines
from cdclake.sqltext import sql_str


@dataclass(frozen=True)
class Limits:
    """Bounds on what one record and one table may hold (``--max-record-bytes``,
    ``--max-columns``); beyond them the record or the table's events of the batch are rejected
    with a code (``RECORD_TOO_LARGE``, ``TOO_MANY_COLUMNS``), never the process stopped.

    max_record_bytes: the largest record value, in bytes (default 16 MiB; Kafka's own default
        limit is 1 MiB).
    max_columns: the most columns a table may have in one batch (default 4096, MySQL's limit).
    """

    max_record_bytes: int = 16 * 1024 * 1024
    max_columns: int = 4096


@dataclass
class DecodeOptions:
    """Per-run options a decoder may use.

    primary_keys: ``{qualified table name or bare table name: [columns]}`` from
        ``--primary-key``; used where the format does not carry a key.
    canal_dts_inverted: Canal JSON written by a DTS instance created before 2022-03-20
        (``old`` and ``data`` swapped for UPDATE; see ``formats/canal_json``).
    extra: format-specific settings by name.
    context: raw records (RAW_SCHEMA, ``source_record`` null) that earlier batches into the same
        target kept for a decoder with ``keeps_context`` (Qlik: its metadata messages); the
        decoder may consult them, never decodes them to events. None: no earlier batch kept any.
    limits: see :class:`Limits` (applied by the ingest around every decoder).
    snapshot_ends: ``--snapshot-removes-missing``: a decoder whose format marks the end of a
        table's full snapshot (Debezium) adds a :attr:`cdclake.model.Kind.SNAPSHOT_END` event
        after the table's last snapshot row; without it no decoder emits one.
    target_tables: what the target holds of a table, by its qualified name
        (:func:`cdclake.model.qualified_name`): a :class:`TargetTable`, or None for a table the
        target does not have. Read on the driver when asked (the ingest passes it); None: no
        target (``convert``, tests of a decoder alone).
    """

    primary_keys: dict[str, list[str]] = field(default_factory=dict)
    canal_dts_inverted: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    context: DataFrame | None = None
    limits: Limits = field(default_factory=Limits)
    snapshot_ends: bool = False
    target_tables: Callable[[str], TargetTable | None] | None = None


@dataclass(frozen=True)
class TargetTable:
    """What a target holds of one table, for a decoder that reads its changes against it.

    columns: the source columns (``_cdc_`` ones left out) in the table's order, as ``(name,
        Spark type)`` (``DataType.simpleString``: ``int``, ``decimal(12,2)``, ``array<int>``).
    last_order: the greatest ``position.order`` applied to the table (its data and DDL events,
        over all sources), or None when unknown.
    """

    columns: tuple[tuple[str, str], ...]
    last_order: tuple | None


class Decoder(ABC):
    """Turns raw records (:data:`cdclake.model.RAW_SCHEMA`) into decoded records
    (:data:`cdclake.model.DECODED_SCHEMA`): one output row per input row, carrying the record's
    canonical events or its reject code."""

    #: the format's name on the command line
    name: str = ""
    #: other names accepted for it
    aliases: tuple[str, ...] = ()
    #: how input files are read: "lines" (one message per line) or "avro" (container files)
    file_kind: str = "lines"
    capabilities: Capabilities

    @abstractmethod
    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """Decode ``raw`` (RAW_SCHEMA) into DECODED_SCHEMA, one row per input row.

        Must not raise on bad records: a record that cannot be decoded gets ``error_code``
        (a :class:`cdclake.errors.RejectCode` value) and ``error_message`` and no events.
        """

    #: whether later batches need records of this one (:meth:`context_records`): the pipeline
    #: keeps them under ``<target>/_cdclake/decoder_context`` and hands them back in
    #: ``DecodeOptions.context``
    keeps_context: bool = False

    def context_records(self, raw: DataFrame) -> DataFrame:
        """The records of ``raw`` (RAW_SCHEMA) that later batches need to decode theirs, as
        ``value binary`` rows (only for decoders with ``keeps_context``)."""
        raise NotImplementedError(f"{self.name} keeps no context")

    def read_files(self, spark, paths: list[str]) -> DataFrame:
        """Raw records (RAW_SCHEMA) from files of this format. Default: one message per line
        (:func:`cdclake.sources.files.read_lines`); formats with binary files override it."""
        return read_lines(spark, paths)

    def detect_score(self, sample: list[bytes]) -> float:
        """How sure (0..1) this decoder is that ``sample`` (the first values of an input) is its
        format; used by ``--format auto``. Runs on the driver over a handful of records.
        Default: the share of values :meth:`looks_like` accepts."""
        return sum(1 for v in sample if self.looks_like(v)) / max(len(sample), 1)

    def looks_like(self, value: bytes) -> bool:
        """Whether one record's value has this format's shape (for :meth:`detect_score`).
        Default: never."""
        return False


def finish(df: DataFrame, events: Column, error_code: Column, error_message: Column) -> DataFrame:
    """Project ``df`` (which must still have RAW_SCHEMA's columns) to DECODED_SCHEMA.

    ``events`` is an ``array<struct>`` expression whose structs have EVENT_SCHEMA's fields in
    order (it is cast to the exact schema); it is replaced by an empty array when
    ``error_code`` is not null.
    """
    target = ArrayType(EVENT_SCHEMA, True)
    # a cast between types that differ only in nullability still copies every struct per row:
    # cast only when the decoder's expression really has other types
    produced = df.select(events.alias("e")).schema["e"].dataType
    typed_events = events if _same_ignoring_nulls(produced, target) else events.cast(target)
    out = df.select(
        F.col("source_record"),
        F.col("key").alias("raw_key"),
        F.col("value").alias("raw_value"),
        F.when(error_code.isNull(), typed_events).otherwise(F.array().cast(target)).alias("events"),
        error_code.alias("error_code"),
        F.when(error_code.isNotNull(), error_message).alias("error_message"),
    )
    return out.select(
        [F.col(f.name) if _same_ignoring_nulls(out.schema[f.name].dataType, f.dataType) else F.col(f.name).cast(f.dataType)
         for f in DECODED_SCHEMA.fields]
    )


def _same_ignoring_nulls(a: DataType, b: DataType) -> bool:
    """``a`` and ``b`` are the same Spark type but for nullability (and field metadata)."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_ignoring_nulls(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_ignoring_nulls(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same_ignoring_nulls(a.keyType, b.keyType) and _same_ignoring_nulls(a.valueType, b.valueType)
    return a == b


def explode_events(decoded: DataFrame) -> DataFrame:
    """The canonical events (EVENT_SCHEMA rows) of the decoded records (DECODED_SCHEMA) that
    were not rejected.

    Written with ``explode_outer`` and a null filter rather than ``explode``: for ``explode``
    Spark's optimizer rule ``InferFiltersFromGenerate`` adds ``size(events) > 0`` below the
    generator and pushes it into the decoder's projections, where it inlines the whole decode
    expression again (a ~10x slower decode). ``get_spark`` also excludes that rule, but a
    user's own session need not. The rejected records are dropped inside the generator's input
    (``CASE WHEN error_code IS NULL``), not by a filter on ``error_code``: such a filter is
    pushed down through the decoder's projections and inlines them again.
    """
    return (
        decoded.select(F.explode_outer(F.when(F.col("error_code").isNull(), F.col("events"))).alias("e"))
        .where(F.col("e").isNotNull())
        .select("e.*")
    )


def first_error(*checks: tuple[Column, str, Column | str]) -> tuple[Column, Column]:
    """Fold ``(condition, code, message)`` checks into ``(error_code, error_message)`` columns:
    the first condition that holds wins."""
    code = F.lit(None).cast("string")
    message = F.lit(None).cast("string")
    for cond, c, msg in reversed(checks):
        msg_col = F.lit(msg) if isinstance(msg, str) else msg
        code = F.when(cond, F.lit(c)).otherwise(code)
        message = F.when(cond, msg_col).otherwise(message)
    return code, message


def event_sql(**fields: str) -> str:
    """SQL text of a ``named_struct`` with EVENT_SCHEMA's fields in order.

    Each keyword is a field name with its SQL expression; fields not given are typed NULLs.
    ``source_record`` defaults to the row's ``source_record`` column. Example::

        event_sql(format="'canal-json'", kind="'data'", op="'c'", after="d")
    """
    unknown = set(fields) - {f.name for f in EVENT_SCHEMA.fields}
    if unknown:
        raise ValueError(f"not canonical event fields: {sorted(unknown)}")
    fields.setdefault("source_record", "source_record")
    parts = []
    for f in EVENT_SCHEMA.fields:
        expr = fields.get(f.name, f"cast(null as {f.dataType.simpleString()})")
        parts.append(f"'{f.name}', {expr}")
    return "named_struct(" + ", ".join(parts) + ")"


def position_sql(parts: list[str], text: str) -> str:
    """SQL text of a position struct from decimal-able ``parts`` (compared in order) and the
    human-readable ``text``."""
    order = ", ".join(f"cast({p} as decimal(38,0))" for p in parts)
    return f"named_struct('order', array({order}), 'text', {text})"


def configured_key_sql(primary_keys: dict[str, list[str]], database: str, table: str) -> str:
    """SQL: the key columns configured (``--primary-key``) for the table named by the SQL
    expressions ``database`` and ``table`` (``array<string>``), looked up by qualified name
    first, then by bare table name, then by the first glob (``shop.*``:
    :func:`cdclake.routing.glob_sql`) the qualified name matches; null when none is configured
    (or the configured list is empty)."""
    if not primary_keys:
        return "cast(null as array<string>)"

    def cols_sql(cols: list[str]) -> str:
        return f"array({', '.join(sql_str(c) for c in cols)})" if cols else "cast(array() as array<string>)"

    exact = {n: c for n, c in primary_keys.items() if not is_glob(n)}
    globs = [(n, c) for n, c in primary_keys.items() if is_glob(n)]
    qualified_name = f"concat_ws('.', nullif({database}, ''), {table})"
    found = []
    if exact:
        pks = "map(" + ", ".join(f"{sql_str(name)}, {cols_sql(cols)}" for name, cols in exact.items()) + ")"
        found += [f"(case when {database} is not null then element_at({pks}, concat({database}, '.', {table})) end)",
                  f"element_at({pks}, {table})"]
    if globs:
        found.append(glob_case_sql([(n, cols_sql(c)) for n, c in globs], qualified_name))
    found_sql = f"coalesce({', '.join(found)})" if len(found) > 1 else found[0]
    return f"(case when size({found_sql}) > 0 then {found_sql} end)"
