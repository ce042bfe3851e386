"""The one place where cdclake pins the versions of its engine.

Spark, Delta Lake and Kafka must agree: delta-spark 4.0.x is built for Spark 4.0.x and Scala
2.13; spark-sql-kafka-0-10 4.0.0 is built against kafka-clients 3.9.0. ``bin/setup`` reads these
values (``python -m cdclake.versions --pip`` / ``--maven``) to install the Python packages and to
fetch the JVM jars, so changing a version here changes it everywhere.

Why 4.0.0 and not 4.0.1: the registry mirror this project builds from lacks
``spark-token-provider-kafka-0-10_2.13:4.0.1``; 4.0.0 is the newest release whose jar set is whole.

Measured for issue 51 (2026-11-29): Spark 4.2.0 with Delta 4.4.0 now resolves whole here
(spark-avro, spark-sql-kafka-0-10 and its token provider 4.2.0, kafka-clients 3.9.2,
commons-pool2 2.13.1; delta-spark 4.4.0 on PyPI) and ran cdclake's benchmarks unchanged (the
test suite was not run on it). It was not faster: in one hour, back to back, each row a fresh JVM (``bench/compare.py --events
1000000 --keys 200000 --formats canal-json --only 'decode:canal-json,from_json,docs,warm:docs,tiny:*'
--warm-batches 8``), 4.2.0+4.4.0 against 4.0.0+4.0.0: the ``from_json`` floor 8.70 / 7.60 s,
cdclake canal decode 42.3 / 39.5 s, the Delta docs MERGE of 1M events 35.8 / 33.1 s, a warm
500-event docs MERGE 1.83 / 1.85 s, 11 events in a fresh process 16.3 / 15.2 s; cdclake's warm
500-event batch 7.05 / 7.30 s (an earlier run). The cost that dominates a small batch is not
gone either: a write carrying a batch identity (``txnAppId``) still makes Delta rebuild the
table's snapshot (3 Spark jobs, ~0.45 s), with the identities in the table's ``.crc`` file
unread. Spark 4.1.1 with Delta 4.3.1 (tried for issue 8) was not faster and needs
``spark.databricks.delta.merge.failSourceCachedAfterMaterialization=false``. So the pin stays
on 4.0.0, the line that is measured fastest here; moving is one edit of this file and
``pyproject.toml``'s bounds once a newer line is.
"""

from __future__ import annotations

import sys

SPARK_VERSION = "4.0.0"
DELTA_VERSION = "4.0.0"
SCALA_BINARY = "2.13"
KAFKA_VERSION = "3.9.0"  # kafka-clients used by spark-sql-kafka-0-10 4.0.0
#: the Apache Kafka broker run by ``bin/kafka`` and the Kafka tests (``cdclake.testing``), fetched
#: from ``jvm/kafka/pom.xml`` into ``.jars/kafka``; it runs in a JVM of its own, never on Spark's
#: classpath. Kafka 4.x is KRaft-only (no ZooKeeper); the kafka-clients 3.9.0 pinned above for
#: Spark's connector talks to 4.0 brokers.
KAFKA_BROKER_VERSION = "4.0.0"
#: the Debezium PostgreSQL connector that the tests run as a real CDC producer, in a Kafka Connect
#: standalone worker of the broker's Kafka version (connect-runtime ``KAFKA_BROKER_VERSION``),
#: fetched from ``jvm/connect/pom.xml`` into ``.jars/connect``. 3.6.1.Final, not newer: the
#: registry mirror this project builds from serves newer Debezium releases only in part. Debezium
#: 3.6 is built against Kafka 4.3; its PostgreSQL connector runs in a 4.0 worker (checked:
#: snapshot, streaming, transaction metadata, restart from the offsets file).
DEBEZIUM_VERSION = "3.6.1.Final"
COMMONS_POOL2_VERSION = "2.12.0"


#: readers the tests open the targets with (not needed to run cdclake): delta-rs, the reader
#: behind Polars and pandas users' scripts, and the pyarrow it hands tables over in
DELTALAKE_VERSION = "1.6.6"
PYARROW_VERSION = "26.0.1"
#: the PostgreSQL client of ``cdclake.testing.postgres`` (typed rows to compare with the tables);
#: the binary wheel brings its own libpq
PSYCOPG_VERSION = "3.3.9"
#: the documentation site (``mkdocs.yml``, ``docs/``): built with ``--strict`` by
#: ``tests/test_docs.py``, served locally with ``.venv/bin/mkdocs serve``
MKDOCS_VERSION = "1.6.1"
MKDOCS_MATERIAL_VERSION = "9.8.1"


def test_pins() -> list[str]:
    """Requirement strings of the test-only readers and the docs builder (``bin/setup --test``)."""
    return [f"deltalake=={DELTALAKE_VERSION}", f"pyarrow=={PYARROW_VERSION}",
            f"psycopg[binary]=={PSYCOPG_VERSION}", f"mkdocs=={MKDOCS_VERSION}",
            f"mkdocs-material=={MKDOCS_MATERIAL_VERSION}"]


def pip_pins() -> list[str]:
    """Requirement strings for pip, e.g. ``["pyspark==4.0.0", "delta-spark==4.0.0"]``."""
    return [f"pyspark=={SPARK_VERSION}", f"delta-spark=={DELTA_VERSION}"]


def maven_properties() -> list[str]:
    """``-Dname=value`` arguments for ``mvn`` matching the ``<properties>`` of ``jvm/pom.xml``,
    ``jvm/kafka/pom.xml`` and ``jvm/connect/pom.xml`` (a property a pom does not declare is
    ignored by it)."""
    return [
        f"-Dspark.version={SPARK_VERSION}",
        f"-Ddelta.version={DELTA_VERSION}",
        f"-Dscala.binary={SCALA_BINARY}",
        f"-Dkafka.version={KAFKA_VERSION}",
        f"-Dcommons.pool2.version={COMMONS_POOL2_VERSION}",
        f"-Dkafka.broker.version={KAFKA_BROKER_VERSION}",
        f"-Ddebezium.version={DEBEZIUM_VERSION}",
    ]


if __name__ == "__main__":  # used by bin/setup
    if sys.argv[1:] == ["--pip"]:
        print("\n".join(pip_pins()))
    elif sys.argv[1:] == ["--pip-test"]:
        print("\n".join(test_pins()))
    elif sys.argv[1:] == ["--maven"]:
        print(" ".join(maven_properties()))
    else:
        print("usage: python -m cdclake.versions --pip | --pip-test | --maven", file=sys.stderr)
        sys.exit(2)
