"""Debezium column types, worked out on the driver once per signature (the SQL that turns
the values into canonical text: :mod:`cdclake.formats.debezium_json.values`).

Two ways a data record's column types are known (see the decoder's module docstring):

* **Kafka Connect schema** (the ``schema``/``payload`` envelope): :func:`connect_columns` reads
  the schema text once per distinct schema (``json.loads``) into column declarations, each
  with the *kind* of its wire value (``decimal``, ``date``, ``ts_ms`` ...); :func:`cdclake.formats.debezium_json.values.wire_sql`
  is the per-column SQL template (``{0}`` = the value's text as ``from_json`` gives it in a
  ``map<string,string>``) turning that wire value into canonical text, NULL when unreadable.
* **JSON value kinds** (no envelope, or a schema that declares no row fields): the type of a
  column is the JSON kind of its value, which differs from record to record; it is read per
  value from a ``map<string,variant>`` parse of the images (``values.kind_class_sql``) into a
  one-letter class, and ``values.inferred_sql`` converts by that class.

Column types, with the envelope: the Kafka Connect schema of ``after`` (else ``before``);
``columns[].source_type`` is the logical name (``org.apache.kafka.connect.data.Decimal``) or the
Connect type (``int32``), ``nullable`` is ``optional``, ``precision``/``scale`` are the Decimal's
``connect.decimal.precision``/``scale`` parameters. Spark types and value conversions:

===========================================  ==============  ===================================
Connect logical name / type                  spark_type      value on the wire -> canonical text
===========================================  ==============  ===================================
org.apache.kafka.connect.data.Decimal        decimal(p,s)    base64 big-endian two's-complement
                                             (p = connect.   unscaled bytes -> unscaled / 10^s,
                                             decimal.        exact (byte arithmetic in
                                             precision, 38   decimal arithmetic up to 30 hex
                                             when absent;    digits, Scala's BigInt beyond: any
                                             string if >38)  length); a JSON number (as some
                                                             producers write it) is taken as is
                                                             (exponent form expanded)
io.debezium.data.VariableScaleDecimal        string          {"scale", "value": base64} -> exact
                                                             decimal text of any length; string
                                                             because the scale differs from
                                                             value to value (PostgreSQL
                                                             ``numeric`` without a scale); a
                                                             NaN arrives as null
io.debezium.time.Date, connect.data.Date     date            int32 days since 1970-01-01
io.debezium.time.Timestamp,                  timestamp       int64 ms since epoch (UTC)
org.apache.kafka.connect.data.Timestamp
io.debezium.time.MicroTimestamp              timestamp       int64 µs since epoch
io.debezium.time.NanoTimestamp               timestamp       int64 ns since epoch (truncated
                                                             to µs: Spark's precision)
io.debezium.time.ZonedTimestamp              timestamp       ISO-8601 text with offset -> UTC
io.debezium.time.Time, connect.data.Time     string          int32 ms of day -> ``HH:MM:SS.ffffff``
io.debezium.time.MicroTime                   string          int64 µs -> ``HH:MM:SS.ffffff``
io.debezium.time.NanoTime                    string          int64 ns -> ``HH:MM:SS.ffffff``
                                                             (a time of day is kept as text:
                                                             Spark 4.0 has no TIME type; hours
                                                             may exceed 23 or be negative, as
                                                             MySQL TIME allows)
int8 / int16 / int32                         int
int64                                        bigint
float (float32) / double (float64)           float / double
boolean                                      boolean
bytes (also io.debezium.data.Bits)           binary          base64 text (already canonical)
string (Json, Enum, EnumSet, Xml, Uuid,      string
ZonedTime ...)
array of int8..int64, float, double,         array<int>,     the JSON array as it is
boolean, string (no logical name)            array<bigint>,
                                             ... array<string>
struct / map / other arrays (geometry,       string          the value's JSON text
numeric[] ...)
===========================================  ==============  ===================================

The unavailable-value placeholder (``unavailable.value.placeholder``, default
``__debezium_unavailable_value``; ``--option unavailable.value.placeholder=...`` names the
connector's own) in the after image, in any of the forms :func:`placeholder_forms` lists,
means the column is not carried: the event's ``present`` leaves it out, and the applier
keeps the value it has (a PostgreSQL TOASTed value an update left unchanged under
``REPLICA IDENTITY DEFAULT``; an Oracle LOB).

Without the envelope the type of each column is inferred per record from the JSON value kind
(``after`` first, then ``before``): integral number -> bigint (beyond the bigint range
decimal(38,0)), fractional number (a ``.`` or exponent in its text) -> double, string ->
string, boolean -> boolean, object/array -> string holding the JSON text, null -> spark_type
null (unknown); ``source_type`` is ``json:integer|number|string|boolean|object|array|null``.
A value that does not fit its column's type (``"abc"`` in an int32 column, bad base64 in a
Decimal) -> ``BAD_VALUE`` naming the columns.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal


DECIMAL = "org.apache.kafka.connect.data.Decimal"
VS_DECIMAL = "io.debezium.data.VariableScaleDecimal"
KIND_BY_NAME = {
    DECIMAL: "decimal",
    VS_DECIMAL: "vsdecimal",
    "io.debezium.time.Date": "date",
    "org.apache.kafka.connect.data.Date": "date",
    "io.debezium.time.Timestamp": "ts_ms",
    "org.apache.kafka.connect.data.Timestamp": "ts_ms",
    "io.debezium.time.MicroTimestamp": "ts_us",
    "io.debezium.time.NanoTimestamp": "ts_ns",
    "io.debezium.time.ZonedTimestamp": "ts_iso",
    "io.debezium.time.Time": "time_ms",
    "org.apache.kafka.connect.data.Time": "time_ms",
    "io.debezium.time.MicroTime": "time_us",
    "io.debezium.time.NanoTime": "time_ns",
}
_KIND_BY_TYPE = {
    "int8": "int", "int16": "int", "int32": "int", "int64": "bigint", "float": "float", "float32": "float",
    "double": "double", "float64": "double", "boolean": "boolean", "bytes": "binary",
}
SPARK_BY_KIND = {
    "vsdecimal": "string",
    "date": "date",
    "ts_ms": "timestamp",
    "ts_us": "timestamp",
    "ts_ns": "timestamp",
    "ts_iso": "timestamp",
    "time_ms": "string",
    "time_us": "string",
    "time_ns": "string",
    "int": "int",
    "bigint": "bigint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "binary": "binary",
}

# ---- the Connect schema, on the driver ------------------------------------------------------------


def _text(v) -> str | None:
    """A JSON value as Spark's ``from_json`` reads it into a ``string`` field: strings as they
    are, other values as their (compact) JSON text."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _java_double(v)
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _java_double(d: float) -> str:
    """Java's ``Double.toString`` (how Jackson writes a JSON number that ``from_json`` copies
    into a string field)."""
    if d != d:
        return "NaN"
    if d in (float("inf"), float("-inf")):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0 or 1e-3 <= abs(d) < 1e7:
        r = repr(d)
        return r if "." in r else r + ".0"
    sign, digits, exp = Decimal(repr(d)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{len(ds) + exp - 1}"


def _bool(v) -> bool | None:
    return v if isinstance(v, bool) else None


def _int(text: str | None) -> int | None:
    """Spark's ``try_cast(text as int)``."""
    if text is None:
        return None
    t = text.strip(" \t\n\r\f\v")
    if not re.fullmatch(r"[+-]?[0-9]+", t):
        return None
    n = int(t)
    return n if -(2**31) <= n < 2**31 else None


def _structs(v) -> list[dict] | None:
    """An ``array<struct<...>>`` field as ``from_json`` reads it: None unless a JSON array of
    objects (one element of another kind makes the whole array NULL)."""
    if not isinstance(v, list) or not all(isinstance(e, dict) for e in v):
        return None
    return v


def _params(v) -> dict | None:
    if not isinstance(v, dict):
        return None
    return {k: _text(x) for k, x in v.items()}


def decimal_spark_type(precision: int | None, scale: int) -> str:
    """The Spark type of a Connect Decimal (``string`` beyond 38 digits)."""
    if scale < 0:
        if precision is None:
            return "decimal(38,0)"
        return "string" if precision - scale > 38 else f"decimal({precision - scale},0)"
    p = 38 if precision is None else precision
    if max(p, scale) > 38:
        return "string"
    return f"decimal({max(p, scale)},{scale})"


#: Connect types of array items kept as a Spark array: the element as it is on the wire
_ARRAY_ITEMS = {"int8": "int", "int16": "int", "int32": "int", "int64": "bigint", "float": "float", "float32": "float",
                "double": "double", "float64": "double", "boolean": "boolean", "string": "string"}


def array_spark_type(items) -> str:
    """The Spark type of a Connect ``array`` column whose item schema is ``items``: an array of
    the item's type when the item is a plain number, boolean or string (PostgreSQL ``int[]``,
    ``bigint[]``, ``text[]``, ``varchar[]`` ..., whose JSON values are the elements as they
    are); else ``string`` holding the array's JSON text (items of a logical type, such as a
    ``numeric[]``'s VariableScaleDecimal structs or a ``date[]``'s day numbers, would need a
    conversion per element)."""
    if not isinstance(items, dict) or items.get("name") is not None:
        return "string"
    elem = _ARRAY_ITEMS.get(_text(items.get("type")) or "")
    return f"array<{elem}>" if elem else "string"


def connect_columns(schema_text: str | None) -> list[dict] | None:
    """The column declarations of an envelope's Kafka Connect schema: one dict per field of its
    ``after`` struct (else ``before``) with COLUMN_SCHEMA's keys plus ``kind`` (the wire
    conversion); None when the schema declares no row fields (types are then inferred from the
    values). A name declared twice keeps its first declaration."""
    if schema_text is None:
        return None
    try:
        s = json.loads(schema_text)
    except ValueError:
        return None
    if not isinstance(s, dict):
        return None
    envelope = _structs(s.get("fields"))
    if envelope is None:
        return None

    def row_fields(name: str):
        for f in envelope:
            if _text(f.get("field")) == name:
                return _structs(f.get("fields"))
        return None

    fields = row_fields("after")
    if fields is None:
        fields = row_fields("before")
    if fields is None:
        return None
    out, seen = [], set()
    for f in fields:
        name = _text(f.get("field"))
        if name is None or name in seen:
            continue
        seen.add(name)
        logical, ctype = _text(f.get("name")), _text(f.get("type"))
        kind = KIND_BY_NAME.get(logical) or _KIND_BY_TYPE.get((ctype or "").lower(), "string")
        precision = scale = None
        if logical == DECIMAL:
            params = _params(f.get("parameters")) or {}
            precision = _int(params.get("connect.decimal.precision"))
            scale = _int(params.get("scale"))
            scale = 0 if scale is None else scale
        if (ctype or "").lower() == "array" and logical is None:
            spark_type = array_spark_type(f.get("items"))
            kind = "array" if spark_type != "string" else "string"
        else:
            spark_type = decimal_spark_type(precision, scale) if kind == "decimal" else SPARK_BY_KIND.get(kind, "string")
        out.append(dict(name=name, source_type=logical if logical is not None else ctype, spark_type=spark_type,
                        precision=precision, scale=scale, nullable=_bool(f.get("optional")), kind=kind))
    return out
