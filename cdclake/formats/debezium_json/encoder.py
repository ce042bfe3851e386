"""Encoder for ``debezium-json``: canonical events -> Debezium MySQL-connector change events as
Kafka Connect's JsonConverter writes them, with the ``schema``/``payload`` envelope
(``schemas.enable=true``, the default here) or without it (``with_schema=False``).

Sources: seed ``003_3602ce7387367728.txt`` (snapshots emit ``read`` events that all carry the
position read before the snapshot, ``ts_ms`` of ``source`` vs of the payload, the schema-change
topic keyed by ``databaseName``, the transaction metadata: ``BEGIN``/``END`` on a topic of its
own and the ``transaction`` block ``id``/``total_order``/``data_collection_order``),
``shared/FORMATS.md`` (section ``debezium-json``: envelope, Connect logical types, op codes,
tombstones, position per connector) and the real MySQL messages in
``shared/fixtures/debezium-json`` (Flink's ``debezium-data-schema-include.txt``: the
``io.debezium.connector.mysql.Source`` block and its schema; Paimon's ``alltype`` file: Decimal
parameters, ``MicroTimestamp``, ``Date``, bytes; Paimon's ``debezium-event-change.json``:
``tableChanges`` columns).

Records written, in commit order (``(key, value)``; JSON, compact)::

    change      key   {"id": 5}                         (the row's primary key; null: no key)
                value {"before": {...} | null, "after": {...} | null,
                       "source": {"version", "connector": "mysql", "name", "ts_ms", "snapshot",
                                  "db", "sequence", "table", "server_id", "gtid",
                                  "file": "mysql-bin.000001", "pos": 254, "row": 0, "thread", "query"},
                       "op": "c"|"u"|"d"|"r"|"t", "ts_ms": ...,
                       "transaction": {"id", "total_order", "data_collection_order"} | null}
    tombstone   key   as the delete's, value null        (after every delete, as Debezium does)
    DDL         key   {"databaseName": "shop"}
                value {"source": {...}, "ts_ms", "databaseName", "schemaName": null, "ddl",
                       "tableChanges": [{"type": "ALTER", "id": "\\"shop\\".\\"customers\\"",
                                         "table": {"primaryKeyColumnNames", "columns": [...]}}]}

With the envelope every key and value is ``{"schema": <Connect schema>, "payload": <above>}``.

* op: ``c``/``u``/``d``/``r``/``t`` as the event's; a snapshot row (``r``) carries
  ``source.snapshot`` ``"true"`` (``"last_in_data_collection"`` on the last row of a table,
  ``"last"`` on the last row of the snapshot, as Debezium 2.x) and the binlog
  position at which the snapshot was taken, which every row of that snapshot shares; truncates
  have no images and no key.
* row values (Debezium's defaults: ``decimal.handling.mode=precise``,
  ``time.precision.mode=adaptive_time_microseconds``, ``binary.handling.mode=bytes``):
  int/smallint/tinyint -> ``int32``/``int16`` numbers, bigint -> ``int64``, decimal(p,s) ->
  ``org.apache.kafka.connect.data.Decimal`` (base64 of the big-endian two's-complement unscaled
  value, minimal length, parameters ``scale`` and ``connect.decimal.precision``), date ->
  ``io.debezium.time.Date`` (int32 days since 1970-01-01), timestamp (MySQL ``DATETIME(6)``)
  -> ``io.debezium.time.MicroTimestamp`` (int64 µs since the epoch), binary -> ``bytes``
  (base64), boolean -> ``boolean``, float/double -> ``float``/``double``, everything else ->
  ``string``. Without the envelope the same JSON values are written and the decoder can only
  infer types from JSON kinds (numbers -> bigint, base64 Decimals and bytes -> string ...):
  :meth:`DebeziumJsonEncoder.carried` says exactly what comes back.
* position: ``source.file``/``pos``/``row``; ``pos`` grows by :data:`POS_STEP` per record, a
  new binlog file starts after :data:`EVENTS_PER_FILE` records (``pos`` back to
  :data:`FIRST_POS`); ``row`` is 0 (one row per binlog rows event). The decoder's
  ``[file number, pos, row, total_order]`` sorts the records back into commit order.
* ``source.ts_ms`` and the payload's ``ts_ms`` = the commit time (ms); ``transaction`` =
  ``{"id": tx_id, "total_order": tx_seq, "data_collection_order": n-th event of that table in
  the transaction}`` when the event has a transaction id.
* DDL events go to the schema-change topic with ``tableChanges`` describing the table after
  the change (``jdbcType``, ``typeName``, ``length``/``scale`` from the column type,
  ``optional`` = nullable; :func:`ddl_column`).

Dropped (counted in ``Encoded.dropped``): heartbeats (Debezium writes them to the
``__debezium-heartbeat`` topic, whose position is a bare ``ts_ms`` that does not order with
binlog positions), transaction BEGIN/END markers (the ``<prefix>.transaction`` topic),
``tx_size``/``tx_last`` (only the END marker carries ``event_count``), the ``schema`` part of
three-part names (the MySQL connector has database and table only), the primary key of data
events (it is the Kafka key, which files do not keep), the column types of truncates (written
without images), the transaction id of DDL events, column types without the envelope (inferred
by the decoder), and events with partial images (``present``: Debezium writes whole rows).

Not modelled: Debezium's MySQL connector writes a primary-key change as a delete, a tombstone
and a create; this encoder writes it as one ``u`` event (the round-trip contract is one decoded
event per canonical event; the applier follows key changes either way).
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal, localcontext

from cdclake.formats.encoding import Encoded, Encoder, dumps, inferred_column, json_text, not_written

NAME = "debezium-json"
DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "io.debezium.time.Date"
MICRO_TS = "io.debezium.time.MicroTimestamp"
VERSION = "1.9.7.Final"
#: binlog position of the first event written to a binlog file
FIRST_POS = 154
#: bytes the binlog position advances per record
POS_STEP = 100
#: records per binlog file before the next file starts
EVENTS_PER_FILE = 100
SERVER_ID = 223344

_DEC = re.compile(r"^decimal\((\d+),(\d+)\)$")
_EPOCH = datetime(1970, 1, 1)
_EPOCH_DAY = date(1970, 1, 1)


# ---- values --------------------------------------------------------------------------------


def connect_field(column: dict, optional: bool | None = None) -> dict:
    """The Kafka Connect field schema Debezium writes for a canonical column."""
    st = column["spark_type"]
    opt = column.get("nullable") is not False if optional is None else optional
    dec = _DEC.match(st)
    if dec:
        return {
            "type": "bytes", "optional": opt, "name": DECIMAL, "version": 1,
            "parameters": {"scale": dec.group(2), "connect.decimal.precision": dec.group(1)},
            "field": column["name"],
        }
    if st == "date":
        return {"type": "int32", "optional": opt, "name": DATE, "version": 1, "field": column["name"]}
    if st == "timestamp":
        return {"type": "int64", "optional": opt, "name": MICRO_TS, "version": 1, "field": column["name"]}
    simple = {
        "tinyint": "int16", "smallint": "int16", "int": "int32", "bigint": "int64", "float": "float",
        "double": "double", "boolean": "boolean", "binary": "bytes",
    }
    return {"type": simple.get(st, "string"), "optional": opt, "field": column["name"]}


def _unscaled_bytes(text: str, scale: int) -> bytes:
    with localcontext() as ctx:
        ctx.prec = 100
        n = int(Decimal(text).scaleb(scale))
    bits = n.bit_length() if n >= 0 else (-n - 1).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _parse_ts(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S")


def wire_value(text: str | None, spark_type: str):
    """Debezium's JSON value for a canonical value of ``spark_type``."""
    if text is None:
        return None
    dec = _DEC.match(spark_type)
    if dec:
        return base64.b64encode(_unscaled_bytes(text, int(dec.group(2)))).decode("ascii")
    if spark_type in ("tinyint", "smallint", "int", "bigint"):
        return int(text)
    if spark_type in ("float", "double"):
        return float(text)
    if spark_type == "boolean":
        return text == "true"
    if spark_type == "date":
        return (date.fromisoformat(text) - _EPOCH_DAY).days
    if spark_type == "timestamp":
        d = _parse_ts(text) - _EPOCH
        return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    return text  # strings; binary is base64 already


def decoded_spark_type(field: dict) -> str:
    """The Spark type the decoder derives from a Connect field schema."""
    if field.get("name") == DECIMAL:
        p = int(field["parameters"].get("connect.decimal.precision", 38))
        s = int(field["parameters"].get("scale", 0))
        return "string" if max(p, s) > 38 else f"decimal({max(p, s)},{s})"
    if field.get("name") == DATE:
        return "date"
    if field.get("name") == MICRO_TS:
        return "timestamp"
    return {
        "int8": "int", "int16": "int", "int32": "int", "int64": "bigint", "float": "float",
        "double": "double", "boolean": "boolean", "bytes": "binary",
    }.get(field["type"], "string")


# ---- DDL columns ---------------------------------------------------------------------------

_TYPE_NAMES = {
    # spark type -> (jdbcType, default typeName, MySQL type names that keep the spark type)
    "tinyint": (-6, "TINYINT", ()),
    "smallint": (5, "SMALLINT", ()),
    "int": (4, "INT", ("int", "integer", "mediumint")),
    "bigint": (-5, "BIGINT", ()),
    "float": (7, "FLOAT", ()),
    "double": (8, "DOUBLE", ("real",)),
    "boolean": (16, "BOOLEAN", ("bool",)),
    "date": (91, "DATE", ()),
    "timestamp": (93, "DATETIME", ("timestamp",)),
    "binary": (-3, "VARBINARY", ("binary", "tinyblob", "blob", "mediumblob", "longblob")),
    "string": (12, "VARCHAR", ("char", "text", "tinytext", "mediumtext", "longtext", "json", "enum", "set")),
}
_BASE = re.compile(r"^\s*([A-Za-z ]+?)\s*(\(|unsigned|zerofill|$)", re.I)
_LEN = re.compile(r"\(\s*([0-9]+)")


def ddl_column(column: dict, position: int) -> dict:
    """A ``tableChanges`` column as Debezium's MySQL connector writes it."""
    st = column["spark_type"]
    src = column.get("source_type") or ""
    m = _BASE.match(src)
    base = m.group(1).lower() if m else ""
    lm = _LEN.search(src)
    length: int | None = int(lm.group(1)) if lm else None
    scale: int | None = None
    dec = _DEC.match(st)
    if dec:
        jdbc, name = 3, "DECIMAL"
        length, scale = int(dec.group(1)), int(dec.group(2))
    else:
        jdbc, name, alts = _TYPE_NAMES.get(st, (12, "VARCHAR", ()))
        if base == name.lower() or base in alts:
            name = base.upper()
        elif st == "string" and length is None:
            name = "TEXT"
    out = {
        "name": column["name"], "jdbcType": jdbc, "typeName": name, "typeExpression": name,
        "charsetName": "utf8mb4" if st == "string" else None, "length": length, "scale": scale,
        "position": position, "optional": column.get("nullable") is not False,
        "autoIncremented": False, "generated": False,
    }
    return out


def _ddl_decoded_spark_type(col: dict) -> str:
    """The decoder's Spark type for a ``tableChanges`` column (jdbcType, length, scale)."""
    code, length, scale = col["jdbcType"], col["length"], col["scale"] or 0
    if code in (2, 3) and length is not None and 1 <= length <= 38:
        return f"decimal({max(length, scale)},{scale})"
    if code in (2, 3) and length is not None and length > 38:
        return "string"
    return {
        -7: "boolean", 16: "boolean", -6: "int", 5: "int", 4: "int", -5: "bigint", 7: "float", 6: "double",
        8: "double", 2: "decimal(38,10)", 3: "decimal(38,10)", 91: "date", 93: "timestamp", 2014: "timestamp",
        -2: "binary", -3: "binary", -4: "binary", 2004: "binary",
    }.get(code, "string")


# ---- Connect schemas -----------------------------------------------------------------------


def _f(type_: str, field: str, optional: bool = False, **extra) -> dict:
    return {"type": type_, "optional": optional, **extra, "field": field}


SOURCE_SCHEMA = {
    "type": "struct",
    "fields": [
        _f("string", "version"), _f("string", "connector"), _f("string", "name"), _f("int64", "ts_ms"),
        _f("string", "snapshot", True, name="io.debezium.data.Enum", version=1,
           parameters={"allowed": "true,last,false,incremental"}, default="false"),
        _f("string", "db"), _f("string", "sequence", True), _f("string", "table", True),
        _f("int64", "server_id"), _f("string", "gtid", True), _f("string", "file"), _f("int64", "pos"),
        _f("int32", "row"), _f("int64", "thread", True), _f("string", "query", True),
    ],
    "optional": False,
    "name": "io.debezium.connector.mysql.Source",
    "field": "source",
}
TX_SCHEMA = {
    "type": "struct",
    "fields": [_f("string", "id"), _f("int64", "total_order"), _f("int64", "data_collection_order")],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}
_DDL_COLUMN_SCHEMA = {
    "type": "struct",
    "fields": [
        _f("string", "name"), _f("int32", "jdbcType"), _f("int32", "nativeType", True), _f("string", "typeName"),
        _f("string", "typeExpression", True), _f("string", "charsetName", True), _f("int32", "length", True),
        _f("int32", "scale", True), _f("int32", "position"), _f("boolean", "optional", True),
        _f("boolean", "autoIncremented", True), _f("boolean", "generated", True),
    ],
    "optional": False,
    "name": "io.debezium.connector.schema.Column",
    "version": 1,
}
SCHEMA_CHANGE_SCHEMA = {
    "type": "struct",
    "fields": [
        SOURCE_SCHEMA,
        _f("int64", "ts_ms", True),
        _f("string", "databaseName", True),
        _f("string", "schemaName", True),
        _f("string", "ddl", True),
        {
            "type": "array",
            "items": {
                "type": "struct",
                "fields": [
                    _f("string", "type"), _f("string", "id"),
                    {
                        "type": "struct",
                        "fields": [
                            _f("string", "defaultCharsetName", True),
                            {"type": "array", "items": {"type": "string", "optional": False}, "optional": True,
                             "field": "primaryKeyColumnNames"},
                            {"type": "array", "items": _DDL_COLUMN_SCHEMA, "optional": False, "field": "columns"},
                        ],
                        "optional": False,
                        "name": "io.debezium.connector.schema.Table",
                        "version": 1,
                        "field": "table",
                    },
                ],
                "optional": False,
                "name": "io.debezium.connector.schema.Change",
                "version": 1,
            },
            "optional": False,
            "field": "tableChanges",
        },
    ],
    "optional": False,
    "name": "io.debezium.connector.mysql.SchemaChangeValue",
    "version": 1,
}
SCHEMA_CHANGE_KEY_SCHEMA = {
    "type": "struct",
    "fields": [_f("string", "databaseName")],
    "optional": False,
    "name": "io.debezium.connector.mysql.SchemaChangeKey",
    "version": 1,
}

#: why an event is not written (:func:`cdclake.formats.encoding.not_written`)
_NOT_WRITTEN = (
    ("heartbeat", "heartbeat events (Debezium's heartbeat topic has no binlog position)"),
    ("tx", "transaction BEGIN/END markers (on the <prefix>.transaction topic)"),
    ("partial", "events with partial images (Debezium writes whole rows)"),
    "unknown",
)


class DebeziumJsonEncoder(Encoder):
    """Writes canonical events as Debezium MySQL-connector change events (see the module
    docstring).

    Args:
        with_schema: wrap every key and value in JsonConverter's ``schema``/``payload``
            envelope (``schemas.enable=true``); False writes the payloads alone.
        server_name: the connector's ``topic.prefix`` (``source.name``, schema names).
    """

    name = NAME
    file_kind = "lines"

    def __init__(self, with_schema: bool = True, server_name: str = "cdclake") -> None:
        self.with_schema = with_schema
        self.server_name = server_name

    # ---- what is written --------------------------------------------------------------------

    @staticmethod
    def _skip_reason(event: dict) -> str | None:
        return not_written(event, _NOT_WRITTEN)

    def _wrap(self, schema: dict, payload):
        return {"schema": schema, "payload": payload} if self.with_schema else payload

    def _row(self, event: dict, image: dict | None) -> dict | None:
        if image is None:
            return None
        types = {c["name"]: c["spark_type"] for c in (event.get("columns") or [])}
        return {k: wire_value(v, types.get(k, "string")) for k, v in image.items()}

    def _value_struct(self, event: dict) -> dict:
        """Connect schema of the row struct (``before``/``after``) of an event's table."""
        return {
            "type": "struct",
            "fields": [connect_field(c) for c in (event.get("columns") or [])],
            "optional": True,
            "name": f"{self.server_name}.{event['database']}.{event['table']}.Value",
        }

    def _key(self, event: dict, image: dict | None):
        pk = event.get("primary_key") or []
        if not pk or image is None:
            return None
        cols = {c["name"]: c for c in (event.get("columns") or [])}
        payload = {k: wire_value(image.get(k), cols[k]["spark_type"] if k in cols else "string") for k in pk}
        schema = {
            "type": "struct",
            "fields": [connect_field(cols.get(k, {"name": k, "spark_type": "string"}), optional=False) for k in pk],
            "optional": False,
            "name": f"{self.server_name}.{event['database']}.{event['table']}.Key",
        }
        return self._wrap(schema, payload)

    def _source(self, event: dict, file_no: int, pos: int, snapshot: str) -> dict:
        ms = event.get("event_time_ms")
        return {
            "version": VERSION, "connector": "mysql", "name": self.server_name,
            "ts_ms": 0 if ms is None else ms, "snapshot": snapshot, "db": event.get("database"),
            "sequence": None, "table": event.get("table"), "server_id": SERVER_ID, "gtid": None,
            "file": f"mysql-bin.{file_no:06d}", "pos": pos, "row": 0, "thread": None, "query": None,
        }

    def _change(self, event: dict, source: dict, dc_order: int | None) -> dict:
        tx = None
        if event.get("tx_id") is not None:
            tx = {"id": event["tx_id"], "total_order": event.get("tx_seq"), "data_collection_order": dc_order}
        payload = {
            "before": self._row(event, event.get("before")) if event["op"] != "t" else None,
            "after": self._row(event, event.get("after")) if event["op"] != "t" else None,
            "source": source,
            "op": event["op"],
            "ts_ms": event.get("event_time_ms"),
            "transaction": tx,
        }
        vs = self._value_struct(event)
        schema = {
            "type": "struct",
            "fields": [
                {**vs, "field": "before"}, {**vs, "field": "after"}, SOURCE_SCHEMA,
                _f("string", "op"), _f("int64", "ts_ms", True), TX_SCHEMA,
            ],
            "optional": False,
            "name": f"{self.server_name}.{event['database']}.{event['table']}.Envelope",
            "version": 1,
        }
        return self._wrap(schema, payload)

    @staticmethod
    def _table_changes(event: dict) -> list[dict]:
        if event.get("columns") is None or event.get("table") is None:
            return []
        ident = ".".join(f'"{p}"' for p in (event.get("database"), event["table"]) if p is not None)
        return [
            {
                "type": "ALTER",
                "id": ident,
                "table": {
                    "defaultCharsetName": "utf8mb4",
                    "primaryKeyColumnNames": list(event.get("primary_key") or []),
                    "columns": [ddl_column(c, i) for i, c in enumerate(event["columns"], start=1)],
                },
            }
        ]

    def _schema_change(self, event: dict, source: dict) -> tuple:
        payload = {
            "source": source,
            "ts_ms": event.get("event_time_ms"),
            "databaseName": event.get("database"),
            "schemaName": None,
            "ddl": event.get("ddl"),
            "tableChanges": self._table_changes(event),
        }
        key = self._wrap(SCHEMA_CHANGE_KEY_SCHEMA, {"databaseName": event.get("database")})
        return key, self._wrap(SCHEMA_CHANGE_SCHEMA, payload)

    # ---- encode -----------------------------------------------------------------------------

    def encode(self, events: Iterable[dict]) -> Encoded:
        """Encode ``events`` (commit order); see the module docstring."""
        events = list(events)
        out = Encoded(units=[])
        file_no, pos, in_file = 1, FIRST_POS, 0
        dc_orders: Counter = Counter()  # (tx id, table) -> events so far
        kept = [e for e in events if not self._skip_reason(e)]
        for e in events:
            reason = self._skip_reason(e)
            if reason:
                out.dropped[reason] += 1
        for i, e in enumerate(kept):
            self._count_losses(e, out)
            if e["kind"] == "data" and e["op"] == "r":
                # Debezium 2.x marks each table's last snapshot row, the snapshot's last one "last"
                nxt = kept[i + 1] if i + 1 < len(kept) else None
                snapshot_over = nxt is None or nxt["kind"] != "data" or nxt["op"] != "r"
                table_over = snapshot_over or (nxt["database"], nxt["table"]) != (e["database"], e["table"])
                mark = "last" if snapshot_over else "last_in_data_collection" if table_over else "true"
                source = self._source(e, file_no, pos, mark)
            else:
                if in_file == EVENTS_PER_FILE:
                    file_no, pos, in_file = file_no + 1, FIRST_POS, 0
                pos += POS_STEP
                in_file += 1
                source = self._source(e, file_no, pos, "false")
            start = len(out.records)
            if e["kind"] == "ddl":
                key, value = self._schema_change(e, source)
                out.records.append((dumps(key), dumps(value)))
                out.units.append(start)
                continue
            dc = None
            if e.get("tx_id") is not None:
                dc_orders[(e["tx_id"], e["database"], e["table"])] += 1
                dc = dc_orders[(e["tx_id"], e["database"], e["table"])]
            key = None if e["op"] == "t" else self._key(e, e.get("after") if e["op"] != "d" else e.get("before"))
            k = None if key is None else dumps(key)
            out.records.append((k, dumps(self._change(e, source, dc))))
            out.units.append(start)
            if e["op"] == "d":
                out.records.append((k, None))  # the tombstone, in the delete's unit
                out.units.append(start)
        return out

    def transaction_records(self, events: Iterable[dict]) -> list[tuple[bytes, bytes]]:
        """The transaction-metadata topic's records (``<prefix>.transaction``, with
        ``provide.transaction.metadata=true``) for the data events of ``events`` that
        :meth:`encode` writes with a transaction id: per transaction, in order of its first
        event, a ``BEGIN`` (``event_count``/``data_collections`` null) and an ``END`` whose
        ``event_count`` is the number of its events and ``data_collections`` the count per
        ``db.table`` in order of first appearance; ``ts_ms`` = its first and last event's
        time. Key: ``{"id": <transaction id>}``. Seed ``003_3602ce7387367728.txt``
        section 3.2.8 (トランザクション境界を表すイベント).
        """
        txs: dict[str, list[dict]] = {}
        for e in events:
            if e["kind"] == "data" and e.get("tx_id") is not None and not self._skip_reason(e):
                txs.setdefault(e["tx_id"], []).append(e)
        dc_schema = {"type": "struct", "optional": False, "fields": [_f("string", "data_collection"), _f("int64", "event_count")]}
        schema = {
            "type": "struct", "optional": False, "name": "io.debezium.connector.common.TransactionMetadataValue",
            "fields": [
                _f("string", "status"), _f("string", "id"), _f("int64", "event_count", True),
                {"type": "array", "items": dc_schema, "optional": True, "field": "data_collections"}, _f("int64", "ts_ms"),
            ],
        }
        key_schema = {"type": "struct", "optional": False, "name": "io.debezium.connector.common.TransactionMetadataKey",
                      "fields": [_f("string", "id")]}
        out = []
        for tx_id, evs in txs.items():
            per_table = Counter(f"{e['database']}.{e['table']}" for e in evs)
            for status, ms, count, dcs in (
                ("BEGIN", evs[0].get("event_time_ms"), None, None),
                ("END", evs[-1].get("event_time_ms"), len(evs), [{"data_collection": t, "event_count": n} for t, n in per_table.items()]),
            ):
                value = {"status": status, "id": tx_id, "event_count": count, "data_collections": dcs, "ts_ms": ms or 0}
                out.append((dumps(self._wrap(key_schema, {"id": tx_id})), dumps(self._wrap(schema, value))))
        return out

    def _count_losses(self, e: dict, out: Encoded) -> None:
        if e.get("tx_size") is not None or e.get("tx_last") is not None:
            out.dropped["transaction sizes and last flags (only the END marker carries event_count)"] += 1
        if e.get("schema") is not None:
            out.dropped["schema names (the MySQL connector has database and table only)"] += 1
        if e["kind"] == "data" and e.get("primary_key"):
            out.dropped["primary keys of data events (in the Kafka key, which files do not keep)"] += 1
        if e["kind"] == "data" and e["op"] == "t" and e.get("columns") is not None:
            out.dropped["column types of truncates (written without images)"] += 1
        if e["kind"] == "ddl" and e.get("tx_id") is not None:
            out.dropped["transaction ids of DDL events"] += 1
        if not self.with_schema and e["kind"] == "data" and e["op"] != "t" and e.get("columns") is not None:
            out.dropped["column types (no schema envelope: the decoder infers them from JSON values)"] += 1

    # ---- carried ----------------------------------------------------------------------------

    def carried(self, event: dict) -> dict | None:
        """``event`` as the debezium-json decoder gives it back from files (see the module
        docstring)."""
        if self._skip_reason(event):
            return None
        out = dict(event)
        out.update(schema=None, present=None, tx_last=None, tx_size=None)
        if event["kind"] == "ddl":
            tcs = self._table_changes(event)
            if tcs:
                cols = tcs[0]["table"]["columns"]
                columns = [
                    {
                        "name": c["name"], "source_type": c["typeName"], "spark_type": _ddl_decoded_spark_type(c),
                        "precision": c["length"], "scale": c["scale"], "nullable": c["optional"],
                    }
                    for c in cols
                ]
                pk = tcs[0]["table"]["primaryKeyColumnNames"] or None
            else:
                columns, pk = None, None
            out.update(tx_id=None, tx_seq=None, columns=columns, primary_key=pk, before=None, after=None, op=None)
            return out
        if event.get("tx_id") is None:
            out.update(tx_seq=None)
        out.update(primary_key=None, ddl=None)
        if event["op"] == "t":
            out.update(columns=None, before=None, after=None)
            return out
        before, after = self._row(event, event.get("before")), self._row(event, event.get("after"))
        if self.with_schema:
            fields = [connect_field(c) for c in (event.get("columns") or [])]
            types = {f["field"]: decoded_spark_type(f) for f in fields}
            columns = [
                {
                    "name": f["field"],
                    "source_type": f.get("name") or f["type"],
                    "spark_type": types[f["field"]],
                    "precision": int(f["parameters"]["connect.decimal.precision"]) if f.get("name") == DECIMAL else None,
                    "scale": int(f["parameters"]["scale"]) if f.get("name") == DECIMAL else None,
                    "nullable": f["optional"],
                }
                for f in fields
            ]
            def back(img: dict | None, orig: dict | None) -> dict | None:
                if img is None:
                    return None
                # typed columns come back as their canonical text; undeclared ones as JSON text
                return {k: (orig[k] if k in types else json_text(v)) for k, v in img.items()}

            out.update(columns=columns, before=back(before, event.get("before")), after=back(after, event.get("after")))
            return out
        columns = _inferred_columns(after, before)
        kinds = {c["name"]: c["spark_type"] for c in columns}
        out.update(
            columns=columns,
            before=None if before is None else {k: _schemaless_text(v, kinds.get(k)) for k, v in before.items()},
            after=None if after is None else {k: _schemaless_text(v, kinds.get(k)) for k, v in after.items()},
        )
        return out


def _inferred_columns(after: dict | None, before: dict | None) -> list[dict]:
    """The decoder's column declarations without the envelope: after's keys then before's,
    each typed by its after value unless that is null."""
    after, before = after or {}, before or {}
    names = list(after) + [k for k in before if k not in after]
    return [inferred_column(n, after[n] if n in after and after[n] is not None else before.get(n)) for n in names]


def _schemaless_text(v, spark_type: str | None) -> str | None:
    """Canonical text the decoder makes of JSON value ``v`` in a column typed ``spark_type``
    by inference."""
    if v is None:
        return None
    if spark_type == "bigint":
        return str(int(v))
    if spark_type == "double":
        return java_double_text(float(v))
    return json_text(v)


def java_double_text(x: float) -> str:
    """``Double.toString`` of ``x`` (what Spark's ``cast(double as string)`` writes): plain
    decimal for 1e-3 <= |x| < 1e7, else ``d.dddE[-]n``; shortest round-trip digits."""
    if x != x or x in (float("inf"), float("-inf")):
        return {True: "NaN"}.get(x != x, "Infinity" if x > 0 else "-Infinity")
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    sign = "-" if x < 0 else ""
    digits, exp = _shortest(abs(x))
    if 1e-3 <= abs(x) < 1e7:
        point = exp + 1
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{exp}"


def _shortest(x: float) -> tuple[str, int]:
    """(significant digits, decimal exponent of the first digit) of repr(x)."""
    r = repr(x)
    if "e" in r:
        m, _, ee = r.partition("e")
        ds = m.replace(".", "").rstrip("0") or "0"
        return ds, int(ee)
    whole, _, frac = r.partition(".")
    ds = (whole + frac).lstrip("0")
    lead = len(whole) - 1 if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")) + 1)
    return ds.rstrip("0") or "0", lead
