"""The test harness itself (pure Python, no Spark): the scrambler, the example tagging, and the
fixed scrambled-ingest cases each format runs (tests/roundtrip.py)."""

from __future__ import annotations

import json
import random

import pytest

from cdclake import formats
from cdclake.model import qualified_name
from cdclake.simulate import Workload
from tests.roundtrip import (
    FORMATS,
    INGEST_CASES,
    KEYS_CONFIGURED,
    MAX_BATCHES,
    format_workload,
    keys_of,
    scramble,
    scramble_units,
    tag,
)


def test_every_format_with_an_encoder_has_a_case():
    assert sorted(FORMATS) == sorted(d.name for d in formats.all_decoders()) == sorted(INGEST_CASES)


def test_scramble_keeps_units_whole_and_in_order():
    starts = [0, 0, 2, 3, 3, 3, 6]
    for seed in range(50):
        parts = scramble_units(starts, random.Random(seed), 3, 0.4)
        assert 1 <= len(parts) <= 3 and all(parts)
        flat = [i for p in parts for i in p]
        assert set(flat) == set(range(7))  # every item delivered, some twice
        for p in parts:
            for s in set(starts):
                unit = [i for i, x in enumerate(starts) if x == s]
                # wherever a unit's first item is, the unit follows it whole, in order
                for j, i in enumerate(p):
                    if i == unit[0]:
                        assert p[j : j + len(unit)] == unit


@pytest.mark.parametrize("fmt", sorted(INGEST_CASES))
def test_ingest_cases_scramble_as_intended(fmt):
    """Each format's one scrambled ingest cuts into the most batches the format allows and
    delivers some units twice (what the hypothesis ingest properties drew at random)."""
    case = INGEST_CASES[fmt]
    events = format_workload(fmt, case.seed)
    enc = formats.get_encoder(fmt)
    encoded = enc.encode(events)
    parts = scramble(encoded, random.Random(case.shuffle_seed), case.batches, case.duplicate)
    assert len(parts) == case.batches == MAX_BATCHES.get(fmt, 3)
    flat = [i for p in parts for i in p]
    assert set(flat) == set(range(len(encoded.records)))
    assert len(flat) > len(encoded.records)  # duplicates
    assert len(set(encoded.unit_starts())) >= 6  # units enough to scramble (Qlik's are a table's DTs)
    assert min(map(len, parts)) > len(encoded.records) // 8  # no batch nearly empty
    ops = {e["op"] for e in events if e["kind"] == "data"}
    assert {"c", "u", "d"} <= ops
    if fmt in KEYS_CONFIGURED:
        assert keys_of(events, enc)


#: an update's halves on the wire: a record's (position, True for the before half) or None
HALVES = {
    "dataworks-json": lambda v: (v["payload"]["sequenceId"], v["payload"]["op"] == "UPDATE_BEFOR")
    if v["payload"]["op"] in ("UPDATE_BEFOR", "UPDATE_AFTER") else None,
    "datahub-tuple": lambda v: (v["_sequence_id_"], v["_before_image_"] == "Y") if v["_operation_type_"] == "U" else None,
}


@pytest.mark.parametrize("fmt", sorted(HALVES))
def test_ingest_cases_split_update_halves(fmt):
    """The scrambled ingest of a format that writes an update as two records delivers some
    updates' halves in different batches, the before half first for some and the after half
    first for others, so the case checks that they still make one update each
    (tests/apply/test_semantics.py has the unit case)."""
    case = INGEST_CASES[fmt]
    encoded = formats.get_encoder(fmt).encode(format_workload(fmt, case.seed))
    parts = scramble(encoded, random.Random(case.shuffle_seed), case.batches, case.duplicate)
    first: dict[str, dict[bool, int]] = {}  # position -> {before half?: the batch it first arrives in}
    for b, p in enumerate(parts):
        for i in p:
            h = HALVES[fmt](json.loads(encoded.records[i][1]))
            if h is not None:
                first.setdefault(h[0], {}).setdefault(h[1], b)
    pairs = [(v[True], v[False]) for v in first.values() if len(v) == 2]
    assert len(pairs) >= 3, "updates written as two halves"
    assert any(before < after for before, after in pairs), "before half in an earlier batch"
    assert any(before > after for before, after in pairs), "after half in an earlier batch"


def test_tag_separates_examples():
    events = Workload(1, events=40).generate().events
    a, b = tag(events, 0), tag(events, 1)
    names = lambda evs: {qualified_name(e["database"], e["schema"], e["table"]) for e in evs if e["table"]}  # noqa: E731
    assert names(a).isdisjoint(names(b)) and len(names(a)) == len(names(events))
    assert "shop_x0.sales_x0.order_lines" in names(a)
    assert [e for e in a if not e["table"]] == [e for e in events if not e["table"]]  # heartbeats untouched
    assert all({**x, "database": y["database"], "schema": y["schema"], "tx_id": y["tx_id"]} == y for x, y in zip(a, events))
    assert {e["tx_id"] for e in a if e["tx_id"]}.isdisjoint({e["tx_id"] for e in b if e["tx_id"]})  # separate sources


def test_oracle_keeps_one_row_of_an_image_a_rank_0_snapshot_read():
    """The oracle (tests/oracle.py) reads copies in a table without a key as the applier does
    (cdclake.apply.keyless, history._copy_ends): after a snapshot read ranked below the stream
    (a format without snapshot positions), an insert of the same image replaces its row, until
    a truncate; a Debezium snapshot read (by position) is one more copy. A snapshot read of an
    image ends the copies begun before its point. Pure Python."""
    from decimal import Decimal

    from tests.oracle import replay

    cols = [{"name": "v", "source_type": "varchar", "spark_type": "string", "precision": None, "scale": None, "nullable": True}]

    def ev(fmt, op, pos, v=None, before=None):
        return {"format": fmt, "kind": "data", "op": op, "database": "db", "schema": None, "table": "k", "before": before,
                "after": None if v is None else {"v": v}, "present": None, "primary_key": None, "columns": cols,
                "position": {"order": [Decimal(p) for p in pos], "text": str(pos)}, "ddl": None}

    def versions(events):
        history: dict = {}
        rows, _ = replay(events, history=history)
        return sorted(r["v"] for r in rows["db.k"]), [(v[0]["v"], v[1], v[2]) for v in history["db.k"]]

    # Canal INIT: the snapshot's place among streamed changes is unknown
    assert versions([ev("canal-json", "r", (0, 1), "x"), ev("canal-json", "c", (5,), "x"), ev("canal-json", "c", (6,), "x")]) == (
        ["x"], [("x", (0, 1), (5,)), ("x", (5,), (6,)), ("x", (6,), None)])
    # after a truncate, copies count again
    assert versions([ev("canal-json", "r", (0, 1), "x"), ev("canal-json", "t", (5,)), ev("canal-json", "c", (6,), "x"),
                     ev("canal-json", "c", (7,), "x")])[0] == ["x", "x"]
    # Debezium: snapshot rows order with the stream by position: two copies
    assert versions([ev("debezium-json", "r", (1,), "x"), ev("debezium-json", "c", (5,), "x")])[0] == ["x", "x"]
    # the same read again (one point) counts once (an atom: image, sign, point); a read at a later
    # point ends the copies before it and counts afresh
    assert versions([ev("debezium-json", "r", (1,), "x"), ev("debezium-json", "r", (1,), "x"), ev("debezium-json", "c", (2,), "x"),
                     ev("debezium-json", "r", (3,), "x")]) == (["x"], [("x", (1,), (3,)), ("x", (2,), (3,)), ("x", (3,), None)])
    # the source held three copies; after a rank-0 read the lake keeps one, so the second update
    # of the image finds none: it takes nothing and its after image lands
    x_to = lambda pos, new: ev("canal-json", "u", pos, new, before={"v": "x"})  # noqa: E731
    assert versions([ev("canal-json", "r", (0, 1), "x"), ev("canal-json", "c", (5,), "x"), ev("canal-json", "c", (6,), "x"),
                     x_to((7,), "y"), x_to((8,), "z"), ev("canal-json", "d", (9,), before={"v": "x"})]) == (
        ["y", "z"], [("x", (0, 1), (5,)), ("x", (5,), (6,)), ("x", (6,), (7,)), ("y", (7,), None), ("z", (8,), None)])
