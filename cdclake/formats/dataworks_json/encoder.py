"""Encoder for ``dataworks-json``: canonical events -> DataWorks "sync all to Kafka" JSON messages
(the same JSON a DataHub BLOB record holds), one message per line.

Sources: seed ``002_f06f21975cd4d102.txt`` (message template, heartbeat, the insert / split
update / update in one record / delete samples, the field-type table), seed
``000_d2c269d42c40e542.txt`` (the DDL sample) and ``shared/FORMATS.md`` (``dataworks-json``);
full-load rows as in Apache Paimon's real ``event-insert.txt`` (``sequenceId`` ``"-1"``).

Wire shapes written (key order as in the seeds' samples)::

    data      {"schema": {"dataColumn": [{"name": "id", "type": "LONG"}, ...],
                          "primaryKey": ["id"] | null,
                          "source": {"dbType": "MySQL", "dbName": "shop",
                                     "schemaName": "sales" (only when the event has a schema),
                                     "tableName": "t"}},
               "payload": {"before": {"dataColumn": {...}} | null, "after": {...} | null,
                           "sequenceId": "1704067200000000007",
                           "timestamp": {"eventTime": ms, "checkpointTime": ms},
                           "op": "INSERT" | "UPDATE_BEFOR" | "UPDATE_AFTER" | "DELETE" | "TRUNCATE",
                           "ddl": null},
               "version": "0.0.1"}
    DDL       {"schema": {"source": {...}},
               "payload": {"op": "ALTER", "sequenceId": "...", "ddl": {"text": "ALTER TABLE ..."},
                           "timestamp": {...}}, "version": "0.0.1"}          (seed 000's sample)
    heartbeat {"schema": {"dataColumn": null, "primaryKey": null, "source": null},
               "payload": {"before": null, "after": null, "sequenceId": null,
                           "timestamp": {"eventTime": ms, "checkpointTime": ms},
                           "op": "MHEARTBEAT", "ddl": null}, "version": "0.0.1"}  (seed 002)

* Ops: ``c`` -> ``INSERT``; ``u`` -> ``UPDATE_BEFOR`` (sic, before image only) then
  ``UPDATE_AFTER`` (after image only), both with the same ``sequenceId``, each its own unit
  (:attr:`~cdclake.formats.encoding.Encoded.units` is None: the applier makes one update of two
  halves that reach it in different batches) (with ``update_in_one_record=True``: one
  ``UPDATE_AFTER`` holding both images, the "one Kafka record per update" option); ``d`` ->
  ``DELETE``; ``t`` -> ``TRUNCATE`` (no images, ``ddl`` null: the seeds set ``ddl`` only when
  the table's schema changes); ``r`` -> a full-load row as DataWorks writes it: ``INSERT`` with
  ``sequenceId`` ``"-1"`` and ``eventTime``/``checkpointTime`` ``-1`` (``systemTime`` holds the
  event's time), so it decodes as ``c`` without an event time, ordered before every streamed
  change; DDL -> the op named by the statement's verb (``ALTER``, ``CREATE``, ``ERASE`` for
  ``DROP TABLE``, ``RENAME``, ``CINDEX``, ``DINDEX``, else ``QUERY``) with ``ddl.text``;
  heartbeats -> ``MHEARTBEAT``; transaction markers -> ``TRANSACTION_BEGIN`` /
  ``TRANSACTION_END``.
* Order: ``sequenceId`` = ``base_ms * 10**6 + k`` (the shape of the seeds' ids,
  ``1620457642589000001``: a start time in ms, then a counter; ``k`` counts the streamed records
  from 0, the two halves of an update share one). ``base_ms`` defaults to the first event time
  in the stream. Heartbeats carry no ``sequenceId`` (seed 002): the decoder orders them by
  ``eventTime``, which does not compare with sequence ids.
* Types (the seeds' six): ``tinyint``/``smallint``/``int``/``bigint`` -> ``LONG`` (JSON number);
  ``decimal(p,s)``, ``float``, ``double`` -> ``DOUBLE`` written as a JSON string holding the
  exact text (as the real messages write DOUBLE: ``"1.100000"``; the decoder keeps the text);
  ``boolean`` -> ``BOOLEAN`` (JSON true/false); ``date`` and ``timestamp`` -> ``DATE``, ms since
  the epoch (JSON number; microseconds are cut, rounding down); ``binary`` -> ``BYTES`` (base64,
  as is); anything else -> ``STRING``. Decoded types: bigint, double, boolean, timestamp,
  binary, string.
* Key: ``schema.primaryKey`` (null for a keyless table). DataWorks adds a LONG
  ``#alibaba_rds_row_id#`` column to MySQL tables without a key; the canonical events carry no
  row identity to fill it, so it is written only when the event has such a column.

Dropped (counted in ``Encoded.dropped``): transaction ids/sequence numbers (only markers exist),
column source types, precision, scale and nullability, the changed types above, microseconds
of timestamps, the snapshot marker and event time of ``r`` rows, the column lists and keys of
DDL events, partial updates (DataWorks images are whole rows), updates without an after image,
and events without a database or table name. ``ddl.ddlMeta`` (a serialised Java object) is
never written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import date, datetime

from cdclake.formats.encoding import DDL_NAMES, Encoded, Encoder, column_types, ddl_name, dumps, not_written, sequence_ids, writable

NAME = "dataworks-json"
VERSION = "0.0.1"
ROW_ID_COLUMN = "#alibaba_rds_row_id#"

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_EPOCH = datetime(1970, 1, 1)

#: DataWorks' ops of DDL statements: the shared names, any other DROP ERASE, and TRUNCATE
_DDL_OPS = (*DDL_NAMES, (r"drop", "ERASE"), (r"truncate", "TRUNCATE"))

#: why an event is not written (:func:`cdclake.formats.encoding.not_written`)
_NOT_WRITTEN = (
    "no_name",
    ("partial_update", "partial updates (DataWorks images are whole rows)"),
    "update_without_after",
    "insert_without_after",
    "delete_without_before",
)


def wire_type(spark_type: str | None) -> str:
    """The DataWorks column type (``dataColumn[].type``) a Spark type is written as."""
    t = (spark_type or "string").lower()
    if t in _INTEGRAL:
        return "LONG"
    if t.startswith("decimal") or t in ("float", "double"):
        return "DOUBLE"
    if t == "boolean":
        return "BOOLEAN"
    if t in ("date", "timestamp"):
        return "DATE"
    if t == "binary":
        return "BYTES"
    return "STRING"


#: DataWorks type -> the Spark type the decoder derives from it
DECODED_TYPE = {"LONG": "bigint", "DOUBLE": "double", "BOOLEAN": "boolean", "DATE": "timestamp", "BYTES": "binary", "STRING": "string"}


def ddl_op(text: str | None) -> str:
    """The DataWorks op of a DDL statement: ``ALTER``, ``CREATE``, ``ERASE`` (DROP TABLE) ...,
    ``QUERY`` for anything else."""
    return ddl_name(text, _DDL_OPS)


def _ms(text: str, spark_type: str) -> int:
    """Milliseconds since the epoch (UTC, rounded down) of a canonical date/timestamp text."""
    if spark_type == "date":
        return (date.fromisoformat(text) - _EPOCH.date()).days * 86_400_000
    delta = datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f") - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _ms_text(ms: int) -> str:
    """Canonical timestamp text of ``ms`` (what the decoder makes of a DATE value)."""
    from datetime import timedelta

    return (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")


def wire_value(text: str | None, spark_type: str | None):
    """A canonical value text as the JSON value DataWorks writes for its column."""
    if text is None:
        return None
    t = (spark_type or "string").lower()
    kind = wire_type(t)
    if kind == "LONG":
        return int(text)
    if kind == "BOOLEAN":
        return text == "true"
    if kind == "DATE":
        return _ms(text, t)
    return text  # DOUBLE (exact text, as a JSON string), BYTES (base64), STRING


def decoded_value(text: str | None, spark_type: str | None) -> str | None:
    """What the decoder gives back for a canonical value text of ``spark_type``."""
    if text is None:
        return None
    t = (spark_type or "string").lower()
    if t in ("date", "timestamp"):
        return _ms_text(_ms(text, t))
    return text


class DataWorksJsonEncoder(Encoder):
    """Canonical events -> DataWorks JSON messages; see the module docstring for the mapping.

    Args:
        update_in_one_record: write an update as one ``UPDATE_AFTER`` with both images (the
            producer's "one Kafka record per update" option) instead of the default
            ``UPDATE_BEFOR`` + ``UPDATE_AFTER`` pair.
        base_ms: the start time (ms) in the sequence ids ``base_ms * 10**6 + k``; default: the
            first event time of the stream (0 when no event has one).
        db_type: ``schema.source.dbType``.
    """

    name = NAME
    file_kind = "lines"

    def __init__(self, update_in_one_record: bool = False, base_ms: int | None = None, db_type: str = "MySQL") -> None:
        self.update_in_one_record = update_in_one_record
        self.base_ms = base_ms
        self.db_type = db_type

    # ---- encoding ---------------------------------------------------------------------------

    def encode(self, events: Iterable[dict]) -> Encoded:
        events = list(events)
        ids = sequence_ids(self.base_ms, events)
        out = Encoded(records=[], dropped=Counter())
        for e in writable(events, out, self._unwritable, self._count_losses):
            streamed = e["kind"] != "heartbeat" and not (e["kind"] == "data" and e["op"] == "r")
            seq = next(ids) if streamed else None
            for value in self._messages(e, seq):
                out.records.append((None, dumps(value)))
        return out

    def _unwritable(self, e: dict) -> str | None:
        """Why event ``e`` cannot be written at all, or None."""
        return not_written(e, _NOT_WRITTEN)

    def _count_losses(self, e: dict, dropped: Counter) -> None:
        if e.get("tx_id") is not None or e.get("tx_seq") is not None or e.get("tx_size") is not None:
            dropped["transaction ids and sequence numbers"] += 1
        cols = e.get("columns")
        if e["kind"] == "ddl":
            if cols is not None or e.get("primary_key"):
                dropped["column lists and keys of DDL events (DDL records carry the text)"] += 1
            return
        if e["kind"] != "data":
            return
        if e["op"] == "r":
            dropped["snapshot reads (written as full-load INSERT, sequenceId -1, no event time)"] += 1
        if cols is None:
            return
        dropped["column source types, precision, scale, nullability"] += 1
        for c in cols:
            t = (c.get("spark_type") or "string").lower()
            if DECODED_TYPE[wire_type(t)] != t:
                dropped[f"column types: {t} written as {wire_type(t)}"] += 1
        types = column_types(e)
        for img in (e.get("before"), e.get("after")):
            for n, v in (img or {}).items():
                if v is not None and (types.get(n) or "").lower() == "timestamp" and v[-3:] != "000":
                    dropped["timestamp values: microseconds cut to milliseconds"] += 1

    def _source(self, e: dict) -> dict:
        src = {"dbType": self.db_type, "dbName": e["database"]}
        if e.get("schema"):
            src["schemaName"] = e["schema"]
        if e.get("table"):
            src["tableName"] = e["table"]
        return src

    def _messages(self, e: dict, seq: str | None) -> list[dict]:
        kind = e["kind"]
        t = e.get("event_time_ms")
        if kind == "heartbeat":
            return [
                {
                    "schema": {"dataColumn": None, "primaryKey": None, "source": None},
                    "payload": {
                        "before": None, "after": None, "sequenceId": None,
                        "timestamp": {"eventTime": t, "checkpointTime": t},
                        "op": "MHEARTBEAT", "ddl": None,
                    },
                    "version": VERSION,
                }
            ]
        if kind in ("tx_begin", "tx_end"):
            source = {"dbType": self.db_type, "dbName": e["database"]} if e.get("database") else None
            return [
                {
                    "schema": {"dataColumn": None, "primaryKey": None, "source": source},
                    "payload": {
                        "before": None, "after": None, "sequenceId": seq,
                        "timestamp": {"eventTime": t, "checkpointTime": t},
                        "op": "TRANSACTION_BEGIN" if kind == "tx_begin" else "TRANSACTION_END", "ddl": None,
                    },
                    "version": VERSION,
                }
            ]
        if kind == "ddl":
            return [
                {
                    "schema": {"source": self._source(e)},
                    "payload": {
                        "op": ddl_op(e.get("ddl")),
                        "sequenceId": seq,
                        "ddl": {"text": e.get("ddl")},
                        "timestamp": {"eventTime": t, "checkpointTime": t},
                    },
                    "version": VERSION,
                }
            ]
        cols = e.get("columns")
        types = column_types(e)
        schema = {
            "dataColumn": [{"name": c["name"], "type": wire_type(c.get("spark_type"))} for c in cols] if cols is not None else None,
            "primaryKey": list(e["primary_key"]) if e.get("primary_key") else None,
            "source": self._source(e),
        }

        def image(img: dict | None) -> dict | None:
            if img is None:
                return None
            return {"dataColumn": {n: wire_value(v, types.get(n)) for n, v in img.items()}}

        def message(op: str, before: dict | None, after: dict | None) -> dict:
            if e["op"] == "r":  # a full-load row (Paimon's real event-insert.txt)
                ts = {"eventTime": -1, "systemTime": t, "checkpointTime": -1}
                sid = "-1"
            else:
                ts = {"eventTime": t, "checkpointTime": t}
                sid = seq
            return {
                "schema": schema,
                "payload": {"before": image(before), "after": image(after), "sequenceId": sid, "timestamp": ts, "op": op, "ddl": None},
                "version": VERSION,
            }

        op = e["op"]
        if op in ("c", "r"):
            return [message("INSERT", None, e["after"])]
        if op == "d":
            return [message("DELETE", e["before"], None)]
        if op == "t":
            return [message("TRUNCATE", None, None)]
        # an update
        if self.update_in_one_record or e.get("before") is None:
            return [message("UPDATE_AFTER", e.get("before"), e["after"])]
        return [message("UPDATE_BEFOR", e["before"], None), message("UPDATE_AFTER", None, e["after"])]

    # ---- what comes back -----------------------------------------------------------------------

    def carried(self, event: dict) -> dict | None:
        e = event
        if self._unwritable(e):
            return None
        out = {
            "kind": e["kind"], "op": None, "database": None, "schema": None, "table": None,
            "before": None, "after": None, "present": None, "primary_key": None, "columns": None,
            "tx_id": None, "tx_seq": None, "tx_last": None, "tx_size": None, "ddl": None,
            "event_time_ms": e.get("event_time_ms") if (e.get("event_time_ms") or 0) >= 0 else None,
        }
        if e["kind"] == "heartbeat":
            return out
        out["database"] = e.get("database")
        if e["kind"] in ("tx_begin", "tx_end"):
            return out
        out["schema"] = e.get("schema") or None
        out["table"] = e.get("table")
        if e["kind"] == "ddl":
            out["ddl"] = e.get("ddl")
            return out
        types = column_types(e)
        cols = e.get("columns")
        if cols is not None:
            out["columns"] = [
                {
                    "name": c["name"], "source_type": wire_type(c.get("spark_type")),
                    "spark_type": DECODED_TYPE[wire_type(c.get("spark_type"))],
                    "precision": None, "scale": None, "nullable": None,
                }
                for c in cols
            ]
        # the key: schema.primaryKey, else the row-id column DataWorks adds to keyless tables
        names = [c["name"] for c in cols] if cols is not None else list(e.get("after") or e.get("before") or {})
        if e.get("primary_key"):
            out["primary_key"] = list(e["primary_key"])
        elif ROW_ID_COLUMN in names:
            out["primary_key"] = [ROW_ID_COLUMN]

        def image(img: dict | None) -> dict | None:
            return None if img is None else {n: decoded_value(v, types.get(n)) for n, v in img.items()}

        op = e["op"]
        out["op"] = "c" if op == "r" else op
        if op in ("c", "r", "u"):
            out["after"] = image(e["after"])
        if op in ("d", "u"):
            out["before"] = image(e.get("before"))
        if op == "r":
            out["event_time_ms"] = None
        return out
