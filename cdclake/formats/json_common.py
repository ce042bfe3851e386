"""Shared parsing for the JSON formats: one ``from_json`` per record with a corrupt-record
column, and a classification of the records it could not read.

Error codes (see :class:`cdclake.errors.RejectCode`): a value that is not JSON at all
(truncated, binary) is ``MALFORMED_JSON``; JSON that is not an object (array, string, number,
``null``) is ``NOT_AN_OBJECT``; an object whose fields have the wrong JSON types for the
format's schema is ``SCHEMA_MISMATCH``. The slower ``try_parse_json`` only runs on the few
records ``from_json`` could not read.
"""

from __future__ import annotations

import json
from abc import abstractmethod

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import Decoder, DecodeOptions, finish, first_error

CORRUPT = "_corrupt_record"


def parse_json(raw: DataFrame, schema_ddl: str, alias: str = "j", null_text_is_tombstone: bool = False) -> DataFrame:
    """Add column ``alias`` (struct of ``schema_ddl``) and ``parse_error`` / ``parse_message``
    (null when the record parsed) to ``raw`` (RAW_SCHEMA); also ``text`` (the value as string).

    A null ``value`` (Kafka tombstone) is not an error: ``alias`` is null, ``parse_error`` null,
    and ``is_tombstone`` true. With ``null_text_is_tombstone`` (formats that have tombstones:
    Debezium), the value ``null`` (what ``kafka-console-consumer`` prints for a tombstone in a
    dumped file, surrounding white space allowed) is a tombstone too.
    """
    text = F.col("value").cast("string")
    parsed = raw.withColumn("text", text).withColumn(
        alias,
        F.from_json(
            F.col("text"),
            f"{schema_ddl}, {CORRUPT} string",
            {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT},
        ),
    )
    corrupt = F.col(f"{alias}.{CORRUPT}").isNotNull()
    valid_json = F.expr("try_parse_json(text) is not null")
    is_object = F.expr("ltrim(text) like '{%'")
    tombstone = F.col("value").isNull()
    if null_text_is_tombstone:
        tombstone = tombstone | F.col("text").rlike(r"^\s*null\s*$")
    code = (
        F.when(tombstone, F.lit(None))
        .when(F.expr(r"trim(BOTH ' \t\r\n' FROM text) = ''"), F.lit(RejectCode.MALFORMED_JSON.value))  # empty, white space
        .when(~corrupt, F.lit(None))
        .when(~valid_json, F.lit(RejectCode.MALFORMED_JSON.value))
        .when(~is_object, F.lit(RejectCode.NOT_AN_OBJECT.value))
        .otherwise(F.lit(RejectCode.SCHEMA_MISMATCH.value))
    )
    message = (
        F.when(code == RejectCode.MALFORMED_JSON.value, F.lit("value is not valid JSON"))
        .when(code == RejectCode.NOT_AN_OBJECT.value, F.lit("value is JSON but not an object"))
        .when(
            code == RejectCode.SCHEMA_MISMATCH.value,
            F.lit("a field has the wrong JSON type for this format"),
        )
    )
    return (
        parsed.withColumn("parse_error", code)
        .withColumn("parse_message", message)
        .withColumn("is_tombstone", tombstone)
    )


def finish_json(df: DataFrame, events: Column, code: Column, message: Column, skip: Column | None = None) -> DataFrame:
    """:func:`cdclake.formats.base.finish` for a frame read by :func:`parse_json`: a record
    that did not parse keeps its parse error's code, and a record ``skip`` marks (default: a
    tombstone, ``is_tombstone``) is no error at all whatever ``code`` says."""
    skip = F.col("is_tombstone") if skip is None else skip
    code = F.when(F.col("parse_error").isNotNull(), F.col("parse_error")).when(skip, F.lit(None)).otherwise(code)
    return finish(df, events, code, message)


def loads_object(value: bytes) -> dict | None:
    """``value`` parsed as a JSON object (on the driver, for ``detect_score``); None when it is
    not JSON or not an object."""
    try:
        d = json.loads(value)
    except Exception:  # not JSON (or nested too deep to read): not an object
        return None
    return d if isinstance(d, dict) else None


def parse_checks() -> list[tuple[Column, str, Column | str]]:
    """The first rungs of every JSON format's reject ladder (:func:`first_error`): a record
    that did not parse keeps its parse error (code and message, :func:`parse_json`), and a
    tombstone is no error."""
    return [(F.col("parse_error").isNotNull(), "", F.col("parse_message")), (F.col("is_tombstone"), "", "tombstone")]


class JsonDecoder(Decoder):
    """The decode skeleton of a JSON format: one ``from_json`` per record over the format's
    wire schema (:meth:`parse`), then the format's own columns (:meth:`derive`), its
    events (:meth:`events`) and its reject checks (:meth:`checks`, after :func:`parse_checks`),
    projected to DECODED_SCHEMA by :func:`finish_json`. A format declares
    :attr:`wire_schema` and overrides the three steps."""

    #: the fields the format reads from a record, as a Spark DDL struct body (``from_json``)
    wire_schema: str = ""

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """DECODED_SCHEMA rows of ``raw`` (RAW_SCHEMA), one per record."""
        df = self.derive(self.parse(raw, options), options)
        code, message = first_error(*parse_checks(), *self.checks(df, options))
        return finish_json(df, self.events(df, options), code, message)

    def parse(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """``raw`` with each record parsed once (:func:`parse_json` over :attr:`wire_schema`).
        A format whose records need context from other records of the batch (Qlik's metadata
        messages) overrides it to join that context here."""
        return parse_json(raw, self.wire_schema)

    @abstractmethod
    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        """``df`` (RAW_SCHEMA, the parsed record ``j``, ``text``, ``parse_error``,
        ``parse_message``, ``is_tombstone``) with the columns :meth:`events` and
        :meth:`checks` read."""

    @abstractmethod
    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        """The record's events: an ``array<struct>`` of EVENT_SCHEMA's fields over
        :meth:`derive`'s columns (:func:`cdclake.formats.base.event_sql`)."""

    @abstractmethod
    def checks(self, df: DataFrame, options: DecodeOptions) -> list[tuple[Column, str, Column | str]]:
        """``(condition, reject code, message)`` rungs after :func:`parse_checks`, the first
        that holds wins (:func:`cdclake.formats.base.first_error`)."""
