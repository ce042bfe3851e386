"""The metadata messages of ``qlik-json``: each table's description (columns, types, key), read
from the message, and the one a data message is tied to.

A metadata message decodes to one ``ddl`` event: ``columns`` = the table's columns ordered by
``ordinal`` (``source_type`` = the Qlik type, with ``(length)`` for STRING/WSTRING/BYTES and
``(p,s)`` for NUMERIC; ``precision``/``scale`` = the message's when ``precision > 0``;
``nullable`` = ``nullable``), ``primary_key`` = the columns with ``primaryKeyPosition > 0``
ordered by it (null when none), ``ddl`` = a description such as ``QLIK METADATA
employees.salaries tableVersion 1 (emp_no INT4 NOT NULL, ..., PRIMARY KEY (emp_no,
from_date))`` (the message carries no DDL text). Its position is ``[0, tableVersion]``
(metadata messages carry no change sequence): versions order among themselves and come
before every CDC change. ``event_time_ms`` = ``lineage.timestamp`` read as UTC.

A data message is tied to a metadata message **of the same batch**, in this order: its
envelope ``messageSchemaId`` = the MD's ``schemaId`` (envelope ``messageSchemaId`` when the
MD has no ``schemaId``); else ``headers.externalSchemaId`` = that ``schemaId``; else its own
``schema``/``table`` names = the MD's ``lineage.schema``/``lineage.table``. When several MDs
match, the greatest ``tableVersion`` wins (then the last one to arrive). The tie is made in
Spark: the batch's (few) metadata messages are collected into one row (a second pass reads
only the records whose text contains ``tableStructure``), broadcast and cross-joined to every
record, and each data message picks its MD from that array with SQL higher-order functions.

Types (the MD's ``type``, case-insensitive; a parenthesised ``(p,s)``/``(len)`` in the type
text wins over the separate fields): INT1, INT2, INT4, UINT1, UINT2 -> int; INT8, UINT4 ->
bigint; UINT8 -> decimal(20,0); NUMERIC(p,s) -> decimal(p,s) (p > 38, s > p or s < 0 ->
string; no precision -> decimal(38,10)); REAL4 -> float; REAL8 -> double; STRING, WSTRING,
CLOB, NCLOB -> string; BYTES, BLOB -> binary; DATE -> date; TIME -> string; DATETIME (and
TIMESTAMP) -> timestamp; BOOLEAN -> boolean; any other -> string.

``columnMask`` / ``changeMask``: hex strings, a little-endian bitmask over the column
ordinals of the table's metadata message: byte 0 (the first two hex digits) holds bits 0..7,
byte 1 bits 8..15 ...; bit ``i`` set = the column with ordinal ``i + 1``. The seed's example
``0B`` (binary 1011) = ordinals 1, 2 and 4 (see :func:`mask_ordinals_sql`). An odd number of
digits is read with a leading ``0``. ``columnMask`` says which columns the message carries:
``present`` = the names of the MD's columns inside the mask (in ordinal order), so the
applier leaves the others as they are; no ``columnMask``, or one that covers every column (as
Qlik usually writes it), -> ``present`` null (the whole row).
A ``columnMask`` that is not hex -> ``BAD_VALUE``. ``changeMask`` (which columns changed;
LOB columns are not in it) has no place in the canonical event and is not read.

Metadata of earlier batches: the valid metadata messages of every batch are kept under
``<target>/_cdclake/decoder_context`` (``keeps_context``; see :mod:`cdclake.pipeline`) and
come back in ``DecodeOptions.context``, so a data message whose metadata message arrived in an
earlier micro-batch, file ingest or run into the same target is tied to it as if it were in
its own batch (a kept message loses a tie of equal ``tableVersion`` to one of the batch).
A data message whose metadata message was never seen is decoded without it: its values are
kept as strings (``columns`` null, so the applier takes the columns from the image keys, typed
string), ``primary_key`` is null (use ``--primary-key``), and its ``columnMask`` is resolved by
position instead of ordinal (bit ``i`` = the ``i+1``-th key of ``data``, which Qlik writes in
ordinal order, as ``dataSchema`` in Metadata.json shows); a wrapped data message, which names
no table itself, is then rejected with ``MISSING_TABLE``. Qlik sends each table's metadata
message before its data (again when a task starts and after every DDL).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from cdclake.formats.json_common import parse_json
from cdclake.values import let

_HEADERS = (
    "struct<operation string, changeSequence string, timestamp string, streamPosition string, "
    "transactionId string, changeMask string, columnMask string, externalSchemaId string, "
    "transactionEventCounter string, transactionLastEvent string>"
)
_COLUMN = (
    "struct<ordinal string, type string, length string, precision string, scale string, "
    "primaryKeyPosition string, nullable string>"
)
_LINEAGE = "struct<server string, task string, schema string, table string, tableVersion string, timestamp string>"
#: the fields of a metadata or data message (the body of the envelope, or the flat document)
_BODY = (
    f"schema string, table string, headers {_HEADERS}, data map<string,string>, beforeData map<string,string>, "
    f"schemaId string, lineage {_LINEAGE}, tableStructure struct<tableColumns map<string,{_COLUMN}>>, dataSchema string"
)
SCHEMA = f"magic string, type string, messageSchemaId string, messageSchema string, message struct<{_BODY}>, {_BODY}"

MAGIC = "atMSG"
_MAX_INT = 2147483647
#: SQL: a record that may be a metadata message (only those are parsed a second time)
MAYBE_MD = "instr(cast(value as string), 'tableStructure') > 0"


def qlik_to_spark_sql(type_text: str, precision: str, scale: str) -> str:
    """SQL expression: the Spark type (text) of a Qlik column type.

    ``type_text`` yields the MD's ``type`` (``INT4``, ``NUMERIC``, ``NUMERIC(10,2)``,
    ``STRING(50)`` ...), ``precision``/``scale`` the MD's int fields (used when the type text has
    no parentheses). Mapping in the module docstring; unknown types -> ``string``.
    """
    t = f"upper(trim({type_text}))"
    bind = {
        "base": f"regexp_extract({t}, '^([A-Z0-9_]+)', 1)",
        "p": f"coalesce(try_cast(nullif(regexp_extract({t}, '\\\\(\\\\s*([0-9]+)', 1), '') as int), {precision})",
        "s": f"coalesce(try_cast(nullif(regexp_extract({t}, '\\\\(\\\\s*[0-9]+\\\\s*,\\\\s*([0-9]+)', 1), '') as int), {scale}, 0)",
    }
    body = """(case
      when x.base in ('INT1','INT2','INT4','UINT1','UINT2') then 'int'
      when x.base in ('INT8','UINT4') then 'bigint'
      when x.base = 'UINT8' then 'decimal(20,0)'
      when x.base in ('NUMERIC','DECIMAL') then
        (case when x.p is null or x.p <= 0 then 'decimal(38,10)'
              when x.p > 38 or x.s > x.p or x.s < 0 then 'string'
              else concat('decimal(', x.p, ',', x.s, ')') end)
      when x.base = 'REAL4' then 'float'
      when x.base = 'REAL8' then 'double'
      when x.base in ('BYTES','BLOB') then 'binary'
      when x.base = 'DATE' then 'date'
      when x.base in ('DATETIME','TIMESTAMP') then 'timestamp'
      when x.base = 'BOOLEAN' then 'boolean'
      else 'string' end)"""
    return let(bind, body)


def mask_ordinals_sql(mask: str) -> str:
    """SQL expression: ``array<int>`` of the column ordinals whose bits are set in the hex
    bitmask ``mask`` (a ``changeMask``/``columnMask`` string), ascending.

    Little-endian: hex digits 1-2 are byte 0 (bits 0..7), digits 3-4 byte 1 (bits 8..15) ...;
    within a byte bit 0 is the least significant; bit ``i`` -> ordinal ``i + 1``. ``'0B'`` ->
    ``[1, 2, 4]``; ``'0B01'`` -> ``[1, 2, 4, 9]``; ``''`` -> ``[]``; null -> null. An odd number
    of digits gets a leading ``0``. Non-hex digits count as no bits (validate separately).
    No 64-bit limit: each byte is read on its own.
    """
    h = f"(case when length({mask}) % 2 = 1 then concat('0', {mask}) else {mask} end)"
    body = (
        "(case when x.h is null then cast(null as array<int>) when length(x.h) = 0 then cast(array() as array<int>) "
        "else flatten(transform(sequence(0, length(x.h) div 2 - 1), b -> filter(transform(sequence(0, 7), "
        "k -> case when (shiftright(cast(conv(substr(x.h, 2 * b + 1, 2), 16, 10) as int), k) & 1) = 1 "
        "then cast(8 * b + k + 1 as int) end), o -> o is not null))) end)"
    )
    return let({"h": h}, body)


def pick_md(cond: str) -> str:
    """SQL expression: the element of ``_mds`` (the batch's metadata descriptions) for which
    ``cond`` (over ``m``) holds with the greatest ``(version, arrival)``; null when none does."""
    keyed = f"filter(transform(_mds, (m, i) -> named_struct('v', m.version, 'a', m.arrival, 'i', i + 1, 'ok', {cond})), x -> x.ok)"
    return f"element_at(_mds, array_max(transform({keyed}, x -> named_struct('v', x.v, 'a', x.a, 'i', x.i))).i)"


def by_field(field: str) -> str:
    """A null-safe ascending comparator over an int struct field (for ``array_sort``)."""
    lv, rv = f"coalesce(l.{field}, {_MAX_INT})", f"coalesce(r.{field}, {_MAX_INT})"
    return f"(l, r) -> case when {lv} < {rv} then -1 when {lv} > {rv} then 1 else 0 end"


def prepare(raw: DataFrame) -> DataFrame:
    """Parse ``raw`` and add the columns both forms share: ``rtype`` (MD/DT), ``hdr``,
    ``data_raw``/``before_data_raw``, names, link ids, and ``md`` (the metadata message's
    table description, null unless the record is a valid MD)."""
    df = parse_json(raw, SCHEMA)
    df = df.selectExpr("*", "(j.magic is not null or j.type is not null or j.message is not null) as wrapped")
    df = df.selectExpr(
        "*",
        """(case when wrapped then upper(trim(j.type))
                 when j.lineage is not null or j.tableStructure is not null then 'MD'
                 when j.headers is not null or j.data is not null or j.beforeData is not null then 'DT' end) as rtype""",
        "if(wrapped, j.message.headers, j.headers) as hdr",
        "if(wrapped, j.message.data, j.data) as data_raw",
        "if(wrapped, j.message.beforeData, j.beforeData) as before_data_raw",
        "if(wrapped, j.message.lineage, j.lineage) as lineage",
        "if(wrapped, j.message.tableStructure.tableColumns, j.tableStructure.tableColumns) as table_columns",
        "nullif(trim(if(wrapped, coalesce(j.message.schemaId, j.messageSchemaId), j.schemaId)), '') as md_id",
        "nullif(trim(coalesce(j.message.schema, j.schema)), '') as dt_schema",
        "nullif(trim(coalesce(j.message.table, j.table)), '') as dt_table",
    )
    df = df.selectExpr(
        "*",
        "case when rtype = 'DT' then nullif(trim(j.messageSchemaId), '') end as link_id",
        "case when rtype = 'DT' then nullif(trim(hdr.externalSchemaId), '') end as ext_id",
        f"""array_sort(transform(map_entries(table_columns), e -> named_struct(
              'name', e.key,
              'ordinal', try_cast(trim(e.value.ordinal) as int),
              'type', trim(e.value.type),
              'length', try_cast(trim(e.value.length) as int),
              'precision', try_cast(trim(e.value.precision) as int),
              'scale', try_cast(trim(e.value.scale) as int),
              'pk_pos', coalesce(try_cast(trim(e.value.primaryKeyPosition) as int), 0),
              'nullable', try_cast(trim(e.value.nullable) as boolean))), {by_field('ordinal')}) as md_cols0""",
    )
    source_type = """(case when c.type rlike '\\\\(' then c.type
             when upper(c.type) in ('NUMERIC','DECIMAL') and c.precision > 0 then concat(c.type, '(', c.precision, ',', coalesce(c.scale, 0), ')')
             when upper(c.type) in ('STRING','WSTRING','BYTES') and c.length > 0 then concat(c.type, '(', c.length, ')')
             else c.type end)"""
    df = df.selectExpr(
        "*",
        f"""transform(md_cols0, c -> named_struct(
              'name', c.name, 'ordinal', c.ordinal, 'pk_pos', c.pk_pos,
              'source_type', {source_type},
              'spark_type', {qlik_to_spark_sql('c.type', 'c.precision', 'c.scale')},
              'precision', case when c.precision > 0 then c.precision end,
              'scale', case when c.precision > 0 then c.scale end,
              'nullable', c.nullable)) as md_cols""",
    )
    md_ok = (
        f"rtype = 'MD' and parse_error is null and not is_tombstone and (not wrapped or j.magic = '{MAGIC}') "
        "and nullif(trim(lineage.table), '') is not null and size(md_cols) > 0 "
        "and forall(md_cols, c -> coalesce(c.ordinal >= 1, false))"
    )
    names = "array_distinct(transform(md_cols, c -> c.name))"
    pk_cols = f"array_sort(filter(md_cols, c -> c.pk_pos > 0), {by_field('pk_pos')})"
    return df.selectExpr(
        "*",
        f"""case when {md_ok} then named_struct(
              'id', md_id,
              'schema', nullif(trim(lineage.schema), ''),
              'table', nullif(trim(lineage.table), ''),
              'version', try_cast(trim(lineage.tableVersion) as bigint),
              'cols', md_cols,
              'columns', transform(md_cols, c -> named_struct('name', c.name, 'source_type', c.source_type,
                             'spark_type', c.spark_type, 'precision', c.precision, 'scale', c.scale,
                             'nullable', c.nullable)),
              'types', map_from_arrays({names}, transform({names}, n -> element_at(filter(md_cols, c -> c.name = n), 1).spark_type)),
              'pk', case when size({pk_cols}) > 0 then transform({pk_cols}, c -> c.name) end,
              'arrival', named_struct('file', source_record.file, 'line', source_record.line,
                                      'partition', source_record.partition, 'offset', source_record.offset))
           end as md""",
    )
