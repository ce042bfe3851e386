"""Decoder for ``debezium-json``: Debezium change events as Kafka Connect's JsonConverter writes
them, with the ``schema``/``payload`` envelope (``schemas.enable=true``) or without it.

Sources: seed ``003_3602ce7387367728.txt`` (Debezium Db2 connector: snapshots, change-table
reading order by commit LSN then change LSN, topic names, schema-change topic, transaction
metadata), ``shared/FORMATS.md`` (section ``debezium-json``), the Debezium documentation of the
Db2/SQL Server/MySQL/PostgreSQL/Oracle connectors (source blocks, logical types) and the Kafka
Connect JSON converter; real messages from Apache Flink, Apache SeaTunnel, Apache Paimon, the
Debezium project and memiiso/debezium-server-iceberg (``shared/fixtures/SOURCES.md``).

Wire shapes: :mod:`cdclake.formats.debezium_json.wire`. Column types and value conversions:
:mod:`cdclake.formats.debezium_json.images`. Positions, schema changes, transactions:
:mod:`cdclake.formats.debezium_json.events`.

Mapping to the canonical event:

* ``op`` c/u/d/r -> ``kind = data`` with that op; ``t`` (truncate) -> ``data``/``t`` without
  images; ``m`` (logical-decoding message) decodes to no event; any other op -> ``UNKNOWN_OP``.
  A ``c``/``r``/``u`` without ``after`` or a ``d`` without ``before`` -> ``MISSING_IMAGE`` (an
  ``u`` without ``before``, as PostgreSQL's REPLICA IDENTITY DEFAULT writes it, is fine).
  The op is taken as written: ``source.snapshot`` (``true``/``last``/``incremental`` ...) does not
  change it (Debezium marks snapshot rows with ``r``). Under ``--snapshot-removes-missing``
  (``DecodeOptions.snapshot_ends``) an ``r`` whose ``source.snapshot`` is
  ``last_in_data_collection`` (the last row of one table's snapshot, Debezium 2.x) or ``last``
  (the snapshot's last row) decodes to the data event and then a ``snapshot_end`` event of the
  same table, position, event time and record: the table's snapshot is complete there. A
  table whose snapshot read no row, or a connector older than these markers on every table but
  the last, gives none (the Debezium test ``assertRecordsSnapshotMarkers`` and the Connect
  schema's enum ``true,first,first_in_data_collection,last_in_data_collection,last,false,
  incremental``; fixture ``memiiso .../serde-unnested-order-val-withschema.json``). Incremental
  snapshots (``incremental``) carry no end and never give one. Only connectors whose positions
  follow commit order give one (MySQL/MariaDB binlog, SQL Server/Db2 commit LSN, MongoDB
  oplog): a PostgreSQL ``lsn`` or an Oracle ``scn`` is the change's own, so a transaction open
  at the snapshot point commits changes older than the snapshot that it did not read, which the
  end would remove; other connectors' positions fall back to ``ts_ms``, which snapshot rows
  need not share.
* table identity: ``database = source.db``, ``schema = source.schema`` (null where the connector
  has none, e.g. MySQL), ``table = source.table`` (MongoDB: ``source.collection``); a data event
  without a table -> ``MISSING_TABLE``.
* ``primary_key``: the field names of the Kafka key (``{"schema", "payload": {...}}`` or bare
  ``{...}``), in key order; null when the record has no key (files).
* a document that is none of the above (an unwrapped row, a key written as a value) ->
  ``SCHEMA_MISMATCH``; parse errors as :mod:`cdclake.formats.json_common` classifies them.

Every expression is ANSI-safe (``try_cast``, ``try_add``, range guards before
``timestamp_millis``/``conv``), so a bad value is a reject, never a failed job, whatever
``spark.sql.ansi.enabled`` says.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions
from cdclake.formats.facts import Capabilities
from cdclake.formats.debezium_json.events import (
    COLUMN_DDL, add_column_ddl, add_position, column_ddl_events, ddl_event, heartbeat_event, tx_event,
)
from cdclake.formats.debezium_json.inferred import column_ddl
from cdclake.formats.debezium_json.images import plan_of, typed_images
from cdclake.formats.debezium_json.wire import (
    BODY_FIELDS, BODY_SCHEMA, HISTORY_SCHEMA, IMAGE, IMAGE_SIG, JSON_OPTS, LENIENT_SCHEMA, OTHER, PG_ORDER, PLACEHOLDER,
    PLACEHOLDER_OPTION, SCHEMA, SCHEMA_HASH, SCHEMA_SIG, SIG, SIG_PARTS, placeholder_forms, tx_id_sql,
)
from cdclake.formats.json_common import CORRUPT, JsonDecoder, loads_object, parse_json
from cdclake.formats.skeleton import bad_values, persist_stage, table_missing
from cdclake.formats.typed import collect_signatures
from cdclake.sqltext import sql_str

NAME = "debezium-json"

#: what the typed stage reads of the parse stage (persisted once)
_KEEP = (
    "source_record", "key", "value", "parse_error", "parse_message", "rt", "env", "fb", "b", "ts", "event_time",
    "ddl_text", "tc", "db_name", "schema_name", "after_m", "before_m", "after_p", "before_p", "fb_after",
    "fb_before", "sig_schema", "sig", "sig_a", "sig_b", "sig_s", "pg_order",
)


class DebeziumJsonDecoder(JsonDecoder):
    """Debezium change events as JSON; see the module docstring for the mapping."""

    name = NAME
    capabilities = Capabilities.load(__package__)  # facts.json beside this module
    wire_schema = SCHEMA
    record_fields = {"event_time_ms": "event_time"}

    def parse(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """One ``from_json`` per record (images stay raw, the Connect schema raw text); the text
        ``null`` is a tombstone. Records SCHEMA does not fit (rare) are read again the lenient
        way and decoded from that reading (``fb``, ``jl``); their parse error is that reading's."""
        df = parse_json(raw, SCHEMA, null_text_is_tombstone=True)
        df = df.selectExpr(
            "*",
            f"case when j.{CORRUPT} is not null then from_json(text, '{LENIENT_SCHEMA}, {CORRUPT} string', {JSON_OPTS}) end as jl",
        )
        return df.selectExpr("*", f"coalesce(jl.{CORRUPT} is null, false) and jl is not null as fb").selectExpr(
            *[c for c in df.columns if c not in ("parse_error", "parse_message")],
            "fb",
            "case when fb then null else parse_error end as parse_error",
            "case when fb then null else parse_message end as parse_message",
        )

    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        """The record's kind ``rt`` (data, truncate, ddl, tx, heartbeat, message, skip, error,
        bad_payload, unknown, none), payload ``b``, raw images and signatures (persisted), then
        per signature the typed images, the column DDL the batch shows (PostgreSQL), the
        position and the key."""
        df = persist_stage(self._fields(df).select(*_KEEP))
        # ---- types: once per signature, on the driver (the Connect schema read by json.loads) ---
        rows = collect_signatures(df, "sig", SIG_PARTS, {
            "first": F.min("pg_order"), "last": F.max("pg_order"),
            "ident": F.first(F.expr("named_struct('db', b.source.db, 'schema', b.source.`schema`, 'table', coalesce(b.source.`table`, b.source.collection))")),
        })
        plans = [plan_of(r) for r in rows]
        forms = placeholder_forms(options.extra.get(PLACEHOLDER_OPTION) or PLACEHOLDER)
        df = typed_images(df, plans, "(" + ", ".join(sql_str(f) for f in forms) + ")")
        # ---- column DDL seen only in the data (PostgreSQL), on the driver ------------------------
        df = add_column_ddl(df, column_ddl(rows, {p.id: p for p in plans}, options.target_tables))
        df = add_position(df)
        # Primary key: the Kafka key's fields (enveloped or bare).
        df = df.selectExpr("*", "case when rt = 'data' then from_json(cast(key as string), 'map<string,string>') end as km")
        pk = """(case when km is null then cast(null as array<string>)
                     when size(km) = 2 and map_contains_key(km, 'schema') and map_contains_key(km, 'payload')
                       then json_object_keys(km['payload'])
                     else map_keys(km) end)"""
        df = df.selectExpr("*", f"{pk} as pkk", "coalesce(src.`table`, src.collection) as tbl")
        # a record the decode skips (a tombstone, JsonConverter's null rendering) is no error
        return df.selectExpr("*", "case when size(pkk) > 0 then pkk end as pk", "rt = 'skip' as is_tombstone")

    def _fields(self, df: DataFrame) -> DataFrame:
        """The payload's fields (``b``), raw images (``after_m``/``before_m``, present flags
        ``after_p``/``before_p``), the schema-change fields, ``event_time``, the record kind
        ``rt`` and the signatures (``sig``, ``sig_a``, ``sig_b``, ``sig_s``) with ``pg_order``."""
        fields = lambda s: ", ".join(f"'{n}', {s}.`{n}`" for n in OTHER)  # noqa: E731
        df = df.selectExpr(
            "*",
            "case when fb then jl.payload is not null else j.payload is not null end as env",
            f"""case when fb then (case when jl.payload is not null then from_json(jl.payload, '{BODY_SCHEMA}, {CORRUPT} string', {JSON_OPTS})
                                        else named_struct({", ".join(f"'{n}', jl.`{n}`" for n, _ in BODY_FIELDS)}, '{CORRUPT}', cast(null as string)) end) end as bl""",
            "case when fb then jl.`schema` else j.`schema` end as schema_txt",
        )
        img = lambda n: (  # noqa: E731
            f"case when fb then from_json(bl.`{n}`, '{IMAGE}') when j.payload is not null then j.payload.`{n}` else j.`{n}` end as {n}_m",
            f"case when fb then bl.`{n}` is not null when j.payload is not null then j.payload.`{n}` is not null else j.`{n}` is not null end as {n}_p",
            f"case when fb then bl.`{n}` end as fb_{n}",
        )
        df = df.selectExpr(
            "*",
            f"case when fb then named_struct({fields('bl')}) when j.payload is not null then named_struct({fields('j.payload')}) else named_struct({fields('j')}) end as b",
            *img("after"),
            *img("before"),
            "case when fb then bl.`_corrupt_record` is not null end as bl_bad",
        )
        df = df.selectExpr(
            "*",
            "try_cast(b.ts_ms as bigint) as ts",
            f"case when b.historyRecord is not null then from_json(b.historyRecord, '{HISTORY_SCHEMA}') end as hist",
            # JsonConverter's rendering of a null value with schemas enabled: a tombstone too
            r"""(not env and schema_txt is null and text rlike '^\\s*\\{\\s*"schema"\\s*:\\s*null\\s*,\\s*"payload"\\s*:\\s*null\\s*\\}\\s*$') as null_env""",
        )
        # the number of fields of the event (heartbeats have one), only read for candidates
        body_size = f"""size(case when fb then from_json(case when env then jl.payload else text end, '{IMAGE}')
                                  when env then from_json(text, 'payload {IMAGE}').payload else from_json(text, '{IMAGE}') end)"""
        df = df.selectExpr(
            "*",
            "coalesce(b.ddl, hist.ddl) as ddl_text",
            "coalesce(b.tableChanges, hist.tableChanges) as tc",
            "coalesce(b.databaseName, hist.databaseName) as db_name",
            "coalesce(b.schemaName, hist.schemaName) as schema_name",
            "coalesce(case when try_cast(b.source.ts_ms as bigint) > 0 then try_cast(b.source.ts_ms as bigint) end, ts) as event_time",
            f"""(case when is_tombstone or null_env then 'skip'
                      when parse_error is not null then 'error'
                      when env and bl_bad then 'bad_payload'
                      when b.op is not null then (case when b.op in ('c','u','d','r') then 'data' when b.op = 't' then 'truncate'
                                                       when b.op = 'm' then 'message' else 'unknown' end)
                      when upper(b.status) in ('BEGIN', 'END') then 'tx'
                      when b.ddl is not null or b.tableChanges is not null or b.historyRecord is not null then 'ddl'
                      when ts is not null and b.source is null and not before_p and not after_p and {body_size} = 1 then 'heartbeat'
                      else 'none' end) as rt""",
        )
        df = df.selectExpr("*", "case when rt = 'data' and env then schema_txt end as sig_schema")
        df = df.selectExpr("*", f"{SCHEMA_HASH} as sig_schema_h")
        df = df.selectExpr("*", f"case when rt = 'data' then {SIG} end as sig")
        return df.selectExpr(
            "*",
            f"case when sig is not null then {IMAGE_SIG.format(m='after_m', tag=1)} end as sig_a",
            f"case when sig is not null then {IMAGE_SIG.format(m='before_m', tag=2)} end as sig_b",
            f"{SCHEMA_SIG} as sig_s",
            # a PostgreSQL change's position order (as ``pos`` reads it): where its schema was seen
            f"case when sig_schema is not null and lower(b.source.connector) = 'postgresql' then {PG_ORDER} end as pg_order",
        )

    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        record = self.declare()
        change = record.but(
            database="src.db", schema="src.`schema`", table="tbl", position="pos",
            tx_id=tx_id_sql("b.`transaction`.id"), tx_seq="try_cast(b.`transaction`.total_order as bigint)",
        )
        data_event = change.data(
            "b.op", before="before_img", after="after_img", primary_key="pk", columns="cols",
            present="carried",
        )
        # --snapshot-removes-missing: the table's last snapshot row (Debezium 2.x marks it
        # last_in_data_collection, the snapshot's very last row last) also says the table's
        # snapshot is complete at its position; only where positions follow commit order
        # (binlog, commit LSN, oplog): a PostgreSQL lsn or an Oracle scn is the change's own,
        # so a transaction open at the snapshot point commits changes older than it
        ends = (
            f"""when rt = 'data' and b.op = 'r' and lower(src.snapshot) in ('last', 'last_in_data_collection')
                     and pstyle in ('binlog', 'lsn', 'mongo')
                then array({data_event}, {change.without('tx_id', 'tx_seq').event("'snapshot_end'")})"""
            if options.snapshot_ends else ""
        )
        # a PostgreSQL change whose columns differ from its table's before it: the DDL first
        inferred = (
            f"when rt = 'data' and {COLUMN_DDL} is not null then concat({column_ddl_events(record)}, array({data_event}))"
            if COLUMN_DDL in df.columns else ""
        )
        return F.expr(
            f"""case
              {ends}
              {inferred}
              when rt = 'data' then array({data_event})
              when rt = 'truncate' then array({change.truncate()})
              when rt = 'ddl' and size(tc) > 0 then transform(tc, x -> {ddl_event(record, 'x')})
              when rt = 'ddl' then array({ddl_event(record, None)})
              when rt = 'tx' then array({tx_event(record)})
              when rt = 'heartbeat' then array({heartbeat_event(record)})
              else array() end"""
        )

    def checks(self, df: DataFrame, options: DecodeOptions) -> list[tuple[Column, str, Column | str]]:
        rt = F.col("rt")
        is_data = rt == "data"
        return [
            (rt == "bad_payload", RejectCode.SCHEMA_MISMATCH.value, "'payload' is not a Debezium event object"),
            (
                rt == "none",
                RejectCode.SCHEMA_MISMATCH.value,
                "not a Debezium change, transaction or schema-change event (no 'op', 'status' or 'ddl')",
            ),
            (rt == "unknown", RejectCode.UNKNOWN_OP.value, F.concat(F.lit("unknown Debezium op "), F.col("b.op"))),
            table_missing(rt.isin("data", "truncate"), None, "tbl", "'source' names no table"),
            (
                is_data & F.expr("(after_p and after_m is null) or (before_p and before_m is null) or kv_bad"),
                RejectCode.SCHEMA_MISMATCH.value,
                "'before' or 'after' is not a JSON object",
            ),
            (
                is_data & F.expr("(b.op in ('c','r','u') and after_m is null) or (b.op = 'd' and before_m is null)"),
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
            bad_values(is_data, "bad_cols", "value does not fit its declared type"),
        ]

    def looks_like(self, value: bytes) -> bool:
        d = loads_object(value)
        if d is not None and "payload" in d and "schema" in d:
            d = d["payload"]
        if not isinstance(d, dict):
            return False
            # Debezium's op codes are one letter; DataWorks' envelope looks alike but its ops are
            # words (INSERT, UPDATE_AFTER ...) and its payload carries sequenceId
        return (
            ("op" in d and d.get("op") in ("c", "u", "d", "r", "t", "m") and "sequenceId" not in d
             and ("source" in d or "after" in d or "before" in d))
            or ("status" in d and "event_count" in d)
            or ("tableChanges" in d and "source" in d)
            or "historyRecord" in d
        )
