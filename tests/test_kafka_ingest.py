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
#: formats read in two micro-batches (the others in one); Qlik's second batch holds data
#: messages whose metadata messages came in the first (kept in _cdclake/decoder_context)
MULTI_BATCH = ("canal-json", "qlik-json")


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


#: Debezium is not among them: test_debezium_topics_of_one_connector_with_their_kafka_keys reads
#: the same workload through Kafka (its own topic layout, keys from the Kafka keys) and checks
#: the same tables and changelog (session 26, for the suite's time)
THROUGH_ONE_TOPIC = tuple(f for f in FORMATS if f != "debezium-json")


@pytest.mark.parametrize("fmt", THROUGH_ONE_TOPIC)
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
    # the second half carries Kafka headers, and two broken records sit among it: they are
    # rejected with their Kafka coordinates and headers, the rest is applied
    hdrs = [("trace-id", b"t-1"), ("empty", None)]
    broken = [(b"k", b'{"data": [', None, [("why", b"truncated")]), (None, b"\xff\xfe not utf-8", None, [])]
    tail = [(k, v, None, hdrs) for k, v in records[half:]]
    kafka_broker.produce(topic, tail[:3] + broken + tail[3:])
    second = _stream(spark, kafka_broker, "canal-json", topic, tmp_path / "lake", tmp_path / "ckpt")
    third = _stream(spark, kafka_broker, "canal-json", topic, tmp_path / "lake", tmp_path / "ckpt")  # nothing new

    assert first.query_id == second.query_id == third.query_id  # the id lives in the checkpoint
    assert (first.totals.records_in, second.totals.records_in, third.totals.records_in) == (half, len(records) - half + 2, 0)
    assert (first.totals.rejected, second.totals.rejected) == (0, 2)
    rejects = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/rejects"))
    got = sorted((r["error_code"], r["source_record"]["offset"], r["raw_key"] and bytes(r["raw_key"]),
                  [(h["key"], h["value"] and bytes(h["value"])) for h in r["source_record"]["headers"] or []])
                 for r in rejects.collect())
    assert got == [("MALFORMED_JSON", half + 3, b"k", [("why", b"truncated")]), ("MALFORMED_JSON", half + 4, None, [])]
    changelog = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/changelog"))
    headers = {r["offset"]: [(h["key"], h["value"] and bytes(h["value"])) for h in r["headers"] or []]
               for r in changelog.select("source_record.offset", "source_record.headers").collect()}
    assert {o: h for o, h in headers.items() if o < half} == {o: [] for o in headers if o < half}
    assert {o: h for o, h in headers.items() if o >= half} == {o: hdrs for o in headers if o >= half}
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


def test_debezium_topics_of_one_connector_with_their_kafka_keys(spark, kafka_broker, tmp_path):
    """Debezium's own layout: one data topic per table, keyed by the row's primary key, with a
    tombstone after each delete, the schema-change topic (DDL, keyed by database) and the
    transaction-metadata topic (BEGIN/END) beside them, read by one query through a topic
    pattern. The keys come from the Kafka keys (no --primary-key), the tombstones decode to
    nothing, every BEGIN/END is a tx_begin/tx_end event with its END's event count, and the
    tables equal the oracle's."""
    import json
    import re

    events = format_workload("debezium-json", INGEST_CASES["debezium-json"].seed)
    enc = formats.get_encoder("debezium-json")
    encoded = enc.encode(events)
    prefix = re.sub(r"[^a-z0-9]", "", tmp_path.name.lower())[-20:]
    by_topic: dict[str, list] = {}
    last_data_topic = None
    for key, value in encoded.records:
        if value is None:  # a tombstone follows its delete on the same topic
            topic = last_data_topic
        else:
            payload = json.loads(value)["payload"]
            if "ddl" in payload:
                topic = f"{prefix}"  # the schema-change topic is named after the server
            else:
                topic = last_data_topic = f"{prefix}.{payload['source']['db']}.{payload['source']['table']}"
        by_topic.setdefault(topic, []).append((key, value))
    assert len(by_topic) >= 3 and any(v is None for recs in by_topic.values() for _, v in recs)
    tx_records = enc.transaction_records(events)
    by_topic[f"{prefix}.transaction"] = tx_records
    tx_sizes = {}
    for e in events:
        if e["kind"] == "data" and e.get("tx_id") and e.get("present") is None:
            tx_sizes[e["tx_id"]] = tx_sizes.get(e["tx_id"], 0) + 1
    assert len(tx_records) == 2 * len(tx_sizes) > 0
    for topic, recs in by_topic.items():
        kafka_broker.create_topic(topic)
        kafka_broker.produce(topic, recs)

    config = StreamConfig("debezium-json", str(tmp_path / "lake"), str(tmp_path / "ckpt"),
                          KafkaInput(kafka_broker.bootstrap, topic_pattern=re.escape(prefix) + r"(\..*)?"), available_now=True)
    s = run_stream(spark, config, out=False)

    tombstones = sum(1 for _, v in encoded.records if v is None)
    assert (s.totals.records_in, s.totals.rejected) == (len(encoded.records) + len(tx_records), 0)
    assert s.totals.events == len(encoded.records) - tombstones + len(tx_records)
    markers = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/changelog")).where("kind like 'tx_%'")
    got_tx = sorted((r["kind"], r["tx_id"], r["tx_size"]) for r in markers.select("kind", "tx_id", "tx_size").collect())
    assert got_tx == sorted([("tx_begin", t, None) for t in tx_sizes] + [("tx_end", t, n) for t, n in tx_sizes.items()])
    rows, schemas = expected_tables(enc, events)
    assert_lake_matches(spark, tmp_path / "lake", rows, schemas)
    # every table with a key got it from the Kafka keys (a keyless table's records have none)
    keys = {t: k for t, k in keys_of(events, enc).items() if k}
    assert keys
    changes = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/changelog")).where("kind = 'data' and op != 't'")
    got = {(f"{r['database']}.{r['table']}", tuple(r["primary_key"] or ())) for r in changes.select("database", "table", "primary_key").distinct().collect()}
    assert {(t, tuple(k)) for t, k in keys.items()} <= got
    assert all(k for t, k in got if t in keys)
    # every changelog row names the Kafka record it came from
    changelog = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/changelog"))
    assert changelog.count() == s.totals.events
    assert {r["topic"] for r in changelog.select("source_record.topic").distinct().collect()} <= set(by_topic)
    assert changelog.where(F.col("source_record.timestamp_ms").isNull() | F.col("source_record.file").isNotNull()).count() == 0
