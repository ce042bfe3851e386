"""``cdclake convert`` and ``cdclake simulate``: every format into every format.

For each source format F a seeded workload is written in F (``cdclake simulate``), converted
into each format G, and the G file decoded: its events must be what G carries of the events F's
decoder gives (``G.carried(e)`` for each decoded F event, in order).

Spark work is batched (each job costs seconds here): each F file is decoded once; three pairs go
through ``cdclake convert`` itself (:data:`REAL_CONVERTS`: F -> the next format in
:data:`FORMATS` for a JSON source into the Avro format, the Avro source into JSON, a source
without keys on the wire into one with them; ``convert`` is the same code for every pair, the
decoders and encoders are what differ, and every one of them runs here); the other pairs are encoded
from F's decoded events as ``convert`` encodes them (``known_types``, commit order: decode order
is position then line, as ``convert`` sorts), and the G files of all sources are decoded in one
job (for SharePlex and TUPLE, whose decoders take keys from the configuration: of all sources
whose decoders give the same keys).
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path

import pytest

from cdclake import formats
from cdclake.cli import main
from cdclake.convert import SUFFIX, convert, simulate
from cdclake.formats.encoding import known_types
from cdclake.model import qualified_name
from tests.roundtrip import comparable, decode_files, decode_paths, floats_as_numbers

FORMATS = [d.name for d in formats.all_decoders()]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """One simulated workload per format: {format: path}."""
    folder = tmp_path_factory.mktemp("simulated")
    return {f: simulate(f, str(folder) + "/", events=40, tables=3, seed=7).output for f in FORMATS}


def differences(got: list[dict], want: list[dict], limit: int = 3) -> str:
    """A short text of where two event lists differ (field by field), '' when equal."""
    if got == want:
        return ""
    out = [f"{len(got)} events decoded, {len(want)} expected"]
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            fields = sorted(k for k in set(g) | set(w) if g.get(k) != w.get(k))
            out.append(f"  #{i} {w.get('kind')} {w.get('op')} {w.get('table')}: " + "; ".join(f"{k}: {g.get(k)!r} != {w.get(k)!r}" for k in fields))
            limit -= 1
            if not limit:
                break
    return "\n".join(out)


def keys_of(decoded_source: list[dict]) -> dict[str, list[str]]:
    """Formats without keys on the wire (SharePlex, TUPLE) are read with the keys configured,
    as a user would (--primary-key): the keys the source's decoder gives."""
    return {qualified_name(e["database"], e["schema"], e["table"]): e["primary_key"] for e in decoded_source if e["table"] and e["primary_key"]}


#: sources whose pair with the next format goes through ``cdclake convert`` itself: debezium-json
#: -> dts-avro, dts-avro -> qlik-json, shareplex-json -> canal-json (each real convert costs a
#: decode and a sort, seconds here)
REAL_CONVERTS = ("debezium-json", "dts-avro", "shareplex-json")


def real_convert_target(source: str) -> str | None:
    """The destination ``source`` goes to through ``cdclake convert`` itself (None: none)."""
    return FORMATS[(FORMATS.index(source) + 1) % len(FORMATS)] if source in REAL_CONVERTS else None


@pytest.fixture(scope="module")
def conversions(spark, sources, tmp_path_factory):
    """Every (source, destination) pair converted and decoded: ``{pair: (decoded source events,
    decoded destination events, destination rejects)}``, or ``{pair: error text}``."""
    folder = tmp_path_factory.mktemp("converted")
    decoded = {f: decode_paths(spark, f, [sources[f]]) for f in FORMATS}
    out: dict[tuple[str, str], object] = {}
    # destination files grouped by format and, for a format whose decoder reads keys from the
    # configuration (SharePlex, TUPLE), the keys their source's decoder gives: each group is
    # decoded in one job with those keys configured (the other decoders never read them)
    files: dict[tuple[str, str], dict[tuple[str, str], Path]] = {}
    for f in FORMATS:
        events, rejects = decoded[f]
        if rejects or not events:
            for g in FORMATS:
                out[(f, g)] = f"decoding the {f} source: {len(rejects)} rejects, {len(events)} events"
            continue
        keys = json.dumps(keys_of(events), sort_keys=True)
        for g in FORMATS:
            group = (g, keys if getattr(formats.get_encoder(g), "keys_configured", False) else "{}")
            path = folder / f"{f}-to-{g}{SUFFIX[formats.get_encoder(g).file_kind]}"
            try:
                if g == real_convert_target(f):
                    s = convert(spark, f, [sources[f]], g, str(path))
                    if (s.records_in, s.rejected) != (s.decoded, 0) or s.events != len(events):
                        out[(f, g)] = f"convert: {s}"
                        continue
                else:
                    encoder = formats.get_encoder(g)
                    encoder.write(encoder.encode(known_types(e) for e in events), path)
                files.setdefault(group, {})[(f, g)] = path
            except Exception as e:  # noqa: BLE001 -- report every pair, not only the first that raises
                out[(f, g)] = f"raised {type(e).__name__}: {e}\n" + "".join(traceback.format_tb(e.__traceback__)[-3:])
    for (g, keys), paths in files.items():
        try:
            by_file = decode_files(spark, g, list(paths.values()), primary_keys=json.loads(keys))
        except Exception as e:  # noqa: BLE001
            for pair in paths:
                out[pair] = f"decoding {g} raised {type(e).__name__}: {e}"
            continue
        for pair, path in paths.items():
            out[pair] = (decoded[pair[0]][0], *by_file[path])
    return out


def check_pair(got: list[dict], rejects: list, decoded_source: list[dict], dest: str) -> str:
    """'' when ``got`` (the ``dest`` file's events) is what ``dest`` carries of
    ``decoded_source``, else what differs."""
    keys = keys_of(decoded_source)
    if rejects:
        return f"decoding {dest} rejected {len(rejects)}: {[(r.error_code, r.error_message) for r in rejects[:3]]}"
    decoded_source = [known_types(e) for e in decoded_source]  # as convert hands them over
    encoder = formats.get_encoder(dest)
    encoder.encode(decoded_source)  # what convert wrote (carried may depend on it: Qlik's tableVersion)
    if getattr(encoder, "keys_configured", False):
        # the decoder gives every event of a table its configured key, truncates included
        name = lambda e: qualified_name(e["database"], e["schema"], e["table"]) if e["table"] else None  # noqa: E731
        decoded_source = [{**e, "primary_key": e["primary_key"] or keys.get(name(e))} for e in decoded_source]
    want = [floats_as_numbers(comparable(c)) for c in (encoder.carried(e) for e in decoded_source) if c is not None]
    got = [floats_as_numbers(comparable(e)) for e in got]
    if dest == "qlik-json":
        # every Qlik metadata message decodes to a ddl event positioned [0, tableVersion], ahead of
        # the changes, including those written before a table's first data message (no input
        # event of their own): data events compare in order, ddl events against the MDs written
        # (see tests/formats/qlik_json/test_roundtrip.py)
        mds = [floats_as_numbers(comparable(e)) for _i, _v, e in sorted(encoder.metadata, key=lambda m: (m[1], m[0]))]
        if [e for e in got if e["kind"] == "ddl"] != mds or not all(e in mds for e in want if e["kind"] == "ddl"):
            return "metadata messages: " + differences([e for e in got if e["kind"] == "ddl"], mds)
        got, want = ([e for e in evs if e["kind"] != "ddl"] for evs in (got, want))
    # heartbeats compare among themselves: DataWorks orders an MHEARTBEAT by its time, not by a
    # sequence shared with the changes (tests/formats/dataworks_json/test_roundtrip.py)
    beats = lambda evs: [e for e in evs if e["kind"] == "heartbeat"]  # noqa: E731
    rest = lambda evs: [e for e in evs if e["kind"] != "heartbeat"]  # noqa: E731
    return differences(rest(got), rest(want)) or differences(beats(got), beats(want))


@pytest.mark.parametrize("source", FORMATS)
def test_convert_into_every_format(conversions, source):
    failures = {}
    for dest in FORMATS:
        res = conversions[(source, dest)]
        if isinstance(res, str):
            failures[dest] = res
            continue
        decoded_source, got, rejects = res
        assert decoded_source
        try:
            failures[dest] = check_pair(got, rejects, decoded_source, dest)
        except Exception as e:  # noqa: BLE001 -- report every pair, not only the first that raises
            failures[dest] = f"raised {type(e).__name__}: {e}\n" + "".join(traceback.format_tb(e.__traceback__)[-3:])
    failures = {d: f for d, f in failures.items() if f}
    assert not failures, "\n".join(f"{source} -> {d}: {f}" for d, f in failures.items())


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
