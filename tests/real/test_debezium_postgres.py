"""What the real Debezium PostgreSQL connector writes lands exactly (issue 50).

PostgreSQL from Debian's packages and Debezium's PostgreSQL connector 3.6.1.Final in Kafka
Connect standalone (``tests/real/conftest.py``) capture a database; the workload
(:mod:`tests.real.postgres_workload`) writes its rows before the initial snapshot and streams
transactions after it; ``cdclake``'s streaming ingest (``--available-now``) reads the topics;
each target table, read with delta-rs, equals the database's own rows, typed
(:mod:`tests.real.postgres_types`); an ingest with nothing new adds nothing; nothing is held.

Connector settings: ``plugin.name=pgoutput``, the JSON converter with schemas,
``provide.transaction.metadata=true``, ``skipped.operations=none`` (Debezium skips TRUNCATE by
default), ``snapshot.mode=initial``, the rest Debezium's defaults (``decimal.handling.mode=
precise``, ``time.precision.mode=adaptive``, ``binary.handling.mode=bytes``,
``interval.handling.mode=numeric``, the default unavailable-value placeholder).

CI runs the bounded workload (scale 1); ``bin/test --thorough`` a longer one
(``HYPOTHESIS_PROFILE=thorough``: scale 10, the seed from ``CDCLAKE_REAL_SEED`` or random,
printed).
"""

from __future__ import annotations

import os
import random

import pytest

from cdclake.stream import StreamConfig, run_stream
from cdclake.sources.kafka import KafkaInput
from cdclake.status import target_status
from tests.real.postgres_types import database_rows, mapping, target_rows, target_types
from tests.real.postgres_workload import Workload

pytestmark = [pytest.mark.kafka, pytest.mark.real]

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def _workload() -> Workload:
    if not THOROUGH:
        return Workload(seed=50, scale=1)
    seed = int(os.environ.get("CDCLAKE_REAL_SEED") or random.randrange(1 << 30))
    print(f"real workload seed {seed} (CDCLAKE_REAL_SEED={seed} repeats it)")
    return Workload(seed=seed, scale=10)


def _ingest(spark, capture, target, checkpoint):
    config = StreamConfig(
        "debezium-json", str(target), str(checkpoint),
        KafkaInput(capture.broker.bootstrap, topic_pattern=capture.topic_pattern), available_now=True,
    )
    return run_stream(spark, config, out=False)


def _assert_tables_equal_the_database(capture, target, tables=None, modes=None) -> None:
    with capture.pg.connect(capture.db, autocommit=True) as conn:
        tables = tables or [r[0] for r in conn.execute(
            "select table_name from information_schema.tables where table_schema = 'public' order by 1")]
        for table in tables:
            columns, want = database_rows(conn, "public", table, modes)
            path = target / f"{capture.db}.public.{table}"
            names, got = target_rows(path, columns, modes)
            assert names == [n for n, _ in columns], f"{table}: target columns {names}, database {columns}"
            types = target_types(path)
            assert types == {n: mapping(t, modes).spark_type for n, t in columns}, f"{table}: target types"
            assert got == want, f"{table}: target rows differ from the database's\n target:   {got}\n database: {want}"


def test_the_real_connector_s_tables_equal_the_database(spark, debezium, tmp_path):
    work = _workload()
    capture = debezium(work.create)
    target, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"

    # batch 1: the snapshot and the streamed transactions after it
    work.stream(capture.pg, capture.db)
    capture.caught_up(work.mark(capture.pg, capture.db))
    s1 = _ingest(spark, capture, target, checkpoint)
    assert s1.totals.rejected == 0, s1.totals.reject_codes
    _assert_tables_equal_the_database(capture, target)

    # batch 2: column DDL (Debezium's PostgreSQL connector sends none: the schemas change)
    work.ddl(capture.pg, capture.db)
    capture.caught_up(work.mark(capture.pg, capture.db))
    s2 = _ingest(spark, capture, target, checkpoint)
    assert s2.totals.rejected == 0, s2.totals.reject_codes
    _assert_tables_equal_the_database(capture, target)

    # nothing held, nothing given up; an ingest with nothing new adds nothing
    status = target_status(spark, str(target))
    assert (status["held_transactions"], status["held_events"], status["timed_out_transactions"], status["held"]) == (0, 0, 0, [])
    versions = {t["table"]: t["delta_version"] for t in status["tables"]}
    s3 = _ingest(spark, capture, target, checkpoint)
    assert (s3.batches, s3.totals.records_in) == (0, 0)
    assert {t["table"]: t["delta_version"] for t in target_status(spark, str(target))["tables"]} == versions


#: value modes other than Debezium's defaults, one connector with all of them
MODES = {"decimal.handling.mode": "string", "time.precision.mode": "connect", "binary.handling.mode": "hex",
         "interval.handling.mode": "string"}


@pytest.mark.skipif(not THOROUGH, reason="other value modes: bin/test --thorough (CI runs the defaults)")
def test_other_value_modes_give_their_documented_columns(spark, debezium, tmp_path):
    # numerics as text, Kafka Connect's millisecond times, bytea as hex, intervals as ISO 8601
    work = _workload()
    capture = debezium(work.create, {**MODES, "table.include.list": "public.types_all,public.marker",
                                     "publication.autocreate.mode": "filtered"})
    for _ in range(5 * work.scale):
        work.random_transaction(capture.pg, capture.db)
    capture.caught_up(work.mark(capture.pg, capture.db))
    s = _ingest(spark, capture, tmp_path / "lake", tmp_path / "checkpoint")
    assert s.totals.rejected == 0, s.totals.reject_codes
    _assert_tables_equal_the_database(capture, tmp_path / "lake", ["types_all"], MODES)
