"""Files of exported messages as raw records.

``read_lines(spark, paths)`` reads text files with one message per line (JSON formats) into
:data:`cdclake.model.RAW_SCHEMA`: ``value`` is the line's UTF-8 bytes, ``key`` is null,
``source_record`` has ``file`` (absolute URI as Spark reports it) and ``line`` (1-based line
number in that file). Blank lines (only whitespace) are not records and are dropped; line
numbers still count them. Files may be split across tasks: each line's number is its row index
inside its split plus the number of lines in the earlier splits of the same file, all computed
in Spark (``_metadata.file_block_start``), never by reading a file on the driver.

Note: Spark's text reader decodes lines as UTF-8; bytes that are not UTF-8 arrive as U+FFFD,
so the raw bytes kept for such a reject are the replaced text, not the original bytes.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdclake.errors import CdclakeError
from cdclake.model import RAW_SCHEMA


def resolve_inputs(paths: list[str]) -> list[str]:
    """Expand folders into their files (sorted, hidden files skipped) and check every path.

    Raises:
        CdclakeError(INPUT_NOT_FOUND): a path does not exist or a folder has no files.
    """
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files = sorted(f for f in path.rglob("*") if f.is_file() and not f.name.startswith((".", "_")))
            if not files:
                raise CdclakeError("INPUT_NOT_FOUND", f"input folder {p} holds no files")
            out.extend(str(f.resolve()) for f in files)
        elif path.is_file():
            out.append(str(path.resolve()))
        else:
            raise CdclakeError("INPUT_NOT_FOUND", f"input {p} does not exist")
    return out


def read_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Read JSON-lines files as raw records (RAW_SCHEMA), blank lines dropped.

    Raises:
        CdclakeError(INPUT_NOT_FOUND): see :func:`resolve_inputs`.
    """
    files = resolve_inputs(paths)
    text = spark.read.format("text").load(files)
    return number_records(text, F.encode(F.col("value"), "UTF-8"), keep=F.trim(F.col("value")) != "")


def number_records(df: DataFrame, value: Column, keep: Column | None = None) -> DataFrame:
    """Raw records (RAW_SCHEMA) from a DataFrame read by a Spark file source (text, avro,
    parquet ...): ``value`` (a binary expression over ``df``'s columns) becomes the record's
    value, ``source_record.file`` the file's path and ``source_record.line`` the row's 1-based
    index in its file. Rows where ``keep`` is false are dropped after numbering.

    Row ids (``monotonically_increasing_id``) are consecutive inside one split: a row's index
    is the split's first index plus (id - the split's smallest id). Only the small per-split
    table is aggregated and broadcast; the rows themselves are never shuffled.
    """
    rows = df.select(
        value.alias("value"),
        (keep if keep is not None else F.lit(True)).alias("keep"),
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("mid"),
    )
    splits = rows.groupBy("file", "block").agg(F.min("mid").alias("min_mid"), F.count(F.lit(1)).alias("n"))
    before = Window.partitionBy("file").orderBy("block").rowsBetween(Window.unboundedPreceding, -1)
    splits = splits.withColumn("first_line", F.coalesce(F.sum("n").over(before), F.lit(0)) + 1)
    numbered = rows.join(F.broadcast(splits.select("file", "block", "min_mid", "first_line")), ["file", "block"])
    raw = numbered.where("keep").select(
        F.lit(None).cast("binary").alias("key"),
        "value",
        F.struct(
            F.lit(None).cast("string").alias("topic"),
            F.lit(None).cast("int").alias("partition"),
            F.lit(None).cast("long").alias("offset"),
            F.lit(None).cast("long").alias("timestamp_ms"),
            F.col("file"),
            (F.col("first_line") + F.col("mid") - F.col("min_mid")).alias("line"),
        ).alias("source_record"),
    )
    return raw.select([F.col(f.name).cast(f.dataType) for f in RAW_SCHEMA.fields])
