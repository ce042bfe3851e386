"""Decoder for ``debezium-json``: Debezium change events as Kafka Connect's JsonConverter writes
them, with the ``schema``/``payload`` envelope (``schemas.enable=true``) or without it.

Sources: seed ``003_3602ce7387367728.txt`` (Debezium Db2 connector: snapshots, change-table
reading order by commit LSN then change LSN, topic names, schema-change topic, transaction
metadata), ``shared/FORMATS.md`` (section ``debezium-json``), the Debezium documentation of the
Db2/SQL Server/MySQL/PostgreSQL/Oracle connectors (source blocks, logical types) and the Kafka
Connect JSON converter; real messages from Apache Flink, Apache SeaTunnel, Apache Paimon, the
Debezium project and memiiso/debezium-server-iceberg (``shared/fixtures/SOURCES.md``).

Wire shapes (one JSON document per Kafka value; the Kafka key is the row's key)::

    change event    {"before": {col: v} | null, "after": {col: v} | null,
                     "source": {"connector": "db2", "db": "TESTDB", "schema": "DB2INST1",
                                "table": "CUSTOMERS", "ts_ms": 1559729471739, "snapshot": "false",
                                "commit_lsn": "00000025:00000d98:00a2", "change_lsn": ..., ...},
                     "op": "c"|"u"|"d"|"r"|"t"|"m", "ts_ms": 1559729471739,
                     "transaction": {"id": "...", "total_order": 1, "data_collection_order": 1} | null}
    enveloped       {"schema": {Kafka Connect schema of the above}, "payload": {the above}}
    tombstone       Kafka value null (or ``{"schema": null, "payload": null}``)
    transaction     {"status": "BEGIN"|"END", "id": "...", "ts_ms": ..., "event_count": 2 | null,
                     "data_collections": [{"data_collection": "db.s.t", "event_count": 1}]}
    schema change   {"source": {...}, "ts_ms": ..., "databaseName": "TESTDB", "schemaName": "...",
                     "ddl": "CREATE TABLE ..." | null, "tableChanges": [{"type": "CREATE"|"ALTER"|"DROP",
                     "id": "\\"DB2INST1\\".\\"CUSTOMERS\\"", "table": {"primaryKeyColumnNames": [...],
                     "columns": [{"name", "jdbcType", "typeName", "length", "scale", "optional", ...}]}}]}
                    (Flink CDC's embedded Debezium puts the same document, as a JSON string, in
                    ``payload.historyRecord``; it is read too)
    heartbeat       {"ts_ms": 1588252618953} (nothing else)

Mapping to the canonical event:

* ``op`` c/u/d/r -> ``kind = data`` with that op; ``t`` (truncate) -> ``data``/``t`` without
  images; ``m`` (logical-decoding message) decodes to no event; any other op -> ``UNKNOWN_OP``.
  A ``c``/``r``/``u`` without ``after`` or a ``d`` without ``before`` -> ``MISSING_IMAGE`` (an
  ``u`` without ``before``, as PostgreSQL's REPLICA IDENTITY DEFAULT writes it, is fine).
  The op is taken as written: ``source.snapshot`` (``true``/``last``/``incremental`` ...) does not
  change it (Debezium marks snapshot rows with ``r``).
* table identity: ``database = source.db``, ``schema = source.schema`` (null where the connector
  has none, e.g. MySQL), ``table = source.table`` (MongoDB: ``source.collection``); a data event
  without a table -> ``MISSING_TABLE``.
* ``primary_key``: the field names of the Kafka key (``{"schema", "payload": {...}}`` or bare
  ``{...}``), in key order; null when the record has no key (files).
* column types, with the envelope: the Kafka Connect schema of ``after`` (else ``before``);
  ``columns[].source_type`` is the logical name (``org.apache.kafka.connect.data.Decimal``) or the
  Connect type (``int32``), ``nullable`` is ``optional``, ``precision``/``scale`` are the Decimal's
  ``connect.decimal.precision``/``scale`` parameters. Spark types and value conversions:

  ===========================================  ==============  ===================================
  Connect logical name / type                  spark_type      value on the wire -> canonical text
  ===========================================  ==============  ===================================
  org.apache.kafka.connect.data.Decimal        decimal(p,s)    base64 big-endian two's-complement
                                               (p = connect.   unscaled bytes -> unscaled / 10^s,
                                               decimal.        exact (byte arithmetic in
                                               precision, 38   decimal(38,0)); a JSON number (as
                                               when absent;    some producers write it) is taken
                                               string if >38)  as is (exponent form expanded)
  io.debezium.data.VariableScaleDecimal        string          {"scale", "value": base64} -> exact
                                                               decimal text; string because the
                                                               scale differs from value to value
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
  struct / array / map (geometry ...)          string          the value's JSON text
  ===========================================  ==============  ===================================

  Without the envelope the type of each column is inferred per record from the JSON value kind
  (``after`` first, then ``before``): integral number -> bigint (beyond the bigint range
  decimal(38,0)), fractional number (a ``.`` or exponent in its text) -> double, string ->
  string, boolean -> boolean, object/array -> string holding the JSON text, null -> spark_type
  null (unknown); ``source_type`` is ``json:integer|number|string|boolean|object|array|null``.
  A value that does not fit its column's type (``"abc"`` in an int32 column, bad base64 in a
  Decimal) -> ``BAD_VALUE`` naming the columns.
* position (``order`` compared lexicographically gives commit order within one connector):

  ================  ==========================================================  =====================
  connector         order                                                       text
  ================  ==========================================================  =====================
  db2, sqlserver    commit_lsn hi, lo, change_lsn hi, lo, event_serial_no,      commit_lsn=… change_lsn=…
                    total_order (an LSN's hex digits, colons removed, read as
                    one unsigned number split into hi = digits before the last
                    16, lo = the last 16; a missing LSN counts as 0, the
                    smallest, as Debezium's ``Lsn.NULL``)
  postgresql        lsn, total_order                                            lsn=34078720
  mysql, mariadb    binlog file number (``mysql-bin.000003`` -> 3), pos, row,   mysql-bin.000003:154:0
                    total_order
  oracle            scn, total_order                                            scn=…
  mongodb           source.ts_ms, ord, total_order                              ts_ms=… ord=…
  other / none      event_time_ms, total_order                                  ts_ms=…
  ================  ==========================================================  =====================

  The connector is ``source.connector``; without it the fields present decide. ``total_order``
  is 0 when the event has no ``transaction`` block; `` total_order=N`` is appended to the text
  when it has. A coordinate that is present but not a number (an LSN that is not hex or longer
  than 32 digits), or no coordinate and no ``ts_ms`` at all -> ``BAD_POSITION``.
* ``event_time_ms = source.ts_ms`` (commit time) when positive, else the payload's ``ts_ms``
  (snapshots of old MySQL connectors write ``source.ts_ms = 0``).
* transactions: ``tx_id = transaction.id``, ``tx_seq = transaction.total_order``; a record of
  the transaction topic -> ``tx_begin``/``tx_end`` with ``tx_id = id``, ``tx_size =
  event_count`` (END), ``position = [ts_ms]``.
* schema change -> one ``ddl`` event per ``tableChanges`` element (one event when the list is
  empty), ``ddl`` = the statement text (null for Db2 and SQL Server, whose events carry only
  ``tableChanges``). Table from ``tableChanges[i].id``: three parts are
  ``"db"."schema"."table"``; two parts are ``"schema"."table"`` when the event has a schema
  (Db2: ``"DB2INST1"."CUSTOMERS"``, database from ``source.db``) and ``"db"."table"`` otherwise
  (MySQL); no id -> ``source``. ``columns`` from ``tableChanges[i].table.columns`` (spark type
  from ``jdbcType``, decimal precision/scale from ``length``/``scale``), ``primary_key`` from
  ``primaryKeyColumnNames``. A database-level statement (no table anywhere) is kept as a ddl
  event with a null table.
* a document that is none of the above (an unwrapped row, a key written as a value) ->
  ``SCHEMA_MISMATCH``; parse errors as :mod:`cdclake.formats.json_common` classifies them.

Every expression is ANSI-safe (``try_cast``, ``try_add``, range guards before
``timestamp_millis``/``conv``), so a bad value is a reject, never a failed job, whatever
``spark.sql.ansi.enabled`` says.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import Capabilities, Decoder, DecodeOptions, event_sql, finish, first_error, position_sql
from cdclake.formats.json_common import CORRUPT, parse_json
from cdclake.values import TS_FORMAT, jdbc_to_spark_sql, normalize_sql

NAME = "debezium-json"

_SOURCE = (
    "struct<connector:string, name:string, db:string, `schema`:string, `table`:string, collection:string, "
    "ts_ms:string, snapshot:string, file:string, pos:string, `row`:string, lsn:string, commit_lsn:string, "
    "change_lsn:string, event_serial_no:string, scn:string, commit_scn:string, ord:string>"
)
_TX = "struct<id:string, total_order:string, data_collection_order:string>"
_TABLE_CHANGES = (
    "array<struct<type:string, id:string, `table`:struct<primaryKeyColumnNames:array<string>, "
    "columns:array<struct<name:string, jdbcType:string, typeName:string, typeExpression:string, "
    "length:string, scale:string, optional:string>>>>>"
)
#: fields of a Debezium payload (change, transaction, schema change, heartbeat)
BODY_FIELDS = [
    ("before", "string"),
    ("after", "string"),
    ("source", _SOURCE),
    ("op", "string"),
    ("ts_ms", "string"),
    ("transaction", _TX),
    ("status", "string"),
    ("id", "string"),
    ("event_count", "string"),
    ("databaseName", "string"),
    ("schemaName", "string"),
    ("ddl", "string"),
    ("tableChanges", _TABLE_CHANGES),
    ("historyRecord", "string"),
]
BODY_SCHEMA = ", ".join(f"`{n}` {t}" for n, t in BODY_FIELDS)
#: the record: the envelope's two fields, or the payload's own fields at top level
SCHEMA = f"`schema` string, payload string, {BODY_SCHEMA}"
#: the Kafka Connect schema of an envelope, two levels deep (envelope fields, row columns)
CONNECT_SCHEMA = (
    "type string, name string, fields array<struct<field:string, type:string, name:string, optional:boolean, "
    "fields:array<struct<field:string, type:string, name:string, optional:boolean, parameters:map<string,string>>>>>"
)
HISTORY_SCHEMA = f"databaseName string, schemaName string, ddl string, tableChanges {_TABLE_CHANGES}"

_JSON_OPTS = f"map('mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '{CORRUPT}')"
_NUMERIC_KINDS = "('BIGINT','INT','SMALLINT','TINYINT','DOUBLE','FLOAT')"
_INT_TEXT = r"'^\\s*[+-]?[0-9]+\\s*$'"
# splits a tableChanges id on the dots outside double quotes: "db"."a.b"."t" -> 3 parts
_ID_SPLIT = r"""'\\.(?=(?:[^"]*"[^"]*")*[^"]*$)'"""

# Kafka Connect logical names
DECIMAL = "org.apache.kafka.connect.data.Decimal"
VS_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_KIND_BY_NAME = {
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
_SPARK_BY_KIND = {
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


def _let(expr: str, var: str, body: str) -> str:
    """SQL: ``body`` with lambda variable ``var`` bound to ``expr`` (evaluated once)."""
    return f"element_at(transform(array({expr}), {var} -> {body}), 1)"


def _case(subject: str, mapping: dict[str, str], default: str) -> str:
    whens = " ".join(f"when {subject} = '{k}' then '{v}'" for k, v in mapping.items())
    return f"(case {whens} else {default} end)"


def _unscaled_sql(hexvar: str) -> str:
    """SQL: the signed value (decimal(38,0)) of big-endian two's-complement bytes given as the
    upper-case hex text ``hexvar``; null when empty, longer than 17 bytes or beyond 38 digits
    (try_add / try_multiply: never an overflow error, also under ANSI mode). A negative number is
    computed from the inverted bytes (-1 - ~x) so that no 256^n term is ever needed."""
    n = f"(length({hexvar}) div 2)"
    neg = f"(substr({hexvar}, 1, 1) >= '8')"
    byte = f"cast(conv(substr({hexvar}, 2 * di + 1, 2), 16, 10) as int)"
    acc = (
        f"aggregate(sequence(0, {n} - 1), cast(0 as decimal(38,0)), "
        f"(dacc, di) -> cast(try_add(try_multiply(dacc, 256), case when {neg} then 255 - {byte} else {byte} end) as decimal(38,0)))"
    )
    return (
        f"(case when {hexvar} is null or {n} = 0 or {n} > 17 then cast(null as decimal(38,0)) "
        f"when {neg} then cast(try_subtract(cast(-1 as decimal(38,0)), {acc}) as decimal(38,0)) else {acc} end)"
    )


def _decimal_text_sql(unscaled: str, scale: str) -> str:
    """SQL: plain decimal text of ``unscaled * 10^-scale`` (``223``, 2 -> ``2.23``; ``5``, 3 ->
    ``0.005``; ``-12``, 0 -> ``-12``; ``7``, -2 -> ``700``)."""
    w = f"greatest(length(dd), {scale} + 1)"
    padded = f"lpad(dd, {w}, '0')"
    sign = "(case when du < 0 then '-' else '' end)"
    body = (
        f"(case when du is null or {scale} is null then null "
        f"when {scale} <= 0 then concat({sign}, dd, case when du = 0 then '' else repeat('0', -{scale}) end) "
        f"else concat({sign}, substr({padded}, 1, {w} - {scale}), '.', substr({padded}, {w} - {scale} + 1)) end)"
    )
    # the digits without the sign, taken from the text: Spark 4.0's abs() on a decimal(38,0)
    # rounds to 34 significant digits (abs(-9999999999999999999999999999999999999) gives
    # 10000000000000000000000000000000000000, and 38 nines overflow)
    return _let(unscaled, "du", _let("regexp_replace(cast(du as string), '^-', '')", "dd", body))


def _base64_decimal_sql(b64: str, scale: str) -> str:
    """SQL: decimal text of a Connect Decimal's base64 unscaled bytes; null when not base64."""
    hexed = f"hex(try_to_binary(regexp_replace({b64}, '\\\\s', ''), 'base64'))"
    return _let(hexed, "dh", _decimal_text_sql(_unscaled_sql("dh"), scale))


def _time_text_sql(micros: str) -> str:
    """SQL: ``[-]HH:MM:SS.ffffff`` from microseconds (of day, or a MySQL TIME duration)."""
    body = (
        "(case when tu is null or tu not between -86400000000000 and 86400000000000 then null else format_string('%s%02d:%02d:%02d.%06d', "
        "case when tu < 0 then '-' else '' end, abs(tu) div 3600000000, (abs(tu) div 60000000) % 60, "
        "(abs(tu) div 1000000) % 60, abs(tu) % 1000000) end)"
    )
    return _let(micros, "tu", body)


def _wire_text_sql(t: str, vk: str, kind: str, scale: str) -> str:
    """SQL: a Debezium value as text that :func:`cdclake.values.normalize_sql` reads for the
    column's Spark type (logical types decoded); null when it cannot be read.

    ``t`` is the value's JSON text (strings unquoted, objects as JSON), ``vk`` its JSON kind as
    ``schema_of_variant`` names it, ``kind`` the column's conversion (see ``_KIND_BY_NAME``),
    ``scale`` the Decimal scale.
    """
    isnum = f"({vk} in {_NUMERIC_KINDS} or {vk} like 'DECIMAL%')"
    big = f"try_cast({t} as bigint)"
    ms_lo, ms_hi = -62135596800000, 253402300799999  # 0001-01-01 .. 9999-12-31T23:59:59.999
    return f"""(case
      when {t} is null then null
      when {kind} = 'decimal' then (case
          when {vk} = 'STRING' then {_base64_decimal_sql(t, scale)}
          when {t} rlike '[eE]' then format_string(concat('%.', greatest({scale}, 0), 'f'), try_cast({t} as double))
          else {t} end)
      when {kind} = 'vsdecimal' then {_let(f"from_json({t}, 'scale int, value string')", 'vs', _base64_decimal_sql('vs.value', 'vs.scale'))}
      when {kind} = 'date' and {isnum} then (case when try_cast({t} as int) between -719162 and 2932896
                                                then cast(date_add(date'1970-01-01', try_cast({t} as int)) as string) end)
      when {kind} = 'ts_ms' and {isnum} then (case when {big} between {ms_lo} and {ms_hi}
                                                 then date_format(timestamp_millis({big}), '{TS_FORMAT}') end)
      when {kind} = 'ts_us' and {isnum} then (case when {big} between {ms_lo}000 and {ms_hi}999
                                                 then date_format(timestamp_micros({big}), '{TS_FORMAT}') end)
      when {kind} = 'ts_ns' and {isnum} then date_format(timestamp_micros({big} div 1000), '{TS_FORMAT}')
      when {kind} = 'time_ms' and {isnum} then {_time_text_sql(f"try_multiply({big}, 1000)")}
      when {kind} = 'time_us' and {isnum} then {_time_text_sql(big)}
      when {kind} = 'time_ns' and {isnum} then {_time_text_sql(f"{big} div 1000")}
      when {kind} = 'int' then (case when {t} rlike {_INT_TEXT} then cast(try_cast(trim({t}) as int) as string) end)
      when {kind} = 'bigint' then (case when {t} rlike {_INT_TEXT} then cast(try_cast(trim({t}) as bigint) as string) end)
      when {kind} = 'float' then cast(try_cast({t} as float) as string)
      when {kind} = 'double' then cast(try_cast({t} as double) as string)
      else {t} end)"""


def _schema_columns_sql(fields: str) -> str:
    """SQL: column declarations (COLUMN_SCHEMA fields + ``kind``) from the Connect schema fields
    of a row struct."""
    kind = (
        "(case "
        + " ".join(f"when f.name = '{n}' then '{k}'" for n, k in _KIND_BY_NAME.items())
        + " when lower(f.type) in ('int8','int16','int32') then 'int'"
        " when lower(f.type) = 'int64' then 'bigint'"
        " when lower(f.type) in ('float','float32') then 'float'"
        " when lower(f.type) in ('double','float64') then 'double'"
        " when lower(f.type) = 'boolean' then 'boolean'"
        " when lower(f.type) = 'bytes' then 'binary'"
        " else 'string' end)"
    )
    first = f"""transform(filter({fields}, f -> f.field is not null), f -> named_struct(
        'name', f.field,
        'source_type', coalesce(f.name, f.type),
        'kind', {kind},
        'precision', case when f.name = '{DECIMAL}' then try_cast(f.parameters['connect.decimal.precision'] as int) end,
        'scale', case when f.name = '{DECIMAL}' then coalesce(try_cast(f.parameters['scale'] as int), 0) end,
        'nullable', f.optional))"""
    p, s = "c.precision", "c.scale"
    decimal_type = f"""(case
        when {s} < 0 then (case when {p} is null then 'decimal(38,0)' when {p} - {s} > 38 then 'string'
                                else concat('decimal(', {p} - {s}, ',0)') end)
        when greatest(coalesce({p}, 38), {s}) > 38 then 'string'
        else concat('decimal(', greatest(coalesce({p}, 38), {s}), ',', {s}, ')') end)"""
    spark_type = _case("c.kind", _SPARK_BY_KIND, f"(case when c.kind = 'decimal' then {decimal_type} else 'string' end)")
    return f"""transform({first}, c -> named_struct(
        'name', c.name, 'source_type', c.source_type, 'spark_type', {spark_type},
        'precision', c.precision, 'scale', c.scale, 'nullable', c.nullable, 'kind', c.kind))"""


_IMAGE_MAP = "map<string,struct<t:string,vk:string>>"


def _inferred_columns_sql(after: str, before: str) -> str:
    """SQL: column declarations inferred from the JSON kinds of the values (no envelope): one
    per key of ``after`` then of ``before`` (``map_zip_with`` joins them by key in one pass),
    typed by the ``after`` value unless that is null."""
    picks = (
        f"map_zip_with(coalesce({after}, cast(map() as {_IMAGE_MAP})), coalesce({before}, cast(map() as {_IMAGE_MAP})), "
        "(ik, a, b) -> coalesce(case when a.vk != 'VOID' then a end, b))"
    )
    st = """(case when e.x is null or e.x.vk is null or e.x.vk = 'VOID' then cast(null as string)
          when e.x.vk = 'STRING' then 'string'
          when e.x.vk = 'BOOLEAN' then 'boolean'
          when e.x.vk like 'OBJECT%' or e.x.vk like 'ARRAY%' then 'string'
          when e.x.vk in ('DOUBLE','FLOAT') or e.x.t rlike '[.eE]' then 'double'
          when e.x.vk in ('BIGINT','INT','SMALLINT','TINYINT') then 'bigint'
          when e.x.vk like 'DECIMAL%' then 'decimal(38,0)'
          else 'string' end)"""
    source_type = """concat('json:', case when e.x is null or e.x.vk is null or e.x.vk = 'VOID' then 'null'
          when e.x.vk = 'STRING' then 'string' when e.x.vk = 'BOOLEAN' then 'boolean'
          when e.x.vk like 'OBJECT%' then 'object' when e.x.vk like 'ARRAY%' then 'array'
          when e.x.vk in ('DOUBLE','FLOAT') or e.x.t rlike '[.eE]' then 'number'
          else 'integer' end)"""
    return f"""transform(transform(map_entries({picks}), me -> named_struct('n', me.key, 'x', me.value)), e -> named_struct(
        'name', e.n, 'source_type', {source_type}, 'spark_type', {st},
        'precision', cast(null as int), 'scale', cast(null as int), 'nullable', cast(null as boolean),
        'kind', case {st} when 'bigint' then 'bigint' when 'double' then 'double' else 'string' end))"""


def _ddl_spark_type_sql(c: str) -> str:
    """SQL: Spark type of a ``tableChanges`` column (``jdbcType``, ``length``, ``scale``)."""
    code = f"try_cast({c}.jdbcType as int)"
    length, scale = f"try_cast({c}.length as int)", f"coalesce(try_cast({c}.scale as int), 0)"
    return f"""(case
      when {code} in (2, 3) and {length} between 1 and 38 then concat('decimal(', greatest({length}, {scale}), ',', {scale}, ')')
      when {code} in (2, 3) and {length} > 38 then 'string'
      when {code} = -5 and upper({c}.typeName) like '%UNSIGNED%' then 'decimal(20,0)'
      when {code} = 4 and upper({c}.typeName) like '%UNSIGNED%' then 'bigint'
      else {jdbc_to_spark_sql(code)} end)"""


def _lsn_hi_lo(hexcol: str) -> tuple[str, str]:
    """SQL: (hi, lo) decimals of an LSN's hex digits: lo = the last 16 digits, hi = the rest
    (0 when the LSN is missing or longer than 32 digits, which is a BAD_POSITION)."""
    hexcol = f"(case when length({hexcol}) <= 32 then {hexcol} end)"
    hi = f"coalesce(try_cast(conv(nullif(substr({hexcol}, 1, greatest(length({hexcol}) - 16, 0)), ''), 16, 10) as decimal(38,0)), 0)"
    lo = f"coalesce(try_cast(conv(nullif(substr({hexcol}, greatest(length({hexcol}) - 15, 1)), ''), 16, 10) as decimal(38,0)), 0)"
    return hi, lo


class DebeziumJsonDecoder(Decoder):
    """Debezium change events as JSON; see the module docstring for the mapping."""

    name = NAME
    capabilities = Capabilities(
        key="Kafka message key (its fields)",
        column_types="Kafka Connect schema (envelope), else inferred from JSON value kinds",
        position="connector source position (commit/change LSN, lsn, binlog file/pos/row, scn), then total_order",
        transactions="BEGIN/END topic + event_count; transaction.id/total_order on events",
        ddl=True,
        heartbeats=True,
        snapshot_marker="op r",
    )

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        df = parse_json(raw, SCHEMA)
        from_j = ", ".join(f"'{n}', j.`{n}`" for n, _ in BODY_FIELDS)
        df = df.selectExpr(
            "*",
            "j.payload is not null as env",
            # JsonConverter's rendering of a null value with schemas enabled: a tombstone too
            r"""(j.payload is null and j.`schema` is null and text rlike '^\\s*\\{\\s*"schema"\\s*:\\s*null\\s*,\\s*"payload"\\s*:\\s*null\\s*\\}\\s*$') as null_env""",
            f"""(case when j.payload is not null then from_json(j.payload, '{BODY_SCHEMA}, {CORRUPT} string', {_JSON_OPTS})
                      else named_struct({from_j}, '{CORRUPT}', cast(null as string)) end) as b""",
            "cast(key as string) as key_text",
        )
        df = df.selectExpr(
            "*",
            "b.source as src",
            "try_cast(b.ts_ms as bigint) as ts",
            f"case when b.historyRecord is not null then from_json(b.historyRecord, '{HISTORY_SCHEMA}') end as hist",
            f"case when env then from_json(j.`schema`, '{CONNECT_SCHEMA}') end as cs",
            "case when env then j.payload else text end as body_text",
        )
        df = df.selectExpr(
            "*",
            "coalesce(b.ddl, hist.ddl) as ddl_text",
            "coalesce(b.tableChanges, hist.tableChanges) as tc",
            "coalesce(b.databaseName, hist.databaseName) as db_name",
            "coalesce(b.schemaName, hist.schemaName) as schema_name",
            "coalesce(case when try_cast(src.ts_ms as bigint) > 0 then try_cast(src.ts_ms as bigint) end, ts) as event_time",
            f"""(case when is_tombstone or null_env then 'skip'
                      when parse_error is not null then 'error'
                      when env and b.{CORRUPT} is not null then 'bad_payload'
                      when b.op is not null then (case when b.op in ('c','u','d','r') then 'data' when b.op = 't' then 'truncate'
                                                       when b.op = 'm' then 'message' else 'unknown' end)
                      when upper(b.status) in ('BEGIN', 'END') then 'tx'
                      when b.ddl is not null or b.tableChanges is not null or b.historyRecord is not null then 'ddl'
                      when ts is not null and b.source is null and b.before is null and b.after is null
                           and size(from_json(body_text, 'map<string,string>')) = 1 then 'heartbeat'
                      else 'none' end) as rt""",
        )

        # Images: each value's JSON text (map<string,string>) beside its JSON kind (variant).
        def image(col: str) -> str:
            # both maps come from the same text, so their keys are in the same (document) order
            return f"""(case when rt = 'data' then {_let(f"from_json(b.{col}, 'map<string,string>')", 'ms', _let(
                          f"from_json(b.{col}, 'map<string,variant>')", 'mv',
                          "map_from_arrays(map_keys(ms), zip_with(map_values(ms), map_values(mv), "
                          "(s, v) -> named_struct('t', s, 'vk', schema_of_variant(v))))"))} end) as {col}_k"""

        df = df.selectExpr("*", image("after"), image("before"))
        fields = (
            "coalesce(try_element_at(filter(cs.fields, f -> f.field = 'after'), 1).fields, "
            "try_element_at(filter(cs.fields, f -> f.field = 'before'), 1).fields)"
        )
        df = df.selectExpr(
            "*",
            f"""(case when rt = 'data' then coalesce({_schema_columns_sql(fields)}, {_inferred_columns_sql('after_k', 'before_k')}) end) as decl0""",
        )
        # Column names must be unique and not null for the map below; a schema that repeats a
        # name (malformed) keeps the first declaration (the O(n^2) filter only runs then).
        df = df.selectExpr(
            "*",
            """(case when size(array_distinct(transform(decl0, c -> c.name))) = size(decl0) and forall(decl0, c -> c.name is not null)
                     then decl0
                     else filter(decl0, (c, i) -> c.name is not null and array_position(transform(decl0, d -> d.name), c.name) = i + 1)
                end) as decl""",
        )
        df = df.selectExpr(
            "*",
            "map_from_arrays(transform(decl, c -> c.name), decl) as declm",
            "transform(decl, c -> named_struct('name', c.name, 'source_type', c.source_type, 'spark_type', c.spark_type, "
            "'precision', c.precision, 'scale', c.scale, 'nullable', c.nullable)) as cols",
        )

        # Stage 1: Debezium's wire values -> text of the column's Spark type; stage 2: the
        # canonical encoding (cdclake.values.normalize_sql); ok is false when either fails.
        # map_zip_with joins each image to the declarations by key in one pass (a hash join,
        # not a lookup per value); keys only declared (x null) are dropped again.
        wire = _wire_text_sql("x.t", "x.vk", "coalesce(dc.kind, 'string')", "dc.scale")
        canon = _let(
            normalize_sql("w", "coalesce(dc.spark_type, 'string')"),
            "nz",
            "named_struct('value', nz.value, 'ok', (x.t is null or w is not null) and coalesce(nz.ok, false))",
        )
        declm = "coalesce(declm, cast(map() as map<string,struct<name:string,source_type:string,spark_type:string,precision:int,scale:int,nullable:boolean,kind:string>>))"

        def convert(img: str) -> str:
            return (
                f"map_filter(map_zip_with({img}, {declm}, (k, x, dc) -> case when x is not null then {_let(wire, 'w', canon)} end), "
                "(k, z) -> z is not null)"
            )

        df = df.selectExpr("*", f"{convert('after_k')} as after_c", f"{convert('before_k')} as before_c")
        df = df.selectExpr(
            "*",
            "transform_values(after_c, (k, z) -> z.value) as after_img",
            "transform_values(before_c, (k, z) -> z.value) as before_img",
            """array_distinct(concat(coalesce(map_keys(map_filter(before_c, (k, z) -> not z.ok)), cast(array() as array<string>)),
                                     coalesce(map_keys(map_filter(after_c, (k, z) -> not z.ok)), cast(array() as array<string>)))) as bad_cols""",
        )

        # Position, per connector.
        df = df.selectExpr(
            "*",
            """(case when lower(src.connector) in ('sqlserver', 'db2') then 'lsn'
                     when lower(src.connector) = 'postgresql' then 'pg'
                     when lower(src.connector) in ('mysql', 'mariadb') then 'binlog'
                     when lower(src.connector) = 'oracle' then 'scn'
                     when lower(src.connector) = 'mongodb' then 'mongo'
                     when src.commit_lsn is not null or src.change_lsn is not null then 'lsn'
                     when src.lsn is not null then 'pg'
                     when src.file is not null or src.pos is not null then 'binlog'
                     when src.scn is not null then 'scn'
                     else 'ts' end) as pstyle""",
            # at most 32 hex digits (Db2: 16 bytes) so that conv() never overflows (also under ANSI)
            "regexp_replace(src.commit_lsn, '[^0-9A-Fa-f]', '') as commit_hex",
            "regexp_replace(src.change_lsn, '[^0-9A-Fa-f]', '') as change_hex",
            "try_cast(b.`transaction`.total_order as decimal(38,0)) as total_order",
        )
        c_hi, c_lo = _lsn_hi_lo("commit_hex")
        ch_hi, ch_lo = _lsn_hi_lo("change_hex")
        tot = "coalesce(total_order, 0)"
        dec = lambda e: f"coalesce(try_cast({e} as decimal(38,0)), 0)"  # noqa: E731
        tot_text = "(case when total_order is not null then concat(' total_order=', b.`transaction`.total_order) else '' end)"
        styles = {
            "lsn": (
                [c_hi, c_lo, ch_hi, ch_lo, dec("src.event_serial_no"), tot],
                "concat_ws(' ', concat('commit_lsn=', src.commit_lsn), concat('change_lsn=', src.change_lsn), "
                "concat('event_serial_no=', src.event_serial_no))",
            ),
            "pg": ([dec("src.lsn"), tot], "concat('lsn=', src.lsn)"),
            "binlog": (
                [dec(r"regexp_extract(src.file, '([0-9]+)$', 1)"), dec("src.pos"), dec("src.`row`"), tot],
                "concat_ws(':', src.file, src.pos, src.`row`)",
            ),
            "scn": ([dec("src.scn"), tot], "concat_ws(' ', concat('scn=', src.scn), concat('commit_scn=', src.commit_scn))"),
            "mongo": ([dec("src.ts_ms"), dec("src.ord"), tot], "concat('ts_ms=', src.ts_ms, ' ord=', coalesce(src.ord, ''))"),
        }
        fallback_text = f"concat('ts_ms=', event_time, {tot_text})"
        position = (
            "(case "
            + " ".join(f"when pstyle = '{s}' then {position_sql(parts, f'concat({text}, {tot_text})')}" for s, (parts, text) in styles.items())
            + f" else {position_sql([dec('event_time'), tot], fallback_text)} end)"
        )
        lsn_ok = "(src.{f} is null or (src.{f} rlike '^[0-9A-Fa-f:]+$' and length({h}) <= 32))"
        pos_ok = f"""(case
            when pstyle = 'lsn' then coalesce(src.commit_lsn, src.change_lsn) is not null
                                     and {lsn_ok.format(f='commit_lsn', h='commit_hex')} and {lsn_ok.format(f='change_lsn', h='change_hex')}
            when pstyle = 'pg' then src.lsn is null or try_cast(src.lsn as decimal(38,0)) is not null
            when pstyle = 'binlog' then (src.pos is null or try_cast(src.pos as decimal(38,0)) is not null)
                                        and (src.`row` is null or try_cast(src.`row` as decimal(38,0)) is not null)
            when pstyle = 'scn' then src.scn is null or try_cast(src.scn as decimal(38,0)) is not null
            when pstyle = 'mongo' then true
            else event_time is not null end)"""
        # Primary key: the Kafka key's fields (enveloped or bare).
        key_map = "from_json(key_text, 'map<string,string>')"
        pk = _let(
            key_map,
            "km",
            """(case when km is null then cast(null as array<string>)
                     when size(km) = 2 and map_contains_key(km, 'schema') and map_contains_key(km, 'payload')
                       then map_keys(from_json(km['payload'], 'map<string,string>'))
                     else map_keys(km) end)""",
        )
        df = df.selectExpr(
            "*",
            f"{position} as pos",
            f"coalesce({pos_ok}, false) as pos_ok",
            f"(case when rt = 'data' then {_let(pk, 'pkk', 'case when size(pkk) > 0 then pkk end')} end) as pk",
            "coalesce(src.`table`, src.collection) as tbl",
        )

        common = dict(format=f"'{NAME}'", event_time_ms="event_time")
        data_common = dict(
            **common,
            database="src.db",
            schema="src.`schema`",
            table="tbl",
            position="pos",
            tx_id="b.`transaction`.id",
            tx_seq="try_cast(b.`transaction`.total_order as bigint)",
        )
        data_event = event_sql(
            **data_common, kind="'data'", op="b.op", before="before_img", after="after_img", primary_key="pk", columns="cols"
        )
        truncate_event = event_sql(**data_common, kind="'data'", op="'t'")

        def ddl_event(x: str | None) -> str:
            if x is None:
                ident = dict(
                    database="coalesce(src.db, db_name)",
                    schema="coalesce(src.`schema`, schema_name)",
                    table="src.`table`",
                )
                extra: dict[str, str] = {}
            else:
                n = "coalesce(size(idp), 0)"
                has_schema = "(coalesce(schema_name, src.`schema`) is not null)"
                ident = dict(
                    database=f"(case when {n} >= 3 then idp[{n} - 3] when {n} = 2 and not {has_schema} then idp[0] else coalesce(src.db, db_name) end)",
                    schema=f"(case when {n} >= 3 then idp[{n} - 2] when {n} = 2 and {has_schema} then idp[0] when {n} = 2 then cast(null as string) else coalesce(src.`schema`, schema_name) end)",
                    table=f"(case when {n} >= 1 then idp[{n} - 1] else src.`table` end)",
                )
                extra = dict(
                    columns=f"""transform({x}.`table`.columns, c -> named_struct('name', c.name, 'source_type', c.typeName,
                                 'spark_type', {_ddl_spark_type_sql('c')}, 'precision', try_cast(c.length as int),
                                 'scale', try_cast(c.scale as int), 'nullable', try_cast(c.optional as boolean)))""",
                    primary_key=f"(case when size({x}.`table`.primaryKeyColumnNames) > 0 then {x}.`table`.primaryKeyColumnNames end)",
                )
            ev = event_sql(
                **common,
                **ident,
                **extra,
                kind="'ddl'",
                ddl="ddl_text",
                position="pos",
                tx_id="b.`transaction`.id",
            )
            if x is None:
                return ev
            return _let(f"""transform(split({x}.id, {_ID_SPLIT}), p -> regexp_replace(p, '^"|"$', ''))""", "idp", ev)

        tx_event = event_sql(
            **common,
            kind="(case when upper(b.status) = 'BEGIN' then 'tx_begin' else 'tx_end' end)",
            tx_id="b.id",
            tx_size="try_cast(b.event_count as bigint)",
            position=position_sql(["coalesce(ts, 0)"], "concat_ws(' ', concat('tx=', b.id), upper(b.status))"),
        )
        heartbeat_event = event_sql(**common, kind="'heartbeat'", position=position_sql(["ts"], "concat('ts_ms=', ts)"))

        events = F.expr(
            f"""case
              when rt = 'data' then array({data_event})
              when rt = 'truncate' then array({truncate_event})
              when rt = 'ddl' and size(tc) > 0 then transform(tc, x -> {ddl_event('x')})
              when rt = 'ddl' then array({ddl_event(None)})
              when rt = 'tx' then array({tx_event})
              when rt = 'heartbeat' then array({heartbeat_event})
              else array() end"""
        )
        rt = F.col("rt")
        is_data = rt == "data"
        code, message = first_error(
            (F.col("parse_error").isNotNull(), "", F.col("parse_message")),
            (rt == "skip", "", "tombstone"),
            (rt == "bad_payload", RejectCode.SCHEMA_MISMATCH.value, "'payload' is not a Debezium event object"),
            (
                rt == "none",
                RejectCode.SCHEMA_MISMATCH.value,
                "not a Debezium change, transaction or schema-change event (no 'op', 'status' or 'ddl')",
            ),
            (rt == "unknown", RejectCode.UNKNOWN_OP.value, F.concat(F.lit("unknown Debezium op "), F.col("b.op"))),
            (rt.isin("data", "truncate") & F.col("tbl").isNull(), RejectCode.MISSING_TABLE.value, "'source' names no table"),
            (
                is_data & F.expr("(b.after is not null and after_k is null) or (b.before is not null and before_k is null)"),
                RejectCode.SCHEMA_MISMATCH.value,
                "'before' or 'after' is not a JSON object",
            ),
            (
                is_data & F.expr("(b.op in ('c','r','u') and after_k is null) or (b.op = 'd' and before_k is null)"),
                RejectCode.MISSING_IMAGE.value,
                F.expr("concat('op ', b.op, case when b.op = 'd' then ' without before' else ' without after' end)"),
            ),
            (
                rt.isin("data", "truncate", "ddl") & ~F.col("pos_ok"),
                RejectCode.BAD_POSITION.value,
                F.expr(
                    "case when coalesce(pos.text, '') = '' then 'no source position and no ts_ms' "
                    "else concat('source position is not a number: ', pos.text) end"
                ),
            ),
            (
                is_data & F.expr("size(bad_cols) > 0"),
                RejectCode.BAD_VALUE.value,
                F.expr("concat('value does not fit its declared type in column(s) ', array_join(bad_cols, ', '))"),
            ),
        )
        # parse errors keep their own code; a tombstone is not an error at all
        code = F.when(F.col("parse_error").isNotNull(), F.col("parse_error")).when(rt == "skip", F.lit(None)).otherwise(code)
        return finish(df, events, code, message)

    def detect_score(self, sample: list[bytes]) -> float:
        import json

        hits = 0
        for v in sample:
            try:
                d = json.loads(v)
            except Exception:
                continue
            if isinstance(d, dict) and "payload" in d and "schema" in d:
                d = d["payload"]
            if not isinstance(d, dict):
                continue
            # Debezium's op codes are one letter; DataWorks' envelope looks alike but its ops are
            # words (INSERT, UPDATE_AFTER ...) and its payload carries sequenceId
            if (
                ("op" in d and d.get("op") in ("c", "u", "d", "r", "t", "m") and "sequenceId" not in d
                 and ("source" in d or "after" in d or "before" in d))
                or ("status" in d and "event_count" in d)
                or ("tableChanges" in d and "source" in d)
                or "historyRecord" in d
            ):
                hits += 1
        return hits / max(len(sample), 1)
