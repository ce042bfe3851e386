"""Format conversion and simulated workloads: canonical events -> any wire format.

* :func:`convert`: files of format F -> decode (Spark SQL, the same decoders as ``ingest``) ->
  canonical events in commit order -> the encoder of format G -> one output file. What G cannot
  carry is counted in :attr:`ConvertSummary.dropped`; records F's decoder rejects are written to
  ``<output>.rejects.jsonl`` (raw value as base64, where it came from, the reject code), so
  records in = converted + rejected.
* :func:`simulate`: a seeded :class:`cdclake.simulate.Workload` encoded in any format.

Where code runs: decoding is Spark; the decoded events are streamed to the driver
(``toLocalIterator``, one partition at a time) and encoded there in Python, so ``convert`` suits
files that fit a driver's memory after encoding (the encoders hold the encoded records in a list).
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import functions as F

from cdclake import formats
from cdclake.formats.base import DecodeOptions, explode_events
from cdclake.formats.encoding import Encoded, Encoder, known_types
from cdclake.normalize import pair_update_halves
from cdclake.pipeline import detect_format
from cdclake.simulate import Workload
from cdclake.sources.files import resolve_inputs

#: file name suffix per encoder file kind
SUFFIX = {"lines": ".jsonl", "avro": ".avro", "parquet": ".parquet"}


@dataclass
class ConvertSummary:
    """What a conversion did. ``records_in == decoded + rejected``; ``events`` canonical events
    went to the encoder (after pairing split update halves into one update) and ``records_out``
    wire records were written; ``dropped`` counts what the target
    format could not carry (reason -> events or fields)."""

    source_format: str
    target_format: str
    output: str
    records_in: int = 0
    decoded: int = 0
    rejected: int = 0
    events: int = 0
    records_out: int = 0
    reject_codes: dict[str, int] = field(default_factory=dict)
    dropped: Counter = field(default_factory=Counter)
    rejects_file: str | None = None


def output_file(output: str | Path, encoder: Encoder, stem: str) -> Path:
    """``output`` itself, or ``output/<stem><suffix>`` when ``output`` is an existing folder or
    ends with a path separator."""
    p = Path(output)
    if p.is_dir() or str(output).endswith(("/", "\\")):
        return p / f"{stem}{SUFFIX[encoder.file_kind]}"
    return p


def convert(
    spark,
    source_format: str,
    inputs: list[str],
    target_format: str,
    output: str,
    options: DecodeOptions | None = None,
) -> ConvertSummary:
    """Convert files of ``source_format`` (or ``auto``) into one file of ``target_format``.

    Events are encoded in commit order: sorted by ``position.order``, then input file and line.

    Raises:
        CdclakeError: UNKNOWN_FORMAT, INPUT_NOT_FOUND, FORMAT_NOT_DETECTED.
    """
    encoder = formats.get_encoder(target_format)
    files = resolve_inputs(inputs)
    decoder = formats.get(source_format) if source_format != "auto" else detect_format(files)
    out = output_file(output, encoder, f"converted-{encoder.name}")
    summary = ConvertSummary(decoder.name, encoder.name, str(out))

    decoded = decoder.decode(decoder.read_files(spark, files), options or DecodeOptions()).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        for row in decoded.groupBy("error_code").agg(F.count(F.lit(1)).alias("n")).collect():
            summary.records_in += row["n"]
            if row["error_code"] is None:
                summary.decoded += row["n"]
            else:
                summary.rejected += row["n"]
                summary.reject_codes[row["error_code"]] = row["n"]
        if summary.rejected:
            summary.rejects_file = str(_write_rejects(decoded.where(F.col("error_code").isNotNull()), out))
        events = pair_update_halves(
            explode_events(decoded)
        ).orderBy(F.col("position.order"), F.col("source_record.file"), F.col("source_record.line"))

        def rows():
            for r in events.toLocalIterator():
                summary.events += 1
                yield known_types(r.asDict(recursive=True))

        encoded: Encoded = encoder.encode(rows())
    finally:
        decoded.unpersist()
    encoder.write(encoded, out)
    summary.records_out = len(encoded.records)
    summary.dropped = Counter(encoded.dropped)
    return summary


def _write_rejects(rejects, out: Path) -> Path:
    """Rejected records as JSON lines beside the output: where from, code, message, raw bytes."""
    path = out.with_name(out.name + ".rejects.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in rejects.toLocalIterator():
            fh.write(json.dumps({
                "source_record": r["source_record"].asDict() if r["source_record"] else None,
                "error_code": r["error_code"],
                "error_message": r["error_message"],
                "raw_value_base64": base64.b64encode(bytes(r["raw_value"])).decode("ascii") if r["raw_value"] is not None else None,
            }, ensure_ascii=False) + "\n")
    return path


@dataclass
class SimulateSummary:
    """What ``cdclake simulate`` wrote: events generated, wire records written, what the format
    dropped, and the path."""

    format: str
    output: str
    events: int
    records_out: int
    dropped: Counter


def simulate(fmt: str, output: str, *, events: int, tables: int, seed: int) -> SimulateSummary:
    """Write a seeded workload (:class:`cdclake.simulate.Workload`) of ``events`` streamed events
    over ``tables`` tables, after its initial snapshot, in format ``fmt``.

    Raises:
        CdclakeError(UNKNOWN_FORMAT): no such format.
    """
    encoder = formats.get_encoder(fmt)
    result = Workload(seed, tables=tables, events=events).generate()
    encoded = encoder.encode(result.events)
    out = output_file(output, encoder, f"{encoder.name}-seed{seed}")
    encoder.write(encoded, out)
    return SimulateSummary(encoder.name, str(out), len(result.events), len(encoded.records), Counter(encoded.dropped))
