"""Avro object container files of DTS ``Record`` s as raw records.

``read_avro_records(spark, paths)`` reads container files (``.avro`` or any other name) whose
records are DTS Avro ``Record`` s into :data:`cdclake.model.RAW_SCHEMA`, so that the one
decoding path of :class:`cdclake.formats.dts_avro.DtsAvroDecoder` serves Kafka and files alike:

* ``value``: the record re-encoded as one Avro binary datum of ``Record`` (``to_avro`` of the
  row with :data:`RECORD_SCHEMA_JSON`), i.e. the bytes DTS would have put in a Kafka value;
* ``key``: null;
* ``source_record.file``: the file's URI as Spark reports it (``_metadata.file_path``);
  ``source_record.line``: the record's 1-based index in its file.

The files are read by Spark's Avro source with ``Record`` as the reader schema (a file written
with an older but compatible ``Record`` schema is resolved to it). Record numbers are computed
in Spark as in :func:`cdclake.sources.files.read_lines`: a split's rows have consecutive
``monotonically_increasing_id`` values, so index = first index of the split (rows of the
earlier splits of the same file, ordered by ``_metadata.file_block_start``) + the row's offset
in its split. Nothing is read on the driver and no Python code touches rows.

Raises (on the driver, before any row is read):
    CdclakeError(INPUT_NOT_FOUND): a path does not exist or a folder holds no files.
A file that is not an Avro container file fails the Spark job (an input error, not a reject).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro

from cdclake.formats.dts_avro.schema import RECORD_FIELDS, RECORD_SCHEMA_JSON
from cdclake.model import RAW_SCHEMA, source_record_col
from cdclake.sources.files import resolve_inputs


def read_avro_records(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Read Avro container files of DTS ``Record`` s as raw records (RAW_SCHEMA), one per
    Avro record, in file order.

    Raises:
        CdclakeError(INPUT_NOT_FOUND): see :func:`cdclake.sources.files.resolve_inputs`.
    """
    files = resolve_inputs(paths)
    recs = (
        spark.read.format("avro")
        .option("avroSchema", RECORD_SCHEMA_JSON)
        .load(files)
        .select(
            to_avro(F.struct(*[F.col(f"`{n}`") for n in RECORD_FIELDS]), RECORD_SCHEMA_JSON).alias("value"),
            F.col("_metadata.file_path").alias("file"),
            F.col("_metadata.file_block_start").alias("block"),
            F.monotonically_increasing_id().alias("mid"),
        )
    )
    # Only the small per-split table is aggregated and broadcast; the records are not shuffled.
    splits = recs.groupBy("file", "block").agg(F.min("mid").alias("min_mid"), F.count(F.lit(1)).alias("n"))
    before = Window.partitionBy("file").orderBy("block").rowsBetween(Window.unboundedPreceding, -1)
    splits = splits.withColumn("first", F.coalesce(F.sum("n").over(before), F.lit(0)) + 1)
    numbered = recs.join(F.broadcast(splits.select("file", "block", "min_mid", "first")), ["file", "block"])
    raw = numbered.select(
        F.lit(None).cast("binary").alias("key"),
        F.col("value"),
        source_record_col(file=F.col("file"), line=F.col("first") + F.col("mid") - F.col("min_mid")).alias("source_record"),
    )
    return raw.select([F.col(f.name).cast(f.dataType) for f in RAW_SCHEMA.fields])
