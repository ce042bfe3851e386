"""The command's contract (DESIGN.md): exit codes, one-line errors, the summary."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cdclake.cli import main
from tests.conftest import REPO, fixture_path


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_unknown_format_lists_known_ones(capsys):
    code, _, err = run(["ingest", "--format", "nope", "--input", "x", "--target", "y"], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "UNKNOWN_FORMAT" in err and "canal-json" in err and "debezium-json" in err


def test_missing_input(capsys, tmp_path):
    code, _, err = run(["ingest", "--format", "canal-json", "--input", str(tmp_path / "none.txt"), "--target", str(tmp_path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "INPUT_NOT_FOUND" in err


def test_unwritable_target(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    src = fixture_path("canal-json/apache-flink/canal-data.txt")
    code, _, err = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(f / "sub")], capsys)
    assert code == 2 and err.count("\n") == 1 and "TARGET_NOT_WRITABLE" in err


def test_bad_primary_key_option(capsys, tmp_path):
    src = fixture_path("canal-json/apache-flink/canal-data.txt")
    code, _, err = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(tmp_path), "--primary-key", "t"], capsys)
    assert code == 2 and "BAD_OPTION" in err


def test_usage_error_is_one_line():
    r = subprocess.run([sys.executable, "-m", "cdclake.cli", "ingest", "--format"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("cdclake: error:")


def test_help_works():
    r = subprocess.run([sys.executable, "-m", "cdclake.cli", "ingest", "--help"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and "--primary-key" in r.stdout


def test_ingest_prints_summary_and_exits_zero_with_rejects(spark, capsys, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(fixture_path("canal-json/apache-flink/canal-data.txt").read_text() + "not json\n")
    code, out, _ = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(tmp_path / "lake")], capsys)
    assert code == 0
    assert "inventory.products2" in out
    assert "records in: 12  decoded: 11  rejected: 1  events: 21" in out
    assert "MALFORMED_JSON=1" in out
    # the same input with --scd-type 2: history tables whose current versions are the rows above
    history = tmp_path / "history"
    code, out, _ = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(history), "--scd-type", "2"], capsys)
    assert code == 0 and "records in: 12  decoded: 11  rejected: 1  events: 21" in out
    cols = ("id", "name", "description", "weight")
    for name in ("inventory.products2",):
        current = spark.read.format("delta").load(str(history / name)).where("_cdc_is_current").select(*cols).collect()
        assert sorted(current) == sorted(spark.read.format("delta").load(str(tmp_path / "lake" / name)).select(*cols).collect())
        assert spark.read.format("delta").load(str(history / name)).count() > len(current)  # with the older versions
    # a history table named with the other SCD type: one line, exit 2
    code, _, err = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(history), "--scd-type", "1"], capsys)
    assert code == 2 and err.count("\n") == 1 and "SCD_TYPE_MISMATCH" in err and "is SCD type 2" in err


def test_formats_table(capsys):
    code, out, _ = run(["formats"], capsys)
    assert code == 0 and "canal-json" in out and "dataworks-json" in out


def test_spark_settings_from_the_environment(monkeypatch):
    from cdclake.errors import CdclakeError
    from cdclake.spark import env_conf

    monkeypatch.setenv("CDCLAKE_SPARK_CONF", " spark.a=1\n spark.b=x=y ")
    assert env_conf() == {"spark.a": "1", "spark.b": "x=y"}
    monkeypatch.setenv("CDCLAKE_SPARK_CONF", "spark.a")
    with pytest.raises(CdclakeError) as e:
        env_conf()
    assert e.value.code == "BAD_OPTION"


@pytest.mark.parametrize(
    "args, code_and_text",
    [
        (["--kafka-bootstrap", "h:1", "--topic", "t"], "BAD_OPTION: a Kafka ingest needs --checkpoint"),
        (["--kafka-bootstrap", "h:1", "--checkpoint", "c"], "BAD_OPTION: give --topic T"),
        (["--kafka-bootstrap", "h:1", "--topic", "t", "--topic-pattern", "x.*", "--checkpoint", "c"], "BAD_OPTION: give --topic T"),
        (["--kafka-bootstrap", "h:1", "--topic", "t", "--checkpoint", "c", "--available-now", "--trigger-interval", "1s"],
         "BAD_OPTION: give --available-now or --trigger-interval"),
        (["--kafka-bootstrap", "h:1", "--topic", "t", "--checkpoint", "c", "--trigger-interval", "soon"], "BAD_OPTION: --trigger-interval 'soon'"),
        (["--kafka-bootstrap", "h:1", "--topic", "t", "--checkpoint", "c", "--kafka-option", "novalue"], "BAD_OPTION: --kafka-option 'novalue'"),
        (["--kafka-bootstrap", "h:1", "--topic", "t", "--checkpoint", "c", "--max-offsets-per-trigger", "0"], "BAD_OPTION: --max-offsets-per-trigger"),
        (["--topic", "t", "--input", "x"], "BAD_OPTION: --topic needs --kafka-bootstrap"),
        (["--input", "x", "--snapshot-removes-missing"], "BAD_OPTION: --snapshot-removes-missing: canal-json marks no end of a snapshot"),
    ],
)
def test_stream_options_are_checked_before_spark_starts(capsys, tmp_path, args, code_and_text):
    code, _, err = run(["ingest", "--format", "canal-json", "--target", str(tmp_path / "lake"), *args], capsys)
    assert code == 2 and err.count("\n") == 1 and code_and_text in err, err


def test_trigger_intervals_and_kafka_options():
    from cdclake.cli import assignments, trigger_interval
    from cdclake.errors import CdclakeError
    from cdclake.sources.kafka import kafka_options

    assert [trigger_interval(t) for t in ("10s", "500ms", "1m", "2h", "3 seconds")] == [
        "10 seconds", "500 milliseconds", "1 minutes", "2 hours", "3 seconds",
    ]
    opts = assignments(["security.protocol=SASL_SSL", " kafka.sasl.mechanism =PLAIN", "sasl.jaas.config=a=b;"], "--kafka-option")
    assert kafka_options(opts) == {
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": "a=b;",
    }
    for bad in ("no-equals", "=value"):
        with pytest.raises(CdclakeError, match=f"--kafka-option '{bad}' is not NAME=VALUE"):
            assignments([bad], "--kafka-option")


def test_status_of_a_target_given_as_a_uri(spark, capsys, tmp_path):
    """The target as a Hadoop file-system URI (``file://``, the code path of ``s3a://`` and
    ``abfss://``): the layout marker, write probe and status go through Hadoop's FileSystem;
    the tables land in the same folder a plain path names."""
    src = tmp_path / "in.txt"
    src.write_text(fixture_path("canal-json/apache-flink/canal-data.txt").read_text() + "not json\n")
    uri = f"file://{tmp_path}/lake/"
    assert run(["ingest", "--format", "canal-json", "--input", str(src), "--target", uri, "--quiet"], capsys)[0] == 0
    assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["_cdclake", "inventory.products2"]
    assert (tmp_path / "lake/_cdclake/layout.json").exists()
    code, out, _ = run(["status", "--target", uri, "--json"], capsys)
    assert code == 0
    import json

    st = json.loads(out)
    assert st["target"] == uri.rstrip("/")
    assert st["rejects"] == {"MALFORMED_JSON": 1} and st["held_transactions"] == 0
    t, ddl_only = st["tables"]
    # canal-data.txt: 9 inserts, 2 more, one of them deleted, two of the first deleted; the
    # CREATE TABLE of user02 makes an empty table
    assert (t["table"], t["rows"], t["last_position"]) == ("inventory.products2", 8, "1589374013000:12:1")
    assert t["last_event_time_ms"] == 1589374013000 and t["sources"] == [f"file:{src}"]
    assert (ddl_only["table"], ddl_only["rows"], ddl_only["last_position"]) == ("inventory.user02", 0, "1589373566000:13")
    code, out, _ = run(["status", "--target", str(tmp_path / "lake")], capsys)
    assert code == 0 and "inventory.products2" in out and "rejects: MALFORMED_JSON=1" in out
    code, _, err = run(["status", "--target", str(tmp_path / "nothing")], capsys)
    assert code == 2 and "INPUT_NOT_FOUND" in err
    code, _, err = run(["status", "--target", f"file://{tmp_path}/nothing"], capsys)
    assert code == 2 and "INPUT_NOT_FOUND" in err


def test_a_target_of_another_layout_is_refused_in_one_line(spark, capsys, tmp_path):
    # a target written by a newer cdclake (another _cdclake layout): refused before any write
    lake = tmp_path / "lake"
    (lake / "_cdclake").mkdir(parents=True)
    (lake / "_cdclake" / "layout.json").write_text('{"layout": 99}')
    src = fixture_path("canal-json/apache-flink/canal-data.txt")
    code, _, err = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(lake)], capsys)
    assert code == 2 and err.count("\n") == 1 and "TARGET_LAYOUT" in err and "99" in err
    assert sorted(p.name for p in lake.rglob("*")) == ["_cdclake", "layout.json"]


@pytest.mark.parametrize("args", [["--max-record-bytes", "0"], ["--max-columns", "-1"], ["--transaction-timeout-ms", "-1"]])
def test_limits_must_be_positive(capsys, tmp_path, args):
    src = fixture_path("canal-json/apache-flink/canal-data.txt")
    code, _, err = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(tmp_path), *args], capsys)
    assert code == 2 and err.count("\n") == 1 and "BAD_OPTION" in err and args[0] in err


def test_names_from_messages_are_printed_as_text(capsys):
    # rich markup in a table name would be read as markup (``[/x]`` raises), an ANSI escape
    # would reach the terminal: both are shown as plain, visible text
    from cdclake.apply.delta_table import ApplyResult
    from cdclake.cli import _print_summary
    from cdclake.pipeline import IngestSummary

    s = IngestSummary("canal-json", tables=[
        ApplyResult("db.[/x][bold]t", inserted=1, key=["[red]k"]),
        ApplyResult("db.\x1b[31mred", failed="TABLE_FAILED: [/] no", failed_events=2),
    ])
    _print_summary(s, quiet=False)
    out = capsys.readouterr().out
    assert "db.[/x][bold]t" in out and "[red]k" in out
    assert "\x1b[31m" not in out and "db.\\x1b[31mred" in out
    assert "table failed: db.\\x1b[31mred: 2 events sent to the rejects table (TABLE_FAILED: [/] no)" in out


def test_a_target_being_written_by_another_process_is_refused_in_one_line(capsys, tmp_path):
    # one writer per target (cdclake.targets.WriterLock): a live process's lock refuses a second
    # ingest before it writes anything (a lock of a dead process is taken over: tests/test_hostile.py)
    import json

    lake = tmp_path / "lake"
    (lake / "_cdclake").mkdir(parents=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        import socket

        lock = {"pid": other.pid, "host": socket.gethostname(), "id": "x", "started_ms": 0, "heartbeat_ms": 0}
        (lake / "_cdclake" / "writer.lock").write_text(json.dumps(lock))
        src = fixture_path("canal-json/apache-flink/canal-data.txt")
        code, _, err = run(["ingest", "--format", "canal-json", "--input", str(src), "--target", str(lake)], capsys)
    finally:
        other.kill()
        other.wait()
    assert code == 2 and err.count("\n") == 1 and "TARGET_LOCKED" in err and f"process {other.pid}" in err
    assert sorted(p.name for p in lake.rglob("*")) == ["_cdclake", "writer.lock"]


def test_snapshot_removes_missing_through_the_command(spark, capsys, tmp_path):
    # --snapshot-removes-missing from the command line to the table: run 1 streams rows 1 and 2;
    # run 2 reads a snapshot (Debezium MySQL read events at the binlog position they were taken
    # at, the last one marked last_in_data_collection, as in memiiso's
    # serde-unnested-order-val-withschema.json) holding rows 1 and 3: row 2 is removed
    import json

    def rec(op, oid, pos, snapshot="false"):
        return json.dumps({
            "before": None, "after": {"order_number": oid, "purchaser": 1000 + oid}, "op": op, "ts_ms": 1718461481941,
            "source": {"connector": "mysql", "name": "testc", "ts_ms": 1718461481000, "snapshot": snapshot, "db": "inventory",
                       "table": "orders", "file": "mysql-bin.000003", "pos": pos, "row": 0}})

    (tmp_path / "stream.json").write_text(rec("c", 1, 100) + "\n" + rec("c", 2, 200) + "\n")
    (tmp_path / "snapshot.json").write_text(rec("r", 1, 824, "true") + "\n" + rec("r", 3, 824, "last_in_data_collection") + "\n")
    lake = tmp_path / "lake"
    common = ["ingest", "--format", "debezium-json", "--target", str(lake), "--primary-key", "inventory.orders=order_number"]
    assert run([*common, "--input", str(tmp_path / "stream.json")], capsys)[0] == 0
    code, out, _ = run([*common, "--input", str(tmp_path / "snapshot.json"), "--snapshot-removes-missing"], capsys)
    assert code == 0 and "records in: 2  decoded: 2  rejected: 0  events: 3" in out, out
    rows = spark.read.format("delta").load(str(lake / "inventory.orders")).select("order_number", "purchaser", "_cdc_op").collect()
    assert sorted(tuple(r) for r in rows) == [(1, 1001, "r"), (3, 1003, "r")]
