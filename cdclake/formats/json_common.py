"""Shared parsing for the JSON formats: one ``from_json`` per record with a corrupt-record
column, and a classification of the records it could not read.

Error codes (see :class:`cdclake.errors.RejectCode`): a value that is not JSON at all
(truncated, binary) is ``MALFORMED_JSON``; JSON that is not an object (array, string, number,
``null``) is ``NOT_AN_OBJECT``; an object whose fields have the wrong JSON types for the
format's schema is ``SCHEMA_MISMATCH``. The slower ``try_parse_json`` only runs on the few
records ``from_json`` could not read.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode

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
