"""Files of exported messages as raw records.

``read_lines(spark, paths)`` reads text files with one message per line (JSON formats) into
:data:`cdclake.model.RAW_SCHEMA`: ``value`` is the line's bytes as written, ``key`` is null,
``source_record`` has ``file`` (absolute URI as Spark reports it) and ``line`` (1-based line
number in that file). Blank lines (only whitespace) are not records and are dropped; line
numbers still count them. Files may be split across tasks: each line's number is its row index
inside its split plus the number of lines in the earlier splits of the same file, computed
by Spark (``_metadata.file_block_start``; see :func:`number_records`), never by reading a file
on the driver.

A record's value is the line's own bytes (Spark's text reader does not decode them): a line
that is not UTF-8 keeps its bytes in the rejects, as a Kafka record does; where a decoder reads
it as text, bytes that are not UTF-8 read as U+FFFD.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.errors import CdclakeError
from cdclake.model import RAW_SCHEMA, source_record_col


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
    value = F.col("value")
    # a blank line is not a record: trim only lines that start with whitespace (JSON starts with '{')
    blank = (F.octet_length(value) == 0) | ((F.ascii(value) <= 32) & (F.trim(value) == ""))
    if len(files) == 1 and Path(files[0]).stat().st_size <= one_split_bytes(spark):
        return _raw(text.select(
            value.cast("binary").alias("value"), (~blank).alias("keep"),
            F.col("_metadata.file_path").alias("file"), (F.monotonically_increasing_id() + 1).alias("line"),
        ))
    return number_records(text, value.cast("binary"), keep=~blank)


def one_split_bytes(spark: SparkSession) -> int:
    """Size in bytes up to which Spark reads one file as one split whatever the session's
    parallelism: ``spark.sql.files.openCostInBytes`` (Spark's ``maxSplitBytes`` is never below
    it) and ``spark.sql.files.maxPartitionBytes``, the smaller, as Spark's own ``SQLConf`` reads
    them. Such a file alone is one partition, numbered 0, whose row ids
    (``monotonically_increasing_id``) are its line indexes: :func:`read_lines` numbers its lines
    without the aggregate of :func:`number_records` (a Spark job less per batch)."""
    conf = spark._jsparkSession.sessionState().conf()
    return min(int(conf.filesOpenCostInBytes()), int(conf.filesMaxPartitionBytes()))


#: up to this many file splits, a record's file and line come from a CASE on its row id (no
#: join, no per-row file path); beyond it, from a broadcast join on (file, split)
_CASE_SPLITS = 64


def number_records(df: DataFrame, value: Column, keep: Column | None = None) -> DataFrame:
    """Raw records (RAW_SCHEMA) from a DataFrame read by a Spark file source (text, avro,
    parquet ...): ``value`` (a binary expression over ``df``'s columns) becomes the record's
    value, ``source_record.file`` the file's path and ``source_record.line`` the row's 1-based
    index in its file. Rows where ``keep`` is false are dropped after numbering.

    Row ids (``monotonically_increasing_id``) are consecutive inside one split, and the ids of
    different splits never interleave: a row's line is its split's first line plus (id - the
    split's smallest id). One small aggregate per input (run here, on the driver: a job that
    reads the files' rows without parsing them) gives each split's smallest id and row count;
    with few splits the rows are then numbered by a CASE over id ranges, else by a broadcast
    join with the split table. The rows themselves are never shuffled.
    """
    keep_col = keep if keep is not None else F.lit(True)
    ids = df.select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("mid"),
    )
    splits = ids.groupBy("file", "block").agg(F.min("mid").alias("min_mid"), F.count(F.lit(1)).alias("n")).collect()
    first_line: dict[tuple, int] = {}
    seen: dict[str, int] = {}
    for r in sorted(splits, key=lambda r: (r["file"], r["block"])):
        first_line[(r["file"], r["block"])] = seen.get(r["file"], 0) + 1
        seen[r["file"]] = seen.get(r["file"], 0) + r["n"]
    mid = F.monotonically_increasing_id()
    if len(splits) <= _CASE_SPLITS:
        ordered = sorted(splits, key=lambda r: r["min_mid"])
        file_col, line_col = F.lit(None).cast("string"), F.lit(None).cast("long")
        for r in ordered:  # the outermost test is the split with the greatest smallest id
            hit = F.col("mid") >= F.lit(r["min_mid"])
            file_col = F.when(hit, F.lit(r["file"])).otherwise(file_col)
            line_col = F.when(hit, F.col("mid") - F.lit(r["min_mid"]) + F.lit(first_line[(r["file"], r["block"])])).otherwise(line_col)
        numbered = df.select(value.alias("value"), keep_col.alias("keep"), mid.alias("mid")).select(
            "value", "keep", file_col.alias("file"), line_col.alias("line")
        )
    else:
        table = df.sparkSession.createDataFrame(
            [(r["file"], r["block"], r["min_mid"], first_line[(r["file"], r["block"])]) for r in splits],
            "file string, block bigint, min_mid bigint, first_line bigint",
        )
        rows = df.select(
            value.alias("value"), keep_col.alias("keep"),
            F.col("_metadata.file_path").alias("file"), F.col("_metadata.file_block_start").alias("block"), mid.alias("mid"),
        )
        numbered = rows.join(F.broadcast(table), ["file", "block"]).select(
            "value", "keep", "file", (F.col("first_line") + F.col("mid") - F.col("min_mid")).alias("line")
        )
    return _raw(numbered)


def _raw(numbered: DataFrame) -> DataFrame:
    """RAW_SCHEMA rows from ``value`` (binary), ``keep`` (boolean), ``file``, ``line`` (long):
    the kept ones."""
    raw = numbered.where("keep").select(
        F.lit(None).cast("binary").alias("key"),
        "value",
        source_record_col(file=F.col("file"), line=F.col("line")).alias("source_record"),
    )
    return raw.select([F.col(f.name).cast(f.dataType) for f in RAW_SCHEMA.fields])
