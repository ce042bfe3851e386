"""The decode skeleton: the steps every decoder on it runs, in order, once per batch.

1. :meth:`StagedDecoder.parse`: each record read once (one ``from_json`` or ``from_avro``);
2. :meth:`StagedDecoder.derive`: the format's own columns (its signatures and typed images,
   worked out on the driver from one small aggregate);
3. :meth:`StagedDecoder.events`: the record's canonical events, one SQL expression over those
   columns;
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
from cdclake.formats.base import Decoder, DecodeOptions, finish, first_error

#: a reject rung: ``(condition, reject code, message)``
Check = tuple[Column, str, Column | str]


class StagedDecoder(Decoder):
    """A decoder written as the skeleton's steps (see the module docstring)."""

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
        :meth:`derive`'s columns (:func:`cdclake.formats.base.event_sql`)."""

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


def persist_stage(df: DataFrame) -> DataFrame:
    """Keep a decoder's parse stage so that the signature aggregate and the typed stage read
    the parsed records without parsing them again (see :class:`batch_scope`). In a scope the
    stage is a local checkpoint: its rows are stored as rows, not encoded into the columnar
    cache (canal-json decode of 200k records 2.9 s against 3.5 s persisted, session 48), and
    its plan is one leaf, so later steps do not analyse the parse again."""
    stack = getattr(_local, "stack", None)
    if stack:
        df = frames.keep(df)
        stack[-1].append(df)
        return df
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    _unscoped.append(df)
    while len(_unscoped) > _UNSCOPED_KEEP:
        _unscoped.pop(0).unpersist()
    return df
