"""The round-trip harness every format's property tests use.

* :func:`decode_round_trip`: encode canonical events with a format's encoder, write them to a
  file, read and decode that file with the format's decoder (plus the normalisation the
  pipeline applies: update halves paired), and return the decoded events in position order
  next to what the encoder says the format carries (:meth:`Encoder.carried`). The property is
  ``decoded == carried``: every field except ``format``, ``position`` and ``source_record``,
  and the positions must sort the events back into commit order.
* :func:`ingest_scrambled`: encode a simulator workload, scramble the records the way a
  transport may (units shuffled across and within batches, some duplicated), ingest the batches
  with the real pipeline into Delta tables, and compare every table with the pure-Python replay
  (:mod:`tests.oracle`) of the carried events; then ingest everything again (a replay) and
  compare again.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from cdclake import formats
from cdclake.formats.base import DecodeOptions
from cdclake.formats.encoding import Encoded, Encoder
from cdclake.normalize import pair_update_halves
from tests.oracle import read_lake_table, replay, same_rows

#: fields compared between carried and decoded events
COMPARED = (
    "kind", "op", "database", "schema", "table", "before", "after", "present", "primary_key",
    "columns", "tx_id", "tx_seq", "tx_last", "tx_size", "ddl", "event_time_ms",
)

SUFFIX = {"lines": ".jsonl", "avro": ".avro", "parquet": ".parquet"}

#: hypothesis examples per format of the decode round trip (seconds each) and of the scrambled
#: ingest (minutes each on a 2-core machine: several Delta commits per batch, twice over)
DECODE_EXAMPLES = 8
INGEST_EXAMPLES = 2
_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def decode_property(test):
    """Decorator: run ``test(..., seed)`` as a hypothesis property over workload seeds."""
    return settings(max_examples=DECODE_EXAMPLES, **_SETTINGS)(given(seed=st.integers(0, 2**32 - 1))(test))


def ingest_property(test):
    """Decorator: run ``test(..., seed, shuffle_seed, batches, duplicate)`` as a hypothesis
    property: a workload seed, a shuffle seed, 1-3 batches, up to 40 % of units delivered twice."""
    strategies = dict(
        seed=st.integers(0, 2**32 - 1),
        shuffle_seed=st.integers(0, 2**32 - 1),
        batches=st.integers(1, 3),
        duplicate=st.floats(0, 0.4),
    )
    # each batch ingest runs several Delta commits: 15-20 s idle, 1-2 min on a loaded machine;
    # an example ingests up to 3 batches twice, more than the suite's default per-test limit
    return pytest.mark.timeout(2700)(settings(max_examples=INGEST_EXAMPLES, **_SETTINGS)(given(**strategies)(test)))


def subset(encoder: Encoder, encoded: Encoded, indexes: list[int]) -> Encoded:
    """The records at ``indexes`` (in that order) as an :class:`Encoded` of their own."""
    return Encoded(records=[encoded.records[i] for i in indexes])


def decode_paths(spark, fmt: str, paths: list[Path], **options) -> tuple[list[dict], list]:
    """Decode files of ``fmt``: (events after update-half pairing, sorted by position then
    input line; reject rows)."""
    decoder = formats.get(fmt)
    raw = decoder.read_files(spark, [str(p) for p in paths])
    decoded = decoder.decode(raw, DecodeOptions(**options)).cache()
    try:
        rejects = decoded.where(F.col("error_code").isNotNull()).collect()
        events = decoded.where(F.col("error_code").isNull()).select(F.explode("events").alias("e")).select("e.*")
        rows = pair_update_halves(events).collect()
    finally:
        decoded.unpersist()
    out = [r.asDict(recursive=True) for r in rows]
    out.sort(key=lambda e: ([int(x) for x in (e["position"] or {}).get("order") or []], (e["source_record"] or {}).get("line") or 0))
    return out, rejects


def comparable(event: dict) -> dict:
    """The fields :data:`COMPARED` of an event; ``columns`` as a list of plain dicts."""
    out = {k: event.get(k) for k in COMPARED}
    if out["columns"] is not None:
        out["columns"] = [dict(c) for c in out["columns"]]
    return out


def floats_as_numbers(event: dict) -> dict:
    """``event`` (a :func:`comparable` dict) with the image values of float and double columns
    as Python floats: a double has more than one canonical text ('83300.00' written by one
    format, '83300.0' read back by another; the JVM 17's ``Double.toString`` is not always the
    shortest), so conversions between formats compare them as numbers."""
    floats = {c["name"] for c in event["columns"] or [] if c.get("spark_type") in ("float", "double")}
    if not floats:
        return event
    num = lambda img: img and {k: (float(v) if k in floats and v is not None else v) for k, v in img.items()}  # noqa: E731
    return {**event, "before": num(event["before"]), "after": num(event["after"])}


def decode_round_trip(spark, fmt: str, events: list[dict], tmp_path: Path, **options) -> tuple[list[dict], list[dict]]:
    """``(decoded, carried)`` for ``events`` (commit order): both lists of :func:`comparable`
    dicts in order. Fails if the decoder rejects any encoded record."""
    enc = formats.get_encoder(fmt)
    encoded = enc.encode(events)
    path = enc.write(encoded, tmp_path / f"all{SUFFIX[enc.file_kind]}")
    decoded, rejects = decode_paths(spark, fmt, [path], **options)
    assert not rejects, f"{fmt}: the decoder rejected encoded records: {[(r.error_code, r.error_message) for r in rejects[:3]]}"
    carried = [c for c in (enc.carried(e) for e in events) if c is not None]
    return [comparable(e) for e in decoded], [comparable(e) for e in carried]


def scramble(encoded: Encoded, rnd: random.Random, batches: int, duplicate: float) -> list[list[int]]:
    """Record indexes per batch: units (see :attr:`Encoded.units`) shuffled, a ``duplicate``
    fraction of them delivered twice, and cut into ``batches`` batches. Records of one unit
    stay together and in their order."""
    starts = encoded.unit_starts()
    units: dict[int, list[int]] = {}
    for i, s in enumerate(starts):
        units.setdefault(s, []).append(i)
    order = list(units.values())
    order += [u for u in order if rnd.random() < duplicate]
    rnd.shuffle(order)
    cuts = sorted(rnd.sample(range(1, len(order)), min(batches - 1, max(len(order) - 1, 0)))) if len(order) > 1 else []
    out, prev = [], 0
    for c in [*cuts, len(order)]:
        out.append([i for u in order[prev:c] for i in u])
        prev = c
    return [b for b in out if b]


def expected_tables(encoder: Encoder, events: list[dict]) -> tuple[dict, dict]:
    """The oracle: (rows, schemas) per table from replaying the carried events in commit order."""
    carried = [c for c in (encoder.carried(e) for e in events) if c is not None]
    return replay(carried, strict=False)


def assert_lake_matches(spark, target: Path, rows: dict, schemas: dict) -> None:
    from delta.tables import DeltaTable

    for name, expected in rows.items():
        path = f"{target}/{name}"
        if not DeltaTable.isDeltaTable(spark, path):
            assert expected == [], f"{name}: no Delta table but {len(expected)} rows expected"
            continue
        schema, got = read_lake_table(spark, path)
        assert schema == schemas[name], f"{name}: table schema {schema} != {schemas[name]}"
        same_rows(got, expected, schema)


def ingest_scrambled(
    spark, fmt: str, events: list[dict], tmp_path: Path, seed: int, *, batches: int = 2, duplicate: float = 0.2,
    replay_all: bool = True, **options,
) -> None:
    """Encode ``events``, scramble them (seeded), ingest batch by batch with the pipeline, and
    assert the Delta tables equal the oracle; with ``replay_all``, ingest every batch again and
    assert nothing changed."""
    from cdclake.pipeline import IngestConfig, ingest

    enc = formats.get_encoder(fmt)
    encoded = enc.encode(events)
    rnd = random.Random(seed)
    parts = scramble(encoded, rnd, batches, duplicate)
    files = [enc.write(subset(enc, encoded, idx), tmp_path / "in" / f"batch{k:03d}{SUFFIX[enc.file_kind]}") for k, idx in enumerate(parts)]
    target = tmp_path / "lake"
    cfg = dict(primary_keys=options.pop("primary_keys", {}), extra=options.pop("extra", {}))
    for f in files:
        s = ingest(spark, IngestConfig(format=fmt, inputs=[str(f)], target=str(target), **cfg))
        assert s.rejected == 0, f"{fmt}: rejects while ingesting {f.name}: {s.reject_codes}"
    rows, schemas = expected_tables(enc, events)
    assert_lake_matches(spark, target, rows, schemas)
    if replay_all:
        for f in files:
            ingest(spark, IngestConfig(format=fmt, inputs=[str(f)], target=str(target), **cfg))
        assert_lake_matches(spark, target, rows, schemas)
