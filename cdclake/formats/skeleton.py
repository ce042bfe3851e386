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

from abc import abstractmethod

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

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
