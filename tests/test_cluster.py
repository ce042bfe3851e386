"""The Kafka ingest on a Spark standalone cluster (issue 9, "On a cluster"): a master and two
workers started on 127.0.0.1 from the PySpark installation (``cdclake.testing.spark_cluster``),
``cdclake ingest --master spark://...`` run as a separate process whose tasks run in the
workers' executors, and the tables it writes equal those of the same messages ingested from a
file in local mode (and the oracle's).

The driver (the CLI process) and the executors share no folder but the target and the
checkpoint (local paths under tmp: one machine). The jars reach the executors through
``spark.jars`` (served by the driver, fetched into each executor's work folder).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from cdclake import formats
from cdclake.pipeline import IngestConfig, ingest
from tests.conftest import REPO
from tests.oracle import canon, read_lake_table
from tests.roundtrip import assert_lake_matches, expected_tables, format_workload

pytestmark = pytest.mark.kafka

FMT = "canal-json"
#: the simulator seed of the workload (the canal-json scrambled ingest's, INGEST_CASES)
SEED = 11
#: what the CLI driver may use of the cluster: one executor of 1 core and 1 GiB per worker;
#: plus the suite's settings for small data (tests/conftest.py TEST_CONF), no semantics
CLUSTER_CONF = (
    "spark.executor.memory=1g spark.executor.cores=1 spark.cores.max=2 spark.driver.host=127.0.0.1 "
    "spark.databricks.delta.snapshotPartitions=2 spark.sql.adaptive.enabled=false"
)
#: the CLI run's limit (s): it takes about a minute on 2 idle cores (executor JVMs start cold)
CLI_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone cluster of two workers of 1 core and 1 GiB each, for this module."""
    from cdclake.testing.spark_cluster import StandaloneCluster

    c = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores_per_worker=1, memory_per_worker="1g")
    c.start(timeout_s=90)
    try:
        yield c
    finally:
        c.stop()


def _records(spark, path) -> list[tuple]:
    """The file's raw records as (key, value) pairs, in file order (as the file reader sees them)."""
    raw = formats.get(FMT).read_files(spark, [str(path)])
    rows = raw.orderBy("source_record.file", "source_record.line").select("key", "value").collect()
    return [(None if r["key"] is None else bytes(r["key"]), None if r["value"] is None else bytes(r["value"])) for r in rows]


def _completed_apps(cluster, timeout_s: float = 30) -> list[dict]:
    """The master's completed applications named ``cdclake``, once there is one (the master
    learns of the end of an application from its driver's goodbye or lost connection, a moment
    after the driver process exits) or ``timeout_s`` seconds have passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        apps = [a for a in cluster.status()["completedapps"] if a["name"] == "cdclake"]
        if apps or time.monotonic() >= deadline:
            return apps
        time.sleep(0.2)


def _tables(target) -> set[str]:
    return {p.name for p in target.iterdir() if p.is_dir() and not p.name.startswith("_")}


def test_a_kafka_ingest_on_a_standalone_cluster_equals_the_local_file_ingest(spark, kafka_broker, kafka_topic, cluster, tmp_path):
    events = format_workload(FMT, SEED)
    enc = formats.get_encoder(FMT)
    path = enc.write(enc.encode(events), tmp_path / "in.jsonl")
    records = _records(spark, path)
    topic = kafka_topic(partitions=2)
    # both partitions hold records, so that the batch reads in two tasks (the order across
    # partitions is lost: canal-json's positions, es and id, restore it)
    kafka_broker.produce(topic, [(k, v, i % 2) for i, (k, v) in enumerate(records)])

    target, checkpoint = tmp_path / "cluster-lake", tmp_path / "cluster-ckpt"
    env = {
        **os.environ,
        "CDCLAKE_DRIVER_MEMORY": "1g",
        "CDCLAKE_SHUFFLE_PARTITIONS": "2",
        "CDCLAKE_SPARK_CONF": CLUSTER_CONF,
        "SPARK_LOCAL_IP": "127.0.0.1",  # the driver listens where the executors can reach it
        "PYSPARK_PYTHON": sys.executable,
    }
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    cmd = [
        sys.executable, "-m", "cdclake.cli", "ingest", "--format", FMT, "--kafka-bootstrap", kafka_broker.bootstrap,
        "--topic", topic, "--target", str(target), "--checkpoint", str(checkpoint), "--available-now",
        "--master", cluster.master_url, "--quiet",
    ]
    t0 = time.monotonic()
    with open(tmp_path / "cli.out", "w+") as out, open(tmp_path / "cli.err", "w+") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        try:
            # meanwhile the same messages from the file, in local mode (the session's local[2]
            # Spark): the cluster's driver spends much of its time waiting for its executors
            local = tmp_path / "local-lake"
            ingest(spark, IngestConfig(FMT, [str(path)], str(local)))
            code = proc.wait(timeout=max(1.0, CLI_TIMEOUT_S - (time.monotonic() - t0)))
        finally:
            if proc.poll() is None:  # the CLI and its driver JVM
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        took = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    assert code == 0, f"exit {code} after {took:.0f} s\nstdout:\n{stdout}\nstderr:\n{stderr[-6000:]}\n{cluster.log_tails()}"

    # the application ran on the cluster: the master lists it as completed, each worker
    # launched an executor for it (a folder of the application in its work folder), and the
    # executors ran tasks (Spark's executor log, INFO by default, names each task it runs)
    apps = _completed_apps(cluster)
    assert len(apps) == 1, apps
    app_id = apps[0]["id"]
    executor_logs = []
    for i in range(cluster.workers):
        app_dir = cluster.work_dir(i) / app_id
        assert app_dir.is_dir(), f"worker {i} ran no executor of {app_id}: {list(cluster.work_dir(i).iterdir())}"
        # the jars of spark.jars reached the executor from the driver (fetched into its folder)
        assert list(app_dir.glob("*/delta-spark_*.jar")), f"no Delta jar in {app_dir}"
        executor_logs += [p.read_text(errors="replace") for p in app_dir.glob("*/stderr")]
    tasks = sum(log.count("Running task") for log in executor_logs)
    assert tasks > 0, "no task ran in the workers' executors"

    names = _tables(local)
    assert names and _tables(target) == names
    for name in sorted(names):
        got_schema, got = read_lake_table(spark, str(target / name))
        want_schema, want = read_lake_table(spark, str(local / name))
        assert got_schema == want_schema, name
        key = lambda row: canon(row, want_schema)  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key), name
    rows, schemas = expected_tables(enc, events)
    assert_lake_matches(spark, target, rows, schemas)
    changes = [spark.read.format("delta").load(str(t / "_cdclake/changelog")).count() for t in (target, local)]
    assert changes[0] == changes[1] > 0
