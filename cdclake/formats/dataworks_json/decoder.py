"""Decoder for ``dataworks-json`` (alias ``datahub-blob``): DataWorks "sync all to Kafka"
messages, and DataHub BLOB records, which carry the same JSON as UTF-8 bytes.

Sources: seed ``002_f06f21975cd4d102.txt`` (DataWorks: message format written to Kafka, heartbeat,
insert / update (both modes) / delete samples, field types), seed ``000_d2c269d42c40e542.txt``
(DataHub: BLOB topic JSON, heartbeat and DDL samples) and ``shared/FORMATS.md``
(``dataworks-json``); real messages from Apache Paimon's tests (``kafka/aliyun/table/event``).

Wire shape (one JSON object per record)::

    {"schema":  {"dataColumn": [{"name": "id", "type": "LONG"}...] | null,
                 "primaryKey": ["id"] | null,
                 "source": {"dbType": "MySQL", "dbVersion": "..", "dbName": "db",
                            "schemaName": "s" (PostgreSQL, SQL Server, Oracle ...),
                            "tableName": "t"} | null} | {},
     "payload": {"before": {"dataColumn": {col: value}} | null,
                 "after":  {"dataColumn": {col: value}} | null,
                 "sequenceId": "1620457642589000001" | null,  "scn": "..." (Oracle only),
                 "op": "INSERT", "timestamp": {"eventTime": ms, "systemTime": ms?, "checkpointTime": ms?},
                 "ddl": {"text": "alter table ...", "ddlMeta": base64 Java object} | null},
     "version": "0.0.1"}

Mapping to the canonical event (one input record -> zero or one event):

* ``op`` is case-sensitive. ``INSERT`` -> ``c`` (after image); ``DELETE`` -> ``d`` (before
  image); ``UPDATE_AFTER`` -> ``u`` with the after image and, when the record carries one (the
  "one Kafka record per update" mode), the before image, else before = null;
  ``UPDATE_BEFOR`` (sic) -> ``u`` with the before image only (see below); ``TRUNCATE`` -> data event ``t`` (no
  image; ``ddl`` = ``payload.ddl.text`` when given); ``CREATE``, ``ALTER``, ``ERASE``, ``QUERY``,
  ``RENAME``, ``CINDEX``, ``DINDEX`` -> ``ddl`` with ``payload.ddl.text`` (``ddlMeta`` is a
  serialised Java ``SQLStatement``: ignored); ``TRANSACTION_BEGIN`` / ``TRANSACTION_END`` ->
  ``tx_begin`` / ``tx_end`` (the format carries no transaction id: ``tx_id`` null);
  ``MHEARTBEAT`` -> ``heartbeat`` (no table; only ``timestamp`` is set); ``GTID``,
  ``XACOMMIT``, ``XAROLLBACK`` carry nothing to apply and decode to no event (not an error);
  any other value (``insert``, ``UPDATE``, ...) is rejected with ``UNKNOWN_OP``.
* Split updates: without "one record per update" DataWorks writes an update as
  ``UPDATE_BEFOR`` (before image only) followed by ``UPDATE_AFTER`` (after image only), both
  with the same ``sequenceId``. Each half decodes to a ``u`` event carrying its one image; the
  applier pairs halves of one table with equal positions into one update
  (:func:`cdclake.normalize.pair_update_halves`), so a key change removes the old key's row.
  ``UPDATE_BEFORE`` (Apache Paimon's spelling) is read like ``UPDATE_BEFOR``.
* Table: ``database`` = ``source.dbName``, ``schema`` = ``source.schemaName`` (null when
  absent or empty), ``table`` = ``source.tableName``. Heartbeats have none; transaction markers
  keep the database when the message names one, never a table.
* Key: ``schema.primaryKey`` when it is non-empty; else the column the producer adds to tables
  without a key: ``#alibaba_rds_row_id#`` (MySQL, LONG) or, for an Oracle source (``dbType``
  Oracle or an ``scn`` present), ``rowid`` (STRING). Columns are those of ``schema.dataColumn``
  (or, where the message has no column list, the image's).
* Types (``schema.dataColumn[].type``, case-insensitive) -> Spark: ``BOOLEAN`` -> boolean,
  ``DOUBLE`` -> double, ``LONG`` -> bigint, ``STRING`` -> string, ``DATE`` -> timestamp,
  ``BYTES`` -> binary; any other type (or a column missing from the list) -> string.
  ``columns`` = ``[{name, source_type: type, spark_type}]`` (no precision, scale, nullability
  on the wire).
* Values: the images are read as ``map<string,string>`` (JSON numbers and booleans arrive as
  their text). DATE values are milliseconds since the epoch (13 digits) and become canonical UTC
  timestamp text (``1731661114000`` -> ``2024-11-15 08:58:34.000000``); BYTES are base64
  (``java.util.Base64``), already canonical; DOUBLE may arrive as a JSON string (``"1.100000"``
  in real messages) and is kept as written. A value that does not fit its type (LONG ``"abc"``)
  rejects the record with ``BAD_VALUE``.
* Order: ``payload.sequenceId``, a decimal string (the two halves of a split update share one;
  full-load rows carry ``"-1"``, so they sort before every streamed change), then ``scn`` for
  Oracle: ``position.order = [sequenceId]`` or ``[sequenceId, scn]``, ``position.text`` =
  ``sequenceId[:scn]``. Data, TRUNCATE and DDL records without a numeric ``sequenceId`` are
  rejected with ``BAD_POSITION`` (as is a non-numeric ``scn``). Heartbeats and transaction
  markers may lack it: their position is then ``[eventTime]`` (text ``eventTime:<ms>``), which
  does not compare meaningfully with sequence ids (progress uses ``event_time_ms`` for them).
* ``event_time_ms`` = ``timestamp.eventTime`` (ms, UTC); null when absent or negative
  (full-load rows carry ``-1``).
* Images are whole rows: ``present`` is null.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import Capabilities, Decoder, DecodeOptions, event_sql, finish, first_error, position_sql
from cdclake.formats.json_common import parse_json
from cdclake.values import ms_to_timestamp_text_sql, normalize_image_sql

NAME = "dataworks-json"

SCHEMA = (
    "schema struct<dataColumn array<struct<name string, type string>>, primaryKey array<string>, "
    "source struct<dbType string, dbVersion string, dbName string, schemaName string, tableName string>>, "
    "payload struct<before struct<dataColumn map<string,string>>, after struct<dataColumn map<string,string>>, "
    "sequenceId string, scn string, op string, "
    "timestamp struct<eventTime string, systemTime string, checkpointTime string>, "
    "ddl struct<text string, ddlMeta string>>, "
    "version string"
)

#: ``UPDATE_BEFORE`` is how Apache Paimon's DataWorks parser spells the before half; the seeds
#: spell it ``UPDATE_BEFOR``. Both are accepted.
DATA_OPS = {"INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d", "UPDATE_BEFOR": "u", "UPDATE_BEFORE": "u"}
BEFORE_HALVES = ("UPDATE_BEFOR", "UPDATE_BEFORE")
#: data records that decode to no event
DROPPED_DATA_OPS: tuple[str, ...] = ()
DDL_OPS = ("CREATE", "ALTER", "ERASE", "QUERY", "RENAME", "CINDEX", "DINDEX")
TX_OPS = {"TRANSACTION_BEGIN": "tx_begin", "TRANSACTION_END": "tx_end"}
SKIP_OPS = ("GTID", "XACOMMIT", "XAROLLBACK")
HEARTBEAT_OP = "MHEARTBEAT"
TRUNCATE_OP = "TRUNCATE"
KNOWN_OPS = (*DATA_OPS, *DROPPED_DATA_OPS, *DDL_OPS, *TX_OPS, *SKIP_OPS, HEARTBEAT_OP, TRUNCATE_OP)

ROW_ID_COLUMN = "#alibaba_rds_row_id#"  # MySQL tables without a primary key (LONG)
ORACLE_ROW_ID_COLUMN = "rowid"  # Oracle sources (STRING)

#: latest ms-since-epoch accepted for DATE values (9999-12-31 23:59:59.999 UTC)
_MAX_MS = 253402300799999
#: a decimal integer as sequenceId / scn may hold it
_DECIMAL_RE = "^[+-]?[0-9]{1,38}$"


def _in(col: str, values) -> str:
    return f"{col} in ({', '.join(repr(v) for v in values)})"


def dataworks_to_spark_sql(type_text: str) -> str:
    """SQL expression: the Spark type (text) for a DataWorks column type (``dataColumn[].type``):
    BOOLEAN -> boolean, DOUBLE -> double, LONG -> bigint, STRING -> string, DATE (ms since epoch)
    -> timestamp, BYTES (base64) -> binary; anything else -> string."""
    t = f"upper(trim({type_text}))"
    return f"""(case {t}
      when 'BOOLEAN' then 'boolean'
      when 'DOUBLE' then 'double'
      when 'LONG' then 'bigint'
      when 'DATE' then 'timestamp'
      when 'BYTES' then 'binary'
      else 'string' end)"""


def _dates_to_text(image: str, types: str) -> str:
    """SQL expression: ``image`` (map<string,string>) with the values of timestamp (DATE) columns
    that are integral milliseconds turned into canonical timestamp text; other values unchanged
    (a DATE value that is not a number is left to fail normalisation)."""
    ms = "trim(v)"
    is_ms = f"({ms} rlike '^-?[0-9]{{1,15}}$' and abs(cast({ms} as bigint)) <= {_MAX_MS})"
    return (
        f"transform_values({image}, (k, v) -> case when element_at({types}, k) = 'timestamp' and {is_ms} "
        f"then {ms_to_timestamp_text_sql(ms)} else v end)"
    )


class DataWorksJsonDecoder(Decoder):
    """DataWorks / DataHub BLOB JSON; see the module docstring for the mapping."""

    name = NAME
    aliases = ("datahub-blob",)
    capabilities = Capabilities(
        key="message (schema.primaryKey), else #alibaba_rds_row_id# / Oracle rowid",
        column_types="schema.dataColumn[].type (BOOLEAN, DOUBLE, LONG, STRING, DATE, BYTES)",
        position="sequenceId (+ scn for Oracle)",
        transactions="TRANSACTION_BEGIN/TRANSACTION_END markers (no transaction id)",
        ddl=True,
        heartbeats=True,
        snapshot_marker="none (full-load rows carry sequenceId -1)",
    )

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        df = parse_json(raw, SCHEMA)
        df = df.selectExpr(
            "*",
            "j.payload.op as op",
            "nullif(trim(j.payload.sequenceId), '') as seq_text",
            "nullif(trim(j.payload.scn), '') as scn_text",
            "try_cast(trim(j.payload.timestamp.eventTime) as bigint) as et",
            "nullif(trim(j.schema.source.schemaName), '') as schema_name",
            "filter(j.schema.dataColumn, c -> c.name is not null) as cols",
        )
        df = df.selectExpr(
            "*",
            f"case when seq_text rlike '{_DECIMAL_RE}' then cast(seq_text as decimal(38,0)) end as seq",
            f"case when scn_text rlike '{_DECIMAL_RE}' then cast(scn_text as decimal(38,0)) end as scn",
            # column name -> Spark type (first declaration of a name wins)
            f"""map_from_arrays(array_distinct(transform(cols, c -> c.name)),
                  transform(array_distinct(transform(cols, c -> c.name)),
                            n -> {dataworks_to_spark_sql('element_at(filter(cols, c -> c.name = n), 1).type')})) as types""",
            # which images each op uses
            f"case when {_in('op', ('UPDATE_AFTER', 'DELETE', *BEFORE_HALVES))} then j.payload.before.dataColumn end as before_raw",
            f"case when {_in('op', ('INSERT', 'UPDATE_AFTER'))} then j.payload.after.dataColumn end as after_raw",
        )
        df = df.selectExpr(
            "*",
            f"{normalize_image_sql(_dates_to_text('after_raw', 'types'), 'types', 'base64')} as after_n",
            f"{normalize_image_sql(_dates_to_text('before_raw', 'types'), 'types', 'base64')} as before_n",
            # the columns the key fallback looks at: the message's column list, else the image's
            "coalesce(transform(cols, c -> c.name), map_keys(coalesce(after_raw, before_raw)), array()) as col_names",
            "(lower(j.schema.source.dbType) like '%oracle%' or scn_text is not null) as is_oracle",
        )

        pk = f"""(case when size(filter(j.schema.primaryKey, k -> k is not null and k != '')) > 0
                        then filter(j.schema.primaryKey, k -> k is not null and k != '')
                      when array_contains(col_names, '{ROW_ID_COLUMN}') then array('{ROW_ID_COLUMN}')
                      when is_oracle and array_contains(col_names, '{ORACLE_ROW_ID_COLUMN}') then array('{ORACLE_ROW_ID_COLUMN}')
                 end)"""
        columns = f"""transform(cols, c -> named_struct(
                        'name', c.name,
                        'source_type', c.type,
                        'spark_type', {dataworks_to_spark_sql('c.type')},
                        'precision', cast(null as int),
                        'scale', cast(null as int),
                        'nullable', cast(null as boolean)))"""
        by_seq = position_sql(["seq"], "seq_text")
        by_seq_scn = position_sql(["seq", "scn"], "concat(seq_text, ':', scn_text)")
        by_event_time = position_sql(["et"], "concat('eventTime:', et)")
        seq_position = f"(case when scn is null then {by_seq} else {by_seq_scn} end)"
        # heartbeats and transaction markers: sequenceId when they carry one, else eventTime
        marker_position = f"(case when seq is null then {by_event_time} else {seq_position} end)"
        common = dict(
            format=f"'{NAME}'",
            database="j.schema.source.dbName",
            schema="schema_name",
            table="j.schema.source.tableName",
            event_time_ms="(case when et >= 0 then et end)",
            position=seq_position,
        )
        op_code = "(case " + " ".join(f"when op = '{k}' then '{v}'" for k, v in DATA_OPS.items()) + " end)"
        data_event = event_sql(
            **common,
            kind="'data'",
            op=op_code,
            before="before_n.image",
            after="after_n.image",
            primary_key=pk,
            columns=columns,
        )
        truncate_event = event_sql(**common, kind="'data'", op="'t'", primary_key=pk, columns=columns, ddl="j.payload.ddl.text")
        ddl_event = event_sql(**common, kind="'ddl'", primary_key=pk, columns=columns, ddl="j.payload.ddl.text")
        tx_kind = "(case " + " ".join(f"when op = '{k}' then '{v}'" for k, v in TX_OPS.items()) + " end)"
        no_table = dict(schema="cast(null as string)", table="cast(null as string)", position=marker_position)
        tx_event = event_sql(**{**common, **no_table}, kind=tx_kind)
        heartbeat_event = event_sql(**{**common, **no_table, "database": "cast(null as string)"}, kind="'heartbeat'")

        events = F.expr(
            f"""case
              when is_tombstone then array()
              when {_in('op', DATA_OPS)} then array({data_event})
              when op = '{TRUNCATE_OP}' then array({truncate_event})
              when {_in('op', DDL_OPS)} then array({ddl_event})
              when {_in('op', TX_OPS)} then array({tx_event})
              when op = '{HEARTBEAT_OP}' then array({heartbeat_event})
              else array() end"""
        )

        is_data = F.expr(_in("op", (*DATA_OPS, *DROPPED_DATA_OPS)))
        needs_seq = F.expr(_in("op", (*DATA_OPS, *DROPPED_DATA_OPS, *DDL_OPS, TRUNCATE_OP)))
        is_marker = F.expr(_in("op", (*TX_OPS, HEARTBEAT_OP)))
        needs_table = F.expr(_in("op", (*DATA_OPS, *DROPPED_DATA_OPS, *DDL_OPS, TRUNCATE_OP)))
        bad_number = (needs_seq | is_marker) & F.expr(
            "(seq_text is not null and seq is null) or (scn_text is not null and scn is null)"
        )
        code, message = first_error(
            (F.col("parse_error").isNotNull(), "", F.col("parse_message")),
            (F.col("is_tombstone"), "", "tombstone"),
            (F.expr("j.payload is null"), RejectCode.SCHEMA_MISMATCH.value, "no 'payload' object"),
            (F.col("op").isNull(), RejectCode.SCHEMA_MISMATCH.value, "no 'payload.op' field"),
            (~F.expr(_in("op", KNOWN_OPS)), RejectCode.UNKNOWN_OP.value, F.concat(F.lit("unknown DataWorks op "), F.col("op"))),
            (
                needs_table
                & F.expr("nullif(trim(j.schema.source.dbName), '') is null or (nullif(trim(j.schema.source.tableName), '') is null and op != 'QUERY')"),
                RejectCode.MISSING_TABLE.value,
                "message has no schema.source.dbName/tableName",
            ),
            (
                F.expr("op in ('INSERT', 'UPDATE_AFTER') and coalesce(size(after_raw), 0) <= 0"),
                RejectCode.MISSING_IMAGE.value,
                F.concat(F.col("op"), F.lit(" without payload.after.dataColumn")),
            ),
            (
                F.expr(f"{_in('op', ('DELETE', *BEFORE_HALVES))} and coalesce(size(before_raw), 0) <= 0"),
                RejectCode.MISSING_IMAGE.value,
                F.concat(F.col("op"), F.lit(" without payload.before.dataColumn")),
            ),
            (
                (needs_seq & F.expr("seq is null")) | bad_number,
                RejectCode.BAD_POSITION.value,
                "payload.sequenceId (or scn) missing or not a decimal number",
            ),
            (is_marker & F.expr("seq is null and et is null"), RejectCode.BAD_POSITION.value, "neither payload.sequenceId nor timestamp.eventTime"),
            (
                is_data & F.expr("not (after_n.ok and before_n.ok)"),
                RejectCode.BAD_VALUE.value,
                "a value does not match its schema.dataColumn type",
            ),
        )
        # parse errors keep their own code; a tombstone is not an error at all
        code = F.when(F.col("parse_error").isNotNull(), F.col("parse_error")).when(F.col("is_tombstone"), F.lit(None)).otherwise(code)
        return finish(df, events, code, message)

    def detect_score(self, sample: list[bytes]) -> float:
        import json

        hits = 0
        for v in sample:
            try:
                d = json.loads(v)
            except Exception:
                continue
            if not isinstance(d, dict) or not isinstance(d.get("payload"), dict) or "schema" not in d:
                continue
            p = d["payload"]
            if "op" in p and ("sequenceId" in p or "timestamp" in p):
                hits += 1
        return hits / max(len(sample), 1)
