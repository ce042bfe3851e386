"""Kafka topics as raw records, through Spark Structured Streaming's Kafka source
(``spark-sql-kafka-0-10``, fetched by ``bin/setup``).

:func:`read_kafka` opens the stream; :func:`kafka_raw` turns a micro-batch of the source's rows
(``key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp,
timestampType int, headers array<struct<key string, value binary>>``) into :data:`cdclake.model.RAW_SCHEMA`:

* ``key``, ``value``: the record's bytes as they are (a null value is a Kafka tombstone);
* ``source_record``: ``topic``, ``partition``, ``offset``, ``timestamp_ms`` (the record's
  Kafka timestamp in ms since the epoch, UTC) and ``headers`` (``array<struct<key string,
  value binary>>`` in the record's order, null when it has none); ``file`` and ``line`` null.

Text formats read the value as UTF-8 (their decoders do); DTS Avro reads it as one Avro binary
datum of ``Record`` (no container file), which is what DTS writes to Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.errors import CdclakeError
from cdclake.model import RAW_SCHEMA, source_record_col


@dataclass
class KafkaInput:
    """Where and how to read Kafka.

    bootstrap: ``HOST:PORT[,HOST:PORT...]``.
    topics: topic names; or ``topic_pattern``: a Java regular expression of topic names (one of
        the two).
    starting_offsets: ``earliest`` or ``latest`` (used only when the checkpoint is new).
    max_offsets_per_trigger: at most this many records per micro-batch (None: no limit).
    options: more settings of the Kafka consumer, ``kafka.``-prefixed as Spark's Kafka source
        wants them (``kafka.security.protocol`` ...), passed through unread.
    """

    bootstrap: str
    topics: list[str] = field(default_factory=list)
    topic_pattern: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    options: dict[str, str] = field(default_factory=dict)

    def source_options(self) -> dict[str, str]:
        """The options of Spark's Kafka source for this input.

        Raises:
            CdclakeError(BAD_OPTION): no topic and no pattern, or both; a bad starting offset.
        """
        if bool(self.topics) == bool(self.topic_pattern):
            raise CdclakeError("BAD_OPTION", "give --topic T (repeatable) or --topic-pattern RE, not both")
        if self.starting_offsets not in ("earliest", "latest"):
            raise CdclakeError("BAD_OPTION", f"--starting-offsets must be earliest or latest, not {self.starting_offsets!r}")
        opts = {
            "kafka.bootstrap.servers": self.bootstrap,
            "startingOffsets": self.starting_offsets,
            # records deleted by retention before they were read stop the query: nothing is
            # skipped silently (a user who accepts the loss passes failOnDataLoss=false)
            "failOnDataLoss": "true",
            "includeHeaders": "true",  # into source_record.headers
        }
        if self.topics:
            opts["subscribe"] = ",".join(self.topics)
        else:
            opts["subscribePattern"] = self.topic_pattern
        if self.max_offsets_per_trigger:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        opts.update(self.options)
        return opts


def kafka_options(settings: dict[str, str]) -> dict[str, str]:
    """Kafka consumer settings (``--kafka-option NAME=VALUE``, parsed) as Kafka source
    options: a NAME without the ``kafka.`` prefix gets it (``security.protocol`` ->
    ``kafka.security.protocol``)."""
    return {name if name.startswith("kafka.") else f"kafka.{name}": value for name, value in settings.items()}


def read_kafka(spark: SparkSession, source: KafkaInput) -> DataFrame:
    """The streaming DataFrame of Spark's Kafka source for ``source`` (rows as the source gives
    them; :func:`kafka_raw` maps each micro-batch to RAW_SCHEMA)."""
    reader = spark.readStream.format("kafka")
    for k, v in source.source_options().items():
        reader = reader.option(k, v)
    return reader.load()


def kafka_raw(rows: DataFrame) -> DataFrame:
    """Kafka source rows (``key``, ``value``, ``topic``, ``partition``, ``offset``,
    ``timestamp``, ``headers``) as raw records (RAW_SCHEMA)."""
    raw = rows.select(
        F.col("key"),
        F.col("value"),
        source_record_col(
            topic=F.col("topic"), partition=F.col("partition"), offset=F.col("offset"),
            timestamp_ms=F.unix_millis(F.col("timestamp")), headers=F.col("headers"),
        ).alias("source_record"),
    )
    return raw.select([F.col(f.name).cast(f.dataType) for f in RAW_SCHEMA.fields])
