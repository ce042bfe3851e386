"""The wire of ``debezium-json``: what a record is read with (one ``from_json``), the SQL its
signatures are hashed from, and the facts of Debezium's ids and placeholders that every part
of the decode reads.

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
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid

from cdclake.formats.json_common import CORRUPT

SOURCE = (
    "struct<connector:string, name:string, db:string, `schema`:string, `table`:string, collection:string, "
    "ts_ms:string, snapshot:string, file:string, pos:string, `row`:string, lsn:string, commit_lsn:string, "
    "change_lsn:string, event_serial_no:string, scn:string, commit_scn:string, ord:string>"
)
TX = "struct<id:string, total_order:string, data_collection_order:string>"
TABLE_CHANGES = (
    "array<struct<type:string, id:string, `table`:struct<primaryKeyColumnNames:array<string>, "
    "columns:array<struct<name:string, jdbcType:string, typeName:string, typeExpression:string, "
    "length:string, scale:string, optional:string>>>>>"
)
#: fields of a Debezium payload (change, transaction, schema change, heartbeat); the images'
#: type is given by the schema using them
BODY_FIELDS = [
    ("before", None),
    ("after", None),
    ("source", SOURCE),
    ("op", "string"),
    ("ts_ms", "string"),
    ("transaction", TX),
    ("status", "string"),
    ("id", "string"),
    ("event_count", "string"),
    ("databaseName", "string"),
    ("schemaName", "string"),
    ("ddl", "string"),
    ("tableChanges", TABLE_CHANGES),
    ("historyRecord", "string"),
]
IMAGES = ("before", "after")
OTHER = [n for n, _ in BODY_FIELDS if n not in IMAGES]


def body(image_type: str, sep: str = " ") -> str:
    """A payload's fields as a Spark DDL struct body (``sep`` between name and type: a space
    for a top-level schema, a colon inside ``struct<>``), the images of type ``image_type``."""
    return ", ".join(f"`{n}`{sep}{image_type if t is None else t}" for n, t in BODY_FIELDS)


IMAGE = "map<string,string>"
#: the record, read once: the envelope (``schema`` kept as its raw JSON text, ``payload`` the
#: event with its images as ``map<string,string>``) or the payload's own fields at top level
SCHEMA = f"`schema` string, payload struct<{body(IMAGE, ':')}>, {body(IMAGE)}"
#: the same with the payload and the images as raw JSON text: what a record is read with when
#: SCHEMA does not fit it (a payload or an image written as a JSON string holding the object,
#: or not an object at all); such records are decoded from this reading, as they always were
BODY_SCHEMA = body("string")
LENIENT_SCHEMA = f"`schema` string, payload string, {BODY_SCHEMA}"
#: the images' JSON value kinds (second parse, only of records that need them)
KIND_ENV = "payload struct<`before`:map<string,variant>, `after`:map<string,variant>>"
KIND_BARE = "`before` map<string,variant>, `after` map<string,variant>"
HISTORY_SCHEMA = f"databaseName string, schemaName string, ddl string, tableChanges {TABLE_CHANGES}"

JSON_OPTS = f"map('mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '{CORRUPT}')"
# splits a tableChanges id on the dots outside double quotes: "db"."a.b"."t" -> 3 parts
ID_SPLIT = r"""'\\.(?=(?:[^"]*"[^"]*")*[^"]*$)'"""
NULL_STRINGS = "cast(null as array<string>)"

#: what a data record's signature is hashed from: its Connect schema text (NULL without the
#: envelope) and its images' keys; then the per-image and per-schema signatures it implies
SIG_PARTS = ["sig_schema", "map_keys(after_m)", "map_keys(before_m)", "sig_a", "sig_b", "sig_s"]
SIG = "xxhash64(sig_schema_h, coalesce(size(map_keys(after_m)), -1), map_keys(after_m), coalesce(size(map_keys(before_m)), -1), map_keys(before_m))"
#: A typed image depends on the Connect schema and that image's keys only, and the events'
#: ``columns`` on the schema only: with a schema, each image's CASE is over the distinct
#: (schema, image keys) of the batch (``sig_a``/``sig_b``) and ``columns`` over the distinct
#: schemas (``sig_s``), not over every (schema, after keys, before keys): an insert, an update
#: and a delete of one schema share their branches (a third of the CASE branches). Without a
#: schema (types inferred from both images' values) they are the record's signature.
IMAGE_SIG = "case when {m} is null then null when sig_schema is not null then xxhash64({tag}, sig_schema_h, coalesce(size(map_keys({m})), -1), map_keys({m})) else sig end"
SCHEMA_SIG = "case when sig is null then null when sig_schema is not null then xxhash64(3, sig_schema_h) else sig end"
#: the Connect schema's text hashed once per record (``sig_schema_h``; a schema is ~2 KB of JSON
#: text): the signatures above hash this, not the text again (a collision is still caught: the
#: signature aggregate checks a second hash over the text itself)
SCHEMA_HASH = "case when sig_schema is not null then xxhash64(sig_schema) end"


#: a PostgreSQL transaction id as Debezium 2.0 and later write it: ``<txId>:<LSN>``, both decimal
PG_TX_ID = r"'^([0-9]+):[0-9]+$'"


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
    return f"(case when {id_} rlike {PG_TX_ID} then regexp_extract({id_}, {PG_TX_ID}, 1) else {id_} end)"


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


#: SQL: a PostgreSQL change's ``position.order`` (``lsn``, ``total_order``), read from the
#: payload (``b``) as the position below reads it
PG_ORDER = ("array(coalesce(try_cast(b.source.lsn as decimal(38,0)), 0), "
             "coalesce(try_cast(b.`transaction`.total_order as decimal(38,0)), 0))")
