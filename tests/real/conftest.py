"""Real producers for the tests that read what they write: a PostgreSQL server from Debian's
packages (:class:`cdclake.testing.postgres.PostgresServer`, one for the session) and Debezium's
PostgreSQL connector in a Kafka Connect standalone worker
(:class:`cdclake.testing.kafka_connect.KafkaConnect`, one per test) writing into the session's
Kafka broker (``kafka_broker`` of ``tests/conftest.py``). ``bin/setup --test`` installs and
fetches them."""

from __future__ import annotations

import json
import re
import time

import pytest

from cdclake.testing.kafka_connect import KafkaConnect, debezium_postgres_config
from cdclake.testing.postgres import PostgresServer
from cdclake.testing.processes import free_port

_databases = iter(range(1, 1_000_000))


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """A PostgreSQL server (``wal_level=logical``) on a free port of 127.0.0.1, for the session."""
    server = PostgresServer(tmp_path_factory.mktemp("pg"), free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def debezium(postgres, kafka_broker, tmp_path, request):
    """A factory ``start(db, overrides=None) -> Capture``: a new database ``db`` of the session's
    server is captured by Debezium's PostgreSQL connector (pgoutput, JSON with schemas,
    transaction metadata, ``skipped.operations=none`` so TRUNCATE is captured, topic prefix
    unique to the test) in a Connect worker of its own, stopped when the test ends. The
    database is made (and the workload's tables with it) before the connector starts: pass
    ``create`` to make them."""
    workers: list[KafkaConnect] = []
    base = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]

    def start(create, overrides: dict | None = None) -> Capture:
        n = next(_databases)
        db = f"{base}_{n}"
        postgres.execute(f'create database "{db}"')
        create(postgres, db)
        prefix = f"{base}_{n}"
        config = debezium_postgres_config(postgres.port, db, prefix, overrides={"skipped.operations": "none", **(overrides or {})})
        worker = KafkaConnect(tmp_path / f"connect-{n}", kafka_broker.bootstrap, free_port())
        workers.append(worker)
        worker.start({prefix: config})
        worker.wait_snapshot_done(prefix)
        return Capture(postgres, kafka_broker, worker, db, prefix)

    try:
        yield start
    finally:
        for w in workers:
            w.stop()


class Capture:
    """A database captured into Kafka: ``db`` on ``pg``, topics ``<prefix>.*``."""

    def __init__(self, pg, broker, worker, db: str, prefix: str):
        self.pg, self.broker, self.worker, self.db, self.prefix = pg, broker, worker, db, prefix

    @property
    def topic_pattern(self) -> str:
        return re.escape(self.prefix) + r"\..*"

    def caught_up(self, mark: int, timeout_s: float = 120) -> None:
        """Wait until marker row ``mark`` (``marker`` table, its own transaction) and the END
        record of its transaction are in Kafka: the connector has sent every change committed
        before it (it sends in commit order)."""
        from confluent_kafka import Consumer, TopicPartition

        deadline = time.monotonic() + timeout_s
        consumer = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": f"wait-{self.prefix}",
                             "enable.auto.commit": False, "broker.address.family": "v4", "log_level": 0})
        try:
            tx = self._find(consumer, TopicPartition(f"{self.prefix}.public.marker", 0, 0), deadline,
                            lambda v: v["payload"]["after"]["id"] == mark, lambda v: str(v["payload"]["source"]["txId"]))
            self._find(consumer, TopicPartition(f"{self.prefix}.transaction", 0, 0), deadline,
                       lambda v: v["payload"]["status"] == "END" and v["payload"]["id"].split(":")[0] == tx, lambda v: True)
        finally:
            consumer.close()

    def _find(self, consumer, tp, deadline, match, result):
        consumer.assign([tp])
        while True:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error() and msg.value():
                value = json.loads(msg.value())
                if match(value):
                    return result(value)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{tp.topic}: no record matched in time ({self.worker.status(self.prefix)})")
