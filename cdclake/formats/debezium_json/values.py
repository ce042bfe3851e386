"""Debezium values -> canonical text: per-column SQL templates over a value's text as
``from_json`` gives it in a ``map<string,string>`` (``{0}``), for a column of a Kafka Connect
schema (:func:`wire_sql`, the kinds :mod:`cdclake.formats.debezium_json.connect` reads) or of
a record without one (:func:`inferred_sql`, by the JSON kind of each value). The table of
types and conversions is in :mod:`cdclake.formats.debezium_json.connect`.

Every template is plain top-level SQL (no lambda) and ANSI-safe (``try_cast``, ``try_add``,
range guards before ``timestamp_millis``/``conv``).
"""

from __future__ import annotations

from cdclake.formats.typed import TS_FORMAT, canonical_sql
from cdclake.sqltext import sql_str

#: text of a JSON number as ``from_json`` copies it into a string (Jackson: integers as digits,
#: other numbers through a double: ``1.5``, ``1.0E10``)
NUMBER_TEXT = r"'^-?[0-9]+(\\.[0-9]+(E-?[0-9]+)?)?$'"
_NON_FINITE = "('\"NaN\"', '\"Infinity\"', '\"-Infinity\"')"
_INT_TEXT = r"'^\\s*[+-]?[0-9]+\\s*$'"
_DIGITS = r"'^[0-9]+$'"
_NUMERIC_RE = r"'^\\s*[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?\\s*$'"
#: 2^60 and 2^120: a hex text of up to 34 digits is read as three chunks of at most 15 digits
_P60 = "1152921504606846976BD"
_P120 = "1329227995784915872903807060280344576BD"
#: the kinds whose Spark type is date or timestamp (MySQL zero dates there read as NULL)
DATE_KINDS = ("date", "ts_ms", "ts_us", "ts_ns", "ts_iso")
#: the kinds whose wire value is base64 text read in a pre-projection (see decimal_hex_sql)
HEX_KINDS = ("decimal", "vsdecimal")
#: the timestamps Spark can hold, in ms since the epoch: 0001-01-01 .. 9999-12-31T23:59:59.999
_MS_LO, _MS_HI = -62135596800000, 253402300799999
#: the kinds of a number of units since the epoch: Spark's function reading it, its range
_EPOCH_KINDS = {"ts_ms": ("timestamp_millis", _MS_LO, _MS_HI), "ts_us": ("timestamp_micros", f"{_MS_LO}000", f"{_MS_HI}999")}
#: the kinds of a time of day (a MySQL TIME: a duration): SQL of its microseconds from the number ``{0}``
_TIME_KINDS = {"time_ms": "try_multiply({0}, 1000)", "time_us": "{0}", "time_ns": "({0} div 1000)"}
#: the kinds whose text reads as the canonical text of a Spark type (:func:`canonical_sql`)
_CANONICAL_KINDS = {"ts_iso": "timestamp", "boolean": "boolean", "binary": "binary"}


def is_number_sql(v: str) -> str:
    """SQL: ``v`` (a value's text) is the text of a JSON number."""
    return f"({v} rlike {NUMBER_TEXT})"


def unquote_non_finite_sql(v: str) -> str:
    """SQL: a value's text with JSON's non-finite numbers (``NaN``, ``Infinity``, which
    ``from_json`` copies into a string as ``"NaN"`` with the quotes) as the JSON strings
    ``NaN``/``Infinity`` that they have always been read as (the event used to be read twice,
    and the first reading wrote them out as strings)."""
    return f"(case when {v} in {_NON_FINITE} then substr({v}, 2, length({v}) - 2) else {v} end)"


def is_non_finite_sql(v: str) -> str:
    """SQL: the raw text ``v`` is one of those non-finite numbers (a JSON string since)."""
    return f"({v} in {_NON_FINITE})"


def _decimal_normal(v: str) -> str:
    return f"(case when {v} rlike {_NUMERIC_RE} then trim({v}) end)"


def _integer(v: str, spark_type: str) -> str:
    """SQL: the canonical text of an integer value's text ``v`` (digits only, a sign and white
    space around them allowed) for a column of ``spark_type`` (``int``, ``bigint``)."""
    return f"(case when {v} rlike {_INT_TEXT} then {canonical_sql(v, spark_type)} end)"


def _time_text(micros: str) -> str:
    """SQL: ``[-]HH:MM:SS.ffffff`` from microseconds (of day, or a MySQL TIME duration)."""
    m = micros
    return (
        f"(case when {m} is null or {m} not between -86400000000000 and 86400000000000 then null else "
        f"format_string('%s%02d:%02d:%02d.%06d', case when {m} < 0 then '-' else '' end, abs({m}) div 3600000000, "
        f"(abs({m}) div 60000000) % 60, (abs({m}) div 1000000) % 60, abs({m}) % 1000000) end)"
    )


def decimal_ambiguous_sql(v: str) -> str:
    """SQL: the text ``v`` of a Decimal value could be a JSON string (base64 bytes) as well as
    another JSON value that is read differently: digits only (``"1234"`` is valid base64, and
    so is ``"true"``), a boolean, an object or an array. Only then is the value's JSON kind
    needed (a second parse of the few records that have such a value)."""
    return f"({v} rlike {_DIGITS} or {v} in ('true', 'false') or {v} rlike '^[\\\\[{{]')"


def decimal_is_string_sql(v: str, kind: str) -> str:
    """SQL: the Decimal value whose text is ``v`` was a JSON string (base64 bytes), not a JSON
    number; ``kind``: its JSON kind (``schema_of_variant`` of the value) where
    :func:`decimal_ambiguous_sql` says the text cannot tell."""
    return f"(case when {decimal_ambiguous_sql(v)} then coalesce({kind} = 'STRING', false) when {is_number_sql(v)} then false else true end)"


def decimal_hex_sql(v: str, is_string: str) -> str:
    """SQL (first pre-projection of a Decimal column): the upper-case hex of the base64 bytes of
    ``v`` when the value is a JSON string (``is_string``), '' when that is not base64; NULL when
    the value is a JSON number (read as a number) or NULL."""
    return f"(case when {v} is not null and {is_string} then coalesce(hex(try_to_binary(regexp_replace({v}, '\\\\s', ''), 'base64')), '') end)"


def vsdecimal_hex_sql(v: str) -> str:
    """SQL (first pre-projection of a VariableScaleDecimal column ``{"scale": s, "value":
    base64}``): ``<scale>:<hex of value>`` ('' parts when missing or not base64)."""
    vs = f"from_json({v}, 'scale int, value string')"
    return (
        f"(case when {v} is not null then concat(coalesce(cast({vs}.scale as string), ''), ':', "
        f"coalesce(hex(try_to_binary(regexp_replace({vs}.value, '\\\\s', ''), 'base64')), '')) end)"
    )


def unscaled_digits_sql(h: str, kind: str) -> str:
    """SQL (second pre-projection): the first pre-projection's hex ``h`` read as the unscaled
    value's digits ('' when unreadable); for ``vsdecimal`` ``<scale>:<digits>``. Any length:
    up to :data:`_SHORT_HEX` hex digits in decimal arithmetic (:func:`unscaled_sql`), longer
    ones (a PostgreSQL ``numeric`` of more than 36 digits) by :func:`big_unscaled_sql`."""
    if kind == "vsdecimal":
        hx = f"substring_index({h}, ':', -1)"
        return f"(case when {h} is not null then concat(substring_index({h}, ':', 1), ':', {_digits_text(hx)}) end)"
    return f"(case when {h} is not null then {_digits_text(h)} end)"


#: hex digits (60 bits a chunk, two chunks) read by decimal arithmetic; beyond, by BigInt
_SHORT_HEX = 30


def _digits_text(h: str) -> str:
    return (f"(case when length({h}) <= {_SHORT_HEX} then coalesce(cast({unscaled_sql(h)} as string), '') "
            f"else coalesce({big_unscaled_sql(h)}, '') end)")


def _plus_one_sql(d: str) -> str:
    """SQL: the decimal digits ``d`` (no sign) plus one, as text of any length: the digits
    before the trailing nines, the last of them raised by one, the nines turned to zeros."""
    parts = r"'^(.*?)([0-8]?)(9*)$'"
    head, last, nines = (f"regexp_extract({d}, {parts}, {i})" for i in (1, 2, 3))
    return f"concat({head}, case when {last} = '' then '1' else cast(cast({last} as int) + 1 as string) end, repeat('0', length({nines})))"


def big_unscaled_sql(h: str) -> str:
    """SQL: the signed decimal text of big-endian two's-complement bytes of any length, given as
    the upper-case hex text ``h`` (NULL when empty or not hex).

    Spark's decimals stop at 38 digits, so the digits come from the JVM's arbitrary-precision
    integer: ``reflect('scala.math.BigInt', 'apply', hex, 16)`` (a static method of Scala's
    library, which every Spark JVM has; a SQL expression, no UDF). A negative value
    (first bit set) is ``-(~x + 1)``: the inverted digits' value plus one, with a minus sign."""
    neg = f"(substr({h}, 1, 1) >= '8')"
    inverted = f"translate({h}, '0123456789ABCDEF', 'FEDCBA9876543210')"
    big = lambda x: f"reflect('scala.math.BigInt', 'apply', {x}, 16)"  # noqa: E731
    return (f"(case when {h} is null or {h} = '' or {h} rlike '[^0-9A-F]' then null "
            f"when {neg} then concat('-', {_plus_one_sql(big(inverted))}) else {big(h)} end)")


def unscaled_sql(h: str) -> str:
    """SQL: the signed value (decimal(38,0)) of big-endian two's-complement bytes given as the
    upper-case hex text ``h``; NULL when empty, longer than 17 bytes or beyond 38 digits.

    No loop over the bytes: the hex digits (of the inverted bytes when negative, -1 - ~x) are
    read as three chunks of at most 15 digits (``conv``, exact in a long) and combined with
    decimal arithmetic (``try_*``: never an overflow error, also under ANSI mode)."""
    neg = f"(substr({h}, 1, 1) >= '8')"
    g = f"(case when {neg} then translate({h}, '0123456789ABCDEF', 'FEDCBA9876543210') else {h} end)"
    n = f"length({h})"
    chunk = lambda e: f"cast(coalesce(conv(nullif({e}, ''), 16, 10), '0') as decimal(38,0))"  # noqa: E731
    lo = chunk(f"right({g}, 15)")
    mid = chunk(f"right(left({g}, greatest({n} - 15, 0)), 15)")
    hi = chunk(f"left({g}, greatest({n} - 30, 0))")
    u = f"try_add(try_add(try_multiply({hi}, {_P120}), try_multiply({mid}, {_P60})), {lo})"
    return (
        f"(case when {h} is null or {n} = 0 or {n} > 34 then cast(null as decimal(38,0)) "
        f"when {neg} then cast(try_subtract(cast(-1 as decimal(38,0)), {u}) as decimal(38,0)) else cast({u} as decimal(38,0)) end)"
    )


def scaled_text_sql(d: str, scale: str) -> str:
    """SQL: plain decimal text of the integer text ``d`` (``-`` sign allowed) times
    ``10^-scale`` (``223``, 2 -> ``2.23``; ``5``, 3 -> ``0.005``; ``-12``, 0 -> ``-12``;
    ``7``, -2 -> ``700``). Text only: no decimal arithmetic, exact for any length."""
    scale = f"({scale})"  # a negative literal after '-' would read as a comment
    neg = f"({d} like '-%')"
    dd = f"regexp_replace({d}, '^-', '')"
    sign = f"(case when {neg} then '-' else '' end)"
    w = f"greatest(length({dd}), {scale} + 1)"
    padded = f"lpad({dd}, {w}, '0')"
    return (
        f"(case when {d} is null or {scale} is null then null "
        f"when {scale} <= 0 then concat({d}, case when {dd} = '0' then '' else repeat('0', -{scale}) end) "
        f"else concat({sign}, substr({padded}, 1, {w} - {scale}), '.', substr({padded}, {w} - {scale} + 1)) end)"
    )


def wire_sql(col: dict | None, pre: str | None = None) -> str:
    """SQL template (``{0}`` = the value's text) turning a value of the declared column ``col``
    (a :func:`connect_columns` entry; None: undeclared, kept as text) into canonical text, NULL
    when it cannot be read. ``pre`` is the column's entry in the pre-projection (the unscaled
    digits of a Decimal's base64 bytes, see :func:`decimal_hex_sql`), for Decimal kinds."""
    kind = "string" if col is None else col["kind"]
    spark_type = "string" if col is None else col["spark_type"]
    v = "{0}"
    num = is_number_sql(v)
    big = f"try_cast({v} as bigint)"
    if kind == "decimal":
        # pre: the unscaled digits of the base64 bytes ('' when unreadable), NULL for numbers
        scale = col["scale"]
        from_bytes = f"(case when {pre} = '' then null else {scaled_text_sql(pre, str(scale))} end)"
        exp = f"format_string('%.{max(scale, 0)}f', try_cast({v} as double))"
        if spark_type == "string":
            return f"(case when {pre} is not null then {from_bytes} when {v} rlike '[eE]' then {exp} else {v} end)"
        return f"(case when {pre} is not null then {from_bytes} when {v} rlike '[eE]' then {_decimal_normal(exp)} else {_decimal_normal(v)} end)"
    if kind == "vsdecimal":
        # pre: '<scale>:<unscaled digits>'
        digits = f"substring_index({pre}, ':', -1)"
        s = f"try_cast(nullif(substring_index({pre}, ':', 1), '') as int)"
        return f"(case when {digits} = '' then null else {scaled_text_sql(digits, s)} end)"
    if kind == "date":
        days = f"try_cast({v} as int)"
        return (
            f"(case when {num} then (case when {days} between -719162 and 2932896 then cast(date_add(date'1970-01-01', {days}) as string) end) "
            f"else {canonical_sql(v, 'date')} end)"
        )
    if kind in _EPOCH_KINDS:
        read, lo, hi = _EPOCH_KINDS[kind]
        return f"(case when {num} then (case when {big} between {lo} and {hi} then date_format({read}({big}), '{TS_FORMAT}') end) else {canonical_sql(v, 'timestamp')} end)"
    if kind == "ts_ns":
        return f"(case when {num} then {canonical_sql(f'date_format(timestamp_micros({big} div 1000), {chr(39)}{TS_FORMAT}{chr(39)})', 'timestamp')} else {canonical_sql(v, 'timestamp')} end)"
    if kind in _TIME_KINDS:
        return f"(case when {num} then {_time_text(_TIME_KINDS[kind].format(big))} else {v} end)"
    if kind in ("int", "bigint"):
        return _integer(v, kind)
    if kind in ("float", "double"):
        return f"cast(try_cast({v} as {kind}) as string)"
    if kind in _CANONICAL_KINDS:
        return canonical_sql(v, _CANONICAL_KINDS[kind])
    if kind == "array":
        # the array's JSON text as it is, when it reads as the Spark array type
        return f"(case when from_json({v}, {sql_str(spark_type)}) is not null then {v} end)"
    return v


# ---- no schema: types from the JSON kinds of the values -------------------------------------------

#: class letter -> (spark_type, source_type) of an inferred column
INFERRED = {
    "N": (None, "json:null"),
    "S": ("string", "json:string"),
    "B": ("boolean", "json:boolean"),
    "O": ("string", "json:object"),
    "A": ("string", "json:array"),
    "F": ("double", "json:number"),
    "I": ("bigint", "json:integer"),
    "D": ("decimal(38,0)", "json:integer"),
    "X": ("string", "json:integer"),
}


def kind_class_sql(kind: str, text: str) -> str:
    """SQL: the class letter of a value from its JSON kind ``kind`` (``schema_of_variant`` text,
    NULL when the value is absent) and its text: an integer beyond bigint (``DECIMAL(p,0)``)
    is ``D``, a number with a fraction or exponent in its text ``F``."""
    k = kind
    return (
        f"(case when {k} is null or {k} = 'VOID' then 'N' when {k} = 'STRING' or {is_non_finite_sql(text)} then 'S' when {k} = 'BOOLEAN' then 'B' "
        f"when {k} like 'OBJECT%' then 'O' when {k} like 'ARRAY%' then 'A' "
        f"when {k} in ('DOUBLE', 'FLOAT') or {text} rlike '[.eE]' then 'F' "
        f"when {k} in ('BIGINT', 'INT', 'SMALLINT', 'TINYINT') then 'I' when {k} like 'DECIMAL%' then 'D' else 'X' end)"
    )


def inferred_sql(cls: str) -> str:
    """SQL template (``{0}`` = the value's text): canonical text of a value of an inferred
    column whose class letter is ``cls`` (an SQL expression)."""
    v = "{0}"
    return (
        f"(case {cls} when 'I' then {_integer(v, 'bigint')} "
        f"when 'F' then cast(try_cast({v} as double) as string) when 'B' then {canonical_sql(v, 'boolean')} "
        f"when 'D' then {_decimal_normal(v)} else {v} end)"
    )


def inferred_column_sql(name: str, cls: str) -> str:
    """SQL: the COLUMN_SCHEMA struct of an inferred column (class letter ``cls``, SQL)."""
    st = "(case " + " ".join(f"when {cls} = '{c}' then {'null' if t is None else repr(t)}" for c, (t, _) in INFERRED.items()) + " end)"
    src = "(case " + " ".join(f"when {cls} = '{c}' then '{s}'" for c, (_, s) in INFERRED.items()) + " end)"
    return (
        f"named_struct('name', {sql_str(name)}, 'source_type', {src}, 'spark_type', cast({st} as string), "
        "'precision', cast(null as int), 'scale', cast(null as int), 'nullable', cast(null as boolean))"
    )
