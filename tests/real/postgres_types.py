"""PostgreSQL column types as Debezium's PostgreSQL connector (3.6.1.Final, default settings:
``decimal.handling.mode=precise``, ``time.precision.mode=adaptive``, ``binary.handling.mode=bytes``,
``interval.handling.mode=numeric``, ``hstore.handling.mode=json``) writes them, and what a
cdclake target table holds for each: the Spark type, and how a value read back with delta-rs
compares with the value the database holds.

This is the type table of the README's "Debezium PostgreSQL" section, checked against the real
connector by ``tests/real/test_debezium_postgres.py``: :func:`database_rows` reads a table's rows
as the database holds them (typed, through psycopg) and :func:`target_rows` the target table's
rows (delta-rs), both as comparable Python values; equal lists mean equal tables.

Sources: the Debezium PostgreSQL connector documentation ("Data type mappings"), the connector's
real output (``tests/real``), PostgreSQL's ``format_type``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

from tests.readers import has_column_mapping

#: Debezium's MicroDuration: a month is 365.25 / 12 days (``io.debezium.time.MicroDuration``)
DAYS_PER_MONTH = 365.25 / 12


def _float32(v):
    return None if v is None else struct.unpack("f", struct.pack("f", v))[0]


def _decimal_text(v):
    """A decimal held as text (beyond ``decimal(38)``): the number; Debezium writes a NaN as null."""
    return None if v is None else Decimal(v)


def _db_decimal(v):
    return None if v is None or v.is_nan() else v


def _time_text(v):
    return None if v is None else dt.time.fromisoformat(v)


def _utc_time(v: dt.time | None):
    """A ``timetz`` as the UTC time of day Debezium's ZonedTime gives."""
    if v is None:
        return None
    at = dt.datetime.combine(dt.date(2000, 1, 1), v)
    return at.astimezone(dt.timezone.utc).time().replace(tzinfo=None)


def _zoned_time(v):
    return None if v is None else dt.time.fromisoformat(v.rstrip("Z"))


def _naive_utc(v):
    if v is None:
        return None
    return v.astimezone(dt.timezone.utc).replace(tzinfo=None) if v.tzinfo else v


def _instant(v):
    return None if v is None else v.astimezone(dt.timezone.utc)


def _interval_micros(v):
    """``[months, days, seconds of the time part]`` of an interval as Debezium's MicroDuration
    counts it (``MicroDuration.durationMicros``: days and seconds as doubles, then to a long)."""
    if v is None:
        return None
    months, days, seconds = (float(x) for x in v)
    number_of_days = months * DAYS_PER_MONTH + days
    return int((number_of_days * 86_400 + seconds) * 1e6)


def _bits(v):
    """A ``bit(n)``/``varbit`` text as Debezium's Bits bytes (``BitSet.toByteArray``: the last
    bit is bit 0, little-endian bytes, no trailing zero bytes)."""
    if v is None:
        return None
    n = int(v, 2) if v else 0
    return n.to_bytes((n.bit_length() + 7) // 8, "little")


def _json(v):
    """JSON text as its value (psycopg gives a database's json and jsonb values so)."""
    return None if v is None else json.loads(v)


def _point_db(v):
    if v is None:
        return None
    x, y = v.strip("()").split(",")
    return (float(x), float(y))


def _point_lake(v):
    if v is None:
        return None
    p = json.loads(v)
    return (p["x"], p["y"])


def _vsdecimal(d: dict) -> Decimal:
    unscaled = int.from_bytes(base64.b64decode(d["value"]), "big", signed=True)
    return Decimal(unscaled).scaleb(-int(d["scale"]))


def _numeric_array_lake(v):
    """A ``numeric[]``: Debezium writes an array of VariableScaleDecimal structs; the target keeps
    its JSON text."""
    if v is None:
        return None
    return [None if e is None else _vsdecimal(e) for e in json.loads(v)]


def _numeric_array_db(v):
    return None if v is None else [None if e is None or e.is_nan() else e for e in v]


def _same(v):
    return v


def _text(v):
    return None if v is None else str(v)


def _list(v):
    return None if v is None else list(v)


@dataclass(frozen=True)
class Mapping:
    """One PostgreSQL type: ``spark_type`` of the target column; ``select``: the SQL that reads
    the column (``{c}``: its quoted name) for :func:`database_rows`; ``db`` and ``lake``: the
    database's and the target's Python value as one comparable value."""

    spark_type: str
    select: str = "{c}"
    db: Callable[[Any], Any] = _same
    lake: Callable[[Any], Any] = _same


_TEXT = Mapping("string", "{c}::text", _text, _text)

#: by ``format_type`` of the column; :func:`mapping` reads the families (``numeric(p,s)``,
#: ``character varying(n)``, arrays ...)
MAPPINGS: dict[str, Mapping] = {
    "smallint": Mapping("int"),
    "integer": Mapping("int"),
    "bigint": Mapping("bigint"),
    "real": Mapping("float", db=_float32),
    "double precision": Mapping("double"),
    # numeric without a scale: io.debezium.data.VariableScaleDecimal, any scale per value
    "numeric": Mapping("string", db=_db_decimal, lake=_decimal_text),
    "money": Mapping("decimal(38,2)", "{c}::numeric"),
    "text": Mapping("string"),
    "bytea": Mapping("binary", db=lambda v: None if v is None else bytes(v), lake=lambda v: None if v is None else bytes(v)),
    "boolean": Mapping("boolean"),
    "bit(1)": Mapping("boolean", "{c}::text = '1'"),
    "date": Mapping("date"),
    # io.debezium.time.MicroTime: the time of day as text (Spark has no TIME type)
    "time without time zone": Mapping("string", lake=_time_text),
    # io.debezium.time.ZonedTime: the UTC time of day as ISO text with Z
    "time with time zone": Mapping("string", db=_utc_time, lake=_zoned_time),
    # io.debezium.time.MicroTimestamp: UTC
    "timestamp without time zone": Mapping("timestamp", lake=_naive_utc),
    # io.debezium.time.ZonedTimestamp
    "timestamp with time zone": Mapping("timestamp", db=_instant, lake=_instant),
    # io.debezium.time.MicroDuration: microseconds, a month 30.4375 days
    "interval": Mapping(
        "bigint",
        "case when {c} is not null then array[extract(year from {c}) * 12 + extract(month from {c}), "
        "extract(day from {c}), extract(epoch from {c} - date_trunc('day', {c}))] end",
        db=lambda v: _interval_micros(v),
    ),
    "uuid": Mapping("string", db=_text),
    "json": Mapping("string", lake=_json),
    "jsonb": Mapping("string", lake=_json),
    "xml": _TEXT,
    "inet": Mapping("string", db=_text),
    "cidr": Mapping("string", db=_text),
    "macaddr": _TEXT,
    "tsvector": _TEXT,
    "int4range": _TEXT,
    # an enum (the workload's ``mood``): io.debezium.data.Enum, its label
    "mood": _TEXT,
    # io.debezium.data.geometry.Point: its JSON (x, y, wkb, srid)
    "point": Mapping("string", "{c}::text", _point_db, _point_lake),
    "integer[]": Mapping("array<int>", db=_list, lake=_list),
    "bigint[]": Mapping("array<bigint>", db=_list, lake=_list),
    "text[]": Mapping("array<string>", db=_list, lake=_list),
    "numeric[]": Mapping("string", db=_numeric_array_db, lake=_numeric_array_lake),
}


def mapping(pg_type: str, modes: dict[str, str] | None = None) -> Mapping:
    """The :class:`Mapping` of a column whose ``format_type`` is ``pg_type``, under the
    connector's default value modes or those of ``modes`` (setting -> value, :data:`MODES`).

    Raises:
        KeyError: a type this table does not list."""
    for setting, value in (modes or {}).items():
        family = "numeric" if pg_type.startswith("numeric(") else pg_type
        if family in MODES.get((setting, value), {}):
            return MODES[setting, value][family]
    if pg_type in MAPPINGS:
        return MAPPINGS[pg_type]
    base, _, args = pg_type.partition("(")
    if base == "numeric" and args:
        precision, _, scale = args.rstrip(")").partition(",")
        if int(precision) <= 38:  # connect Decimal with its precision
            return Mapping(f"decimal({precision},{scale or 0})")
        return Mapping("string", db=_db_decimal, lake=_decimal_text)
    if base in ("character varying", "character"):
        return Mapping("string")
    if base in ("bit", "bit varying"):  # io.debezium.data.Bits
        return Mapping("binary", "{c}::text", _bits, lambda v: None if v is None else bytes(v))
    if base == "time without time zone":
        return MAPPINGS[base]
    if base in ("timestamp without time zone", "timestamp with time zone"):
        return MAPPINGS[base]
    raise KeyError(pg_type)


def _decimal_or_nan_db(v):
    """A numeric as ``decimal.handling.mode=string`` writes it: a NaN is the text ``NAN``."""
    return None if v is None else ("NAN" if v.is_nan() else v)


def _decimal_or_nan_lake(v):
    return None if v is None else (v if v == "NAN" else Decimal(v))


def _ms(v):
    """A time of day or timestamp cut to milliseconds (Connect's Time and Timestamp)."""
    return None if v is None else v.replace(microsecond=v.microsecond // 1000 * 1000)


_ISO_DURATION = re.compile(r"^P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)D)?(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?[\d.]+)S)?)?$")


def _iso_interval(v):
    """Debezium's ``interval.handling.mode=string`` text (ISO 8601, ``P1Y2M3DT4H5M6.5S``) as
    ``(months, days, seconds)``."""
    if v is None:
        return None
    y, mo, d, h, mi, sec = (x or "0" for x in _ISO_DURATION.match(v).groups())
    return (int(y) * 12 + int(mo), int(d), int(h) * 3600 + int(mi) * 60 + Decimal(sec))


def _interval_parts(v):
    if v is None:
        return None
    months, days, seconds = v
    return (int(months), int(days), Decimal(seconds))


_NUMERIC_TEXT = Mapping("string", db=_decimal_or_nan_db, lake=_decimal_or_nan_lake)

#: other value modes of the connector: ``(setting, value) -> {type family: Mapping}``
MODES: dict[tuple[str, str], dict[str, Mapping]] = {
    # numerics as Debezium's text of the number (a NaN: NAN)
    ("decimal.handling.mode", "string"): {
        "numeric": _NUMERIC_TEXT,
        "money": Mapping("string", "{c}::numeric", _decimal_or_nan_db, _decimal_or_nan_lake),
        "numeric[]": Mapping("array<string>", db=lambda v: None if v is None else [_decimal_or_nan_db(e) for e in v],
                             lake=lambda v: None if v is None else [_decimal_or_nan_lake(e) for e in v]),
    },
    # Kafka Connect's Date, Time (ms of day) and Timestamp (ms): microseconds are cut
    ("time.precision.mode", "connect"): {
        "time without time zone": Mapping("string", db=_ms, lake=_time_text),
        "timestamp without time zone": Mapping("timestamp", db=_ms, lake=_naive_utc),
    },
    # bytea as hex text (Bits stay bytes)
    ("binary.handling.mode", "hex"): {
        "bytea": Mapping("string", db=lambda v: None if v is None else bytes(v), lake=lambda v: None if v is None else bytes.fromhex(v)),
    },
    # ISO 8601 durations
    ("interval.handling.mode", "string"): {
        "interval": Mapping("string", MAPPINGS["interval"].select, db=_interval_parts, lake=_iso_interval),
    },
}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_columns(conn, schema: str, table: str) -> list[tuple[str, str]]:
    """``(name, format_type)`` of the table's columns in the database's order (dropped ones left out)."""
    return conn.execute(
        "select a.attname, format_type(a.atttypid, a.atttypmod) from pg_attribute a "
        "join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace "
        "where n.nspname = %s and c.relname = %s and a.attnum > 0 and not a.attisdropped order by a.attnum",
        (schema, table),
    ).fetchall()


def _sort_key(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=repr)


def database_rows(conn, schema: str, table: str, modes: dict[str, str] | None = None) -> tuple[list[tuple[str, str]], list[dict]]:
    """The table's columns (:func:`table_columns`) and rows as comparable values, sorted."""
    columns = table_columns(conn, schema, table)
    select = ", ".join(mapping(t, modes).select.format(c=_q(n)) for n, t in columns)
    rows = conn.execute(f"select {select} from {_q(schema)}.{_q(table)}").fetchall()
    out = [{n: mapping(t, modes).db(v) for (n, t), v in zip(columns, r)} for r in rows]
    return columns, sorted(out, key=_sort_key)


def target_rows(path, columns: list[tuple[str, str]], modes: dict[str, str] | None = None) -> tuple[list[str], list[dict]]:
    """The target table's source columns (every column but ``_cdc_*``, in the table's order) and
    its rows, read with delta-rs (through its SQL ``QueryBuilder`` once a column was renamed or
    dropped: :func:`tests.readers.delta_rs_rows` says why), as :func:`database_rows` gives them
    for the database's ``columns``; a column the database does not have is read as it is."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    types = dict(columns)
    dt_ = DeltaTable(str(path))
    if has_column_mapping(path):
        table = pa.table(QueryBuilder().register("t", dt_).execute("select * from t").read_all())
    else:
        table = dt_.to_pyarrow_table()
    names = [n for n in table.column_names if not n.startswith("_cdc_")]
    out = []
    for r in table.select(names).to_pylist():
        out.append({n: (mapping(types[n], modes).lake(v) if n in types else v) for n, v in r.items()})
    return names, sorted(out, key=_sort_key)


def target_types(path) -> dict[str, str]:
    """The Spark type (simple string) of each source column of the target table at ``path``."""
    from deltalake import DeltaTable

    schema = json.loads(DeltaTable(str(path)).schema().to_json())
    return {f["name"]: _spark_type(f["type"]) for f in schema["fields"] if not f["name"].startswith("_cdc_")}


def _spark_type(t) -> str:
    if isinstance(t, dict):
        if t["type"] == "array":
            return f"array<{_spark_type(t['elementType'])}>"
        return t["type"]
    return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}.get(t, t)

