"""Decoder for ``dts-avro``: Alibaba Cloud DTS "DTS Avro" records (change tracking / DTS to Kafka).

Sources:

* seed ``001_a1c6319148bc2083.txt`` (DTS message-queue data formats, "DTS Avro": parse with the
  DTS Avro schema; "in DTS Avro, DDL statements are of type STRING");
* the schema, ``avsc/`` (Alibaba's ``aliyun-dts-subscribe-demo``, Apache-2.0, see
  ``avsc/NOTICE.md``), and ``shared/FORMATS.md`` (``dts-avro``);
* where the seed is silent, Alibaba's own readers of the format: the official Java SDK
  ``aliyun/aliyun-dts-subscribe-sdk-java`` (``AvroRecordParser``, ``DefaultValueDeserializer``,
  ``ObjectNameUtils``, ``TimeUtils``) and the subscribe demo's MySQL field converter (the
  ``dataTypeNumber`` codes, the MySQL charset -> Java charset table). No real DTS Avro record is
  public; the tests build records from the schema.

Wire shape: each Kafka value is one Avro *binary datum* of ``com.alibaba.dts.formats.avro.Record``
(no container header, no schema registry prefix)::

    {version: int, id: long (unique, increasing in the stream), sourceTimestamp: long (seconds),
     sourcePosition: "4165@1001", safeSourcePosition: "", sourceTxid: "", source: {sourceType:
     MySQL|Oracle|..., version: "5.7"}, operation: INSERT|UPDATE|DELETE|DDL|BEGIN|COMMIT|...,
     objectName: "db.table" | null, processTimestamps: [long] | null,
     tags: {"pk_uk_info": "{\\"PRIMARY\\":[\\"id\\"]}", ...},
     fields: null | string | [{name: "id", dataTypeNumber: 3}, ...],
     beforeImages / afterImages: null | string (DDL text) | [VALUE, ...] (one per field, same order),
     bornTimestamp: long (ms)}

    VALUE = null | Integer{precision, value: "123"} | Character{charset: "utf8mb4", value: bytes}
          | Decimal{value: "1.50", precision, scale} | Float{value: double, precision, scale}
          | Timestamp{timestamp: seconds, millis: MICROseconds} | DateTime{year, month, day,
            hour, minute, second, millis: MICROseconds (all nullable)}
          | TimestampWithTimeZone{value: DateTime, timezone} | BinaryGeometry{type, value: bytes}
          | TextGeometry{type, value} | BinaryObject{type, value: bytes} | TextObject{type, value}
          | EmptyObject (enum NULL | NONE)

Decoding is one ``from_avro(value, Record schema, PERMISSIVE)``; Spark 4.0 gives a struct whose
fields are all null for bytes that are not a ``Record`` datum (random bytes, truncated datum, an
operation symbol out of range): such records are rejected with ``AVRO_DECODE_ERROR``. A null
value (Kafka tombstone) decodes to no event.

Mapping to the canonical event (one record -> zero or one event):

* ``operation``: INSERT -> ``c``; UPDATE -> ``u``; DELETE -> ``d``; INIT (full-load rows) ->
  ``r`` (snapshot read); DDL -> kind ``ddl`` with the text of the ``string`` branch of
  ``afterImages`` (``beforeImages`` when only that one holds it), except a ``TRUNCATE``
  statement on a table named by ``objectName``, which is a data event with op ``t`` (DTS has
  no truncate operation: the binlog's statement reaches the stream as a DDL record; its text is
  kept in ``ddl``); BEGIN -> ``tx_begin``; COMMIT ->
  ``tx_end`` (the transaction's changes, which carry the same ``sourceTxid``, are held back
  until its COMMIT arrives: ``transaction_bounds``); ROLLBACK -> ``tx_end`` as well: a MySQL binlog transaction that ends in ROLLBACK
  is one whose changes to non-transactional tables stayed applied (only such transactions reach
  the binlog), so the changes DTS delivered before it are real and the transaction is over;
  HEARTBEAT -> ``heartbeat``; ABORT, CHECKPOINT, COMMAND, FILL, FINISH, CONTROL, RDB, NOOP
  carry nothing to apply and decode to no event (never an error).
* Table: ``objectName`` is split on ``.`` and each part un-escaped (``\\u002E`` -> ``.``), as the
  official SDK's ``ObjectNameUtils`` does: ``db.table`` -> database, table (schema null);
  ``db.schema.table`` (PostgreSQL, SQL Server, Oracle sources) -> database, schema, table;
  ``db`` alone -> database only. Data changes without a table (no objectName, one part, more
  than three parts) are rejected with ``MISSING_TABLE``; DDL without a table is kept (its
  ``table`` is null), transaction markers keep the database only, heartbeats have neither.
* Key: the ``PRIMARY`` entry of the JSON in ``tags["pk_uk_info"]`` (as the official SDK reads
  it), else null (``--primary-key`` or the applier's fallbacks apply).
* Order: ``position.order = [id]``, ``position.text = "<id>:<sourcePosition>"``;
  ``tx_id = sourceTxid`` (null when empty); ``event_time_ms`` = ``sourceTimestamp`` in ms:
  the value is seconds (the demo formats it with ``datetime.fromtimestamp``); a value of 10^10 or
  more is already milliseconds and kept (the SDK's ``TimeUtils.getTimestampSeconds`` rule).
* Columns: ``fields[i]`` names column *i* and gives its ``dataTypeNumber``; ``beforeImages[i]`` /
  ``afterImages[i]`` hold its values. For MySQL sources (``source.sourceType`` MySQL or DRDS) the
  number is MySQL's column type code (:data:`MYSQL_TYPES`, DTS "MySQL data types and
  dataTypeNumber values"): ``columns[].source_type`` is its name (``MYSQL_TYPE_INT32``) and the
  Spark type follows the code (:func:`_column_type_sql`); a value whose union branch
  contradicts the code (a Character for an INT column) rejects the record with ``BAD_VALUE``.
  For other sources the code is the source's own and is only reported (``Oracle type 2``); the
  Spark type then follows the value's branch. Types and canonical text (see
  :mod:`cdclake.values`):

  ======================  =====================================  ===============================
  branch                  Spark type                             canonical text
  ======================  =====================================  ===============================
  Integer                 bigint; decimal(20,0) / decimal(38,0)   plain integer text
                          when the value does not fit a bigint
                          (BIGINT UNSIGNED); int for YEAR
  Character               string (binary when charset binary)    bytes decoded by ``charset``
  Decimal                 decimal(precision, scale) (string      value text
                          beyond 38 digits)
  Float                   double                                 Spark's double text (1.5, 1.0E10)
  Timestamp               timestamp (date for DATE columns)      ``timestamp`` s + ``millis`` us,
                                                                 UTC; MySQL zero TIMESTAMP -> NULL
  DateTime                timestamp; date (DATE codes); int      wall time as UTC; zero date ->
                          (YEAR); string ``[-]HH:MM:SS[.ffffff]``  NULL
                          (TIME codes)
  TimestampWithTimeZone   timestamp                              converted to UTC
  BinaryGeometry/Object   binary                                 base64
  TextGeometry/Object     string                                 value
  EmptyObject NULL        (no type of its own)                   NULL
  EmptyObject NONE        (no type of its own)                   column absent from the image
  ======================  =====================================  ===============================

  ``millis`` of Timestamp and DateTime holds *microseconds* despite its name: the official SDK
  reads ``Timestamp.millis`` as the micro part (``UnixTimestamp.setMicro``) and
  ``DateTime.millis * 1000`` as nanoseconds, and the demo converter prints it with six digits.
  Charsets: utf8 / utf8mb4 / utf8mb3 are read as UTF-8 (invalid bytes: ``BAD_VALUE``), ascii as
  US-ASCII, latin1 / binary as ISO-8859-1, ucs2 / utf16 as UTF-16BE, utf16le, utf32; other MySQL
  charsets (gbk, gb18030, big5, sjis ...) need Spark's Java charsets and are decoded only when
  the session has ``spark.sql.legacy.javaCharsets=true`` and
  ``spark.sql.legacy.codingErrorAction=true`` (Spark 4.0's ``decode`` otherwise rejects them);
  else the record is rejected with ``BAD_VALUE`` naming the charset. A column whose type the
  value decides (DECIMAL: precision and scale; VARCHAR/STRING and BLOB codes: binary or text by
  the charset; GEOMETRY; every column of a non-MySQL source) and whose values in the record are
  all NULL (or EmptyObject) has ``spark_type`` null: not stated. The applier then takes the
  type from the batch's other events, else keeps the table's (``TablePlan.untyped``); a column
  new to the table that no event of the batch types gets the code's default type
  (:func:`cdclake.formats.sqltypes.untyped_spark_type` of its ``source_type``: decimal(38,10)
  for DECIMAL, binary for BLOB and GEOMETRY, else string). (Until session 15 every NULL got
  that default, so one NULL widened a decimal(10,2) column to decimal(38,10).)
* Images: INSERT / INIT use ``afterImages``, DELETE ``beforeImages``, UPDATE both (the before
  image may be absent). Columns whose value is EmptyObject ``NONE`` are left out of the image;
  when the after image leaves any out, ``present`` lists the columns it carries (a partial
  image), else ``present`` is null.

Rejects: ``AVRO_DECODE_ERROR`` (not a Record datum); ``MISSING_TABLE`` (data change without a
table in objectName); ``MISSING_IMAGE`` (INSERT/UPDATE/INIT without an afterImages array,
DELETE without a beforeImages array, an empty image, DDL without its text); ``SCHEMA_MISMATCH``
(data change without a ``fields`` array, an image whose length differs from ``fields``, a column
name twice); ``BAD_VALUE`` (a value that contradicts its column's type or cannot be read).
"""

from __future__ import annotations

import io
import re

from fastavro import parse_schema, schemaless_reader
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from cdclake.errors import RejectCode
from cdclake.formats.base import Capabilities, DecodeOptions, Decoder, event_sql, finish, first_error, format_facts, position_sql
from cdclake.formats.dts_avro.schema import OPERATIONS, RECORD_SCHEMA, RECORD_SCHEMA_JSON, VALUE_BRANCHES
from cdclake.values import TS_FORMAT

#: the DTS ``Record`` schema as fastavro reads it (``looks_like``)
_PARSED_RECORD_SCHEMA = parse_schema(RECORD_SCHEMA)

NAME = "dts-avro"

#: ``operation`` -> what it means (facts.json ``ops``); the schema's other operations are skipped
OPS: dict[str, str] = format_facts(__package__)["ops"]
DATA_OPS = {k: v for k, v in OPS.items() if v in ("c", "u", "d", "r")}
TX_OPS = {k: v for k, v in OPS.items() if v in ("tx_begin", "tx_end")}
(DDL_OP,) = (k for k, v in OPS.items() if v == "ddl")
(HEARTBEAT_OP,) = (k for k, v in OPS.items() if v == "heartbeat")
#: operations that carry nothing to apply: no event, not an error
SKIP_OPS = tuple(o for o in OPERATIONS if o not in (*DATA_OPS, *TX_OPS, DDL_OP, HEARTBEAT_OP))

#: ``source.sourceType`` values whose ``dataTypeNumber`` is a MySQL column type code
MYSQL_SOURCES = ("MySQL", "DRDS")

#: MySQL column type codes (``dataTypeNumber``) and their names, as DTS documents them ("MySQL data
#: types and dataTypeNumber values"; the numbers are MySQL's ``enum_field_types``).
MYSQL_TYPES = {
    0: "MYSQL_TYPE_DECIMAL",
    1: "MYSQL_TYPE_INT8",
    2: "MYSQL_TYPE_INT16",
    3: "MYSQL_TYPE_INT32",
    4: "MYSQL_TYPE_FLOAT",
    5: "MYSQL_TYPE_DOUBLE",
    6: "MYSQL_TYPE_NULL",
    7: "MYSQL_TYPE_TIMESTAMP",
    8: "MYSQL_TYPE_INT64",
    9: "MYSQL_TYPE_INT24",
    10: "MYSQL_TYPE_DATE",
    11: "MYSQL_TYPE_TIME",
    12: "MYSQL_TYPE_DATETIME",
    13: "MYSQL_TYPE_YEAR",
    14: "MYSQL_TYPE_DATE_NEW",
    15: "MYSQL_TYPE_VARCHAR",
    16: "MYSQL_TYPE_BIT",
    17: "MYSQL_TYPE_TIMESTAMP_NEW",
    18: "MYSQL_TYPE_DATETIME_NEW",
    19: "MYSQL_TYPE_TIME_NEW",
    245: "MYSQL_TYPE_JSON",
    246: "MYSQL_TYPE_DECIMAL_NEW",
    247: "MYSQL_TYPE_ENUM",
    248: "MYSQL_TYPE_SET",
    249: "MYSQL_TYPE_TINY_BLOB",
    250: "MYSQL_TYPE_MEDIUM_BLOB",
    251: "MYSQL_TYPE_LONG_BLOB",
    252: "MYSQL_TYPE_BLOB",
    253: "MYSQL_TYPE_VAR_STRING",
    254: "MYSQL_TYPE_STRING",
    255: "MYSQL_TYPE_GEOMETRY",
}

# union branch indexes (``memberN`` of an image value); -1 is a SQL NULL value
B_NULL, B_INT, B_CHAR, B_DEC, B_FLOAT, B_TS, B_DT, B_TSTZ, B_BGEO, B_TGEO, B_BOBJ, B_TOBJ, B_EMPTY = range(-1, 12)

INT_CODES = (1, 2, 3, 8, 9, 16)
DECIMAL_CODES = (0, 246)
FLOAT_CODES = (4, 5)
TIMESTAMP_CODES = (7, 17, 12, 18)  # TIMESTAMP and DATETIME
DATE_CODES = (10, 14)
TIME_CODES = (11, 19)
YEAR_CODE = 13
STRING_CODES = (15, 253, 254)  # VARCHAR, VAR_STRING, STRING (also BINARY/VARBINARY, ENUM/SET in binlog)
TEXT_CODES = (245, 247, 248)  # JSON, ENUM, SET
BLOB_CODES = (249, 250, 251, 252)  # TEXT columns are BLOB in the binlog too
GEOMETRY_CODE = 255

#: which value branches each MySQL code accepts (a SQL NULL and EmptyObject always fit); codes
#: missing here accept every branch
ALLOWED_BRANCHES = {
    **{c: (B_INT,) for c in INT_CODES},
    **{c: (B_DEC,) for c in DECIMAL_CODES},
    **{c: (B_FLOAT,) for c in FLOAT_CODES},
    6: (),
    **{c: (B_TS, B_DT, B_TSTZ) for c in TIMESTAMP_CODES},
    **{c: (B_TS, B_DT) for c in DATE_CODES},
    **{c: (B_DT,) for c in TIME_CODES},
    YEAR_CODE: (B_DT, B_INT),
    **{c: (B_CHAR, B_BOBJ, B_TOBJ) for c in STRING_CODES},
    **{c: (B_TOBJ, B_CHAR) for c in TEXT_CODES},
    **{c: (B_BOBJ, B_CHAR, B_TOBJ) for c in BLOB_CODES},
    GEOMETRY_CODE: (B_BGEO, B_TGEO, B_BOBJ),
}

#: MySQL charset -> Java charset for ``decode`` under ``spark.sql.legacy.javaCharsets`` (the
#: charsets Spark 4.0 decodes natively are handled without it, see :func:`_chars_sql`)
JAVA_CHARSETS = {
    "gbk": "GBK",
    "gb2312": "GB2312",
    "gb18030": "GB18030",
    "big5": "Big5",
    "sjis": "Shift_JIS",
    "cp932": "windows-31j",
    "ujis": "EUC-JP",
    "eucjpms": "x-eucJP-Open",
    "euckr": "EUC-KR",
    "cp1250": "windows-1250",
    "cp1251": "windows-1251",
    "cp1256": "windows-1256",
    "cp1257": "windows-1257",
    "latin2": "ISO-8859-2",
    "latin5": "ISO-8859-9",
    "latin7": "ISO-8859-13",
    "greek": "ISO-8859-7",
    "hebrew": "ISO-8859-8",
    "koi8r": "KOI8-R",
    "koi8u": "KOI8-U",
    "cp850": "IBM850",
    "cp852": "IBM852",
    "cp866": "IBM866",
    "tis620": "TIS-620",
    "macroman": "x-MacRoman",
    "macce": "x-MacCentralEurope",
}

_INT_RE = r"^[+-]?[0-9]+$"
_NUM_RE = r"^[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?$"
#: largest |seconds| accepted for a Timestamp (year 9999), keeps the micro arithmetic in range
_MAX_SECONDS = 253402300799
_ZONE_ID_RE = re.compile(r"^[A-Za-z0-9/_+\-]+$")


def _in(expr: str, values) -> str:
    vals = list(values)
    if not vals:
        return "false"
    return f"{expr} in ({', '.join(repr(v) for v in vals)})"


def _case_map(expr: str, mapping: dict, default: str = "null") -> str:
    whens = " ".join(f"when {k!r} then {v}" for k, v in mapping.items())
    return f"(case {expr} {whens} else {default} end)"


# --- SQL builders over one image value ``v`` (a VALUE struct expression) --------------------------


def _branch_sql(v: str) -> str:
    """int: the union branch of value ``v`` (0..11, :data:`VALUE_BRANCHES`), -1 for NULL."""
    whens = " ".join(f"when {v}.member{i} is not null then {i}" for i in range(len(VALUE_BRANCHES)))
    return f"(case when {v} is null then -1 {whens} else -1 end)"


def _int_type_sql(text: str) -> str:
    """Spark type of an Integer value's text: bigint when it fits, else decimal(20,0) (BIGINT
    UNSIGNED), decimal(38,0), string beyond 38 digits; null when it is not an integer."""
    t = f"trim({text})"
    digits = f"length(regexp_replace({t}, '^[+-]?0*', ''))"
    return f"""(case when not ({t} rlike '{_INT_RE}') then null
      when try_cast({t} as bigint) is not null then 'bigint'
      when {digits} <= 20 then 'decimal(20,0)'
      when {digits} <= 38 then 'decimal(38,0)' else 'string' end)"""


def _decimal_type_sql(d: str) -> str:
    """Spark type of a Decimal value ``d``: decimal(precision, scale); string beyond 38 digits;
    decimal(38,10) when precision/scale are not usable."""
    p, s = f"{d}.precision", f"{d}.scale"
    return f"""(case when {p} between 1 and 38 and {s} between 0 and {p} then concat('decimal(', {p}, ',', {s}, ')')
      when {p} > 38 then 'string' else 'decimal(38,10)' end)"""


def _value_type_sql(v: str, b: str) -> str:
    """Spark type the value ``v`` (branch ``b``) implies on its own; null for NULL / EmptyObject."""
    dt = f"{v}.member{B_DT}"
    cs = f"lower(trim({v}.member{B_CHAR}.charset))"
    return f"""(case {b}
      when {B_INT} then coalesce({_int_type_sql(f'{v}.member{B_INT}.value')}, 'bigint')
      when {B_CHAR} then (case when {cs} in ('binary', '') or {cs} is null then 'binary' else 'string' end)
      when {B_DEC} then {_decimal_type_sql(f'{v}.member{B_DEC}')}
      when {B_FLOAT} then 'double'
      when {B_TS} then 'timestamp'
      when {B_DT} then (case when {dt}.year is null and {dt}.hour is not null then 'string'
                              when {dt}.hour is null then 'date' else 'timestamp' end)
      when {B_TSTZ} then 'timestamp'
      when {B_BGEO} then 'binary' when {B_TGEO} then 'string'
      when {B_BOBJ} then 'binary' when {B_TOBJ} then 'string'
      else null end)"""


_INT_RANK = "array('bigint', 'decimal(20,0)', 'decimal(38,0)', 'string')"


def _column_type_sql(c: str) -> str:
    """Spark type of column ``c`` (struct with ``code``, ``ab``/``bb`` branches and ``at``/``bt``
    value types of the after/before values) for one record; ``is_mysql`` says whether ``code`` is
    a MySQL type code. Integer columns take the widest type their values need."""
    hint_b = f"(case when {c}.ab >= 0 and {c}.ab != {B_EMPTY} then {c}.ab else {c}.bb end)"
    hint_t = f"(case when {c}.ab >= 0 and {c}.ab != {B_EMPTY} then {c}.at else {c}.bt end)"
    ints = (
        f"try_element_at({_INT_RANK}, cast(greatest(coalesce(case when {c}.ab = {B_INT} then array_position({_INT_RANK}, {c}.at) end, 1), "
        f"coalesce(case when {c}.bb = {B_INT} then array_position({_INT_RANK}, {c}.bt) end, 1)) as int))"
    )
    code = f"{c}.code"
    # no value tells the type (both NULL or EmptyObject): null, "not stated" (the applier takes
    # the type from other events of the batch, else keeps the table's: TablePlan.untyped)
    unknown = f"{hint_b} in ({B_NULL}, {B_EMPTY})"
    mysql = f"""(case
      when {_in(code, INT_CODES)} then (case when {ints} = 'string' then 'decimal(38,0)' else {ints} end)
      when {_in(code, DECIMAL_CODES)} then (case when {hint_b} = {B_DEC} then {hint_t} when {unknown} then null else 'decimal(38,10)' end)
      when {_in(code, FLOAT_CODES)} then 'double'
      when {code} = 6 then 'string'
      when {_in(code, TIMESTAMP_CODES)} then 'timestamp'
      when {_in(code, DATE_CODES)} then 'date'
      when {_in(code, TIME_CODES)} then 'string'
      when {code} = {YEAR_CODE} then 'int'
      when {_in(code, STRING_CODES)} then (case when {hint_t} = 'binary' then 'binary' when {unknown} then null else 'string' end)
      when {_in(code, TEXT_CODES)} then 'string'
      when {_in(code, BLOB_CODES)} then (case when {hint_b} in ({B_CHAR}, {B_TOBJ}) and {hint_t} = 'string' then 'string'
                                              when {unknown} then null else 'binary' end)
      when {code} = {GEOMETRY_CODE} then (case when {hint_b} = {B_TGEO} then 'string' when {unknown} then null else 'binary' end)
      else coalesce({hint_t}, 'string') end)"""
    other = f"(case when {hint_b} = {B_INT} then {ints} else {hint_t} end)"
    return f"(case when is_mysql then {mysql} else {other} end)"


def _allowed_sql(code: str, b: str) -> str:
    """boolean: branch ``b`` fits MySQL type code ``code`` (always true for other sources)."""
    whens = []
    for c, branches in ALLOWED_BRANCHES.items():
        whens.append(f"when {c} then {_in(b, branches)}")
    return f"(not is_mysql or {b} in ({B_NULL}, {B_EMPTY}) or (case {code} {' '.join(whens)} else true end))"


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


def _zone_sql(tz: str, zone_ids: tuple[str, ...]) -> str:
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
        java = f"when {_in(cs, JAVA_CHARSETS)} then named_struct('text', decode({b}, {_case_map(cs, {k: repr(v) for k, v in JAVA_CHARSETS.items()})}), 'ok', true)"
    return f"""(case
      when {cs} in ('utf8', 'utf8mb4', 'utf8mb3', 'utf-8') then named_struct('text', cast({b} as string), 'ok', is_valid_utf8({b}))
      when {cs} in ('ascii', 'us-ascii') then named_struct('text', cast({b} as string), 'ok', {hx} rlike '^([0-7][0-9A-F])*$')
      when {cs} in ('latin1', 'iso-8859-1', 'binary') then named_struct('text', decode({b}, 'ISO-8859-1'), 'ok', true)
      when {cs} in ('ucs2', 'utf16', 'utf-16', 'utf-16be') then {guarded(f"{hx} rlike '{u16be}'", 'UTF-16BE')}
      when {cs} in ('utf16le', 'utf-16le') then {guarded(f"{hx} rlike '{u16le}'", 'UTF-16LE')}
      when {cs} in ('utf32', 'utf-32') then {guarded(f"{hx} rlike '{u32}'", 'UTF-32')}
      {java}
      else named_struct('text', cast(null as string), 'ok', false) end)"""


def _parts_sql(v: str, b: str, zone: str, legacy_charsets: bool) -> str:
    """struct of the readings of value ``v`` (branch ``b``) that a column type may ask for, each
    computed once and only for its branch (null otherwise): ``int`` / ``dec`` (trimmed text),
    ``fl`` (double text), ``ts`` (Timestamp as timestamp; ``ts_ok``: in range; ``ts_zero``: MySQL's
    zero TIMESTAMP), ``dt`` / ``dt_date`` (DateTime as timestamp / date; ``dt_zero``: zero date),
    ``dt_time`` (time-of-day text), ``dt_year``, ``tz`` (TimestampWithTimeZone in UTC), ``ch``
    (Character decoded: struct<text, ok>), ``obj`` (TextGeometry / TextObject text), ``bin``
    (bytes of BinaryGeometry / BinaryObject / Character). ``zone``: the checked zone id of a
    TimestampWithTimeZone value (:func:`_zone_sql`)."""
    ts, d, tz = f"{v}.member{B_TS}", f"{v}.member{B_DT}", f"{v}.member{B_TSTZ}"
    ts_ok = f"(abs({ts}.timestamp) <= {_MAX_SECONDS} and abs(coalesce({ts}.millis, 0)) <= 999999)"
    when = lambda br, x: f"case when {b} = {br} then {x} end"  # noqa: E731
    return f"""named_struct(
      'int', {when(B_INT, f"trim({v}.member{B_INT}.value)")},
      'dec', {when(B_DEC, f"trim({v}.member{B_DEC}.value)")},
      'fl', {when(B_FLOAT, f"cast({v}.member{B_FLOAT}.value as string)")},
      'ts', {when(B_TS, f"case when {ts_ok} then timestamp_micros({ts}.timestamp * 1000000 + coalesce({ts}.millis, 0)) end")},
      'ts_ok', {when(B_TS, ts_ok)},
      'ts_zero', {when(B_TS, f"is_mysql and {ts}.timestamp = 0 and coalesce({ts}.millis, 0) = 0")},
      'dt', {when(B_DT, f"case when {d}.year is not null then {_dt_timestamp_sql(d)} end")},
      'dt_date', {when(B_DT, f"cast(try_make_timestamp({d}.year, {d}.month, {d}.day, 0, 0, 0) as date)")},
      'dt_zero', {when(B_DT, _zero_date_sql(d))},
      'dt_time', {when(B_DT, _time_text_sql(d))},
      'dt_year', {when(B_DT, f"{d}.year")},
      'tz', {when(B_TSTZ, _dt_timestamp_sql(f"{tz}.value", zone))},
      'ch', {when(B_CHAR, _chars_sql(f"{v}.member{B_CHAR}", legacy_charsets))},
      'obj', case {b} when {B_TGEO} then {v}.member{B_TGEO}.value when {B_TOBJ} then {v}.member{B_TOBJ}.value end,
      'bin', case {b} when {B_BGEO} then {v}.member{B_BGEO}.value when {B_BOBJ} then {v}.member{B_BOBJ}.value
                      when {B_CHAR} then {v}.member{B_CHAR}.value end)"""


def _value_sql(p: str, b: str, t: str) -> str:
    """struct<text string, ok boolean>: the value whose readings are ``p`` (:func:`_parts_sql`)
    and branch ``b`` as canonical text of Spark type ``t``; ``ok`` is false when the value cannot
    be read as ``t``."""

    def res(text: str, ok: str = "true") -> str:
        return f"named_struct('text', {text}, 'ok', {ok})"

    bad = res("cast(null as string)", "false")
    fmt = lambda x: f"date_format({x}, '{TS_FORMAT}')"  # noqa: E731
    is_int = f"({p}.int rlike '{_INT_RE}')"
    int_text = f"cast(try_cast({p}.int as decimal(38,0)) as string)"
    int_as = lambda typ: res(int_text, f"{is_int} and try_cast({p}.int as {typ}) is not null")  # noqa: E731
    dec = res(f"{p}.dec", f"({p}.dec rlike '{_NUM_RE}')")
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


class DtsAvroDecoder(Decoder):
    """Alibaba DTS "DTS Avro" records; see the module docstring for the mapping."""

    name = NAME
    file_kind = "avro"
    capabilities = Capabilities.load(__package__)  # facts.json beside this module

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        spark = raw.sparkSession
        zones = zone_ids(spark)
        legacy = legacy_charsets_enabled(spark)

        # The parsed records are cut from their plan (a lazy local checkpoint: computed once, on
        # first use) so that no later query holds the from_avro expression: Spark 4.0's FromAvro
        # evaluates its options map (a CreateMap, whose map builder is shared by every copy of
        # the expression) whenever a plan holding it is canonicalized, and the batch's tables
        # are planned in concurrent threads: two threads at once fail with DUPLICATED_MAP_KEY
        # "mode" (seen once in CI, tests/formats/dts_avro/test_roundtrip.py::test_ingest_scrambled).
        df = raw.withColumn("r", from_avro(F.col("value"), RECORD_SCHEMA_JSON, {"mode": "PERMISSIVE"})).localCheckpoint(eager=False)
        data_ops = _in("r.operation", DATA_OPS)
        df = df.selectExpr(
            "*",
            "value is null as is_tombstone",
            "r.operation as op",
            # objectName: split on '.', each part un-escaped ('\u002E' stands for a dot in a name)
            "transform(split(r.objectName, '\\\\.'), p -> replace(p, '\\\\u002E', '.')) as names",
            "coalesce(r.source.sourceType in ('MySQL', 'DRDS'), false) as is_mysql",
            "r.fields.member1 as flds",
            "case when r.operation in ('INSERT', 'UPDATE', 'INIT') then r.afterImages.member1 end as aimg",
            "case when r.operation in ('UPDATE', 'DELETE') then r.beforeImages.member1 end as bimg",
            "coalesce(r.afterImages.member0, r.beforeImages.member0) as ddl_text",
            "case when abs(r.sourceTimestamp) >= 10000000000 then r.sourceTimestamp else r.sourceTimestamp * 1000 end as et",
            "from_json(try_element_at(r.tags, 'pk_uk_info'), 'map<string,array<string>>') as pk_uk",
        )
        branch_name = lambda b: f"try_element_at(array({', '.join(repr(n) for n in VALUE_BRANCHES)}), {b} + 1)"  # noqa: E731
        mysql_name = _case_map("c.code", {k: repr(v) for k, v in MYSQL_TYPES.items()}, "concat('MySQL type ', c.code)")
        source_type = f"(case when is_mysql then {mysql_name} else concat(coalesce(r.source.sourceType, 'source'), ' type ', c.code) end)"
        charset = lambda side, b: f"case when {b} = {B_CHAR} then concat(' charset ', c.{side}.member{B_CHAR}.charset) else '' end"  # noqa: E731
        # Per column, in stages (a lambda has no common-subexpression elimination, so each stage
        # computes its fields once and the next one reads them): 1. name, code, after/before
        # values and their union branches; 2. the type each value implies; 3. the column's Spark
        # type, checked zone ids; 4. each value's readings; 5. canonical texts, checks, the
        # first reason to reject. Large VALUE structs are not carried past stage 4.
        stage1 = f"""transform(flds, (f, i) -> named_struct('name', f.name, 'code', f.dataTypeNumber,
                   'a', try_element_at(aimg, i + 1), 'b', try_element_at(bimg, i + 1),
                   'ab', {_branch_sql('try_element_at(aimg, i + 1)')}, 'bb', {_branch_sql('try_element_at(bimg, i + 1)')}))"""
        stage2 = f"""transform({stage1}, c -> named_struct('name', c.name, 'code', c.code, 'a', c.a, 'b', c.b, 'ab', c.ab, 'bb', c.bb,
                   'at', {_value_type_sql('c.a', 'c.ab')}, 'bt', {_value_type_sql('c.b', 'c.bb')}))"""
        stage3 = f"""transform({stage2}, c -> named_struct('name', c.name, 'code', c.code, 'a', c.a, 'b', c.b, 'ab', c.ab, 'bb', c.bb,
                   't', {_column_type_sql('c')},
                   'az', case when c.ab = {B_TSTZ} then {_zone_sql(f'c.a.member{B_TSTZ}.timezone', zones)} end,
                   'bz', case when c.bb = {B_TSTZ} then {_zone_sql(f'c.b.member{B_TSTZ}.timezone', zones)} end))"""
        stage4 = f"""transform({stage3}, c -> named_struct('name', c.name, 't', c.t, 'ab', c.ab, 'bb', c.bb,
                   'source_type', {source_type},
                   'ap', {_parts_sql('c.a', 'c.ab', 'c.az', legacy)}, 'bp', {_parts_sql('c.b', 'c.bb', 'c.bz', legacy)},
                   'a_none', coalesce(c.a.member{B_EMPTY} = 'NONE', false), 'b_none', coalesce(c.b.member{B_EMPTY} = 'NONE', false),
                   'a_allowed', {_allowed_sql('c.code', 'c.ab')}, 'b_allowed', {_allowed_sql('c.code', 'c.bb')},
                   'a_charset', {charset('a', 'c.ab')}, 'b_charset', {charset('b', 'c.bb')}))"""
        stage5 = f"""transform({stage4}, c -> named_struct('name', c.name, 't', c.t, 'source_type', c.source_type,
                   'a_none', c.a_none, 'b_none', c.b_none, 'ab', c.ab, 'bb', c.bb, 'a_allowed', c.a_allowed, 'b_allowed', c.b_allowed,
                   'a_charset', c.a_charset, 'b_charset', c.b_charset,
                   'av', {_value_sql('c.ap', 'c.ab', 'c.t')}, 'bv', {_value_sql('c.bp', 'c.bb', 'c.t')}))"""
        reason = f"""(case
            when not c.a_allowed then concat('after value is a ', {branch_name('c.ab')}, ', which does not fit ', c.source_type)
            when not c.b_allowed then concat('before value is a ', {branch_name('c.bb')}, ', which does not fit ', c.source_type)
            when not coalesce(c.av.ok, false) then concat('after value (', {branch_name('c.ab')}, c.a_charset, ') cannot be read as ', c.t)
            when not coalesce(c.bv.ok, false) then concat('before value (', {branch_name('c.bb')}, c.b_charset, ') cannot be read as ', c.t)
            end)"""
        cols = f"""transform({stage5}, c -> named_struct('name', c.name, 't', c.t, 'source_type', c.source_type,
                   'a_none', c.a_none, 'b_none', c.b_none, 'a_text', c.av.text, 'b_text', c.bv.text, 'reason', {reason}))"""
        df = df.selectExpr(
            "*",
            "case when size(names) between 1 and 3 then nullif(try_element_at(names, 1), '') end as db",
            "case when size(names) = 3 then nullif(try_element_at(names, 2), '') end as sch",
            "case when size(names) = 2 then nullif(try_element_at(names, 2), '') when size(names) = 3 then nullif(try_element_at(names, 3), '') end as tbl",
            "size(array_distinct(transform(flds, f -> f.name))) != size(flds) as dup_names",
            f"{cols} as cols",
        )
        image = lambda side: (  # noqa: E731
            f"case when not dup_names and {side}img is not null then "
            f"map_from_entries(transform(filter(cols, c -> not c.{side}_none), c -> struct(c.name, c.{side}_text))) end"
        )
        df = df.selectExpr(
            "*",
            f"{image('a')} as after_map",
            f"{image('b')} as before_map",
            "case when exists(cols, c -> c.a_none) then transform(filter(cols, c -> not c.a_none), c -> c.name) end as present_cols",
            "try_element_at(filter(cols, c -> c.reason is not null), 1) as bad",
        )

        columns = """transform(cols, c -> named_struct(
                        'name', c.name,
                        'source_type', c.source_type,
                        'spark_type', c.t,
                        'precision', try_cast(nullif(regexp_extract(c.t, '^decimal\\\\(([0-9]+),', 1), '') as int),
                        'scale', try_cast(nullif(regexp_extract(c.t, '^decimal\\\\([0-9]+,([0-9]+)\\\\)', 1), '') as int),
                        'nullable', cast(null as boolean)))"""
        pk = "(case when size(filter(try_element_at(pk_uk, 'PRIMARY'), k -> k is not null and k != '')) > 0 then filter(try_element_at(pk_uk, 'PRIMARY'), k -> k is not null and k != '') end)"
        position = position_sql(["r.id"], "concat_ws(':', cast(r.id as string), nullif(r.sourcePosition, ''))")
        common = dict(
            format=f"'{NAME}'",
            database="db",
            schema="sch",
            table="tbl",
            position=position,
            tx_id="nullif(r.sourceTxid, '')",
            event_time_ms="et",
        )
        op_code = _case_map("op", {k: repr(v) for k, v in DATA_OPS.items()})
        data_event = event_sql(
            **common,
            kind="'data'",
            op=op_code,
            before="before_map",
            after="after_map",
            present="case when op != 'DELETE' then present_cols end",
            primary_key=pk,
            columns=columns,
        )
        ddl_event = event_sql(**common, kind="'ddl'", ddl="ddl_text", primary_key=pk)
        truncate_event = event_sql(**common, kind="'data'", op="'t'", ddl="ddl_text", primary_key=pk)
        is_truncate = f"op = '{DDL_OP}' and tbl is not null and ddl_text rlike '(?i)^\\\\s*truncate\\\\s'"
        tx_kind = _case_map("op", {k: repr(v) for k, v in TX_OPS.items()})
        tx_event = event_sql(**{**common, "schema": "cast(null as string)", "table": "cast(null as string)"}, kind=tx_kind)
        heartbeat_event = event_sql(
            **{**common, "database": "cast(null as string)", "schema": "cast(null as string)", "table": "cast(null as string)"},
            kind="'heartbeat'",
        )
        events = F.expr(
            f"""case
              when is_tombstone or op is null then array()
              when {data_ops} then array({data_event})
              when {is_truncate} then array({truncate_event})
              when op = '{DDL_OP}' then array({ddl_event})
              when {_in('op', TX_OPS)} then array({tx_event})
              when op = '{HEARTBEAT_OP}' then array({heartbeat_event})
              else array() end"""
        )

        is_data = F.expr(_in("op", DATA_OPS))
        code, message = first_error(
            (F.col("is_tombstone"), "", "tombstone"),
            (
                F.col("op").isNull(),
                RejectCode.AVRO_DECODE_ERROR.value,
                "value is not an Avro binary datum of com.alibaba.dts.formats.avro.Record",
            ),
            (
                is_data & F.expr("nullif(trim(db), '') is null or nullif(trim(tbl), '') is null"),
                RejectCode.MISSING_TABLE.value,
                F.concat(F.lit("objectName "), F.coalesce(F.concat(F.lit("'"), F.col("r.objectName"), F.lit("'")), F.lit("null")), F.lit(" names no table")),
            ),
            (
                F.expr("op in ('INSERT', 'UPDATE', 'INIT') and coalesce(size(aimg), 0) <= 0"),
                RejectCode.MISSING_IMAGE.value,
                F.concat(F.col("op"), F.lit(" without an afterImages array")),
            ),
            (
                F.expr("op = 'DELETE' and coalesce(size(bimg), 0) <= 0"),
                RejectCode.MISSING_IMAGE.value,
                "DELETE without a beforeImages array",
            ),
            (F.expr(f"op = '{DDL_OP}' and ddl_text is null"), RejectCode.MISSING_IMAGE.value, "DDL without its text in afterImages"),
            (is_data & F.col("flds").isNull(), RejectCode.SCHEMA_MISMATCH.value, "data change without a 'fields' array"),
            (
                is_data & F.expr("(aimg is not null and size(aimg) != size(flds)) or (bimg is not null and size(bimg) != size(flds))"),
                RejectCode.SCHEMA_MISMATCH.value,
                "an image does not have one value per entry of 'fields'",
            ),
            (is_data & F.col("dup_names"), RejectCode.SCHEMA_MISMATCH.value, "a column name appears twice in 'fields'"),
            (
                is_data & F.col("bad").isNotNull(),
                RejectCode.BAD_VALUE.value,
                F.concat(F.lit("column "), F.col("bad.name"), F.lit(": "), F.col("bad.reason")),
            ),
        )
        # a tombstone is not an error at all
        code = F.when(F.col("is_tombstone"), F.lit(None)).otherwise(code)
        return finish(df, events, code, message)

    def read_files(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        """Raw records from Avro object container files of ``Record`` (see :mod:`.files`)."""
        from cdclake.formats.dts_avro.files import read_avro_records

        return read_avro_records(spark, paths)

    def detect_score(self, sample: list[bytes]) -> float:
        """How sure we are that ``sample`` is DTS Avro: 1.0 when it holds the header of an Avro
        container file naming the DTS ``Record`` schema (the first "line" of such a file), else
        the share of values :meth:`looks_like` accepts."""
        if any(v.startswith(b"Obj\x01") and b"com.alibaba.dts.formats.avro.Record" in v for v in sample):
            return 1.0
        return super().detect_score(sample)

    def looks_like(self, value: bytes) -> bool:
        """fastavro reads ``value`` as a DTS ``Record`` datum with nothing left over."""
        try:
            buf = io.BytesIO(value)
            rec = schemaless_reader(buf, _PARSED_RECORD_SCHEMA)
        except Exception:  # not a Record datum
            return False
        return isinstance(rec, dict) and rec.get("operation") in OPERATIONS and buf.tell() == len(value)
