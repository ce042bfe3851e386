"""Files of DataHub TUPLE records as raw records (:data:`cdclake.model.RAW_SCHEMA`).

Two file kinds hold TUPLE records: JSON lines (one record per line, read by
:func:`cdclake.sources.files.read_lines`) and Parquet files whose rows are records (the table's
columns beside the metadata columns ``_sequence_id_`` ...), read by :func:`read_parquet_records`.
:func:`read_records` takes any mix of both, telling them apart by the Parquet magic bytes.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.sources.files import number_records, read_lines, resolve_inputs
from cdclake.sqltext import quote_ident

PARQUET_MAGIC = b"PAR1"


def is_parquet(path: str) -> bool:
    """True when the file starts with the Parquet magic bytes (reads 4 bytes on the driver)."""
    with open(path, "rb") as fh:
        return fh.read(4) == PARQUET_MAGIC


def read_parquet_records(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Read Parquet files of TUPLE records as raw records (RAW_SCHEMA), one per Parquet row.

    ``value`` is the row as a JSON object (``to_json(struct(*))``, UTF-8): the Parquet column
    names are the keys. Spark's JSON writer leaves NULL values out (a decoded full image reads an
    absent column as NULL, so the target row is the same), writes timestamps as ISO-8601 text and
    binary as base64. ``key`` is null; ``source_record.file`` is the file as Spark names it and
    ``source_record.line`` the row's 1-based index in its file
    (:func:`cdclake.sources.files.number_records`, all in Spark).

    Files of different tables may be read together: their schemas are merged
    (``mergeSchema``), and as NULLs are left out, a column of one table never shows up in
    another table's records. A column with different types in two files fails the read.

    Raises:
        CdclakeError(INPUT_NOT_FOUND): see :func:`cdclake.sources.files.resolve_inputs`.
    """
    files = resolve_inputs(paths)
    df = spark.read.option("mergeSchema", "true").parquet(*files)
    value = F.encode(F.to_json(F.struct(*[F.col(quote_ident(c)) for c in df.columns])), "UTF-8")
    return number_records(df, value)


def read_records(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Raw records (RAW_SCHEMA) from any mix of JSON-lines and Parquet files of TUPLE records.

    Raises:
        CdclakeError(INPUT_NOT_FOUND): see :func:`cdclake.sources.files.resolve_inputs`.
    """
    files = resolve_inputs(paths)
    kinds = {f: is_parquet(f) for f in files}
    parquet = [f for f in files if kinds[f]]
    lines = [f for f in files if not kinds[f]]
    parts = []
    if lines:
        parts.append(read_lines(spark, lines))
    if parquet:
        parts.append(read_parquet_records(spark, parquet))
    return reduce(DataFrame.unionByName, parts)
