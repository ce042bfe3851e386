"""The streaming ingest from a real Kafka broker (started by the session fixture ``kafka_broker``,
KRaft, 127.0.0.1): every format's simulator workload gives the oracle's tables through Kafka,
as it does from files (tests/formats/<fmt>/test_roundtrip.py), and a real fixture gives the
same tables through Kafka as from its file; a restarted query goes on from its checkpoint.

Records are produced as the file reader sees them (``decoder.read_files``: a line's bytes, or a
DTS Avro datum), one partition per topic: the order a file gives.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from cdclake import formats
from cdclake.pipeline import IngestConfig, ingest
from cdclake.sources.kafka import KafkaInput
from cdclake.stream import StreamConfig, run_stream
from tests.conftest import fixture_lines
from tests.oracle import read_lake_table
from tests.roundtrip import (
    FORMATS, INGEST_CASES, KEYS_CONFIGURED, SUFFIX, assert_lake_matches, expected_tables, format_workload,
    keys_of,
)

pytestmark = pytest.mark.kafka
#: formats read in two micro-batches (the others in one)
MULTI_BATCH = ("canal-json",)


def _records(spark, fmt: str, path) -> list[tuple]:
    """The file's raw records as (key, value) pairs, in file order."""
    raw = formats.get(fmt).read_files(spark, [str(path)])
    rows = raw.orderBy("source_record.file", "source_record.line").select("key", "value").collect()
    return [(None if r["key"] is None else bytes(r["key"]), None if r["value"] is None else bytes(r["value"])) for r in rows]


def _stream(spark, broker, fmt, topic, target, checkpoint, max_per_batch=None, **kw):
    config = StreamConfig(
        fmt, str(target), str(checkpoint), KafkaInput(broker.bootstrap, [topic], max_offsets_per_trigger=max_per_batch),
        available_now=True, **kw,
    )
    return run_stream(spark, config, out=False)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_through_kafka_gives_the_oracle_tables(spark, kafka_broker, kafka_topic, tmp_path, fmt):
    events = format_workload(fmt, INGEST_CASES[fmt].seed)
    enc = formats.get_encoder(fmt)
    path = enc.write(enc.encode(events), tmp_path / f"in{SUFFIX[enc.file_kind]}")
    records = _records(spark, fmt, path)
    topic = kafka_topic()
    kafka_broker.produce(topic, records)
    keys = keys_of(events, enc) if fmt in KEYS_CONFIGURED else {}
    # one micro-batch (a batch costs seconds here), two for canal-json: several batches of
    # every format are the scrambled file ingests' part
    per_batch = len(records) // 2 + 1 if fmt in MULTI_BATCH else None
    s = _stream(spark, kafka_broker, fmt, topic, tmp_path / "lake", tmp_path / "ckpt", per_batch, primary_keys=keys)

    assert s.batches == (1 if per_batch is None else 2)
    t = s.totals
    assert (t.records_in, t.rejected) == (len(records), 0), t.reject_codes
    rows, schemas = expected_tables(enc, events)
    assert_lake_matches(spark, tmp_path / "lake", rows, schemas)
    changelog = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/changelog"))
    assert changelog.count() == t.events
    # every changelog row names the Kafka record it came from
    offsets = changelog.select("source_record.topic", "source_record.partition", "source_record.offset").distinct().collect()
    assert {r["topic"] for r in offsets} == {topic} and len(offsets) <= len(records)
    assert changelog.where(F.col("source_record.timestamp_ms").isNull() | F.col("source_record.file").isNotNull()).count() == 0


def test_a_restarted_query_goes_on_from_its_checkpoint_and_equals_the_file_ingest(spark, kafka_broker, kafka_topic, tmp_path):
    path = fixture_lines("canal-json/apache-flink/canal-data.txt", tmp_path)
    records = _records(spark, "canal-json", path)
    topic = kafka_topic(partitions=1)
    half = len(records) // 2
    kafka_broker.produce(topic, records[:half])
    first = _stream(spark, kafka_broker, "canal-json", topic, tmp_path / "lake", tmp_path / "ckpt")
    kafka_broker.produce(topic, records[half:])
    second = _stream(spark, kafka_broker, "canal-json", topic, tmp_path / "lake", tmp_path / "ckpt")
    third = _stream(spark, kafka_broker, "canal-json", topic, tmp_path / "lake", tmp_path / "ckpt")  # nothing new

    assert first.query_id == second.query_id == third.query_id  # the id lives in the checkpoint
    assert (first.totals.records_in, second.totals.records_in, third.totals.records_in) == (half, len(records) - half, 0)
    ingest(spark, IngestConfig("canal-json", [str(path)], str(tmp_path / "files")))
    for name in ("inventory.products2",):
        assert _table(spark, tmp_path / "lake" / name) == _table(spark, tmp_path / "files" / name)
    n_kafka = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/changelog")).count()
    n_files = spark.read.format("delta").load(str(tmp_path / "files/_cdclake/changelog")).count()
    assert n_kafka == n_files


def _table(spark, path):
    """The Delta table's source columns and rows (sorted by id)."""
    schema, rows = read_lake_table(spark, str(path))
    return schema, sorted(rows, key=lambda r: r["id"])
