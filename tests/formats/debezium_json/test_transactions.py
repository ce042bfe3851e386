"""Debezium's transaction topic through the real decoder and the CLI: a transaction whose END
(with its ``event_count``, seed 003 section 3.2.8) has not arrived is held back, shown by
``cdclake status``, and applied by the ingest that brings its END."""

from __future__ import annotations

import json

from cdclake import formats
from cdclake.pipeline import IngestConfig, ingest
from tests.oracle import replay
from tests.roundtrip import INGEST_CASES, assert_lake_matches, expected_tables, format_workload, keys_of
from tests.test_cli import run


def test_a_transaction_without_its_end_waits_for_it(spark, capsys, tmp_path):
    events = format_workload("debezium-json", INGEST_CASES["debezium-json"].seed)
    enc = formats.get_encoder("debezium-json")
    encoded = enc.encode(events)
    markers = enc.transaction_records(events)
    ends = [(k, v) for k, v in markers if json.loads(v)["payload"]["status"] == "END"]
    late = {json.loads(v)["payload"]["id"] for _, v in ends[-3:]}  # the last three transactions' ENDs come late
    first = [v for _, v in encoded.records if v is not None] + [v for _, v in markers if v not in {e for _, e in ends[-3:]}]
    second = [v for _, v in ends[-3:]]
    (tmp_path / "a.json").write_bytes(b"\n".join(first) + b"\n")
    (tmp_path / "b.json").write_bytes(b"\n".join(second) + b"\n")
    keys = {t: k for t, k in keys_of(events, enc).items() if k}
    lake = tmp_path / "lake"

    ingest(spark, IngestConfig("debezium-json", [str(tmp_path / "a.json")], str(lake), keys))
    code, out, _ = run(["status", "--target", str(lake), "--json"], capsys)
    st = json.loads(out)
    held = [e for e in events if e["kind"] == "data" and e.get("tx_id") in late and not enc._skip_reason(e)]
    assert code == 0 and (st["held_transactions"], st["held_events"]) == (3, len(held) + 3)  # + their BEGINs
    carried = [c for c in (enc.carried(e) for e in events if e.get("tx_id") not in late) if c is not None]
    rows, schemas = replay(carried, strict=False, subset=True)
    assert_lake_matches(spark, lake, rows, schemas)

    ingest(spark, IngestConfig("debezium-json", [str(tmp_path / "b.json")], str(lake), keys))
    assert json.loads(run(["status", "--target", str(lake), "--json"], capsys)[1])["held_transactions"] == 0
    rows, schemas = expected_tables(enc, events)
    assert_lake_matches(spark, lake, rows, schemas)

    # a connector restarted from older offsets sends one of the late transactions again, its
    # BEGIN and its changes but not (yet) its END: open in that ingest alone, but applied before,
    # so it is applied again at once (no change), not held until the timeout
    again = sorted(late)[0]
    payload = lambda v: (lambda d: d.get("payload", d) if isinstance(d, dict) else {})(json.loads(v))  # noqa: E731
    begin = [v for _, v in markers if payload(v)["status"] == "BEGIN" and payload(v)["id"] == again]
    changes = [v for _, v in encoded.records if v is not None and ((payload(v) or {}).get("transaction") or {}).get("id") == again]
    assert len(begin) == 1 and changes
    (tmp_path / "c.json").write_bytes(b"\n".join(begin + changes) + b"\n")
    summary = ingest(spark, IngestConfig("debezium-json", [str(tmp_path / "c.json")], str(lake), keys))
    assert (summary.held_transactions, summary.redelivered_transactions, summary.timed_out_transactions) == (0, 1, 0)
    assert json.loads(run(["status", "--target", str(lake), "--json"], capsys)[1])["held_transactions"] == 0
    assert_lake_matches(spark, lake, rows, schemas)
