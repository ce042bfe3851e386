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
