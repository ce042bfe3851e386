"""Encoder for ``datahub-tuple``: canonical events -> DataHub TUPLE records as DTS / Data
Integration write them, one JSON object per line (``file_kind = "lines"``).

Sources: seed ``000_d2c269d42c40e542.txt`` ("データ形式", TUPLE: the metadata columns and the
example table of an INSERT, an UPDATE's BEFORE and AFTER rows and a DELETE; the topic-type
table: TUPLE topics take DML only, no DDL, no heartbeats) and ``shared/FORMATS.md``
(``datahub-tuple``: one JSON object per line).

Wire shape (the row's columns first, then the metadata columns)::

    {"id": 1, "name": "a", ...,
     "_sequence_id_": "1704067200000000003",   digits, a STRING: base_ms * 10**6 + k (the shape
                                               of the seed's 1649991610688000001), equal for the
                                               two rows of one update
     "_operation_type_": "I" | "U" | "D",
     "_excute_time_": 1704067201000,           (sic) the event time, ms since epoch
     "_source_table_": "shop.customers",       the qualified source name, db[.schema].table
     "_before_image_": "Y" | "N", "_after_image_": "Y" | "N"}

* Rows (the seed's table): ``c`` -> ``I`` ``N``/``Y`` with the after image; ``u`` -> ``U``
  ``Y``/``N`` (the row before) then ``U`` ``N``/``Y`` (the row after), same ``_sequence_id_``,
  each row its own unit (:attr:`~cdclake.formats.encoding.Encoded.units` is None: the applier
  makes one update of two halves that reach it in different batches; an update without a
  before image is its after row alone); ``d`` -> ``D`` ``Y``/``N`` with the before image; ``r`` -> ``I``
  (TUPLE has no snapshot marker).
* Values as DataHub TUPLE fields hold them: ``tinyint``..``bigint`` -> JSON integers (BIGINT);
  ``float``/``double`` -> JSON numbers (DOUBLE); ``boolean`` -> JSON true/false; ``date`` and
  ``timestamp`` -> DataHub TIMESTAMP, microseconds since the epoch as a JSON integer (exact);
  ``decimal(p,s)`` -> a JSON string holding the exact text (DECIMAL as text: a JSON number would
  be read back as a double); ``binary`` -> base64 text; ``string`` -> JSON string; NULL ->
  ``null``. The record does not say its types: the decoder infers them from the JSON kinds, so
  these come back as ``bigint``, ``double`` (text as Java writes a double: ``1.0E16``),
  ``boolean``, ``bigint`` (µs), ``string``, ``string`` (base64 text), ``string``; a NULL value's type is unknown (``spark_type`` null).
* Table: ``_source_table_`` = ``database[.schema].table``; the decoder splits it at the first
  dot (``shop.sales.order_lines`` -> database ``shop``, table ``sales.order_lines``: the same
  qualified target name).
* Key: not in the record. :meth:`DatahubTupleEncoder.carried` assumes the decoder is configured
  with each table's key as the events state it (``DecodeOptions.primary_keys`` /
  ``--primary-key``, e.g. from the simulator's ``SimResult.keys``); with
  ``keys_configured=False`` it expects no key.

Dropped (counted in ``Encoded.dropped``): DDL events, truncates, heartbeats and transaction
markers (TUPLE topics carry DML only), transaction ids/sequence numbers, the snapshot marker
(``r`` is written as ``I``), column source types, precision, scale and nullability, the changed
types above, primary keys (configuration), partial updates (TUPLE rows are whole rows), updates
without an after image and rows without a column.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from datetime import date, datetime

from cdclake.formats.encoding import Encoded, Encoder, column_types, dumps, inferred_column, json_text, not_written, sequence_ids, writable
from cdclake.model import qualified_name

NAME = "datahub-tuple"

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_EPOCH = datetime(1970, 1, 1)


def _micros(text: str, spark_type: str) -> int:
    """Microseconds since the epoch (UTC) of a canonical date/timestamp text."""
    if spark_type == "date":
        return (date.fromisoformat(text) - _EPOCH.date()).days * 86_400_000_000
    delta = datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f") - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def wire_type(spark_type: str | None) -> tuple[str, str]:
    """How a Spark type is written (a DataHub field type or "text") and the Spark type the
    decoder infers back from the JSON kind of its values."""
    t = (spark_type or "string").lower()
    if t in _INTEGRAL:
        return "BIGINT", "bigint"
    if t in ("float", "double"):
        return "DOUBLE", "double"
    if t == "boolean":
        return "BOOLEAN", "boolean"
    if t in ("date", "timestamp"):
        return "TIMESTAMP µs", "bigint"
    if t == "binary":
        return "base64 text", "string"
    if t.startswith("decimal"):
        return "text", "string"
    return "STRING", "string"


def wire_value(text: str | None, spark_type: str | None):
    """A canonical value text as the JSON value of its TUPLE field."""
    if text is None:
        return None
    t = (spark_type or "string").lower()
    if t in _INTEGRAL:
        return int(text)
    if t in ("float", "double"):
        f = float(text)
        return f if math.isfinite(f) else text  # JSON has no NaN/Infinity: kept as text
    if t == "boolean":
        return text == "true"
    if t in ("date", "timestamp"):
        return _micros(text, t)
    return text  # decimal (exact text), binary (base64), string


def java_double_text(f: float) -> str:
    """``f`` as Java's ``Double.toString`` writes it, which is how Spark reads a JSON number into
    a string (``1e+16`` -> ``1.0E16``, ``1e-07`` -> ``1.0E-7``, ``0.001`` -> ``0.001``): plain
    decimal notation for 10^-3 <= |f| < 10^7, else ``d.dddE<n>``. The digits are the shortest
    that round-trip (Python's ``repr``; JDK 19+ prints the same, older JDKs may add digits for
    rare values)."""
    from decimal import Decimal

    if f == 0:
        return "-0.0" if math.copysign(1.0, f) < 0 else "0.0"
    sign = "-" if f < 0 else ""
    d = Decimal(repr(abs(f)))
    if 1e-3 <= abs(f) < 1e7:
        text = format(d, "f")
        return sign + (text if "." in text else text + ".0")
    digits = "".join(map(str, d.as_tuple().digits)).rstrip("0") or "0"
    exponent = d.adjusted()
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def decoded_text(value) -> str | None:
    """The canonical text the decoder gives back for a wire value."""
    return java_double_text(value) if isinstance(value, float) else json_text(value)


#: why an event is not written (:func:`cdclake.formats.encoding.not_written`); beyond them, a
#: row without a column
_NOT_WRITTEN = (
    ("ddl", "DDL events (TUPLE topics carry DML only)"),
    "heartbeat",
    "tx",
    "truncate",
    "no_table",
    ("partial_update", "partial updates (TUPLE rows are whole rows)"),
    "update_without_after",
)


class DatahubTupleEncoder(Encoder):
    """Canonical events -> DataHub TUPLE records as JSON lines; see the module docstring.

    Args:
        base_ms: the start time (ms) in the sequence ids ``base_ms * 10**6 + k``; default: the
            first event time of the stream (0 when no event has one).
        keys_configured: :meth:`carried` expects each table's key (as the event states it) to
            be configured in the decoder (``--primary-key``); False: no key.
    """

    name = NAME
    file_kind = "lines"

    def __init__(self, base_ms: int | None = None, keys_configured: bool = True) -> None:
        self.base_ms = base_ms
        self.keys_configured = keys_configured

    # ---- encoding ---------------------------------------------------------------------------

    @staticmethod
    def _unwritable(e: dict) -> str | None:
        """Why event ``e`` is not written, or None."""
        reason = not_written(e, _NOT_WRITTEN)
        if reason is None and not (e.get("before") if e.get("op") == "d" else e.get("after")):
            return "rows without a column"
        return reason

    def encode(self, events: Iterable[dict]) -> Encoded:
        events = list(events)
        ids = sequence_ids(self.base_ms, events)
        out = Encoded(records=[], dropped=Counter())
        for e in writable(events, out, self._unwritable, self._count_losses):
            for row in self._rows(e, next(ids)):
                out.records.append((None, dumps(row)))
        return out

    def _count_losses(self, e: dict, dropped: Counter) -> None:
        if e.get("tx_id") is not None or e.get("tx_seq") is not None or e.get("tx_size") is not None:
            dropped["transaction ids and sequence numbers"] += 1
        if e["op"] == "r":
            dropped["snapshot reads (written as I)"] += 1
        if e.get("primary_key"):
            dropped["primary keys (not in the record: configure --primary-key)"] += 1
        if e.get("columns") is not None:
            dropped["column source types, precision, scale, nullability"] += 1
            for c in e["columns"]:
                t = (c.get("spark_type") or "string").lower()
                label, to = wire_type(t)
                if to != t:
                    dropped[f"column types: {t} written as {label} ({to} column)"] += 1

    def _rows(self, e: dict, seq: str) -> list[dict]:
        types = column_types(e)
        meta_table = qualified_name(e.get("database"), e.get("schema"), e["table"])

        def row(image: dict, op: str, before: str, after: str) -> dict:
            r = {n: wire_value(v, types.get(n)) for n, v in image.items()}
            r.update(
                {
                    "_sequence_id_": seq,
                    "_operation_type_": op,
                    "_excute_time_": e.get("event_time_ms"),
                    "_source_table_": meta_table,
                    "_before_image_": before,
                    "_after_image_": after,
                }
            )
            return r

        op = e["op"]
        if op in ("c", "r"):
            return [row(e["after"], "I", "N", "Y")]
        if op == "d":
            return [row(e["before"], "D", "Y", "N")]
        rows = [row(e["before"], "U", "Y", "N")] if e.get("before") else []
        return [*rows, row(e["after"], "U", "N", "Y")]

    # ---- what comes back -----------------------------------------------------------------------

    def carried(self, event: dict) -> dict | None:
        e = event
        if self._unwritable(e):
            return None
        types = column_types(e)
        name = qualified_name(e.get("database"), e.get("schema"), e["table"])
        db, dot, rest = name.partition(".")
        database, table = (db or None, rest) if dot else (None, name)

        def wire(img: dict | None) -> dict | None:
            return None if img is None else {n: wire_value(v, types.get(n)) for n, v in img.items()}

        op = e["op"]
        before = wire(e.get("before")) if op in ("u", "d") else None
        after = wire(e.get("after")) if op in ("c", "r", "u") else None
        if op == "u" and not before:
            before = None
        shown = after if after is not None else before  # the paired update takes the after row's columns
        return {
            "kind": "data",
            "op": "c" if op == "r" else op,
            "database": database,
            "schema": None,
            "table": table,
            "before": None if before is None else {n: decoded_text(v) for n, v in before.items()},
            "after": None if after is None else {n: decoded_text(v) for n, v in after.items()},
            "present": None,
            "primary_key": list(e["primary_key"]) if self.keys_configured and e.get("primary_key") else None,
            "columns": [
                inferred_column(n, v) for n, v in shown.items()
            ],
            "tx_id": None,
            "tx_seq": None,
            "tx_last": None,
            "tx_size": None,
            "ddl": None,
            "event_time_ms": e.get("event_time_ms"),
        }
