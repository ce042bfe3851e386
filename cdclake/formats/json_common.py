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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions, finish
from cdclake.formats.skeleton import Check, StagedDecoder

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
        # only a record that did not parse to an object can be the text ``null`` (the regular
        # expression is not run over every record)
        tombstone = tombstone | ((corrupt | F.col(alias).isNull()) & F.col("text").rlike(r"^\s*null\s*$"))
    # A record that parsed to an object is the common case and decided first: the white-space
    # trim below scans the whole record (Spark's trim with a character set indexes every
    # character), a quarter of the decode's CPU when it ran for every record.
    code = (
        F.when(tombstone, F.lit(None))
        .when(~corrupt & F.col(alias).isNotNull(), F.lit(None))
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


class JsonDecoder(StagedDecoder):
    """The decode skeleton (:class:`cdclake.formats.skeleton.StagedDecoder`) of a JSON format:
    :meth:`parse` is one ``from_json`` per record over the format's :attr:`wire_schema`, the
    first rungs are :func:`parse_checks`, and :meth:`finish` is :func:`finish_json`. A format
    declares :attr:`wire_schema` and its ``derive``, ``events`` and ``checks``."""

    #: the fields the format reads from a record, as a Spark DDL struct body (``from_json``)
    wire_schema: str = ""

    def parse(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """``raw`` with each record parsed once (:func:`parse_json` over :attr:`wire_schema`):
        ``j``, ``text``, ``parse_error``, ``parse_message``, ``is_tombstone``. A format whose
        records need context from other records of the batch (Qlik's metadata messages)
        overrides it to join that context here."""
        return parse_json(raw, self.wire_schema)

    def first_checks(self) -> list[Check]:
        return parse_checks()

    def finish(self, df: DataFrame, events: Column, code: Column, message: Column) -> DataFrame:
        return finish_json(df, events, code, message)
