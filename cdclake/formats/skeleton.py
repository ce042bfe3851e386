"""The decode skeleton: the steps every decoder on it runs, in order, once per batch.

1. :meth:`StagedDecoder.parse`: each record read once (one ``from_json`` or ``from_avro``);
2. :meth:`StagedDecoder.derive`: the format's own columns (its signatures and typed images,
   worked out on the driver from one small aggregate);
3. :meth:`StagedDecoder.events`: the record's canonical events, one SQL expression over those
   columns, each event derived from one declaration of what the record's events share
   (:meth:`StagedDecoder.declare`, :class:`EventDecl`);
4. the reject ladder: :meth:`StagedDecoder.first_checks` (the reading's own: the record is not
   the format's datum at all) then :meth:`StagedDecoder.checks` (the format's), the first that
   holds wins (:func:`cdclake.formats.base.first_error`);
5. :meth:`StagedDecoder.finish`: the DECODED_SCHEMA rows; a record that is a tombstone
   (``is_tombstone``) is no error whatever the ladder says.

A format declares the steps; no format writes its own ``decode``
(``tests/test_layout.py`` checks it).
"""

from __future__ import annotations

import threading
from abc import abstractmethod

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake import frames
from cdclake.errors import RejectCode
from cdclake.formats.base import Decoder, DecodeOptions, event_sql, finish, first_error
from cdclake.sqltext import sql_in, sql_str

#: a reject rung: ``(condition, reject code, message)``
Check = tuple[Column, str, Column | str]


def table_missing(when: Column, database: str | None, table: str, message: Column | str, needs_table: str | None = None) -> Check:
    """The ``MISSING_TABLE`` rung of a record ``when`` holds whose ``database`` (SQL; None: the
    format names none) or ``table`` is missing or blank; with ``needs_table`` (SQL) only a
    record it holds for needs a table (not a database-level statement)."""
    blank = f"nullif(trim({table}), '') is null"
    if needs_table:
        blank = f"({blank} and {needs_table})"
    if database:
        blank = f"nullif(trim({database}), '') is null or {blank}"
    return (when & F.expr(blank), RejectCode.MISSING_TABLE.value, message)


def image_missing(op: str, ops: tuple[str, ...], image: str, what: str) -> Check:
    """The ``MISSING_IMAGE`` rung of a record whose op (the column ``op``) is one of ``ops`` and
    whose ``image`` (SQL: an array or map) is missing or empty: ``<op> without <what>``."""
    return (
        F.expr(f"{sql_in(op, ops)} and coalesce(size({image}), 0) <= 0"),
        RejectCode.MISSING_IMAGE.value,
        F.concat(F.col(op), F.lit(f" without {what}")),
    )


def bad_values(when: Column, columns: str, what: str) -> Check:
    """The ``BAD_VALUE`` rung of a record ``when`` holds whose ``columns`` (SQL,
    ``array<string>``: the columns whose value could not be read) is not empty:
    ``<what> in column(s) <columns>``."""
    return (
        when & F.expr(f"size({columns}) > 0"),
        RejectCode.BAD_VALUE.value,
        F.expr(f"concat({sql_str(what + ' in column(s) ')}, array_join({columns}, ', '))"),
    )


class EventDecl:
    """The declaration of a record's events (SQL of EVENT_SCHEMA's fields, :func:`event_sql`):
    ``common``, what every event of the record shares (the format's name, and the table,
    position, transaction, event time ... as the format reads them), declared once; each kind
    of event is derived from it with only what is its own. A field a kind is given again
    replaces the shared one; a field nobody gives is a typed NULL."""

    def __init__(self, common: dict[str, str]) -> None:
        self.common = dict(common)

    def but(self, **fields: str) -> "EventDecl":
        """The declaration with ``fields`` shared as well (or instead)."""
        return EventDecl({**self.common, **fields})

    def without(self, *names: str) -> "EventDecl":
        """The declaration without the shared fields ``names`` (typed NULLs unless given)."""
        return EventDecl({k: v for k, v in self.common.items() if k not in names})

    def event(self, kind: str, **fields: str) -> str:
        """SQL: an event of ``kind`` (an SQL expression) with the shared fields and ``fields``."""
        return event_sql(**{**self.common, **fields, "kind": kind})

    def data(self, op: str, **fields: str) -> str:
        """SQL: a row change (kind ``data``) of op ``op`` (an SQL expression)."""
        return self.event("'data'", op=op, **fields)

    def truncate(self, **fields: str) -> str:
        """SQL: a truncate (kind ``data``, op ``t``)."""
        return self.data("'t'", **fields)

    def ddl(self, ddl: str, **fields: str) -> str:
        """SQL: a DDL event whose statement is ``ddl`` (an SQL expression)."""
        return self.event("'ddl'", ddl=ddl, **fields)

    def tx(self, kind: str, **fields: str) -> str:
        """SQL: a transaction marker (``kind``: an SQL expression, ``tx_begin`` or ``tx_end``):
        it names no schema or table."""
        return self.without("schema", "table").event(kind, **fields)

    def heartbeat(self, **fields: str) -> str:
        """SQL: a heartbeat: it names no database, schema or table."""
        return self.without("database", "schema", "table").event("'heartbeat'", **fields)


class StagedDecoder(Decoder):
    """A decoder written as the skeleton's steps (see the module docstring)."""

    #: the fields (SQL over :meth:`derive`'s columns) naming a record's table and event time in
    #: every event :meth:`declare` declares: the columns ``db``, ``tbl`` and ``et``, as the
    #: formats' ``derive`` names them; a format whose columns are named otherwise declares its own
    record_fields: dict[str, str] = {"database": "db", "table": "tbl", "event_time_ms": "et"}

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """DECODED_SCHEMA rows of ``raw`` (RAW_SCHEMA), one per record."""
        df = self.derive(self.parse(raw, options), options)
        code, message = first_error(*self.first_checks(), *self.checks(df, options))
        return self.finish(df, self.events(df, options), code, message)

    @abstractmethod
    def parse(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """``raw`` with each record read once, and ``is_tombstone`` (boolean: a record that
        decodes to nothing and is no error, such as a Kafka tombstone)."""

    @abstractmethod
    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        """``df`` (:meth:`parse`'s) with the columns :meth:`events` and :meth:`checks` read."""

    @abstractmethod
    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        """The record's events: an ``array<struct>`` of EVENT_SCHEMA's fields over
        :meth:`derive`'s columns (each from :meth:`declare`'s declaration)."""

    def declare(self, **common: str) -> EventDecl:
        """The declaration of a record's events (:class:`EventDecl`): the format's name (this
        decoder's :attr:`name`), its :attr:`record_fields` and ``common``, the other fields
        (SQL) all its events share."""
        return EventDecl({"format": sql_str(self.name), **self.record_fields, **common})

    def first_checks(self) -> list[Check]:
        """The rungs of the reading itself, before :meth:`checks`. Default: the tombstone rung."""
        return [(F.col("is_tombstone"), "", "tombstone")]

    @abstractmethod
    def checks(self, df: DataFrame, options: DecodeOptions) -> list[Check]:
        """The format's ``(condition, reject code, message)`` rungs after :meth:`first_checks`."""

    def finish(self, df: DataFrame, events: Column, code: Column, message: Column) -> DataFrame:
        """:func:`cdclake.formats.base.finish`, with a tombstone (``is_tombstone``) no error."""
        return finish(df, events, F.when(F.col("is_tombstone"), F.lit(None)).otherwise(code), message)


# ---- persisting the parse stage for the length of a batch ----------------------------------------

_local = threading.local()
_unscoped: list[DataFrame] = []
_UNSCOPED_KEEP = 8


class batch_scope:
    """Context manager: parse stages persisted inside it (:func:`persist_stage`) are kept as
    local checkpoints (:func:`cdclake.frames.keep`) and released when it ends. The pipeline
    wraps each batch in one and materialises the batch's flat rows (a kept frame of their own)
    inside it, so nothing reads a parse stage after its release. Without a scope (tests,
    ``convert``, a caller that may read a decoded frame later) a stage is ``persist``-ed
    instead, which Spark can compute again, and the last few stay cached."""

    def __enter__(self):
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append([])
        return self

    def __exit__(self, *exc):
        for df in _local.stack.pop():
            frames.release(df)
        return False


def persist_stage(df: DataFrame, cut: bool = False) -> DataFrame:
    """Keep a decoder's parse stage so that the signature aggregate and the typed stage read
    the parsed records without parsing them again (see :class:`batch_scope`). In a scope the
    stage is a local checkpoint: its rows are stored as rows, not encoded into the columnar
    cache (canal-json decode of 200k records 2.9 s against 3.5 s persisted, session 48), and
    its plan is one leaf, so later steps do not analyse the parse again. With ``cut`` (a
    parse whose plan must not be held by later queries: DTS's ``from_avro``) a stage outside
    a scope is a local checkpoint too, never released by cdclake (Spark frees its blocks once
    no frame refers to it), so that a caller may read it later."""
    stack = getattr(_local, "stack", None)
    if stack:
        df = frames.keep(df)
        stack[-1].append(df)
        return df
    if cut:
        return df.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    _unscoped.append(df)
    while len(_unscoped) > _UNSCOPED_KEEP:
        _unscoped.pop(0).unpersist()
    return df
