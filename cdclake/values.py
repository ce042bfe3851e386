"""Column values: source types to Spark types, and the canonical text encoding of images.

Everything here builds Spark SQL expression *text* (for ``F.expr``), so the work runs in the
JVM. Image values in the canonical event are strings in the canonical encoding of the column's
Spark type (see :mod:`cdclake.model`); :func:`normalize_sql` turns a format's own text into that
encoding and says whether the value was readable at all, :func:`cast_sql` turns canonical text
into the typed value in the applier.

Sources of the type mappings:
* MySQL type text (Canal ``mysqlType``; MySQL reference manual, data types chapter).
* java.sql.Types codes (Canal ``sqlType``; JDK ``java.sql.Types`` constants).
"""

from __future__ import annotations

# Canonical timestamp text: microseconds, UTC (the session time zone is UTC).
TS_FORMAT = "yyyy-MM-dd HH:mm:ss.SSSSSS"

_NUMERIC_RE = r"^\\s*[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?\\s*$"
_FLOAT_RE = r"^\\s*([+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|NaN|[+-]?Infinity)\\s*$"
_INTEGRAL = "('tinyint','smallint','int','bigint')"


def let(bindings: dict[str, str], body: str, var: str = "x") -> str:
    """SQL expression: ``body`` evaluated with each name of ``bindings`` bound once to its
    expression (``<var>.<name>`` in ``body``; ``var`` defaults to ``x``, another name lets one
    ``let`` nest in another). Spark does not eliminate common subexpressions inside lambda
    functions, so an expression used many times in a CASE over image entries is computed once
    this way."""
    fields = ", ".join(f"'{k}', {v}" for k, v in bindings.items())
    return f"element_at(transform(array(named_struct({fields})), {var} -> {body}), 1)"


def normalize_sql(value: str, spark_type: str, binary_input: str = "base64") -> str:
    """SQL expression: ``struct<value: string, ok: boolean>`` for one image value.

    ``value`` is the format's text for the value (SQL NULL = NULL at the source), ``spark_type``
    the column's Spark type as text. ``value`` of the result is the canonical text (see
    :mod:`cdclake.model`); ``ok`` is false when a non-null value cannot be read as that type
    (the record is then rejected with ``BAD_VALUE``). ``binary_input`` says how the format writes
    bytes: ``base64`` (Debezium, DataWorks) or ``latin1`` (Canal writes each byte as one
    ISO-8859-1 character). MySQL's zero dates (``0000-00-00``) read as NULL, as Debezium does.
    """
    v, t = "x.v", "x.t"
    zero_date = f"({v} like '0000-00-00%')"
    if binary_input == "latin1":
        binary = f"base64(encode({v}, 'ISO-8859-1'))"
        binary_ok = "true"
    else:
        binary = f"regexp_replace({v}, '\\\\s', '')"
        binary_ok = f"try_to_binary(regexp_replace({v}, '\\\\s', ''), 'base64') is not null"
    ts = f"coalesce(try_to_timestamp({v}), try_cast({v} as timestamp))"
    canon = f"""(case
      when {v} is null then null
      when {t} = 'string' then {v}
      when {t} in {_INTEGRAL} then cast(try_cast(trim({v}) as bigint) as string)
      when {t} like 'decimal%' then trim({v})
      when {t} in ('float','double') then trim({v})
      when {t} = 'boolean' then (case when lower(trim({v})) in ('true','1') then 'true'
                                      when lower(trim({v})) in ('false','0') then 'false' end)
      when {t} = 'date' then (case when {zero_date} then null
                                   else cast(try_cast(substr(trim({v}), 1, 10) as date) as string) end)
      when {t} = 'timestamp' then (case when {zero_date} then null
                                        else date_format({ts}, '{TS_FORMAT}') end)
      when {t} = 'binary' then {binary}
      else {v} end)"""
    # ``ok`` reads the canonical text (``y.c``) where its nullness says whether the value was
    # readable, so dates and timestamps are parsed once
    c = "y.c"
    ok = f"""(case
      when {v} is null or {t} = 'string' then true
      when {t} in {_INTEGRAL} then trim({v}) rlike '^[+-]?[0-9]+$' and (case
                                     when {t} = 'tinyint' then try_cast(trim({v}) as tinyint) is not null
                                     when {t} = 'smallint' then try_cast(trim({v}) as smallint) is not null
                                     when {t} = 'int' then try_cast(trim({v}) as int) is not null
                                     else try_cast(trim({v}) as bigint) is not null end)
      when {t} like 'decimal%' then {v} rlike '{_NUMERIC_RE}'
      when {t} in ('float','double') then {v} rlike '{_FLOAT_RE}'
      when {t} = 'boolean' then {c} is not null
      when {t} in ('date', 'timestamp') then {zero_date} or {c} is not null
      when {t} = 'binary' then {binary_ok}
      else true end)"""
    return let({"v": value, "t": f"lower({spark_type})"}, let({"c": canon}, f"named_struct('value', {c}, 'ok', {ok})", "y"))


def normalize_image_sql(image: str, types: str, binary_input: str = "base64") -> str:
    """SQL expression: ``struct<image: map<string,string>, ok: boolean>`` for a whole image.

    ``image`` is a ``map<string,string>`` of the format's value text, ``types`` a
    ``map<string,string>`` column name -> Spark type (columns missing from it are strings).
    """
    norm = normalize_sql("v", f"coalesce(element_at({types}, k), 'string')", binary_input)
    checked = f"transform_values({image}, (k, v) -> {norm})"
    # bound once: the normalization is the costly part and both fields read it
    body = "named_struct('image', transform_values(n.c, (k, v) -> v.value), 'ok', coalesce(forall(map_values(n.c), e -> e.ok), true))"
    return let({"c": checked}, body, "n")


def cast_sql(value: str, spark_type: str) -> str:
    """SQL expression: canonical text ``value`` as the typed value of ``spark_type`` (a literal
    Spark type such as ``decimal(10,2)``); used by the applier."""
    t = spark_type.lower()
    if t == "binary":
        return f"try_to_binary({value}, 'base64')"
    if t.startswith("array<"):  # canonical text of an array: its JSON text
        return f"from_json({value}, '{t}')"
    if t == "string":
        return value
    return f"try_cast({value} as {spark_type})"


