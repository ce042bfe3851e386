"""Decoder for ``qlik-json``: the JSON messages of the Qlik Replicate (formerly Attunity
Replicate) / Qlik Talend Data Integration Kafka target.

Sources: seed ``004_8379e34633d1519e.txt`` (Qlik Talend Data Integration, "メタデータとデータ
メッセージ": the fields of metadata and data messages, the ``changeMask``/``columnMask`` bit
layout), ``shared/FORMATS.md`` (section ``qlik-json``), the Qlik Replicate Kafka target
documentation ("Kafka target data types": the type names, "binary values are represented as
hexadecimal digits" in JSON); real messages: ``Data.json`` and ``Metadata.json`` of
jcustenborder/attunity-json-converter (captured from Attunity Replicate 6.3, MySQL
``employees.salaries``; ``shared/fixtures/SOURCES.md``).

Wire shapes (one JSON document per Kafka value)::

    wrapped        {"magic": "atMSG", "type": "MD" | "DT", "headers": null,
                    "messageSchemaId": "8FB9D3C1...", "messageSchema": "<Avro schema text>" | null,
                    "message": <metadata message> | <data message>}
    flat           <metadata message> | <data message> (without the envelope)

    metadata (MD)  {"schemaId": "8FB9D3C1...",
                    "lineage": {"server": "...", "task": "...", "schema": "employees",
                                "table": "salaries", "tableVersion": 1,
                                "timestamp": "2018-04-13T20:13:58.289"},
                    "tableStructure": {"tableColumns": {"emp_no": {"ordinal": 1, "type": "INT4",
                        "length": 10, "precision": 0, "scale": 0, "primaryKeyPosition": 1,
                        "nullable": false}, ...}},
                    "dataSchema": "<Avro schema of the data messages>"}
    data (DT)      {"schema": "employees", "table": "salaries"   (flat form; absent when wrapped),
                    "data": {col: value} | null, "beforeData": {col: value} | null,
                    "headers": {"operation": "REFRESH" | "INSERT" | "UPDATE" | "DELETE",
                                "changeSequence": "20180413201358290000000000000000001" | "",
                                "timestamp": "2018-04-13 20:13:58.290" | "", "streamPosition": "...",
                                "transactionId": "..." | "", "changeMask": "0B" | null,
                                "columnMask": "0F" | null, "externalSchemaId": "..." | null,
                                "transactionEventCounter": 1, "transactionLastEvent": true}}

Mapping to the canonical event (one input record -> exactly one event, or a reject):

* A metadata message decodes to one ``ddl`` event: ``columns`` = the table's columns ordered by
  ``ordinal`` (``source_type`` = the Qlik type, with ``(length)`` for STRING/WSTRING/BYTES and
  ``(p,s)`` for NUMERIC; ``precision``/``scale`` = the message's when ``precision > 0``;
  ``nullable`` = ``nullable``), ``primary_key`` = the columns with ``primaryKeyPosition > 0``
  ordered by it (null when none), ``ddl`` = a description such as ``QLIK METADATA
  employees.salaries tableVersion 1 (emp_no INT4 NOT NULL, ..., PRIMARY KEY (emp_no,
  from_date))`` (the message carries no DDL text). Its position is ``[0, tableVersion]``
  (metadata messages carry no change sequence): versions order among themselves and come
  before every CDC change. ``event_time_ms`` = ``lineage.timestamp`` read as UTC.
* A data message is tied to a metadata message **of the same batch**, in this order: its
  envelope ``messageSchemaId`` = the MD's ``schemaId`` (envelope ``messageSchemaId`` when the
  MD has no ``schemaId``); else ``headers.externalSchemaId`` = that ``schemaId``; else its own
  ``schema``/``table`` names = the MD's ``lineage.schema``/``lineage.table``. When several MDs
  match, the greatest ``tableVersion`` wins (then the last one to arrive). The tie is made in
  Spark: the batch's (few) metadata messages are collected into one row (a second pass reads
  only the records whose text contains ``tableStructure``), broadcast and cross-joined to every
  record, and each data message picks its MD from that array with SQL higher-order functions.
* ``headers.operation`` (case-insensitive): ``REFRESH`` (full load) -> ``r`` (a snapshot read:
  the applier ranks it below every streamed change), ``INSERT`` -> ``c`` (after = ``data``),
  ``UPDATE`` -> ``u`` (after = ``data``, before = ``beforeData``, which may be null),
  ``DELETE`` -> ``d`` (before = ``data``, or ``beforeData`` when ``data`` is null or empty);
  anything else -> ``UNKNOWN_OP``.
* Table: ``database`` = null, ``schema`` = the Qlik schema name, ``table`` = the table name:
  the data message's own names (flat form) else its metadata message's ``lineage``; the target
  table is ``<schema>.<table>`` (``employees.salaries``). Qlik names one level (the source's
  schema; for MySQL the database), so it goes in ``schema`` and ``database`` stays null.
* Types (the MD's ``type``, case-insensitive; a parenthesised ``(p,s)``/``(len)`` in the type
  text wins over the separate fields): INT1, INT2, INT4, UINT1, UINT2 -> int; INT8, UINT4 ->
  bigint; UINT8 -> decimal(20,0); NUMERIC(p,s) -> decimal(p,s) (p > 38, s > p or s < 0 ->
  string; no precision -> decimal(38,10)); REAL4 -> float; REAL8 -> double; STRING, WSTRING,
  CLOB, NCLOB -> string; BYTES, BLOB -> binary; DATE -> date; TIME -> string; DATETIME (and
  TIMESTAMP) -> timestamp; BOOLEAN -> boolean; any other -> string.
* Values: ``data``/``beforeData`` are read as ``map<string,string>`` (JSON numbers and
  booleans arrive as their text) and put in the canonical encoding of their column's type;
  BYTES/BLOB values are hexadecimal digits on the wire and become base64. A value that does not
  fit its type (INT4 ``"abc"``, BYTES ``"XYZ"``) rejects the record with ``BAD_VALUE``.
* ``columnMask`` / ``changeMask``: hex strings, a little-endian bitmask over the column
  ordinals of the table's metadata message: byte 0 (the first two hex digits) holds bits 0..7,
  byte 1 bits 8..15 ...; bit ``i`` set = the column with ordinal ``i + 1``. The seed's example
  ``0B`` (binary 1011) = ordinals 1, 2 and 4 (see :func:`mask_ordinals_sql`). An odd number of
  digits is read with a leading ``0``. ``columnMask`` says which columns the message carries:
  ``present`` = the names of the MD's columns inside the mask (in ordinal order), so the
  applier leaves the others as they are; no ``columnMask``, or one that covers every column (as
  Qlik usually writes it), -> ``present`` null (the whole row).
  A ``columnMask`` that is not hex -> ``BAD_VALUE``. ``changeMask`` (which columns changed;
  LOB columns are not in it) has no place in the canonical event and is not read.
* Order: ``headers.changeSequence`` as a decimal (``position.order = [changeSequence]``, up to 38
  digits; text = the changeSequence). REFRESH rows carry an empty changeSequence: order
  ``[0]``, text ``0``. An INSERT/UPDATE/DELETE whose changeSequence is missing or not digits,
  or a REFRESH whose non-empty changeSequence is not digits -> ``BAD_POSITION``.
* ``event_time_ms`` = ``headers.timestamp`` (UTC text ``yyyy-MM-dd[ T]HH:mm:ss[.f...]``, read
  in the session time zone, which cdclake pins to UTC; all digits = already ms); null when
  empty (REFRESH). ``tx_id`` = ``transactionId`` (null when empty), ``tx_seq`` =
  ``transactionEventCounter``, ``tx_last`` = ``transactionLastEvent``.

Rejects: ``parse_json``'s codes (MALFORMED_JSON, NOT_AN_OBJECT, SCHEMA_MISMATCH for fields of
the wrong JSON type); ``SCHEMA_MISMATCH`` for an envelope whose ``magic`` is not ``atMSG`` or
whose ``type`` is not ``MD``/``DT``, a wrapped message without ``message``, a flat document
that is neither kind, a data message without ``headers.operation``, a metadata message
without columns or with a column lacking a positive integer ``ordinal``; ``UNKNOWN_OP``;
``MISSING_TABLE`` (an MD without ``lineage.table``; a DT that names no table and whose MD is not
in the batch); ``MISSING_IMAGE``; ``BAD_POSITION``; ``BAD_VALUE``. A Kafka tombstone decodes to
no event and is not an error.

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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import Capabilities, DecodeOptions, event_sql, format_facts, position_sql
from cdclake.formats.json_common import JsonDecoder, loads_object, parse_json
from cdclake.values import let, normalize_image_sql

NAME = "qlik-json"

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
#: ``headers.operation`` -> op code
#: ``headers.operation`` -> op (facts.json ``ops``)
OPS: dict[str, str] = format_facts(__package__)["ops"]
_DECIMAL_RE = "^[0-9]{1,38}$"
_HEX_RE = "^[0-9A-Fa-f]+$"
_MAX_INT = 2147483647
#: a record that may be a metadata message (only those are parsed a second time)
_MAYBE_MD = "instr(cast(value as string), 'tableStructure') > 0"


def _in(col: str, values) -> str:
    return f"{col} in ({', '.join(repr(v) for v in values)})"


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


def _hex_to_base64(image: str, types: str) -> str:
    """SQL expression: ``image`` with the values of binary columns turned from hex digits (as
    Qlik writes bytes in JSON) into base64 (canonical binary); a value that is not hex becomes
    ``!``, which the canonical check rejects (``BAD_VALUE``)."""
    return (
        f"transform_values({image}, (k, v) -> case when element_at({types}, k) = 'binary' and v is not null "
        f"then coalesce(base64(try_to_binary(regexp_replace(v, '\\\\s', ''), 'hex')), '!') else v end)"
    )


def _pick(cond: str) -> str:
    """SQL expression: the element of ``_mds`` (the batch's metadata descriptions) for which
    ``cond`` (over ``m``) holds with the greatest ``(version, arrival)``; null when none does."""
    keyed = f"filter(transform(_mds, (m, i) -> named_struct('v', m.version, 'a', m.arrival, 'i', i + 1, 'ok', {cond})), x -> x.ok)"
    return f"element_at(_mds, array_max(transform({keyed}, x -> named_struct('v', x.v, 'a', x.a, 'i', x.i))).i)"


def _by(field: str) -> str:
    """A null-safe ascending comparator over an int struct field (for ``array_sort``)."""
    lv, rv = f"coalesce(l.{field}, {_MAX_INT})", f"coalesce(r.{field}, {_MAX_INT})"
    return f"(l, r) -> case when {lv} < {rv} then -1 when {lv} > {rv} then 1 else 0 end"


class QlikJsonDecoder(JsonDecoder):
    """Qlik Replicate / Qlik Talend Data Integration Kafka JSON; see the module docstring."""

    name = NAME
    capabilities = Capabilities.load(__package__)  # facts.json beside this module
    wire_schema = SCHEMA

    keeps_context = True

    def context_records(self, raw: DataFrame) -> DataFrame:
        """The valid metadata messages of ``raw`` (``value binary``, distinct)."""
        return self._prepare(raw.where(_MAYBE_MD)).where("md is not null").select("value").distinct()

    def _prepare(self, raw: DataFrame) -> DataFrame:
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
                  'nullable', try_cast(trim(e.value.nullable) as boolean))), {_by('ordinal')}) as md_cols0""",
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
        pk_cols = f"array_sort(filter(md_cols, c -> c.pk_pos > 0), {_by('pk_pos')})"
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

    def parse(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """Each record parsed once (:meth:`_prepare`) beside the batch's metadata messages, and
        the data message's own ``meta`` (the metadata message it is tied to) and headers."""
        df = self._prepare(raw)
        # The batch's metadata messages (few, so one broadcast row holds them all); only records
        # that can be one are parsed a second time. A cross join with that one row keeps every
        # record exactly once. collect_list skips the nulls of records that are no valid MD (a
        # filter on ``md`` would be pushed below the parse and parse each record once per field).
        candidates = raw.where(_MAYBE_MD)
        if options.context is not None:  # metadata messages of earlier batches (no coordinates)
            candidates = candidates.unionByName(options.context)
        mds = self._prepare(candidates).agg(F.expr("collect_list(md)").alias("_mds"))
        df = df.crossJoin(F.broadcast(mds))
        meta = "coalesce({}, {}, {})".format(
            _pick("m.id = link_id"),
            _pick("m.id = ext_id"),
            _pick("rtype = 'DT' and m.table = dt_table and m.schema <=> dt_schema"),
        )
        df = df.selectExpr(
            "*",
            f"{meta} as meta",
            "upper(trim(hdr.operation)) as op_name",
            "nullif(trim(hdr.changeSequence), '') as seq_text",
            "nullif(trim(hdr.columnMask), '') as col_mask",
            "nullif(trim(hdr.timestamp), '') as ts_text",
        )
        return df

    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        df = df.selectExpr(
            "*",
            "case when dt_table is not null then dt_schema else meta.schema end as tbl_schema",
            "coalesce(dt_table, meta.table) as tbl_table",
            "coalesce(meta.types, cast(map() as map<string,string>)) as types",
            f"""case when seq_text rlike '{_DECIMAL_RE}' then cast(seq_text as decimal(38,0))
                     when seq_text is null and op_name = 'REFRESH' then cast(0 as decimal(38,0)) end as seq""",
            """case when ts_text rlike '^[0-9]{1,15}$' then cast(ts_text as bigint)
                    else unix_millis(try_cast(ts_text as timestamp)) end as et""",
            "case when op_name in ('INSERT', 'UPDATE', 'REFRESH') then data_raw end as after_raw",
            """case when op_name = 'UPDATE' then before_data_raw
                    when op_name = 'DELETE' then (case when size(data_raw) > 0 then data_raw else before_data_raw end) end as before_raw""",
            f"(col_mask is null or col_mask rlike '{_HEX_RE}') as mask_ok",
        )
        df = df.selectExpr(
            "*",
            f"{normalize_image_sql(_hex_to_base64('after_raw', 'types'), 'types', 'base64')} as after_n",
            f"{normalize_image_sql(_hex_to_base64('before_raw', 'types'), 'types', 'base64')} as before_n",
            f"case when col_mask is not null and mask_ok then {mask_ordinals_sql('col_mask')} end as mask_ords",
        )
        return df

    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        # a mask that covers every column says "the whole row": present null, as the canonical
        # event spells it (a list would mark a whole image as partial)
        keys = "map_keys(coalesce(data_raw, before_data_raw))"
        present = f"""(case when mask_ords is null then cast(null as array<string>)
                           when meta is not null and forall(meta.cols, c -> array_contains(mask_ords, c.ordinal)) then cast(null as array<string>)
                           when meta is null and size({keys}) > 0 and forall(sequence(1, size({keys})), o -> array_contains(mask_ords, o))
                                then cast(null as array<string>)
                           when meta is not null then transform(filter(meta.cols, c -> array_contains(mask_ords, c.ordinal)), c -> c.name)
                           else filter(transform(mask_ords, o -> try_element_at(map_keys(coalesce(data_raw, before_data_raw)), o)), n -> n is not null)
                      end)"""
        op_code = "(case " + " ".join(f"when op_name = '{k}' then '{v}'" for k, v in OPS.items()) + " end)"
        data_event = event_sql(
            format=f"'{NAME}'",
            kind="'data'",
            op=op_code,
            schema="tbl_schema",
            table="tbl_table",
            before="before_n.image",
            after="after_n.image",
            present=present,
            primary_key="meta.pk",
            columns="meta.columns",
            position=position_sql(["seq"], "coalesce(seq_text, '0')"),
            tx_id="nullif(trim(hdr.transactionId), '')",
            tx_seq="try_cast(trim(hdr.transactionEventCounter) as bigint)",
            tx_last="try_cast(trim(hdr.transactionLastEvent) as boolean)",
            event_time_ms="et",
        )
        description = """concat('QLIK METADATA ', concat_ws('.', md.schema, md.table),
                 ' tableVersion ', coalesce(cast(md.version as string), '?'), ' (',
                 array_join(transform(md.cols, c -> concat_ws(' ', c.name, c.source_type,
                                                               case when c.nullable = false then 'NOT NULL' end)), ', '),
                 case when md.pk is not null then concat(', PRIMARY KEY (', array_join(md.pk, ', '), ')') else '' end,
                 ')')"""
        md_event = event_sql(
            format=f"'{NAME}'",
            kind="'ddl'",
            schema="md.schema",
            table="md.table",
            primary_key="md.pk",
            columns="md.columns",
            position=position_sql(["0", "coalesce(md.version, 0)"], "concat('tableVersion:', coalesce(md.version, 0))"),
            ddl=description,
            event_time_ms="unix_millis(try_cast(trim(lineage.timestamp) as timestamp))",
        )
        return F.expr(
            f"""case when is_tombstone then array()
                     when rtype = 'MD' then array({md_event})
                     when rtype = 'DT' then array({data_event})
                     else array() end"""
        )

    def checks(self, df: DataFrame, options: DecodeOptions) -> list[tuple[Column, str, Column | str]]:
        is_md = F.expr("rtype = 'MD'")
        is_dt = F.expr("rtype = 'DT'")
        return [
            (
                F.expr(f"wrapped and coalesce(j.magic, '') != '{MAGIC}'"),
                RejectCode.SCHEMA_MISMATCH.value,
                F.concat(F.lit("envelope magic is not atMSG: "), F.coalesce(F.col("j.magic"), F.lit("(none)"))),
            ),
            (
                F.expr("rtype is null and not wrapped"),
                RejectCode.SCHEMA_MISMATCH.value,
                "neither a Qlik metadata message (lineage, tableStructure) nor a data message (headers, data)",
            ),
            (
                F.expr("coalesce(rtype, '') not in ('MD', 'DT')"),
                RejectCode.SCHEMA_MISMATCH.value,
                F.concat(F.lit("envelope type is neither MD nor DT: "), F.coalesce(F.col("j.type"), F.lit("(none)"))),
            ),
            (F.expr("wrapped and j.message is null"), RejectCode.SCHEMA_MISMATCH.value, "envelope without 'message'"),
            (is_md & F.expr("nullif(trim(lineage.table), '') is null"), RejectCode.MISSING_TABLE.value, "metadata message without lineage.table"),
            (
                is_md & F.expr("coalesce(size(md_cols), 0) <= 0"),
                RejectCode.SCHEMA_MISMATCH.value,
                "metadata message without tableStructure.tableColumns",
            ),
            (
                is_md & F.expr("not forall(md_cols, c -> coalesce(c.ordinal >= 1, false))"),
                RejectCode.SCHEMA_MISMATCH.value,
                "a column of tableStructure.tableColumns has no positive integer ordinal",
            ),
            (is_dt & F.col("op_name").isNull(), RejectCode.SCHEMA_MISMATCH.value, "data message without headers.operation"),
            (
                is_dt & ~F.expr(_in("op_name", OPS)),
                RejectCode.UNKNOWN_OP.value,
                F.concat(F.lit("unknown Qlik operation "), F.col("hdr.operation")),
            ),
            (
                is_dt & F.col("tbl_table").isNull(),
                RejectCode.MISSING_TABLE.value,
                F.concat(
                    F.lit("data message names no table and no metadata message of the batch matches it (messageSchemaId "),
                    F.coalesce(F.col("link_id"), F.lit("none")),
                    F.lit(")"),
                ),
            ),
            (
                is_dt & F.expr("op_name in ('INSERT', 'UPDATE', 'REFRESH') and coalesce(size(after_raw), 0) <= 0"),
                RejectCode.MISSING_IMAGE.value,
                F.concat(F.col("op_name"), F.lit(" without 'data'")),
            ),
            (
                is_dt & F.expr("op_name = 'DELETE' and coalesce(size(before_raw), 0) <= 0"),
                RejectCode.MISSING_IMAGE.value,
                "DELETE without 'data' or 'beforeData'",
            ),
            (
                is_dt & F.col("seq").isNull(),
                RejectCode.BAD_POSITION.value,
                F.concat(F.lit("headers.changeSequence missing or not a decimal number: "), F.coalesce(F.col("seq_text"), F.lit("(empty)"))),
            ),
            (is_dt & ~F.col("mask_ok"), RejectCode.BAD_VALUE.value, F.concat(F.lit("headers.columnMask is not hex: "), F.col("col_mask"))),
            (
                is_dt & F.expr("not (after_n.ok and before_n.ok)"),
                RejectCode.BAD_VALUE.value,
                "a value does not match its column's type in the metadata message",
            ),
        ]

    def looks_like(self, value: bytes) -> bool:
        d = loads_object(value)
        if d is None:
            return False
        headers = d.get("headers")
        return (
            d.get("magic") == MAGIC
            or (isinstance(headers, dict) and "operation" in headers and ("data" in d or "beforeData" in d))
            or ("lineage" in d and "tableStructure" in d)
        )
