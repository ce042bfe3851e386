"""Shared test fixtures: one SparkSession for the whole suite, access to the real messages in
``../shared/fixtures`` (origins in ``shared/fixtures/SOURCES.md``), and the hypothesis profiles.

Hypothesis profiles (``HYPOTHESIS_PROFILE``, default ``ci``):

* ``ci``: derandomized (every run draws the same examples, so a red CI run is reproducible and
  a green one stays green until the code changes), ``max_examples`` 1 because a property
  example in this suite is a whole batch of workloads run in one Spark job; properties ask for
  a multiple of it (``tests.roundtrip.scaled``).
* ``thorough``: random draws and ten times the examples, for a long run on demand
  (``bin/test --thorough``). A failure prints its example and a ``@reproduce_failure`` blob;
  pin it as an explicit case (``@example`` or a fixed test).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from cdclake.spark import DRIVER_JAVA_OPTIONS

_COMMON = dict(deadline=None, print_blob=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("ci", derandomize=True, max_examples=1, **_COMMON)
settings.register_profile("thorough", derandomize=False, max_examples=10, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parent.parent
#: shared/ sits beside the repository (``../shared``) on developer machines and in CI
SHARED = Path(os.environ.get("CDCLAKE_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures"


#: settings for the suite's small data (semantics unchanged): 2 shuffle partitions; Delta
#: rebuilds a table's snapshot (its file list, on every MERGE and read) in 1 task, as cdclake
#: sets it (cdclake.spark.get_spark); no Spark UI; no adaptive re-planning of queries this small;
#: no whole-stage code generation: on a few hundred rows the suite's time went to compiling
#: each new plan (the decoders' per-batch plans are new every batch, and some make Janino fail
#: with "Code grows beyond 64 KB" before Spark falls back), measured session 10: the seven
#: decodes of test_convert's fixture 58 s -> 41 s, tests/apply/test_semantics.py 264 s -> 236 s.
#: Results do not depend on it (Spark evaluates the same expressions either way). Nor are the
#: expressions compiled one by one (``spark.sql.codegen.factoryMode`` ``NO_CODEGEN``, Spark's
#: own setting for its tests of the interpreted path): Spark evaluates every projection and
#: predicate interpreted, as it does when a generated class fails to compile; measured session
#: 20 (JVM CPU seconds, then wall): test_history + canal's round trips 308 s -> 234 s (200 s ->
#: 158 s), test_semantics.py 334 s -> 269 s (236 s -> 196 s). The kill -9 test's ingest
#: processes evaluate interpreted too. The standalone cluster test's ingest (driver and
#: executor), ``bin/demo`` and the benchmarks run with cdclake's own settings: whole-stage and
#: expression code generation on.
#: The test JVM collects garbage with the parallel collector instead of G1: on this 2-core
#: machine G1's concurrent threads compete with the suite's own; measured session 45,
#: tests/apply/test_history.py 188 s / 178 s (G1) against 167 s / 171 s (parallel), 182 s (serial),
#: 209 s with C1 only (``-XX:TieredStopAtLevel=1``).
TEST_CONF = {
    "spark.driver.extraJavaOptions": f"{DRIVER_JAVA_OPTIONS} -XX:+UseParallelGC",
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.ui.enabled": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@pytest.fixture(scope="session")
def spark():
    from cdclake.spark import get_spark

    s = get_spark(master="local[2]", app_name="cdclake-tests", conf=TEST_CONF)
    yield s


def fixture_path(rel: str) -> Path:
    """Absolute path of a file under shared/fixtures; skips the test if shared/ is absent."""
    p = FIXTURES / rel
    if not p.exists():
        if os.environ.get("CI"):  # in CI shared/ is always beside the clone: a miss is a failure
            pytest.fail(f"fixture {rel} not found under {FIXTURES}")
        pytest.skip(f"fixture {rel} not found under {FIXTURES}")
    return p


_LICENSE = re.compile(r"^\s*/\*.*?\*/[^\S\n]*\n(?:[^\S\n]*\n)*", re.S)


def fixture_lines(rel: str, tmp_path: Path) -> Path:
    """Copy a JSON-lines fixture to ``tmp_path`` without the Apache licence comment block that
    Paimon's test files start with (``/* ... */``); returns the copy's path. Message lines are
    kept byte for byte."""
    src = fixture_path(rel)
    text = src.read_text(encoding="utf-8")
    text = _LICENSE.sub("", text, count=1)
    out = tmp_path / src.name
    out.write_text(text, encoding="utf-8")
    return out


def decode_file(spark, fmt: str, path: Path, **options):
    """Decode one JSON-lines file with the named format; returns (decoded DataFrame, list of
    event dicts in input order, list of reject rows)."""

    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.sources.files import read_lines

    raw = read_lines(spark, [str(path)])
    decoded = formats.get(fmt).decode(raw, DecodeOptions(**options))
    rows = decoded.orderBy("source_record.line").collect()
    events = [e.asDict(recursive=True) for r in rows for e in (r.events or [])]
    rejects = [r for r in rows if r.error_code is not None]
    return decoded, events, rejects


# -- Kafka: one real broker for the session (tests that use it carry @pytest.mark.kafka) ----------

_topic_counter = iter(range(1, 1_000_000))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A single-node Kafka broker (``cdclake.testing.kafka_broker.KafkaBroker``) on a free port
    of 127.0.0.1 with its data in a temporary folder, started once for the session (~3-5 s) and
    stopped at its end. Tests share it: each makes its own topics (``kafka_topic``)."""
    from cdclake.testing.kafka_broker import KafkaBroker, free_port

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"), free_port())
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_topic(kafka_broker, request):
    """A factory ``make(partitions=1) -> str`` that creates a new topic on the session broker
    and returns its name: the test's name (cut to the characters Kafka allows) and a counter
    unique in the session."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", request.node.name)[:200]

    def make(partitions: int = 1) -> str:
        return kafka_broker.create_topic(f"{base}-{next(_topic_counter)}", partitions=partitions)

    return make
