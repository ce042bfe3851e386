"""Column types of ``dts-avro`` records: the MySQL type codes (``dataTypeNumber``), the union
branches each allows, and the SQL that gives a column its Spark type within one record.

Columns: ``fields[i]`` names column *i* and gives its ``dataTypeNumber``; ``beforeImages[i]`` /
``afterImages[i]`` hold its values. For MySQL sources (``source.sourceType`` MySQL or DRDS) the
number is MySQL's column type code (:data:`MYSQL_TYPES`, DTS "MySQL data types and
dataTypeNumber values"): ``columns[].source_type`` is its name (``MYSQL_TYPE_INT32``) and the
Spark type follows the code (:func:`column_type_sql`); a value whose union branch
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
"""

from __future__ import annotations

from cdclake.formats.dts_avro.schema import VALUE_BRANCHES
from cdclake.sqltext import sql_in, sql_lookup, sql_str

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

INT_RE = r"^[+-]?[0-9]+$"
NUM_RE = r"^[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?$"
#: largest |seconds| accepted for a Timestamp (year 9999), keeps the micro arithmetic in range
MAX_SECONDS = 253402300799


# --- SQL builders over one image value ``v`` (a VALUE struct expression) --------------------------


def branch_sql(v: str) -> str:
    """int: the union branch of value ``v`` (0..11, :data:`VALUE_BRANCHES`), -1 for NULL."""
    whens = " ".join(f"when {v}.member{i} is not null then {i}" for i in range(len(VALUE_BRANCHES)))
    return f"(case when {v} is null then -1 {whens} else -1 end)"


def _int_type_sql(text: str) -> str:
    """Spark type of an Integer value's text: bigint when it fits, else decimal(20,0) (BIGINT
    UNSIGNED), decimal(38,0), string beyond 38 digits; null when it is not an integer."""
    t = f"trim({text})"
    digits = f"length(regexp_replace({t}, '^[+-]?0*', ''))"
    return f"""(case when not ({t} rlike '{INT_RE}') then null
      when try_cast({t} as bigint) is not null then 'bigint'
      when {digits} <= 20 then 'decimal(20,0)'
      when {digits} <= 38 then 'decimal(38,0)' else 'string' end)"""


def _decimal_type_sql(d: str) -> str:
    """Spark type of a Decimal value ``d``: decimal(precision, scale); string beyond 38 digits;
    decimal(38,10) when precision/scale are not usable."""
    p, s = f"{d}.precision", f"{d}.scale"
    return f"""(case when {p} between 1 and 38 and {s} between 0 and {p} then concat('decimal(', {p}, ',', {s}, ')')
      when {p} > 38 then 'string' else 'decimal(38,10)' end)"""


def value_type_sql(v: str, b: str) -> str:
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


_INT_TYPES = ("bigint", "decimal(20,0)", "decimal(38,0)", "string")
_INT_RANK = f"array({', '.join(sql_str(t) for t in _INT_TYPES)})"


def _int_rank_sql(t: str) -> str:
    """1-based rank of integer type ``t`` in :data:`_INT_TYPES` (a map literal: ``array_position``
    asks its argument's type on every row when interpreted)."""
    return sql_lookup(t, {x: str(i) for i, x in enumerate(_INT_TYPES, 1)})


def column_type_sql(c: str) -> str:
    """Spark type of column ``c`` (struct with ``code``, ``ab``/``bb`` branches and ``at``/``bt``
    value types of the after/before values) for one record; ``is_mysql`` says whether ``code`` is
    a MySQL type code. Integer columns take the widest type their values need."""
    hint_b = f"(case when {c}.ab >= 0 and {c}.ab != {B_EMPTY} then {c}.ab else {c}.bb end)"
    hint_t = f"(case when {c}.ab >= 0 and {c}.ab != {B_EMPTY} then {c}.at else {c}.bt end)"
    ints = (
        f"try_element_at({_INT_RANK}, cast(greatest(coalesce(case when {c}.ab = {B_INT} then {_int_rank_sql(f'{c}.at')} end, 1), "
        f"coalesce(case when {c}.bb = {B_INT} then {_int_rank_sql(f'{c}.bt')} end, 1)) as int))"
    )
    code = f"{c}.code"
    # no value tells the type (both NULL or EmptyObject): null, "not stated" (the applier takes
    # the type from other events of the batch, else keeps the table's: TablePlan.untyped)
    unknown = f"{hint_b} in ({B_NULL}, {B_EMPTY})"
    mysql = f"""(case
      when {sql_in(code, INT_CODES)} then (case when {ints} = 'string' then 'decimal(38,0)' else {ints} end)
      when {sql_in(code, DECIMAL_CODES)} then (case when {hint_b} = {B_DEC} then {hint_t} when {unknown} then null else 'decimal(38,10)' end)
      when {sql_in(code, FLOAT_CODES)} then 'double'
      when {code} = 6 then 'string'
      when {sql_in(code, TIMESTAMP_CODES)} then 'timestamp'
      when {sql_in(code, DATE_CODES)} then 'date'
      when {sql_in(code, TIME_CODES)} then 'string'
      when {code} = {YEAR_CODE} then 'int'
      when {sql_in(code, STRING_CODES)} then (case when {hint_t} = 'binary' then 'binary' when {unknown} then null else 'string' end)
      when {sql_in(code, TEXT_CODES)} then 'string'
      when {sql_in(code, BLOB_CODES)} then (case when {hint_b} in ({B_CHAR}, {B_TOBJ}) and {hint_t} = 'string' then 'string'
                                              when {unknown} then null else 'binary' end)
      when {code} = {GEOMETRY_CODE} then (case when {hint_b} = {B_TGEO} then 'string' when {unknown} then null else 'binary' end)
      else coalesce({hint_t}, 'string') end)"""
    other = f"(case when {hint_b} = {B_INT} then {ints} else {hint_t} end)"
    return f"(case when is_mysql then {mysql} else {other} end)"


def allowed_sql(code: str, b: str) -> str:
    """boolean: branch ``b`` fits MySQL type code ``code`` (always true for other sources)."""
    # a bit mask per code, bit b + 1 set for each branch b it allows (a CASE over the codes walks
    # its arms from the head, and array_contains asks its argument's type, on every row inside
    # the columns' lambda)
    masks = {c: str(sum(1 << (x + 1) for x in branches)) for c, branches in ALLOWED_BRANCHES.items()}
    return f"(not is_mysql or {b} in ({B_NULL}, {B_EMPTY}) or coalesce(bit_get({sql_lookup(code, masks)}, {b} + 1) = 1, true))"
