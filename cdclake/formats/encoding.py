"""The encoder contract: canonical change events -> one wire format, the inverse of a decoder.

Every format package has an ``encoder.py`` beside its ``decoder.py`` with one class named after
the format (``CanalJsonEncoder``), registered in :mod:`cdclake.formats` next to the decoder.
Encoders write what the producers in the seeds write, quirks included (``UPDATE_BEFOR``,
TUPLE's two rows, SharePlex partial updates, Qlik masks and metadata messages, DTS Avro unions,
Debezium envelopes with and without ``schema``, Canal's multi-row messages and string values).

Where code runs: encoders are plain Python over event dicts on the driver. They serve
``cdclake simulate`` (the simulator's events are Python already), ``cdclake convert`` (decoded
events are streamed to the driver with ``toLocalIterator``) and the property tests. They are
not on the ingest hot path.

Input: canonical events as dicts with :data:`cdclake.model.EVENT_SCHEMA`'s fields (image values
in the canonical text encoding; ``columns`` as dicts), **in commit order**. The encoder gives each
record the format's own ordering coordinate (sequence id, SCN, LSN, ``es``/``id`` ...) so that
the decoder's ``position.order`` sorts the records back into that order: the default is the
event's 1-based index in the stream (:func:`sequence_numbers`).

Columns of unknown type (``spark_type`` null: a TUPLE or schemaless Debezium value that was
null) are handed to encoders as ``string`` by :func:`known_types`, which ``cdclake convert``
applies to every event: encoders may take ``spark_type`` as set.

Output: :class:`Encoded`, the wire records in commit order plus what the format could not carry
(``dropped``: reason -> count), which ``cdclake convert`` reports.

Round trip: :meth:`Encoder.carried` says, event by event, what ``decode(encode(events))`` gives
back: the event with the fields the format does not carry set as the decoder sets them (or
``None`` when the format drops the event). The property tests hold every encoder to it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Encoded:
    """What an encoder produced.

    records: the wire records in commit order, each ``(key, value)`` as bytes; ``key`` may be
        ``None`` (the format has no message key), ``value`` is ``None`` only for a Kafka
        tombstone. For ``file_kind == "lines"`` a value is one UTF-8 line without its newline;
        for ``"avro"`` it is one Avro binary datum of the format's writer schema; for
        ``"parquet"`` it is a JSON object whose fields are the Parquet row's columns.
    units: for each record, the index of the record that starts its *unit*: records that must
        reach the decoder in the same batch (a Qlik data record and its table's metadata
        message, ...). ``None`` means every record is its own unit (the two halves of a split
        update, DataWorks UPDATE_BEFOR/UPDATE_AFTER and TUPLE ``U`` rows, need not travel
        together: the applier makes one update of them across batches).
    dropped: what the format could not carry, reason -> number of events (or fields),
        e.g. ``{"heartbeat events": 3, "transaction ids": 120}``.
    """

    records: list[tuple[bytes | None, bytes | None]] = field(default_factory=list)
    units: list[int] | None = None
    dropped: Counter = field(default_factory=Counter)

    def unit_starts(self) -> list[int]:
        """``units`` with the default filled in: one start index per record."""
        return self.units if self.units is not None else list(range(len(self.records)))


class Encoder(ABC):
    """Turns canonical events (dicts, commit order) into a format's wire records."""

    #: the format's name, the same as its decoder's
    name: str = ""
    #: how records are written to files: "lines", "avro" (container file) or "parquet"
    file_kind: str = "lines"

    @abstractmethod
    def encode(self, events: Iterable[dict]) -> Encoded:
        """Encode ``events`` (EVENT_SCHEMA dicts in commit order).

        Never raises on an event the format cannot carry: it is left out (or the part that does
        not fit is) and counted in ``Encoded.dropped``.
        """

    @abstractmethod
    def carried(self, event: dict) -> dict | None:
        """``event`` as the decoder gives it back after encoding: fields the format does not
        carry are set as the decoder sets them, values converted to what the format keeps.
        ``None`` when the format drops the event entirely. ``position``, ``format`` and
        ``source_record`` are not compared (positions are compared by order only)."""

    def write(self, encoded: Encoded, path: str | Path) -> Path:
        """Write ``encoded`` to one file at ``path`` in the format's file kind; returns the path.

        Lines: one value per line (tombstones, having no value, are left out: a file cannot
        hold them). Subclasses with binary files override this.
        """
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        if self.file_kind != "lines":
            raise NotImplementedError(f"{self.name}: write() must be overridden for {self.file_kind} files")
        with p.open("wb") as out:
            for _key, value in encoded.records:
                if value is not None:
                    out.write(value)
                    out.write(b"\n")
        return p


def writable(events: Iterable[dict], out: Encoded, unwritable: Callable[[dict], str | None],
             count_losses: Callable[[dict, Counter], None]) -> Iterator[dict]:
    """The events a format can write, in order: an event ``unwritable`` gives a reason for is
    counted under it in ``out.dropped`` and skipped; of the others ``count_losses`` counts in
    ``out.dropped`` what the wire form loses."""
    for e in events:
        reason = unwritable(e)
        if reason:
            out.dropped[reason] += 1
            continue
        count_losses(e, out.dropped)
        yield e


def dumps(obj) -> bytes:
    """Compact JSON, UTF-8, non-ASCII kept as is (producers write UTF-8, not ``\\u`` escapes)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sequence_numbers(events: list[dict]) -> list[int]:
    """The default ordering coordinate: each event's 1-based index in commit order."""
    return list(range(1, len(events) + 1))


def first_event_time_ms(events: list[dict]) -> int:
    """The first event time (ms) of ``events``, 0 when none has one: the start of sequence ids
    shaped ``base_ms * 10**6 + k`` (DataWorks ``sequenceId``, TUPLE ``_sequence_id_``)."""
    return next((e["event_time_ms"] for e in events if e.get("event_time_ms") is not None), 0)


def column_types(event: dict) -> dict[str, str]:
    """``{column name: spark_type}`` from an event's ``columns`` (empty when it has none)."""
    return {c["name"]: c["spark_type"] for c in (event.get("columns") or [])}


def known_types(event: dict) -> dict:
    """``event`` with every column of unknown type (``spark_type`` null) typed ``string`` (the
    canonical text of its values is kept as is); the event itself when no column needs it."""
    cols = event.get("columns")
    if not cols or all(c.get("spark_type") for c in cols):
        return event
    return {**event, "columns": [c if c.get("spark_type") else {**c, "spark_type": "string"} for c in cols]}


def two_level(event: dict) -> dict:
    """``event`` named the MySQL way (``database.table``): an event named by a schema alone
    (Qlik names one level, the schema) takes it as its database. Formats with two-level names
    (canal-json, dts-avro) apply it to every event they encode or carry."""
    if event.get("database") is None and event.get("schema") is not None:
        return {**event, "database": event["schema"], "schema": None}
    return event
