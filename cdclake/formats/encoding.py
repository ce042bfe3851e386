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

import itertools
import json
import re
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


#: what an event can be that a format does not write, as the formats' ladders name it
#: (:func:`not_written`): case -> (the test, the reason in the words formats share)
EVENT_CASES: dict[str, tuple[Callable[[dict], bool], str]] = {
    "ddl": (lambda e: e["kind"] == "ddl", "DDL events"),
    "heartbeat": (lambda e: e["kind"] == "heartbeat", "heartbeat events"),
    "tx": (lambda e: e["kind"] in ("tx_begin", "tx_end"), "transaction markers"),
    "truncate": (lambda e: e.get("op") == "t", "truncate events"),
    "no_table": (lambda e: not e.get("table"), "events without a table name"),
    "no_name": (lambda e: e["kind"] in ("data", "ddl") and not (e.get("database") and e.get("table")),
                "events without a database or table name"),
    "partial": (lambda e: e["kind"] == "data" and e.get("present") is not None, "events with partial images"),
    "partial_update": (lambda e: e["kind"] == "data" and e.get("op") == "u" and e.get("present") is not None,
                       "partial updates"),
    "update_without_after": (lambda e: e["kind"] == "data" and e.get("op") == "u" and e.get("after") is None,
                             "updates without an after image"),
    "insert_without_after": (lambda e: e["kind"] == "data" and e.get("op") in ("c", "r") and e.get("after") is None,
                             "inserts without an after image"),
    "delete_without_before": (lambda e: e["kind"] == "data" and e.get("op") == "d" and e.get("before") is None,
                              "deletes without a before image"),
    "unknown": (lambda e: e["kind"] not in ("data", "ddl") or (e["kind"] == "data" and e.get("op") not in ("c", "u", "d", "r", "t")),
                "events of kind {kind} op {op}"),
}


def not_written(event: dict, ladder: Iterable[str | tuple[str, str]]) -> str | None:
    """Why a format does not write ``event``: the reason of the first case of ``ladder`` (the
    format's, in its order: a name of :data:`EVENT_CASES`, given the shared reason, or ``(name,
    the format's own reason)``) that ``event`` is; None when it is none of them. A reason may
    name the event's ``{kind}`` and ``{op}``."""
    for step in ladder:
        case, reason = (step, None) if isinstance(step, str) else step
        test, shared = EVENT_CASES[case]
        if test(event):
            return (reason or shared).format(kind=event["kind"], op=event.get("op"))
    return None


def json_kind(value) -> str:
    """The JSON kind of a value read from JSON (``columns[].source_type`` is ``json:<kind>`` where
    a decoder infers a column's type from its values): ``null``, ``boolean``, ``integer``,
    ``number``, ``string``, ``object`` or ``array``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def json_text(value) -> str | None:
    """A JSON value's text as Spark's ``from_json`` reads it into a string: a string as itself,
    ``true``/``false``, other values as JSON (integers as their digits); None for a null.
    (Spark writes a floating point number as Java does; see the formats' ``java_double_text``.)"""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return dumps(value).decode("utf-8")


def inferred_column(name: str, value) -> dict:
    """The column (COLUMN_SCHEMA dict) a decoder that infers types from JSON values (TUPLE,
    Debezium without a schema) declares for a column holding ``value``: an integer is
    ``bigint`` (beyond its range ``decimal(38,0)``), another number ``double``, a boolean
    ``boolean``, a null of no type, anything else ``string``."""
    kind = json_kind(value)
    if kind == "integer":
        spark_type = "bigint" if -(2**63) <= value < 2**63 else "decimal(38,0)"
    else:
        spark_type = {"null": None, "number": "double", "boolean": "boolean"}.get(kind, "string")
    return {"name": name, "source_type": f"json:{kind}", "spark_type": spark_type, "precision": None, "scale": None, "nullable": None}


#: the DDL statements Canal and DataWorks name alike (their ``type`` / ``op``): ``(first
#: words, name)``, the index statements before CREATE and DROP (:func:`ddl_name`)
DDL_NAMES = (
    (r"create\s+(unique\s+|fulltext\s+|spatial\s+)?index", "CINDEX"),
    (r"drop\s+index", "DINDEX"),
    (r"create", "CREATE"),
    (r"alter", "ALTER"),
    (r"rename", "RENAME"),
)


def ddl_name(sql: str | None, names: Iterable[tuple[str, str]], default: str = "QUERY") -> str:
    """The name a format gives the DDL statement ``sql``: that of the first of ``names``
    (``(first words, name)``: a regular expression the statement starts with, white space
    before it allowed, any case, ending at a word boundary) it starts with, else ``default``."""
    for words, name in names:
        if sql and re.match(rf"\s*{words}\b", sql, re.I):
            return name
    return default


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


def sequence_ids(base_ms: int | None, events: list[dict]) -> Iterator[str]:
    """Sequence ids shaped ``base_ms * 10**6 + k`` (k = 0, 1 ...), as text: DataWorks
    ``sequenceId``, TUPLE ``_sequence_id_``; ``base_ms`` None: :func:`first_event_time_ms` of
    ``events``."""
    base = base_ms if base_ms is not None else first_event_time_ms(events)
    return (str(base * 10**6 + k) for k in itertools.count())


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
