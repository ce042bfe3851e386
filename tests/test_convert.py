"""``cdclake convert`` and ``cdclake simulate``: every format into every format.

For each source format F a seeded workload is written in F (``cdclake simulate``), converted
into each format G (``cdclake convert``), and the G file decoded: its events must be what G
carries of the events F's decoder gives (``G.carried(e)`` for each decoded F event, in order).
"""

from __future__ import annotations

import json

import pytest

from cdclake import formats
from cdclake.cli import main
from cdclake.convert import convert, simulate
from tests.roundtrip import comparable, decode_paths

FORMATS = [d.name for d in formats.all_decoders()]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """One simulated workload per format: {format: path}."""
    folder = tmp_path_factory.mktemp("simulated")
    return {f: simulate(f, str(folder) + "/", events=40, tables=3, seed=7).output for f in FORMATS}


@pytest.mark.parametrize("source", FORMATS)
def test_convert_into_every_format(spark, tmp_path, sources, source):
    decoded_source, rejects = decode_paths(spark, source, [sources[source]])
    assert not rejects and decoded_source
    for dest in FORMATS:
        s = convert(spark, source, [sources[source]], dest, str(tmp_path / dest) + "/")
        assert (s.records_in, s.rejected) == (s.decoded, 0), (source, dest)
        assert s.events == len(decoded_source)
        got, rejects = decode_paths(spark, dest, [s.output])
        assert not rejects, (source, dest, [r.error_code for r in rejects[:3]])
        encoder = formats.get_encoder(dest)
        want = [comparable(c) for c in (encoder.carried(e) for e in decoded_source) if c is not None]
        assert [comparable(e) for e in got] == want, f"{source} -> {dest}"


def test_cli_simulate_then_convert(spark, tmp_path, capsys):
    out = tmp_path / "sim.jsonl"
    assert main(["simulate", "--format", "canal-json", "--events", "25", "--seed", "3", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"canal-json: {out}" in printed and "events:" in printed
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines and all(json.loads(x)["type"] for x in lines)
    conv = tmp_path / "deb.jsonl"
    assert main(["convert", "--from", "canal-json", "--to", "debezium-json", "--input", str(out), "--output", str(conv)]) == 0
    printed = capsys.readouterr().out
    assert "canal-json -> debezium-json" in printed and "rejected: 0" in printed and "not carried by debezium-json:" in printed
    assert conv.exists() and conv.stat().st_size > 0


def test_convert_keeps_rejects_beside_the_output(spark, tmp_path):
    src = tmp_path / "mixed.jsonl"
    good = simulate("canal-json", str(tmp_path / "good.jsonl"), events=5, tables=1, seed=1).output
    src.write_text(open(good, encoding="utf-8").read() + "{not json\n", encoding="utf-8")
    s = convert(spark, "canal-json", [str(src)], "dataworks-json", str(tmp_path / "out.jsonl"))
    assert s.rejected == 1 and s.records_in == s.decoded + 1 and s.reject_codes == {"MALFORMED_JSON": 1}
    rej = [json.loads(x) for x in open(s.rejects_file, encoding="utf-8")]
    assert [r["error_code"] for r in rej] == ["MALFORMED_JSON"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["convert", "--from", "nope", "--to", "canal-json", "--input", "x", "--output", "y"], "unknown format 'nope'"),
        (["convert", "--from", "canal-json", "--to", "auto", "--input", "x", "--output", "y"], "--to needs a format name"),
        (["simulate", "--format", "canal-json", "--events", "-1", "--output", "y"], "--events must be zero or more"),
        (["simulate", "--format", "nope", "--output", "y"], "unknown format 'nope'"),
    ],
)
def test_bad_command_lines_fail_in_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
