"""Canonical text of ``dts-avro`` values (one union-typed VALUE struct per column): the SQL
that reads each branch (Integer, Character with its charset, Decimal, Float, Timestamp,
DateTime, TimestampWithTimeZone, geometry and object branches) into the text of its column's
Spark type, and the driver-side facts it needs (the JVM's zone ids, the session's charsets).
See :mod:`cdclake.formats.dts_avro.types` for the table of types and texts.
"""

from __future__ import annotations

import re

from pyspark.sql import SparkSession

from cdclake.formats.dts_avro.schema import VALUE_BRANCHES
from cdclake.formats.dts_avro.types import (
    B_BGEO, B_BOBJ, B_CHAR, B_DEC, B_DT, B_EMPTY, B_FLOAT, B_INT, B_NULL, B_TGEO, B_TOBJ, B_TS, B_TSTZ, INT_RE,
    JAVA_CHARSETS, MAX_SECONDS, MYSQL_TYPES, NUM_RE, allowed_sql, branch_sql, column_type_sql,
    value_type_sql,
)
from cdclake.sqltext import sql_in, sql_lookup, sql_str
from cdclake.values import TS_FORMAT

_ZONE_ID_RE = re.compile(r"^[A-Za-z0-9/_+\-]+$")


def _secs_sql(second: str, micros: str) -> str:
    return f"try_cast((coalesce({second}, 0) * 1000000 + coalesce({micros}, 0)) / 1000000.0 as decimal(8,6))"


def _dt_timestamp_sql(d: str, tz: str | None = None) -> str:
    """timestamp of DateTime ``d`` (wall time in ``tz``, else UTC); null when it is not a time."""
    args = f"{d}.year, {d}.month, {d}.day, coalesce({d}.hour, 0), coalesce({d}.minute, 0), {_secs_sql(f'{d}.second', f'{d}.millis')}"
    if tz is not None:
        args += f", {tz}"
    return f"try_make_timestamp({args})"


def _zero_date_sql(d: str) -> str:
    return f"coalesce({d}.year = 0 and coalesce({d}.month, 0) = 0 and coalesce({d}.day, 0) = 0, false)"


def _time_text_sql(d: str) -> str:
    """``[-]HH:MM:SS[.ffffff]`` of a time-of-day / duration DateTime ``d`` (MySQL TIME: hours may
    exceed 24, fields carry the sign)."""
    h, m, s, us = (f"coalesce({d}.{f}, 0)" for f in ("hour", "minute", "second", "millis"))
    sign = f"(case when {h} < 0 or {m} < 0 or {s} < 0 or {us} < 0 then '-' else '' end)"
    frac = f"(case when {us} != 0 then concat('.', format_string('%06d', abs({us}))) else '' end)"
    return f"concat({sign}, format_string('%02d:%02d:%02d', abs({h}), abs({m}), abs({s})), {frac})"


def zone_sql(tz: str, zone_ids: tuple[str, ...]) -> str:
    """A time-zone id Spark accepts for ``tz`` (``+08:00``, ``GMT+8``, ``UTC``, a region id the JVM
    knows), else null: an unknown id must never reach ``make_timestamp``, which raises on it.
    Region ids are looked up in one comma-separated literal (one small expression, whatever the
    number of zones)."""
    z = f"trim({tz})"
    off = r"^(?i)(GMT|UTC|UT)?([+-])([0-9]{1,2})(:?([0-9]{2}))?$"
    hh = f"cast(regexp_extract({z}, '{off}', 3) as int)"
    mm = f"coalesce(cast(nullif(regexp_extract({z}, '{off}', 5), '') as int), 0)"
    regions = ""
    if zone_ids:
        listed = "," + ",".join(zone_ids) + ","
        regions = f"when {z} rlike '^[A-Za-z0-9/_+-]+$' and instr('{listed}', concat(',', {z}, ',')) > 0 then {z}"
    return f"""(case when upper({z}) in ('', 'Z', 'UTC', 'GMT', 'UT') then '+00:00'
      when {z} rlike '{off}' then (case when {hh} * 60 + {mm} <= 1080 and {mm} < 60
          then concat(regexp_extract({z}, '{off}', 2), format_string('%02d:%02d', {hh}, {mm})) end)
      {regions} else null end)"""


def _chars_sql(ch: str, legacy_charsets: bool) -> str:
    """struct<text string, ok boolean>: Character ``ch`` decoded by its charset. Spark 4.0's
    ``decode`` raises on malformed input, so every native decode is guarded by a validity check
    (``is_valid_utf8``, hex patterns for ASCII / UTF-16 / UTF-32)."""
    cs, b = f"lower(trim({ch}.charset))", f"{ch}.value"
    hx = f"hex({b})"
    u16be = "^((?!D[89AB]|D[C-F])[0-9A-F]{4}|D[89AB][0-9A-F]{2}D[C-F][0-9A-F]{2})*$"
    u16le = "^((?![0-9A-F]{2}D[89AB]|[0-9A-F]{2}D[C-F])[0-9A-F]{4}|[0-9A-F]{2}D[89AB][0-9A-F]{2}D[C-F])*$"
    u32 = "^((?!0000D[89A-F])00(0[0-9A-F]|10)[0-9A-F]{4})*$"

    def guarded(valid: str, charset: str) -> str:
        return f"named_struct('text', case when {valid} then decode({b}, '{charset}') end, 'ok', {valid})"

    java = ""
    if legacy_charsets:
        java = f"when {sql_in(cs, JAVA_CHARSETS)} then named_struct('text', decode({b}, {sql_lookup(cs, {k: sql_str(v) for k, v in JAVA_CHARSETS.items()})}), 'ok', true)"
    return f"""(case
      when {cs} in ('utf8', 'utf8mb4', 'utf8mb3', 'utf-8') then named_struct('text', cast({b} as string), 'ok', is_valid_utf8({b}))
      when {cs} in ('ascii', 'us-ascii') then named_struct('text', cast({b} as string), 'ok', {hx} rlike '^([0-7][0-9A-F])*$')
      when {cs} in ('latin1', 'iso-8859-1', 'binary') then named_struct('text', decode({b}, 'ISO-8859-1'), 'ok', true)
      when {cs} in ('ucs2', 'utf16', 'utf-16', 'utf-16be') then {guarded(f"{hx} rlike '{u16be}'", 'UTF-16BE')}
      when {cs} in ('utf16le', 'utf-16le') then {guarded(f"{hx} rlike '{u16le}'", 'UTF-16LE')}
      when {cs} in ('utf32', 'utf-32') then {guarded(f"{hx} rlike '{u32}'", 'UTF-32')}
      {java}
      else named_struct('text', cast(null as string), 'ok', false) end)"""


def parts_sql(v: str, b: str, zone: str, t: str, legacy_charsets: bool) -> str:
    """struct of the readings of value ``v`` (branch ``b``) that :func:`value_sql` asks for when
    the column's Spark type is ``t``, each computed once and only for its branch and the types
    that read it (null otherwise; the whole struct is null for a NULL or EmptyObject): ``int`` / ``dec`` (trimmed text),
    ``fl`` (double text), ``ts`` (Timestamp as timestamp; ``ts_ok``: in range; ``ts_zero``: MySQL's
    zero TIMESTAMP), ``dt`` / ``dt_date`` (DateTime as timestamp / date; ``dt_zero``: zero date),
    ``dt_time`` (time-of-day text), ``dt_year``, ``tz`` (TimestampWithTimeZone in UTC), ``ch``
    (Character decoded: struct<text, ok>), ``obj`` (TextGeometry / TextObject text), ``bin``
    (bytes of BinaryGeometry / BinaryObject / Character). ``zone``: the checked zone id of a
    TimestampWithTimeZone value (:func:`zone_sql`)."""
    ts, d, tz = f"{v}.member{B_TS}", f"{v}.member{B_DT}", f"{v}.member{B_TSTZ}"
    ts_ok = f"(abs({ts}.timestamp) <= {MAX_SECONDS} and abs(coalesce({ts}.millis, 0)) <= 999999)"
    only = lambda x, *types: f"case when {sql_in(t, types)} then {x} end"  # noqa: E731
    # (field, its type, its reading per branch): one struct per branch, NULL in the fields of
    # other branches (a CASE per field would test the branch fifteen times a value)
    fields = [
        ("int", "string", {B_INT: f"trim({v}.member{B_INT}.value)"}),
        ("dec", "string", {B_DEC: f"trim({v}.member{B_DEC}.value)"}),
        ("fl", "string", {B_FLOAT: f"cast({v}.member{B_FLOAT}.value as string)"}),
        ("ts", "timestamp", {B_TS: f"case when {ts_ok} then timestamp_micros({ts}.timestamp * 1000000 + coalesce({ts}.millis, 0)) end"}),
        ("ts_ok", "boolean", {B_TS: ts_ok}),
        ("ts_zero", "boolean", {B_TS: f"is_mysql and {ts}.timestamp = 0 and coalesce({ts}.millis, 0) = 0"}),
        ("dt", "timestamp", {B_DT: only(f"case when {d}.year is not null then {_dt_timestamp_sql(d)} end", "timestamp", "string")}),
        ("dt_date", "date", {B_DT: only(f"cast(try_make_timestamp({d}.year, {d}.month, {d}.day, 0, 0, 0) as date)", "date")}),
        ("dt_zero", "boolean", {B_DT: _zero_date_sql(d)}),
        ("dt_time", "string", {B_DT: only(_time_text_sql(d), "string")}),
        ("dt_year", "int", {B_DT: f"{d}.year"}),
        ("tz", "timestamp", {B_TSTZ: _dt_timestamp_sql(f"{tz}.value", zone)}),
        ("ch", "struct<text:string,ok:boolean>", {B_CHAR: only(_chars_sql(f"{v}.member{B_CHAR}", legacy_charsets), "string")}),
        ("obj", "string", {B_TGEO: f"{v}.member{B_TGEO}.value", B_TOBJ: f"{v}.member{B_TOBJ}.value"}),
        ("bin", "binary", {B_BGEO: f"{v}.member{B_BGEO}.value", B_BOBJ: f"{v}.member{B_BOBJ}.value",
                           B_CHAR: only(f"{v}.member{B_CHAR}.value", "binary")}),
    ]
    arms = []
    for br in sorted({x for _, _, by in fields for x in by}):
        each = ", ".join(f"'{name}', {by.get(br, f'cast(null as {typ})')}" for name, typ, by in fields)
        arms.append(f"when {br} then named_struct({each})")
    return f"(case {b} {' '.join(arms)} end)"


def value_sql(p: str, b: str, t: str) -> str:
    """struct<text string, ok boolean>: the value whose readings are ``p`` (:func:`parts_sql`)
    and branch ``b`` as canonical text of Spark type ``t``; ``ok`` is false when the value cannot
    be read as ``t``."""

    def res(text: str, ok: str = "true") -> str:
        return f"named_struct('text', {text}, 'ok', {ok})"

    bad = res("cast(null as string)", "false")
    fmt = lambda x: f"date_format({x}, '{TS_FORMAT}')"  # noqa: E731
    is_int = f"({p}.int rlike '{INT_RE}')"
    # the text of an integer that fits ``typ``: read as ``typ`` (a bigint or int is cheaper to
    # read than a decimal(38,0), and its text the same)
    int_as = lambda typ: res(f"cast(try_cast({p}.int as {typ}) as string)", f"{is_int} and try_cast({p}.int as {typ}) is not null")  # noqa: E731
    dec = res(f"{p}.dec", f"({p}.dec rlike '{NUM_RE}')")
    ts = res(f"case when not {p}.ts_zero then {fmt(f'{p}.ts')} end", f"{p}.ts_ok")
    dt = res(f"case when not {p}.dt_zero then {fmt(f'{p}.dt')} end", f"({p}.dt_zero or {p}.dt is not null)")
    tz = res(fmt(f"{p}.tz"), f"{p}.tz is not null")
    b64 = res(f"base64({p}.bin)")
    as_string = f"""(case {b}
        when {B_CHAR} then {p}.ch
        when {B_TGEO} then {res(f'{p}.obj')} when {B_TOBJ} then {res(f'{p}.obj')}
        when {B_INT} then {res(f'{p}.int')} when {B_DEC} then {res(f'{p}.dec')} when {B_FLOAT} then {res(f'{p}.fl')}
        when {B_TS} then {ts}
        when {B_DT} then (case when {p}.dt_year is null then {res(f'{p}.dt_time')} else {dt} end)
        when {B_TSTZ} then {tz}
        when {B_BGEO} then {b64} when {B_BOBJ} then {b64}
        else {bad} end)"""
    return f"""(case
      when {b} in ({B_NULL}, {B_EMPTY}) then {res("cast(null as string)")}
      when {t} = 'string' then {as_string}
      when {t} = 'binary' then (case
          when {b} in ({B_CHAR}, {B_BGEO}, {B_BOBJ}) then {b64}
          when {b} in ({B_TGEO}, {B_TOBJ}) then {res(f"base64(encode({p}.obj, 'UTF-8'))")}
          else {bad} end)
      when {t} = 'int' then (case {b}
          when {B_DT} then {res(f'cast({p}.dt_year as string)', f'{p}.dt_year is not null')}
          when {B_INT} then {int_as('int')}
          else {bad} end)
      when {b} = {B_INT} and {t} = 'bigint' then {int_as('bigint')}
      when {b} = {B_INT} and {t} like 'decimal(%' then {int_as('decimal(38,0)')}
      when {t} like 'decimal(%' then (case when {b} = {B_DEC} then {dec} else {bad} end)
      when {t} = 'double' then (case {b}
          when {B_FLOAT} then {res(f'{p}.fl')}
          when {B_DEC} then {dec}
          when {B_INT} then {res(f'{p}.int', is_int)}
          else {bad} end)
      when {t} = 'timestamp' then (case {b} when {B_TS} then {ts} when {B_DT} then {dt} when {B_TSTZ} then {tz} else {bad} end)
      when {t} = 'date' then (case {b}
          when {B_DT} then {res(f'case when not {p}.dt_zero then cast({p}.dt_date as string) end', f'({p}.dt_zero or {p}.dt_date is not null)')}
          when {B_TS} then {res(f'case when not {p}.ts_zero then cast(cast({p}.ts as date) as string) end', f'{p}.ts_ok')}
          else {bad} end)
      else {bad} end)"""


# --- driver-side helpers ----------------------------------------------------------------------


_ZONE_IDS: tuple[str, ...] | None = None


def zone_ids(spark: SparkSession) -> tuple[str, ...]:
    """The region time-zone ids the JVM knows, asked once per process on the driver (one py4j
    call); empty when there is no JVM gateway (Spark Connect): then only offsets are accepted."""
    global _ZONE_IDS
    if _ZONE_IDS is None:
        try:
            jvm = spark.sparkContext._jvm
            joined = str(jvm.java.lang.String.join(",", jvm.java.time.ZoneId.getAvailableZoneIds()))
            _ZONE_IDS = tuple(sorted(z for z in joined.split(",") if _ZONE_ID_RE.match(z)))
        except Exception:  # Spark Connect or no JVM: offsets only
            return ()
    return _ZONE_IDS


def legacy_charsets_enabled(spark: SparkSession) -> bool:
    """True when the session lets ``decode`` use any Java charset and replace malformed input
    (``spark.sql.legacy.javaCharsets`` and ``spark.sql.legacy.codingErrorAction``)."""
    get = lambda k: str(spark.conf.get(k, "false")).strip().lower() == "true"  # noqa: E731
    return get("spark.sql.legacy.javaCharsets") and get("spark.sql.legacy.codingErrorAction")


def columns_sql(zones: tuple[str, ...], legacy: bool) -> str:
    """SQL: per column of a data record (``flds``, ``aimg``, ``bimg``, ``is_mysql``), its
    ``name``, Spark type ``t``, ``source_type``, whether each image leaves it out
    (``a_none``/``b_none``), its canonical texts (``a_text``/``b_text``) and the first
    ``reason`` to reject the record (NULL when none). ``zones``: the JVM's zone ids
    (:func:`zone_ids`); ``legacy``: the session reads any Java
    charset (:func:`legacy_charsets_enabled`)."""
    branch_name = lambda b: f"try_element_at(array({', '.join(sql_str(n) for n in VALUE_BRANCHES)}), {b} + 1)"  # noqa: E731
    mysql_name = sql_lookup("c.code", {k: sql_str(v) for k, v in MYSQL_TYPES.items()}, "concat('MySQL type ', c.code)")
    source_type = f"(case when is_mysql then {mysql_name} else concat(coalesce(r.source.sourceType, 'source'), ' type ', c.code) end)"
    a, b = "get(aimg, c.i)", "get(bimg, c.i)"  # the column's values, read where used, not carried
    charset = lambda v, br: f"case when {br} = {B_CHAR} then concat(' charset ', {v}.member{B_CHAR}.charset) else '' end"  # noqa: E731
    # Per column, in stages (a lambda has no common-subexpression elimination, so each stage
    # computes its fields once and the next one reads them): 1. name, code, the column's index
    # and its values' union branches; 2. the type each value implies; 3. the column's Spark
    # type, checked zone ids; 4. each value's readings; 5. canonical texts; then the checks and
    # the first reason to reject. A stage's fields are copied into the next (a lambda's result
    # is copied), so the large VALUE structs are read by index (``get``) where a stage needs
    # them, and what only the last step needs (source type, charsets, fit) is computed there.
    stage1 = f"""transform(flds, (f, i) -> named_struct('name', f.name, 'code', f.dataTypeNumber, 'i', i,
               'ab', {branch_sql('get(aimg, i)')}, 'bb', {branch_sql('get(bimg, i)')}))"""
    keep = "'name', c.name, 'code', c.code, 'i', c.i, 'ab', c.ab, 'bb', c.bb"
    stage2 = f"""transform({stage1}, c -> named_struct({keep},
               'at', {value_type_sql(a, 'c.ab')}, 'bt', {value_type_sql(b, 'c.bb')}))"""
    stage3 = f"""transform({stage2}, c -> named_struct({keep},
               't', {column_type_sql('c')},
               'az', case when c.ab = {B_TSTZ} then {zone_sql(f'{a}.member{B_TSTZ}.timezone', zones)} end,
               'bz', case when c.bb = {B_TSTZ} then {zone_sql(f'{b}.member{B_TSTZ}.timezone', zones)} end))"""
    stage4 = f"""transform({stage3}, c -> named_struct({keep}, 't', c.t,
               'ap', {parts_sql(a, 'c.ab', 'c.az', 'c.t', legacy)}, 'bp', {parts_sql(b, 'c.bb', 'c.bz', 'c.t', legacy)},
               'a_none', coalesce({a}.member{B_EMPTY} = 'NONE', false), 'b_none', coalesce({b}.member{B_EMPTY} = 'NONE', false)))"""
    stage5 = f"""transform({stage4}, c -> named_struct({keep}, 't', c.t, 'a_none', c.a_none, 'b_none', c.b_none,
               'av', {value_sql('c.ap', 'c.ab', 'c.t')}, 'bv', {value_sql('c.bp', 'c.bb', 'c.t')}))"""
    reason = f"""(case
        when not {allowed_sql('c.code', 'c.ab')} then concat('after value is a ', {branch_name('c.ab')}, ', which does not fit ', {source_type})
        when not {allowed_sql('c.code', 'c.bb')} then concat('before value is a ', {branch_name('c.bb')}, ', which does not fit ', {source_type})
        when not coalesce(c.av.ok, false) then concat('after value (', {branch_name('c.ab')}, {charset(a, 'c.ab')}, ') cannot be read as ', c.t)
        when not coalesce(c.bv.ok, false) then concat('before value (', {branch_name('c.bb')}, {charset(b, 'c.bb')}, ') cannot be read as ', c.t)
        end)"""
    cols = f"""transform({stage5}, c -> named_struct('name', c.name, 't', c.t, 'source_type', {source_type},
               'a_none', c.a_none, 'b_none', c.b_none, 'a_text', c.av.text, 'b_text', c.bv.text, 'reason', {reason}))"""
    return cols
