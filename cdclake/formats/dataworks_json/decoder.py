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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions, position_sql
from cdclake.formats.facts import Capabilities, OpTable
from cdclake.formats.dataworks_json.types import Signature
from cdclake.formats.json_common import JsonDecoder, loads_object
from cdclake.formats.skeleton import image_missing, persist_stage, table_missing
from cdclake.formats.typed import TypedImage, add_typed_images, collect_signatures, columns_literal, sig_case
from cdclake.sqltext import sql_in

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
#: ``payload.op`` -> what it means (facts.json ``ops``)
OPS = OpTable.load(__package__)
DATA_OPS = OPS.named(*OpTable.DATA)
BEFORE_HALVES = ("UPDATE_BEFOR", "UPDATE_BEFORE")
DDL_OPS = OPS.named("ddl")
TX_OPS = OPS.named("tx_begin", "tx_end")
HEARTBEAT_OP = OPS.one("heartbeat")
TRUNCATE_OP = OPS.one("t")
#: the records whose events carry ``columns`` / ``primary_key``: they get a signature
TABLE_OPS = (*DATA_OPS, TRUNCATE_OP, *DDL_OPS)

#: a decimal integer as sequenceId / scn may hold it
_DECIMAL_RE = "^[+-]?[0-9]{1,38}$"

#: what a table record's signature is hashed from (``p0``..``p2`` on the driver): its column
#: list (every name and type, nulls included; hashed as it was parsed, not written out as JSON
#: text again) and the key lists of its images; a size of -1 tells a missing list from an empty one
SIG_PARTS = ["dc", "map_keys(after_raw)", "map_keys(before_raw)"]
SIG_HASH = (
    "xxhash64(coalesce(size(dc), -1), dc, coalesce(size(map_keys(after_raw)), -1), map_keys(after_raw), "
    "coalesce(size(map_keys(before_raw)), -1), map_keys(before_raw))"
)


class DataWorksJsonDecoder(JsonDecoder):
    """DataWorks / DataHub BLOB JSON; see the module docstring for the mapping."""

    name = NAME
    aliases = ("datahub-blob",)
    capabilities = Capabilities.load(__package__)  # facts.json beside this module
    wire_schema = SCHEMA

    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        return self._typed(self._fields(df))

    def _fields(self, df: DataFrame) -> DataFrame:
        """The record's fields as columns (images stay raw), its signature ``sig``, persisted
        once."""
        df = df.selectExpr(
            "source_record", "key", "value", "parse_error", "parse_message", "is_tombstone",
            "j.payload is null as no_payload",
            "j.payload.op as op",
            "nullif(trim(j.payload.sequenceId), '') as seq_text",
            "nullif(trim(j.payload.scn), '') as scn_text",
            "try_cast(trim(j.payload.timestamp.eventTime) as bigint) as et",
            "j.schema.source.dbName as db",
            "nullif(trim(j.schema.source.schemaName), '') as schema_name",
            "j.schema.source.tableName as tbl",
            "lower(j.schema.source.dbType) like '%oracle%' as oracle_db",
            "array_remove(array_compact(j.schema.primaryKey), '') as pk_given",
            "j.payload.ddl.text as ddl_text",
            f"case when {sql_in('j.payload.op', TABLE_OPS)} then j.schema.dataColumn end as dc",
            # which images each op uses
            f"case when {sql_in('j.payload.op', ('UPDATE_AFTER', 'DELETE', *BEFORE_HALVES))} then j.payload.before.dataColumn end as before_raw",
            f"case when {sql_in('j.payload.op', ('INSERT', 'UPDATE_AFTER'))} then j.payload.after.dataColumn end as after_raw",
        )
        df = df.selectExpr(
            "*",
            f"case when seq_text rlike '{_DECIMAL_RE}' then cast(seq_text as decimal(38,0)) end as seq",
            f"case when scn_text rlike '{_DECIMAL_RE}' then cast(scn_text as decimal(38,0)) end as scn",
            "(oracle_db or scn_text is not null) as is_oracle",
            f"case when {sql_in('op', TABLE_OPS)} then {SIG_HASH} end as sig",
        )
        df = persist_stage(df)
        return df

    def _typed(self, df: DataFrame) -> DataFrame:
        """Types once per signature on the driver, then the typed images (``after_n``,
        ``before_n``: one conversion per column, values read by position), the key ``pk`` and
        the columns ``cols`` (one literal per signature)."""
        sigs = [Signature(r["sig"], r["lo"]["p0"], r["lo"]["p1"], r["lo"]["p2"]) for r in collect_signatures(df, "sig", SIG_PARTS)]

        # ---- typed images: one conversion per column, values read by position ------------------
        # (the values of the raw maps: views, nothing copied)
        images = [
            TypedImage("after_n", "sig", [s.after for s in sigs], lambda s, i: f"map_values(after_raw)[{i}]", "after_raw is not null"),
            TypedImage("before_n", "sig", [s.before for s in sigs], lambda s, i: f"map_values(before_raw)[{i}]", "before_raw is not null"),
        ]
        # the key and the columns: one literal per signature
        by_id = {s.after.id: s for s in sigs}
        fallback_key = sig_case("sig", [s.after for s in sigs], lambda s: by_id[s.id].fallback_key, "cast(null as array<string>)")
        pk = f"(case when size(pk_given) > 0 then pk_given else {fallback_key} end)"
        columns = sig_case("sig", [s.after for s in sigs], lambda s: by_id[s.id].columns, columns_literal(None))
        return add_typed_images(df, images, also=[f"{pk} as pk", f"{columns} as cols"])

    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        pk, columns = "pk", "cols"
        by_seq = position_sql(["seq"], "seq_text")
        by_seq_scn = position_sql(["seq", "scn"], "concat(seq_text, ':', scn_text)")
        by_event_time = position_sql(["et"], "concat('eventTime:', et)")
        seq_position = f"(case when scn is null then {by_seq} else {by_seq_scn} end)"
        # heartbeats and transaction markers: sequenceId when they carry one, else eventTime
        marker_position = f"(case when seq is null then {by_event_time} else {seq_position} end)"
        record = self.declare(
            schema="schema_name",
            event_time_ms="(case when et >= 0 then et end)",
            position=seq_position,
        )
        data_event = record.data(
            OPS.case_sql("op", *OpTable.DATA),
            before="before_n",
            after="after_n",
            primary_key=pk,
            columns=columns,
        )
        truncate_event = record.truncate(primary_key=pk, columns=columns, ddl="ddl_text")
        ddl_event = record.ddl("ddl_text", primary_key=pk, columns=columns)
        tx_event = record.tx(OPS.case_sql("op", "tx_begin", "tx_end"), position=marker_position)
        heartbeat_event = record.heartbeat(position=marker_position)

        return F.expr(
            f"""case
              when is_tombstone then array()
              when {sql_in('op', DATA_OPS)} then array({data_event})
              when op = '{TRUNCATE_OP}' then array({truncate_event})
              when {sql_in('op', DDL_OPS)} then array({ddl_event})
              when {sql_in('op', TX_OPS)} then array({tx_event})
              when op = '{HEARTBEAT_OP}' then array({heartbeat_event})
              else array() end"""
        )

    def checks(self, df: DataFrame, options: DecodeOptions) -> list[tuple[Column, str, Column | str]]:
        is_data = F.expr(sql_in("op", DATA_OPS))
        needs_seq = needs_table = F.expr(sql_in("op", TABLE_OPS))
        is_marker = F.expr(sql_in("op", (*TX_OPS, HEARTBEAT_OP)))
        bad_number = (needs_seq | is_marker) & F.expr(
            "(seq_text is not null and seq is null) or (scn_text is not null and scn is null)"
        )
        return [
            (F.col("no_payload"), RejectCode.SCHEMA_MISMATCH.value, "no 'payload' object"),
            (F.col("op").isNull(), RejectCode.SCHEMA_MISMATCH.value, "no 'payload.op' field"),
            (~F.expr(OPS.in_sql("op")), RejectCode.UNKNOWN_OP.value, F.concat(F.lit("unknown DataWorks op "), F.col("op"))),
            table_missing(needs_table, "db", "tbl", "message has no schema.source.dbName/tableName", needs_table="op != 'QUERY'"),
            image_missing("op", ("INSERT", "UPDATE_AFTER"), "after_raw", "payload.after.dataColumn"),
            image_missing("op", ("DELETE", *BEFORE_HALVES), "before_raw", "payload.before.dataColumn"),
            (
                (needs_seq & F.expr("seq is null")) | bad_number,
                RejectCode.BAD_POSITION.value,
                "payload.sequenceId (or scn) missing or not a decimal number",
            ),
            (is_marker & F.expr("seq is null and et is null"), RejectCode.BAD_POSITION.value, "neither payload.sequenceId nor timestamp.eventTime"),
            (
                is_data & F.expr("size(after_n_bad) > 0 or size(before_n_bad) > 0"),
                RejectCode.BAD_VALUE.value,
                "a value does not match its schema.dataColumn type",
            ),
        ]

    def looks_like(self, value: bytes) -> bool:
        d = loads_object(value)
        if d is None or not isinstance(d.get("payload"), dict) or "schema" not in d:
            return False
        p = d["payload"]
        return "op" in p and ("sequenceId" in p or "timestamp" in p)
