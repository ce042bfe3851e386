"""Fuzz inputs for every decoder and one Spark job that decodes them all (issue 11); used by
``tests/test_fuzz.py`` and ``bench/fuzz.py``."""

from __future__ import annotations

import random

from pyspark.sql import functions as F

from cdclake import formats
from cdclake.formats.base import DecodeOptions
from cdclake.model import RAW_SCHEMA
from cdclake.simulate import Workload
from cdclake.testing.mutate import mutate, special_values


def valid_values(fmt: str, seed: int = 7, events: int = 40) -> list[bytes]:
    """Valid record values of format ``fmt``: its encoder over a seeded simulated workload
    (:class:`cdclake.simulate.Workload`, two tables); Kafka tombstones left out."""
    encoded = formats.get_encoder(fmt).encode(Workload(seed, tables=2, events=events).generate().events)
    return [v for _, v in encoded.records if v is not None]


def fuzz_inputs(
    rnd: random.Random,
    per_format: int,
    real: dict[str, list[bytes]] | None = None,
    big_bytes: int = 10 * 1024 * 1024,
    extra: dict[str, list[bytes]] | None = None,
) -> dict[str, list[bytes]]:
    """Per decoder name: ``per_format`` damaged values (:func:`cdclake.testing.mutate.mutate` of
    a valid value: an encoder's, or one of ``real``), a few valid ones, the fixed hostile values
    (:func:`special_values`, with one value of ``big_bytes`` bytes) and ``extra``."""
    out: dict[str, list[bytes]] = {}
    specials = special_values(big_bytes)
    for d in formats.all_decoders():
        pool = valid_values(d.name, seed=rnd.randrange(1000)) + list((real or {}).get(d.name, []))
        values = [mutate(rnd.choice(pool), rnd)[1] for _ in range(per_format)]
        out[d.name] = values + rnd.sample(pool, min(5, len(pool))) + specials + list((extra or {}).get(d.name, []))
    return out


def decode_mutated(spark, inputs: dict[str, list[bytes]], keep: list[tuple[str, bytes]] = ()):
    """Decode ``inputs`` (decoder name -> values) with every decoder at once: one union, one
    Spark job for the counts, one for the kept rows.

    Returns ``(counts, kept)``: ``counts[fmt][error_code or None]`` = records; ``kept[(fmt,
    value)]`` = the decoded rows (DECODED_SCHEMA) of the values named in ``keep``.
    """
    def decoded(values_by_fmt):
        frames = []
        for fmt, values in values_by_fmt.items():
            rows = [(None, v, ("fuzz", 0, i, None, None, i + 1, None)) for i, v in enumerate(values)]
            raw = spark.createDataFrame(rows, RAW_SCHEMA)
            frames.append(formats.get(fmt).decode(raw, DecodeOptions()).withColumn("fmt", F.lit(fmt)))
        union = frames[0]
        for f in frames[1:]:
            union = union.unionByName(f)
        return union

    counts: dict[str, dict] = {}
    for r in decoded(inputs).groupBy("fmt", "error_code").count().collect():
        counts.setdefault(r["fmt"], {})[r["error_code"]] = r["count"]
    kept: dict = {}
    if keep:
        by_fmt: dict[str, list[bytes]] = {}
        for fmt, value in keep:
            by_fmt.setdefault(fmt, []).append(value)
        for r in decoded(by_fmt).collect():
            kept.setdefault((r["fmt"], bytes(r["raw_value"])), []).append(r)
    return counts, kept
