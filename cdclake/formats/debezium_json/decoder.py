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
    tombstone       Kafka value null (or ``{"schema": null, "payload": null}``, or the text
                    ``null``: how ``kafka-console-consumer`` prints a null value in a dumped file)
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
                                               precision, 38   decimal arithmetic up to 30 hex
                                               when absent;    digits, Scala's BigInt beyond: any
                                               string if >38)  length); a JSON number (as some
                                                               producers write it) is taken as is
                                                               (exponent form expanded)
  io.debezium.data.VariableScaleDecimal        string          {"scale", "value": base64} -> exact
                                                               decimal text of any length; string
                                                               because the scale differs from
                                                               value to value (PostgreSQL
                                                               ``numeric`` without a scale); a
                                                               NaN arrives as null
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
  array of int8..int64, float, double,         array<int>,     the JSON array as it is
  boolean, string (no logical name)            array<bigint>,
                                               ... array<string>
  struct / map / other arrays (geometry,       string          the value's JSON text
  numeric[] ...)
  ===========================================  ==============  ===================================

  The unavailable-value placeholder (``unavailable.value.placeholder``, default
  ``__debezium_unavailable_value``; ``--option unavailable.value.placeholder=...`` names the
  connector's own) in the after image, in any of the forms :func:`placeholder_forms` lists,
  means the column is not carried: the event's ``present`` leaves it out, and the applier
  keeps the value it has (a PostgreSQL TOASTed value an update left unchanged under
  ``REPLICA IDENTITY DEFAULT``; an Oracle LOB).

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
  event_count`` (END), ``position = [ts_ms]``. A PostgreSQL id ``<txId>:<LSN>`` (Debezium 2.0
  and later: the LSN differs from record to record of one transaction) is read as its
  ``txId`` (:func:`tx_id_sql`).
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

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import Capabilities, Decoder, DecodeOptions, event_sql, first_error, position_sql
from cdclake.formats.debezium_json import connect
from cdclake.formats.debezium_json.inferred import column_changes, ddl_text
from cdclake.formats.json_common import CORRUPT, finish_json, loads_object, parse_json
from cdclake.formats.typed import Sig, add_typed_image, collect_signatures, columns_literal, persist_stage, sig_case, unfused
from cdclake.sqltext import sql_str
from cdclake.formats.sqltypes import jdbc_spark_type
from cdclake.model import qualified_name

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
#: fields of a Debezium payload (change, transaction, schema change, heartbeat); the images'
#: type is given by the schema using them
BODY_FIELDS = [
    ("before", None),
    ("after", None),
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
_IMAGES = ("before", "after")
_OTHER = [n for n, _ in BODY_FIELDS if n not in _IMAGES]


def _body(image_type: str, sep: str = " ") -> str:
    return ", ".join(f"`{n}`{sep}{image_type if t is None else t}" for n, t in BODY_FIELDS)


_IMAGE = "map<string,string>"
#: the record, read once: the envelope (``schema`` kept as its raw JSON text, ``payload`` the
#: event with its images as ``map<string,string>``) or the payload's own fields at top level
SCHEMA = f"`schema` string, payload struct<{_body(_IMAGE, ':')}>, {_body(_IMAGE)}"
#: the same with the payload and the images as raw JSON text: what a record is read with when
#: SCHEMA does not fit it (a payload or an image written as a JSON string holding the object,
#: or not an object at all); such records are decoded from this reading, as they always were
BODY_SCHEMA = _body("string")
LENIENT_SCHEMA = f"`schema` string, payload string, {BODY_SCHEMA}"
#: the images' JSON value kinds (second parse, only of records that need them)
KIND_ENV = "payload struct<`before`:map<string,variant>, `after`:map<string,variant>>"
KIND_BARE = "`before` map<string,variant>, `after` map<string,variant>"
HISTORY_SCHEMA = f"databaseName string, schemaName string, ddl string, tableChanges {_TABLE_CHANGES}"

_JSON_OPTS = f"map('mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '{CORRUPT}')"
# splits a tableChanges id on the dots outside double quotes: "db"."a.b"."t" -> 3 parts
_ID_SPLIT = r"""'\\.(?=(?:[^"]*"[^"]*")*[^"]*$)'"""
_NULL_STRINGS = "cast(null as array<string>)"

#: what a data record's signature is hashed from: its Connect schema text (NULL without the
#: envelope) and its images' keys; then the per-image and per-schema signatures it implies
SIG_PARTS = ["sig_schema", "map_keys(after_m)", "map_keys(before_m)", "sig_a", "sig_b", "sig_s"]
_SIG = "xxhash64(sig_schema, coalesce(size(map_keys(after_m)), -1), map_keys(after_m), coalesce(size(map_keys(before_m)), -1), map_keys(before_m))"
#: A typed image depends on the Connect schema and that image's keys only, and the events'
#: ``columns`` on the schema only: with a schema, each image's CASE is over the distinct
#: (schema, image keys) of the batch (``sig_a``/``sig_b``) and ``columns`` over the distinct
#: schemas (``sig_s``), not over every (schema, after keys, before keys): an insert, an update
#: and a delete of one schema share their branches (a third of the CASE branches). Without a
#: schema (types inferred from both images' values) they are the record's signature.
_IMAGE_SIG = "case when {m} is null then null when sig_schema is not null then xxhash64({tag}, sig_schema, coalesce(size(map_keys({m})), -1), map_keys({m})) else sig end"
_SCHEMA_SIG = "case when sig is null then null when sig_schema is not null then xxhash64(3, sig_schema) else sig end"


def _let(expr: str, var: str, body: str) -> str:
    """SQL: ``body`` with lambda variable ``var`` bound to ``expr`` (evaluated once); only on the
    schema-change path (one event per ``tableChanges`` element)."""
    return f"element_at(transform(array({expr}), {var} -> {body}), 1)"


def _layout(keys: list[str] | None) -> tuple[list[str], list[int]]:
    """An image's columns (first-occurrence order) and, per column, the index of its value in
    the image's values (the last one when a key is repeated, as JSON readers keep it)."""
    keys = list(keys or [])
    last = {k: i for i, k in enumerate(keys)}
    names = list(dict.fromkeys(keys))
    return names, [last[n] for n in names]


@dataclass
class _Plan:
    """What one signature fixes: per image (``a`` = after, ``b`` = before) the columns and the
    SQL of each stage-2 projection, for the signature's ``CASE`` branch."""

    id: int  # the signature
    declared: list[dict] | None  # Connect schema columns; None: inferred from the value kinds
    names: dict  # image -> column names
    pos: dict  # image -> index of each column's value in the image's values
    ids: dict  # image (``a``, ``b``) or ``s`` (schema) -> its signature (None: no such image)

    @property
    def inferred(self) -> bool:
        return self.declared is None

    def union(self) -> list[str]:
        """Inferred columns: the after image's, then the before image's others."""
        return self.names["a"] + [n for n in self.names["b"] if n not in self.names["a"]]

    def col(self, name: str) -> dict | None:
        return next((c for c in self.declared if c["name"] == name), None)

    # -- per-column pieces ----------------------------------------------------------------------
    def value(self, img: str, i: int) -> str:
        """SQL: the text of the value (non-finite numbers as the strings they were read as)."""
        return connect.unquote_non_finite_sql(self.text(img, i))

    def text(self, img: str, i: int) -> str:
        """SQL: the value's text as ``from_json`` gives it."""
        return f"vals_{img}[{self.pos[img][i]}]"

    def kind(self, img: str, i: int) -> str:
        """SQL: the JSON kind of the value (second parse)."""
        return f"schema_of_variant(kv_{img}[{self.pos[img][i]}])"

    def need_kinds(self) -> str:
        """SQL: the record needs the second parse (its images' JSON kinds)."""
        if self.inferred:
            return "true"
        conds = [
            connect.decimal_ambiguous_sql(self.value(img, i))
            for img in "ab"
            for i, n in enumerate(self.names[img])
            if (self.col(n) or {}).get("kind") == "decimal"
        ]
        return "(" + " or ".join(conds) + ")" if conds else "false"

    def hex_array(self, img: str) -> str | None:
        """SQL: first pre-projection (base64 bytes of Decimal columns as hex)."""
        if self.inferred:
            return None
        out, any_hex = [], False
        for i, n in enumerate(self.names[img]):
            kind = (self.col(n) or {}).get("kind")
            v = self.value(img, i)
            if kind == "decimal":
                out.append(connect.decimal_hex_sql(v, connect.decimal_is_string_sql(v, self.kind(img, i))))
            elif kind == "vsdecimal":
                out.append(connect.vsdecimal_hex_sql(v))
            else:
                out.append("cast(null as string)")
                continue
            any_hex = True
        return "array(" + ", ".join(out) + ")" if any_hex else None

    def unscaled_array(self, img: str) -> str | None:
        """SQL: second pre-projection (the unscaled digits of those bytes)."""
        if self.hex_array(img) is None:
            return None
        out = []
        for i, n in enumerate(self.names[img]):
            kind = (self.col(n) or {}).get("kind")
            out.append(connect.unscaled_digits_sql(f"hex_{img}[{i}]", kind) if kind in connect.HEX_KINDS else "cast(null as string)")
        return "array(" + ", ".join(out) + ")"

    def kinds_array(self, img: str) -> str | None:
        """SQL (inferred): the JSON kind of each value of the image."""
        if not self.inferred or not self.names[img]:
            return None
        return "array(" + ", ".join(self.kind(img, i) for i in range(len(self.names[img]))) + ")"

    def class_array(self) -> str | None:
        """SQL (inferred): the class letter of each column of :meth:`union`: the after value's
        kind unless that is null (JSON null or no such key), else the before value's."""
        if not self.inferred:
            return None
        out = []
        for n in self.union():
            ka = kb = ta = tb = "cast(null as string)"
            if n in self.names["a"]:
                j = self.names["a"].index(n)
                ka, ta = f"kk_a[{j}]", self.text("a", j)
            if n in self.names["b"]:
                j = self.names["b"].index(n)
                kb, tb = f"kk_b[{j}]", self.text("b", j)
            use_a = f"coalesce({ka} != 'VOID', false)"
            out.append(connect.kind_class_sql(f"(case when {use_a} then {ka} else {kb} end)", f"(case when {use_a} then {ta} else {tb} end)"))
        return "array(" + ", ".join(out) + ")" if out else "cast(array() as array<string>)"

    def image_sig(self, img: str) -> Sig:
        """The typed image's :class:`Sig` (id: the image's signature): one conversion template
        per column."""
        conv = []
        for i, n in enumerate(self.names[img]):
            if self.inferred:
                conv.append(connect.inferred_sql(f"icls[{self.union().index(n)}]"))
            else:
                col = self.col(n)
                pre = f"uns_{img}[{i}]" if col is not None and col["kind"] in connect.HEX_KINDS else None
                conv.append(connect.wire_sql(col, pre))
        return Sig(self.ids[img], tuple(self.names[img]), tuple(conv))

    def raw(self, img: str, i: int) -> str:
        """SQL: the raw text of a column; a MySQL zero date in a date/timestamp column reads as
        NULL (no value, not a bad one)."""
        v = self.value(img, i)
        col = None if self.inferred else self.col(self.names[img][i])
        if col is not None and col["kind"] in connect.DATE_KINDS:
            return f"(case when {v} like '0000-00-00%' then null else {v} end)"
        return v

    def carried_array(self, forms: str) -> str | None:
        """SQL: the after image's columns whose value is none of the placeholder ``forms`` (an
        SQL list ``(v1, v2 ...)``, :func:`placeholder_forms`), in image order."""
        if not self.names["a"]:
            return None
        return "array_compact(array(" + ", ".join(
            f"case when {self.text('a', i)} in {forms} then null else {sql_str(n)} end" for i, n in enumerate(self.names["a"])
        ) + "))"

    def columns(self) -> str:
        if self.inferred:
            return "array(" + ", ".join(connect.inferred_column_sql(n, f"icls[{u}]") for u, n in enumerate(self.union())) + ")"
        return columns_literal([{k: v for k, v in c.items() if k != "kind"} for c in self.declared])


def _plan(row) -> _Plan:
    p = row["lo"]
    names, pos = {}, {}
    names["a"], pos["a"] = _layout(p["p1"])
    names["b"], pos["b"] = _layout(p["p2"])
    return _Plan(row["sig"], connect.connect_columns(p["p0"]), names, pos, {"a": p["p3"], "b": p["p4"], "s": p["p5"]})


class _By:
    """Plans keyed by one of their signatures (``sig``: the record's; ``a``/``b``/``s``: an
    image's or the schema's), one plan per distinct value: the plans sharing it agree on what
    that signature fixes."""

    def __init__(self, plans: list[_Plan], which: str) -> None:
        self.which = which
        self.column = "sig" if which == "sig" else f"sig_{which}"
        self.plans: dict[int, _Plan] = {}
        for p in plans:
            k = p.id if which == "sig" else p.ids[which]
            if k is not None:
                self.plans.setdefault(k, p)

    def case(self, fn, default: str) -> str:
        """SQL: CASE over this signature of ``fn(plan)`` (plans where it is None left out)."""
        have = [(k, p) for k, p in self.plans.items() if fn(p) is not None]
        if not have:
            return default
        return "(case " + self.column + " " + " ".join(f"when {k} then {fn(p)}" for k, p in have) + f" else {default} end)"


def _arrays(df: DataFrame, cols: dict[str, tuple[_By, callable]]) -> DataFrame:
    """Add one ``array<string>`` column per entry of ``cols`` (name -> (plans by a signature,
    per-plan SQL or None)): a CASE over that signature; NULL for signatures without one."""
    return df.selectExpr("*", *[f"{unfused(by.case(fn, _NULL_STRINGS))} as {name}" for name, (by, fn) in cols.items()])


def _ddl_spark_type_sql(c: str) -> str:
    """SQL: Spark type of a ``tableChanges`` column (``jdbcType``, ``length``, ``scale``)."""
    code = f"try_cast({c}.jdbcType as int)"
    length, scale = f"try_cast({c}.length as int)", f"coalesce(try_cast({c}.scale as int), 0)"
    return f"""(case
      when {code} in (2, 3) and {length} between 1 and 38 then concat('decimal(', greatest({length}, {scale}), ',', {scale}, ')')
      when {code} in (2, 3) and {length} > 38 then 'string'
      when {code} = -5 and upper({c}.typeName) like '%UNSIGNED%' then 'decimal(20,0)'
      when {code} = 4 and upper({c}.typeName) like '%UNSIGNED%' then 'bigint'
      else {_jdbc_spark_type_sql(code)} end)"""


#: the ``java.sql.Types`` constants (JDK ``java.sql.Types``)
_JDBC_TYPES = (
    -16, -15, -9, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 70, 91, 92, 93,
    1111, 2000, 2001, 2002, 2003, 2004, 2005, 2006, 2009, 2011, 2012, 2013, 2014,
)


def _jdbc_spark_type_sql(code: str) -> str:
    """SQL: the Spark type of the ``java.sql.Types`` code ``code`` (an int expression), written
    out from the driver-side mapping :func:`cdclake.formats.sqltypes.jdbc_spark_type` (no SQL
    twin of it to keep in step)."""
    groups: dict[str, list[int]] = {}
    for t in _JDBC_TYPES:
        st = jdbc_spark_type(t)
        if st != "string":
            groups.setdefault(st, []).append(t)
    whens = " ".join(f"when {code} in ({', '.join(map(str, ts))}) then '{st}'" for st, ts in groups.items())
    return f"(case {whens} else 'string' end)"


#: a PostgreSQL transaction id as Debezium 2.0 and later write it: ``<txId>:<LSN>``, both decimal
_PG_TX_ID = r"'^([0-9]+):[0-9]+$'"


def tx_id_sql(id_: str) -> str:
    """SQL: the transaction identity of a Debezium transaction id ``id_`` (``transaction.id`` of
    a change, ``id`` of a BEGIN/END record), the same for every record of one transaction.

    Debezium's PostgreSQL connector (2.0 and later, ``PostgresTransactionMonitor.adjustTxId``)
    writes ``<txId>:<LSN of the record>``: each change of a transaction, its BEGIN and its END
    carry a different id, and only ``txId`` (``source.txId``) is shared; it is taken. No other
    connector writes two decimal numbers around one colon (MySQL: a GTID ``<uuid>:<n>`` or
    ``file=...,pos=...``; MariaDB ``<domain>-<server>-<seq>``; SQL Server and Db2: the commit
    LSN, three hex groups; Oracle: an XID; MongoDB ``<lsid JSON>:<txnNumber>``), and those ids
    are the same on every record of a transaction: kept as they are. Sources: Debezium
    3.6.1.Final ``PostgresTransactionMonitor``, ``BinlogOffsetContext.setTransactionId``,
    ``TransactionMonitor``; its ``TransactionMetadataIT`` ("the <lsn> part differs between the
    BEGIN, data and END events"); the real connector's output (tests/real)."""
    return f"(case when {id_} rlike {_PG_TX_ID} then regexp_extract({id_}, {_PG_TX_ID}, 1) else {id_} end)"


#: Debezium's default ``unavailable.value.placeholder``
PLACEHOLDER = "__debezium_unavailable_value"
#: the ``--option`` naming the connector's own placeholder (Debezium's property name)
PLACEHOLDER_OPTION = "unavailable.value.placeholder"


def placeholder_forms(placeholder: str) -> list[str]:
    """The texts of an image value (as ``from_json`` reads it into a string) that mean "this
    column's value is not carried": Debezium writes ``unavailable.value.placeholder`` in place
    of a value it does not have, above all a PostgreSQL TOASTed (out-of-line) value an update
    left unchanged under ``REPLICA IDENTITY DEFAULT``, and an Oracle LOB. Per column type
    (Debezium 3.6.1.Final ``UnchangedToastedPlaceholder``, ``UnchangedToastedArrayPlaceholder``):
    the text itself (text, json, xml ... columns), its bytes for bytea (base64 as the JSON
    converter writes bytes, base64-url and hex under ``binary.handling.mode``), a one-element
    array of it (text arrays, bytea arrays as base64, uuid arrays as the name-based UUID of its
    bytes), the array of its bytes as numbers (int and bigint arrays), and the map of it to
    itself (hstore)."""
    raw = placeholder.encode("utf-8")
    b64 = base64.b64encode(raw).decode()
    name_uuid = str(uuid.UUID(bytes=hashlib.md5(raw).digest(), version=3))
    texts = [
        placeholder, b64, base64.urlsafe_b64encode(raw).decode(), raw.hex(), raw.hex().upper(),
        json.dumps([placeholder], separators=(",", ":")), json.dumps([b64], separators=(",", ":")),
        json.dumps([name_uuid], separators=(",", ":")), json.dumps(list(raw), separators=(",", ":")),
        json.dumps({placeholder: placeholder}, separators=(",", ":")),
    ]
    return list(dict.fromkeys(texts))


def _lsn_hi_lo(hexcol: str) -> tuple[str, str]:
    """SQL: (hi, lo) decimals of an LSN's hex digits: lo = the last 16 digits, hi = the rest
    (0 when the LSN is missing or longer than 32 digits, which is a BAD_POSITION)."""
    hexcol = f"(case when length({hexcol}) <= 32 then {hexcol} end)"
    hi = f"coalesce(try_cast(conv(nullif(substr({hexcol}, 1, greatest(length({hexcol}) - 16, 0)), ''), 16, 10) as decimal(38,0)), 0)"
    lo = f"coalesce(try_cast(conv(nullif(substr({hexcol}, greatest(length({hexcol}) - 15, 1)), ''), 16, 10) as decimal(38,0)), 0)"
    return hi, lo



def _typed(df: DataFrame, plans: list[_Plan], forms_sql: str) -> DataFrame:
    """The parse stage's records (``df``) with their typed images and what depends on their
    signatures' ``plans``: ``after_img``/``before_img`` (``map<string,string>`` canonical
    text), ``bad_cols``, ``kv_bad``, ``cols`` (the events' ``columns``), ``carried`` (the after
    image's columns that carry a value, NULL for all; ``forms_sql`` lists the placeholder
    texts), ``src``. Records of other signatures get NULL images."""
    inferred = [p for p in plans if p.inferred]
    df = df.selectExpr("*", "map_values(after_m) as vals_a", "map_values(before_m) as vals_b")
    # The images' JSON kinds, from a second parse of the records that need them: those whose
    # types are inferred, and digits-only Decimal values (a JSON string or a JSON number?)
    need = sig_case("sig", [p for p in plans if p.need_kinds() != "false"], _Plan.need_kinds, "false")
    kind_parse = f"""(case when fb then named_struct('before', from_json(fb_before, 'map<string,variant>'),
                                                    'after', from_json(fb_after, 'map<string,variant>'))
                           when env then from_json(cast(value as string), '{KIND_ENV}').payload
                           else from_json(cast(value as string), '{KIND_BARE}') end)"""
    df = df.selectExpr("*", f"case when {need} then {kind_parse} end as kv")
    df = df.selectExpr("*", "map_values(kv.after) as kv_a", "map_values(kv.before) as kv_b")
    by = {w: _By(plans, w) for w in ("sig", "a", "b", "s")}
    df = _arrays(df, {
        "hex_a": (by["a"], lambda p: p.hex_array("a")), "hex_b": (by["b"], lambda p: p.hex_array("b")),
        "kk_a": (by["sig"], lambda p: p.kinds_array("a")), "kk_b": (by["sig"], lambda p: p.kinds_array("b")),
    })
    df = _arrays(df, {
        "uns_a": (by["a"], lambda p: p.unscaled_array("a")), "uns_b": (by["b"], lambda p: p.unscaled_array("b")),
        "icls": (by["sig"], lambda p: p.class_array()),
    })
    for img, out in (("a", "after_img"), ("b", "before_img")):
        one = by[img].plans
        df = add_typed_image(
            df, f"sig_{img}", [p.image_sig(img) for p in one.values()], out,
            lambda s, i, img=img, one=one: one[s.id].raw(img, i), f"{'after' if img == 'a' else 'before'}_m is not null",
        )
    # an image the kinds parse could not read (nested duplicate keys): as unreadable as before
    kv_bad = sig_case("sig", inferred, lambda p: "((after_m is not null and kv.after is null) or (before_m is not null and kv.before is null))", "false")
    # Columns carried: all, unless the after image holds the placeholder of a value the
    # connector does not have (then those columns are left as they are: a partial image)
    carried = by["a"].case(lambda p: p.carried_array(forms_sql), _NULL_STRINGS)
    df = df.selectExpr(
        "*",
        f"{unfused(f'case when arrays_overlap(vals_a, array{forms_sql}) then {carried} end')} as carried",
    )
    df = df.selectExpr(
        "*",
        "array_distinct(concat(before_img_bad, after_img_bad)) as bad_cols",
        f"{kv_bad} as kv_bad",
        f"{unfused(by['s'].case(_Plan.columns, columns_literal(None)))} as cols",
        "b.source as src",
    )
    return df


#: SQL: a PostgreSQL change's ``position.order`` (``lsn``, ``total_order``), read from the
#: payload (``b``) as the position below reads it
_PG_ORDER = ("array(coalesce(try_cast(b.source.lsn as decimal(38,0)), 0), "
             "coalesce(try_cast(b.`transaction`.total_order as decimal(38,0)), 0))")


@dataclass(frozen=True)
class _InferredDdl:
    """Column DDL statements the data shows: they happen just before the change at ``order``
    (a ``position.order``) of the records of schema signature ``sig_s``."""

    sig_s: int
    order: tuple
    statements: tuple[str, ...]


def _column_ddl(rows, plans: dict, target_tables) -> list[_InferredDdl]:
    """The column DDL that the batch's PostgreSQL changes show (Debezium's PostgreSQL connector
    writes no schema-change events; :mod:`cdclake.formats.debezium_json.inferred`): per table,
    its distinct column lists (one per Connect schema, from the signature rows ``rows`` with
    their ``first``/``last`` position order and ``ident``) in position order, each compared with
    the one before it, the first with the target's table (``target_tables``) when the target
    has applied nothing of the table at or after it. A table whose column lists' positions
    overlap (a change of an older schema after one of a newer) shows nothing certain: none."""
    by_table: dict[tuple, dict[int, list]] = {}
    for r in rows:
        p = plans[r["sig"]]
        if r["first"] is None or p.inferred or p.ids["s"] is None:
            continue
        ident = tuple(r["ident"])
        cols = tuple((c["name"], c["spark_type"]) for c in p.declared)
        d = by_table.setdefault(ident, {}).setdefault(p.ids["s"], [cols, r["first"], r["last"]])
        d[1], d[2] = min(d[1], r["first"], key=tuple), max(d[2], r["last"], key=tuple)
    out = []
    for (db, schema, table), decls in by_table.items():
        seq = sorted(([s, *d] for s, d in decls.items()), key=lambda x: tuple(x[2]))
        if any(tuple(a[3]) >= tuple(b[2]) for a, b in zip(seq, seq[1:])):
            continue
        known = target_tables(qualified_name(db, schema, table)) if target_tables and table else None
        prev = None
        if known is not None and known.last_order is not None and tuple(known.last_order) < tuple(seq[0][2]):
            prev = known.columns
        for sig_s, cols, first, _last in seq:
            if prev is not None:
                changes = column_changes(prev, cols)
                if changes:
                    out.append(_InferredDdl(sig_s, tuple(first), tuple(ddl_text(table, c) for c in changes)))
            prev = cols
    return out


def _order_literal(order) -> str:
    return "array(" + ", ".join(f"cast({int(v)} as decimal(38,0))" for v in order) + ")"


def _inferred_event(d: _InferredDdl, i: int, common: dict) -> str:
    """SQL: the ``i``-th DDL event of ``d``: at ``d.order`` with its last element one less and
    ``i`` appended, between the change before it (of the old schema: a PostgreSQL change's LSN
    differs from the one before it, and changes of one statement share a schema) and the change
    at ``d.order``."""
    order = [int(v) for v in d.order]
    point = [*order[:-1], order[-1] - 1, i]
    text = f"concat('lsn=', {order[0]}, ' (before: columns changed)')"
    return event_sql(
        **common, database="src.db", schema="src.`schema`", table="tbl", kind="'ddl'", ddl=sql_str(d.statements[i]),
        position=position_sql([str(v) for v in point], text), columns="cols",
    )


class DebeziumJsonDecoder(Decoder):
    """Debezium change events as JSON; see the module docstring for the mapping."""

    name = NAME
    capabilities = Capabilities.load(__package__)  # facts.json beside this module

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        # ---- parse: one from_json per record; images stay raw, the Connect schema raw text -----
        df = parse_json(raw, SCHEMA, null_text_is_tombstone=True)
        # Records SCHEMA does not fit (rare) are read again the lenient way and decoded from that
        # reading: ``fb``. Their parse error is the lenient reading's.
        df = df.selectExpr(
            "*",
            f"case when j.{CORRUPT} is not null then from_json(text, '{LENIENT_SCHEMA}, {CORRUPT} string', {_JSON_OPTS}) end as jl",
        )
        df = df.selectExpr("*", f"coalesce(jl.{CORRUPT} is null, false) and jl is not null as fb").selectExpr(
            *[c for c in df.columns if c not in ("parse_error", "parse_message")],
            "fb",
            "case when fb then null else parse_error end as parse_error",
            "case when fb then null else parse_message end as parse_message",
        )
        fields = lambda s: ", ".join(f"'{n}', {s}.`{n}`" for n in _OTHER)  # noqa: E731
        df = df.selectExpr(
            "*",
            "case when fb then jl.payload is not null else j.payload is not null end as env",
            f"""case when fb then (case when jl.payload is not null then from_json(jl.payload, '{BODY_SCHEMA}, {CORRUPT} string', {_JSON_OPTS})
                                        else named_struct({", ".join(f"'{n}', jl.`{n}`" for n, _ in BODY_FIELDS)}, '{CORRUPT}', cast(null as string)) end) end as bl""",
            "case when fb then jl.`schema` else j.`schema` end as schema_txt",
        )
        img = lambda n: (  # noqa: E731
            f"case when fb then from_json(bl.`{n}`, '{_IMAGE}') when j.payload is not null then j.payload.`{n}` else j.`{n}` end as {n}_m",
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
        body_size = f"""size(case when fb then from_json(case when env then jl.payload else text end, '{_IMAGE}')
                                  when env then from_json(text, 'payload {_IMAGE}').payload else from_json(text, '{_IMAGE}') end)"""
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
        df = df.selectExpr("*", f"case when rt = 'data' then {_SIG} end as sig")
        df = df.selectExpr(
            "*",
            f"case when sig is not null then {_IMAGE_SIG.format(m='after_m', tag=1)} end as sig_a",
            f"case when sig is not null then {_IMAGE_SIG.format(m='before_m', tag=2)} end as sig_b",
            f"{_SCHEMA_SIG} as sig_s",
            # a PostgreSQL change's position order (as ``pos`` below): where its schema was seen
            f"case when sig_schema is not null and lower(b.source.connector) = 'postgresql' then {_PG_ORDER} end as pg_order",
        )
        keep = [
            "source_record", "key", "value", "parse_error", "parse_message", "rt", "env", "fb", "b", "ts", "event_time",
            "ddl_text", "tc", "db_name", "schema_name", "after_m", "before_m", "after_p", "before_p", "fb_after",
            "fb_before", "sig_schema", "sig", "sig_a", "sig_b", "sig_s", "pg_order",
        ]
        df = persist_stage(df.select(*keep))

        # ---- types: once per signature, on the driver (the Connect schema read by json.loads) ---
        rows = collect_signatures(df, "sig", SIG_PARTS, {
            "first": F.min("pg_order"), "last": F.max("pg_order"),
            "ident": F.first(F.expr("named_struct('db', b.source.db, 'schema', b.source.`schema`, 'table', coalesce(b.source.`table`, b.source.collection))")),
        })
        plans = [_plan(r) for r in rows]
        # ---- column DDL seen only in the data (PostgreSQL), on the driver ------------------------
        column_ddl = _column_ddl(rows, {p.id: p for p in plans}, options.target_tables)
        # ---- typed images: one conversion per column -------------------------------------------
        forms = placeholder_forms(options.extra.get(PLACEHOLDER_OPTION) or PLACEHOLDER)
        df = _typed(df, plans, "(" + ", ".join(sql_str(f) for f in forms) + ")")

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
        df = df.selectExpr("*", "case when rt = 'data' then from_json(cast(key as string), 'map<string,string>') end as km")
        pk = """(case when km is null then cast(null as array<string>)
                     when size(km) = 2 and map_contains_key(km, 'schema') and map_contains_key(km, 'payload')
                       then json_object_keys(km['payload'])
                     else map_keys(km) end)"""
        df = df.selectExpr(
            "*",
            f"{position} as pos",
            f"coalesce({pos_ok}, false) as pos_ok",
            f"{pk} as pkk",
            "coalesce(src.`table`, src.collection) as tbl",
        )
        df = df.selectExpr("*", "case when size(pkk) > 0 then pkk end as pk")

        common = dict(format=f"'{NAME}'", event_time_ms="event_time")
        data_common = dict(
            **common,
            database="src.db",
            schema="src.`schema`",
            table="tbl",
            position="pos",
            tx_id=tx_id_sql("b.`transaction`.id"),
            tx_seq="try_cast(b.`transaction`.total_order as bigint)",
        )
        data_event = event_sql(
            **data_common, kind="'data'", op="b.op", before="before_img", after="after_img", primary_key="pk", columns="cols",
            present="carried",
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
                tx_id=tx_id_sql("b.`transaction`.id"),
            )
            if x is None:
                return ev
            return _let(f"""transform(split({x}.id, {_ID_SPLIT}), p -> regexp_replace(p, '^"|"$', ''))""", "idp", ev)

        tx_event = event_sql(
            **common,
            kind="(case when upper(b.status) = 'BEGIN' then 'tx_begin' else 'tx_end' end)",
            tx_id=tx_id_sql("b.id"),
            tx_size="try_cast(b.event_count as bigint)",
            position=position_sql(["coalesce(ts, 0)"], "concat_ws(' ', concat('tx=', b.id), upper(b.status))"),
        )
        heartbeat_event = event_sql(**common, kind="'heartbeat'", position=position_sql(["ts"], "concat('ts_ms=', ts)"))
        # --snapshot-removes-missing: the table's last snapshot row (Debezium 2.x marks it
        # last_in_data_collection, the snapshot's very last row last) also says the table's
        # snapshot is complete at its position; only where positions follow commit order
        # (binlog, commit LSN, oplog): a PostgreSQL lsn or an Oracle scn is the change's own,
        # so a transaction open at the snapshot point commits changes older than it
        ends = (
            f"""when rt = 'data' and b.op = 'r' and lower(src.snapshot) in ('last', 'last_in_data_collection')
                     and pstyle in ('binlog', 'lsn', 'mongo')
                then array({data_event}, {event_sql(**{k: v for k, v in data_common.items() if not k.startswith('tx_')}, kind="'snapshot_end'")})"""
            if options.snapshot_ends else ""
        )

        # a PostgreSQL change whose columns differ from its table's before it: the DDL first
        inferred = "".join(
            f"""when rt = 'data' and sig_s = {d.sig_s} and pg_order = {_order_literal(d.order)}
                 then array({", ".join(_inferred_event(d, i, common) for i in range(len(d.statements)))}, {data_event})
            """
            for d in column_ddl
        )

        events = F.expr(
            f"""case
              {ends}
              {inferred}
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
            (rt.isin("data", "truncate") & F.expr("nullif(trim(tbl), '') is null"), RejectCode.MISSING_TABLE.value, "'source' names no table"),
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
            (
                is_data & F.expr("size(bad_cols) > 0"),
                RejectCode.BAD_VALUE.value,
                F.expr("concat('value does not fit its declared type in column(s) ', array_join(bad_cols, ', '))"),
            ),
        )
        # a record the decode skips (a tombstone, a heartbeat ...) is no error
        return finish_json(df, events, code, message, skip=rt == "skip")

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
