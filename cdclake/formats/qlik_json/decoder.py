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

Mapping to the canonical event (one input record -> exactly one event, or a reject); metadata
messages, the tie of a data message to its metadata message, column types and column masks:
:mod:`cdclake.formats.qlik_json.metadata`.

* ``headers.operation`` (case-insensitive): ``REFRESH`` (full load) -> ``r`` (a snapshot read:
  the applier ranks it below every streamed change), ``INSERT`` -> ``c`` (after = ``data``),
  ``UPDATE`` -> ``u`` (after = ``data``, before = ``beforeData``, which may be null),
  ``DELETE`` -> ``d`` (before = ``data``, or ``beforeData`` when ``data`` is null or empty);
  anything else -> ``UNKNOWN_OP``.
* Table: ``database`` = null, ``schema`` = the Qlik schema name, ``table`` = the table name:
  the data message's own names (flat form) else its metadata message's ``lineage``; the target
  table is ``<schema>.<table>`` (``employees.salaries``). Qlik names one level (the source's
  schema; for MySQL the database), so it goes in ``schema`` and ``database`` stays null.
* Values: ``data``/``beforeData`` are read as ``map<string,string>`` (JSON numbers and
  booleans arrive as their text) and put in the canonical encoding of their column's type;
  BYTES/BLOB values are hexadecimal digits on the wire and become base64. A value that does not
  fit its type (INT4 ``"abc"``, BYTES ``"XYZ"``) rejects the record with ``BAD_VALUE``.
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
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions, position_sql
from cdclake.formats.facts import Capabilities, OpTable
from cdclake.formats.json_common import JsonDecoder, loads_object
from cdclake.formats.qlik_json.metadata import MAGIC, MAYBE_MD, SCHEMA, mask_ordinals_sql, pick_md, prepare
from cdclake.values import normalize_image_sql

NAME = "qlik-json"

#: ``headers.operation`` -> op (facts.json ``ops``)
OPS = OpTable.load(__package__)
_DECIMAL_RE = "^[0-9]{1,38}$"
_HEX_RE = "^[0-9A-Fa-f]+$"


def _hex_to_base64(image: str, types: str) -> str:
    """SQL expression: ``image`` with the values of binary columns turned from hex digits (as
    Qlik writes bytes in JSON) into base64 (canonical binary); a value that is not hex becomes
    ``!``, which the canonical check rejects (``BAD_VALUE``)."""
    return (
        f"transform_values({image}, (k, v) -> case when element_at({types}, k) = 'binary' and v is not null "
        f"then coalesce(base64(try_to_binary(regexp_replace(v, '\\\\s', ''), 'hex')), '!') else v end)"
    )


class QlikJsonDecoder(JsonDecoder):
    """Qlik Replicate / Qlik Talend Data Integration Kafka JSON; see the module docstring."""

    name = NAME
    capabilities = Capabilities.load(__package__)  # facts.json beside this module
    wire_schema = SCHEMA
    record_fields = {"schema": "tbl_schema", "table": "tbl_table", "event_time_ms": "et"}

    keeps_context = True

    def context_records(self, raw: DataFrame) -> DataFrame:
        """The valid metadata messages of ``raw`` (``value binary``, distinct)."""
        return prepare(raw.where(MAYBE_MD)).where("md is not null").select("value").distinct()

    def parse(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """Each record parsed once (:func:`cdclake.formats.qlik_json.metadata.prepare`) beside the batch's metadata messages, and
        the data message's own ``meta`` (the metadata message it is tied to) and headers."""
        df = prepare(raw)
        # The batch's metadata messages (few, so one broadcast row holds them all); only records
        # that can be one are parsed a second time. A cross join with that one row keeps every
        # record exactly once. collect_list skips the nulls of records that are no valid MD (a
        # filter on ``md`` would be pushed below the parse and parse each record once per field).
        candidates = raw.where(MAYBE_MD)
        if options.context is not None:  # metadata messages of earlier batches (no coordinates)
            candidates = candidates.unionByName(options.context)
        mds = prepare(candidates).agg(F.expr("collect_list(md)").alias("_mds"))
        df = df.crossJoin(F.broadcast(mds))
        meta = "coalesce({}, {}, {})".format(
            pick_md("m.id = link_id"),
            pick_md("m.id = ext_id"),
            pick_md("rtype = 'DT' and m.table = dt_table and m.schema <=> dt_schema"),
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
        record = self.declare()
        data_event = record.data(
            OPS.case_sql("op_name"),
            before="before_n.image",
            after="after_n.image",
            present=present,
            primary_key="meta.pk",
            columns="meta.columns",
            position=position_sql(["seq"], "coalesce(seq_text, '0')"),
            tx_id="nullif(trim(hdr.transactionId), '')",
            tx_seq="try_cast(trim(hdr.transactionEventCounter) as bigint)",
            tx_last="try_cast(trim(hdr.transactionLastEvent) as boolean)",
        )
        description = """concat('QLIK METADATA ', concat_ws('.', md.schema, md.table),
                 ' tableVersion ', coalesce(cast(md.version as string), '?'), ' (',
                 array_join(transform(md.cols, c -> concat_ws(' ', c.name, c.source_type,
                                                               case when c.nullable = false then 'NOT NULL' end)), ', '),
                 case when md.pk is not null then concat(', PRIMARY KEY (', array_join(md.pk, ', '), ')') else '' end,
                 ')')"""
        md_event = record.ddl(
            description,
            schema="md.schema",
            table="md.table",
            primary_key="md.pk",
            columns="md.columns",
            position=position_sql(["0", "coalesce(md.version, 0)"], "concat('tableVersion:', coalesce(md.version, 0))"),
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
                is_dt & ~F.expr(OPS.in_sql("op_name")),
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
