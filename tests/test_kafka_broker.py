"""The development Kafka broker (``cdclake.testing.kafka_broker``) is a real broker: records
written to a topic are read back, each exactly once, and survive a restart of the broker."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

pytestmark = pytest.mark.kafka


def consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 20, linger_s: float = 1.0):
    """Every record of ``topic`` from the earliest offset as ``(key, value, partition)``, read by
    a consumer of a new group; polls until ``expected`` records arrived (or ``timeout_s``
    seconds passed) and ``linger_s`` seconds longer, so that duplicates would show."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"test-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.key(), msg.value(), msg.partition()))
            if len(out) >= expected:
                deadline = min(deadline, time.monotonic() + linger_s)
    finally:
        consumer.close()
    return out


def test_records_come_back_exactly_once(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=2)
    records = [(f"key-{i % 7}".encode(), f"value-{i}".encode()) for i in range(20)]
    assert kafka_broker.produce(topic, records) == 20

    got = consume_all(kafka_broker.bootstrap, topic, expected=20)

    assert Counter((k, v) for k, v, _ in got) == Counter(records)
    assert len(got) == 20
    assert {p for _, _, p in got} == {0, 1}  # 7 keys over 2 partitions: both are used
    partition_of = {}
    for k, _, p in got:  # one key, one partition
        assert partition_of.setdefault(k, p) == p


def test_records_survive_a_restart(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=2)
    before = [(b"k%d" % i, b"before-%d" % i, i % 2) for i in range(10)]
    kafka_broker.produce(topic, before)

    kafka_broker.restart()

    after = [(None, b"after-%d" % i, i % 2) for i in range(5)]
    kafka_broker.produce(topic, after)
    got = consume_all(kafka_broker.bootstrap, topic, expected=15)
    assert sorted(got, key=repr) == sorted(before + after, key=repr)
