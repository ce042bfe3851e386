"""Encoder for ``canal-json``: canonical events -> Canal flat messages, as open-source Canal's
MQ producer writes them (``FlatMessage`` serialised by fastjson, keys in alphabetical order).

Sources: seed ``001_a1c6319148bc2083.txt`` (DTS Kafka data formats, "Canal Json": fields,
``es``/``ts`` in ms, ``id`` the operation's serial number, ``type`` INIT during full sync,
``old``/``data`` after 2022-03-20, the DDL message), ``shared/FORMATS.md`` (section
``canal-json``: multi-row messages, ``old`` holds only the changed columns in open-source Canal,
``sqlType`` is ``java.sql.Types``), and the real messages in ``shared/fixtures/canal-json``
(Flink's ``canal-data.txt``: 13-digit ``es`` always ending in ``000``, ``pkNames`` ``[]`` for a
table without key, DDL messages with ``mysqlType``/``sqlType``/``pkNames`` null).

Wire shape written (one JSON object per line; the Kafka key is empty, as Canal's producer
sends it unless a partition hash is configured)::

    {"data": [{col: "text" | null}, ...], "database": "shop", "es": 1704067201000,
     "gtid": "sim-1", "id": 7, "isDdl": false, "mysqlType": {col: "decimal(10,2)"},
     "old": [{changed col: "before text"}] | null, "pkNames": ["id"], "sql": "",
     "sqlType": {col: 3}, "table": "customers", "ts": 1704067201234, "type": "UPDATE"}

* one message per run of consecutive data events of one table, one op and one transaction
  (snapshot rows: one table, no transaction) with the same column types and ``es``, at most
  :data:`MAX_ROWS` rows: ``data[i]``/``old[i]`` are the rows in commit order;
* ``type``: ``c`` INSERT, ``u`` UPDATE (``data`` = after image, ``old`` = the *before* values
  of the columns whose value changed, as open-source Canal writes it), ``d`` DELETE (``data`` =
  the deleted rows, ``old`` null), ``r`` INIT (snapshot rows); ``t`` TRUNCATE (``isDdl`` true,
  ``sql`` the statement, no ``data``/``mysqlType``); DDL events: ``isDdl`` true, ``sql`` the
  statement, ``type`` from its verb (CREATE, ALTER, ERASE = DROP TABLE, RENAME, CINDEX, DINDEX,
  else QUERY), ``mysqlType``/``sqlType``/``pkNames``/``data``/``old`` null;
* values are strings: integers and decimals as plain text, dates ``yyyy-MM-dd``, datetimes
  ``yyyy-MM-dd HH:mm:ss[.f...]`` with as many fraction digits as the type's fsp, booleans
  (MySQL ``tinyint(1)``) ``1``/``0``, binary values one ISO-8859-1 character per byte (Canal's
  ``new String(bytes, ISO_8859_1)``), strings as they are, NULL as JSON null;
* ``mysqlType`` is the column's source type when it is a MySQL type that the decoder maps to
  the column's Spark type (the simulator's ``decimal(10,2)``, ``varchar(255)``,
  ``datetime(6)`` ...), else a MySQL spelling of the Spark type (:data:`MYSQL_FOR_SPARK`);
  ``sqlType`` the ``java.sql.Types`` code of that MySQL type;
* order: ``es`` = the commit time cut to whole seconds (binlog event times are seconds; Canal
  writes ``when * 1000``), ``id`` = the message's 1-based serial number, then the row's index
  in ``data``: the decoder's ``[es, id, i]`` sorts the rows back into commit order as long as
  commit times never go backwards; ``ts`` = the commit time in ms (Canal's build time, never
  before ``es``); ``gtid`` = the transaction id (left out when there is none).

Dropped (counted in ``Encoded.dropped``): heartbeats (Canal's HEARTBEAT entries are internal
and never reach flat messages), transaction BEGIN/END markers (Canal filters its
TRANSACTIONBEGIN/END entries), ``tx_seq``/``tx_size``/``tx_last`` (only the gtid is written),
the ``schema`` part of three-part names (Canal has database and table only), the milliseconds
of commit times, column nullability (Canal does not write it), the column types and key of
truncates and DDL events, datetime fractions beyond the type's fsp, and events with partial
images (``present``: Canal writes whole rows).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable

from cdclake.formats.encoding import DDL_NAMES, Encoded, Encoder, ddl_name, dumps, not_written, two_level
from cdclake.formats.sqltypes import BINARY_TYPES as _BINARY_TYPES, mysql_base_type, mysql_precision_scale, mysql_spark_type

NAME = "canal-json"
#: most rows in one message
MAX_ROWS = 100

#: the MySQL type written when a column's source type is not a MySQL spelling of its Spark type
MYSQL_FOR_SPARK = {
    "tinyint": "tinyint",
    "smallint": "smallint",
    "int": "int",
    "bigint": "bigint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "text",
    "binary": "blob",
    "date": "date",
    "timestamp": "datetime(6)",
}

_DEC = re.compile(r"^decimal\((\d+),(\d+)\)$")
_TEXT_TYPES = ("tinytext", "text", "mediumtext", "longtext")


def mysql_type(column: dict) -> str:
    """``mysqlType`` text written for a canonical column (see the module docstring)."""
    src = (column.get("source_type") or "").strip()
    st = column.get("spark_type") or "string"  # null = unknown (a TUPLE value that was null)
    if src and mysql_spark_type(src) == st:
        return src
    if _DEC.match(st):
        return st
    return MYSQL_FOR_SPARK.get(st, "text")


def sql_type(type_text: str) -> int:
    """``java.sql.Types`` code Canal writes in ``sqlType`` for a MySQL type text."""
    base = mysql_base_type(type_text.strip())
    codes = {
        "tinyint": -6, "smallint": 5, "mediumint": 4, "int": 4, "integer": 4, "bigint": -5,
        "decimal": 3, "numeric": 3, "dec": 3, "fixed": 3, "float": 7, "double": 8, "real": 8,
        "bool": -7, "boolean": -7, "bit": -7, "date": 91, "datetime": 93, "timestamp": 93,
        "time": 92, "year": 12, "char": 1, "varchar": 12, "json": 12,
    }
    if base in _TEXT_TYPES:
        return 2005
    if base in _BINARY_TYPES:
        return 2004
    return codes.get(base, 12)


def _fsp(type_text: str) -> int:
    p, _s = mysql_precision_scale(type_text)
    return min(p, 6) if p is not None else 0


def wire_value(text: str | None, spark_type: str, type_text: str) -> str | None:
    """Canal's string for a canonical value of ``spark_type`` in a column of MySQL type
    ``type_text``."""
    if text is None:
        return None
    if spark_type == "boolean":
        return "1" if text == "true" else "0"
    if spark_type == "binary":
        return base64.b64decode(text).decode("latin-1")
    if spark_type == "timestamp" and mysql_spark_type(type_text) == "timestamp":
        day_time, _, frac = text.partition(".")
        fsp = _fsp(type_text)
        return f"{day_time}.{(frac + '000000')[:fsp]}" if fsp else day_time
    return text


def read_back(wire: str | None, spark_type: str) -> str | None:
    """The canonical text the decoder makes of Canal's string ``wire`` for ``spark_type``."""
    if wire is None:
        return None
    if spark_type == "boolean":
        return "true" if wire.strip().lower() in ("true", "1") else "false"
    if spark_type == "binary":
        return base64.b64encode(wire.encode("latin-1")).decode("ascii")
    if spark_type == "timestamp":
        day_time, _, frac = wire.strip().partition(".")
        return f"{day_time}.{(frac + '000000')[:6]}"
    if spark_type in ("tinyint", "smallint", "int", "bigint"):
        return str(int(wire))
    if spark_type.startswith("decimal") or spark_type in ("float", "double"):
        return wire.strip()
    return wire


#: Canal's ``type``s of DDL statements: the shared names, and DROP TABLE (no other DROP) ERASE
_DDL_TYPES = (*DDL_NAMES, (r"drop\s+table", "ERASE"))


def ddl_type(sql: str | None) -> str:
    """Canal's ``type`` for a DDL statement (never TRUNCATE: that is a data event here)."""
    return ddl_name(sql, _DDL_TYPES)


#: why an event is not written (:func:`cdclake.formats.encoding.not_written`)
_NOT_WRITTEN = (
    ("heartbeat", "heartbeat events (Canal's heartbeats never reach flat messages)"),
    ("tx", "transaction BEGIN/END markers (Canal filters them out)"),
    ("partial", "events with partial images (Canal writes whole rows)"),
    "unknown",
)


_DATA_TYPES = {"c": "INSERT", "u": "UPDATE", "d": "DELETE", "r": "INIT"}


class CanalJsonEncoder(Encoder):
    """Writes canonical events as open-source Canal flat messages (see the module docstring)."""

    name = NAME
    file_kind = "lines"

    # ---- one event's share of a message ---------------------------------------------------

    @staticmethod
    def _types(event: dict) -> dict[str, str] | None:
        """column -> mysqlType text, in column order (None: the event has no columns)."""
        if event.get("columns") is None:
            return None
        return {c["name"]: mysql_type(c) for c in event["columns"]}

    @staticmethod
    def _spark_types(event: dict) -> dict[str, str]:
        return {c["name"]: c["spark_type"] for c in (event.get("columns") or [])}

    def _rows(self, event: dict) -> tuple[dict | None, dict | None]:
        """(``data`` row, ``old`` row) of a data event."""
        types = self._types(event) or {}
        st = self._spark_types(event)

        def wire(img: dict | None) -> dict | None:
            if img is None:
                return None
            return {k: wire_value(v, st.get(k, "string"), types.get(k, "")) for k, v in img.items()}

        op = event["op"]
        if op in ("c", "r"):
            return wire(event["after"]), None
        if op == "d":
            return wire(event["before"]), None
        after, before = wire(event["after"]) or {}, wire(event["before"]) or {}
        old = {k: v for k, v in before.items() if k not in after or after[k] != v}
        return after, old

    @staticmethod
    def _es(event: dict) -> int | None:
        ms = event.get("event_time_ms")
        return None if ms is None else (ms // 1000) * 1000

    @staticmethod
    def _skip_reason(event: dict) -> str | None:
        return not_written(event, _NOT_WRITTEN)

    # ---- encode -----------------------------------------------------------------------------

    def encode(self, events: Iterable[dict]) -> Encoded:
        """Encode ``events`` (commit order) as flat messages; see the module docstring."""
        out = Encoded()
        messages: list[dict] = []
        group: dict | None = None  # the data message being filled
        last_ts = 0

        def flush() -> None:
            nonlocal group
            if group is not None:
                messages.append(group)
                group = None

        for e in map(two_level, events):
            reason = self._skip_reason(e)
            if reason:
                out.dropped[reason] += 1
                continue
            self._count_losses(e, out)
            es = self._es(e)
            ts = e.get("event_time_ms")
            ts = last_ts if ts is None else ts
            last_ts = ts
            if e["kind"] == "ddl" or e["op"] == "t":
                flush()
                sql = e.get("ddl")
                if e["kind"] == "data" and not sql:
                    sql = f"TRUNCATE TABLE {'.'.join(f'`{p}`' for p in (e['database'], e['table']) if p)}"
                messages.append(
                    self._message(
                        e, data=None, old=None, es=es, ts=ts, is_ddl=True, mysql=None, pk=None, sql=sql,
                        type_=("TRUNCATE" if e["kind"] == "data" else ddl_type(sql)),
                    )
                )
                continue
            data, old = self._rows(e)
            types = self._types(e)
            pk = list(e.get("primary_key") or [])
            type_ = _DATA_TYPES[e["op"]]
            groupable = e.get("tx_id") is not None or e["op"] == "r"
            if (
                group is not None
                and groupable
                and group["type"] == type_
                and group["database"] == e["database"]
                and group["table"] == e["table"]
                and group.get("gtid") == e.get("tx_id")
                and group["es"] == es
                and group["mysqlType"] == types
                and group["pkNames"] == pk
                and len(group["data"]) < MAX_ROWS
                and group["_groupable"]
            ):
                group["data"].append(data)
                if group["old"] is not None:
                    group["old"].append(old)
                continue
            flush()
            group = self._message(
                e, data=[data], old=None if old is None else [old], es=es, ts=ts, is_ddl=False, mysql=types, pk=pk,
                sql="", type_=type_,
            )
            group["_groupable"] = groupable
        flush()
        for i, m in enumerate(messages, start=1):
            m.pop("_groupable", None)
            m["id"] = i
            out.records.append((None, dumps(self._ordered(m))))
        return out

    def _message(self, e: dict, *, data, old, es, ts, is_ddl, mysql, pk, sql, type_) -> dict:
        m = {
            "data": data,
            "database": e.get("database"),
            "es": es,
            "id": 0,
            "isDdl": is_ddl,
            "mysqlType": mysql,
            "old": old,
            "pkNames": pk,
            "sql": sql,
            "sqlType": None if mysql is None else {k: sql_type(v) for k, v in mysql.items()},
            "table": e.get("table"),
            "ts": ts,
            "type": type_,
        }
        if e.get("tx_id") is not None:
            m["gtid"] = e["tx_id"]
        return m

    @staticmethod
    def _ordered(m: dict) -> dict:
        """fastjson's alphabetical key order."""
        return {k: m[k] for k in sorted(m)}

    def _count_losses(self, e: dict, out: Encoded) -> None:
        if any(e.get(f) is not None for f in ("tx_seq", "tx_size", "tx_last")):
            out.dropped["transaction sequence numbers and sizes (Canal writes the gtid only)"] += 1
        if e.get("schema") is not None:
            out.dropped["schema names (Canal has database and table only)"] += 1
        if e.get("event_time_ms") is not None and e["event_time_ms"] % 1000:
            out.dropped["milliseconds of commit times (es is in whole seconds)"] += 1
        if e.get("columns") and any(c.get("nullable") is not None for c in e["columns"]):
            out.dropped["column nullability (Canal does not write it)"] += 1
        if (e["kind"] == "ddl" or e.get("op") == "t") and (e.get("columns") is not None or e.get("primary_key")):
            out.dropped["column types and keys of DDL and truncate events (written without mysqlType/pkNames)"] += 1
        if e["kind"] == "data" and e.get("op") != "t":
            types = self._types(e) or {}
            st = self._spark_types(e)
            for img in (e.get("before"), e.get("after")):
                for k, v in (img or {}).items():
                    if v is not None and st.get(k) == "timestamp" and k in types:
                        if read_back(wire_value(v, "timestamp", types[k]), "timestamp") != _full_ts(v):
                            out.dropped["datetime fractions beyond the column's fsp"] += 1

    # ---- carried ----------------------------------------------------------------------------

    def carried(self, event: dict) -> dict | None:
        """``event`` as the canal-json decoder gives it back (see the module docstring)."""
        event = two_level(event)
        if self._skip_reason(event):
            return None
        out = dict(event)
        es = self._es(event)
        out.update(
            schema=None, present=None, tx_seq=None, tx_last=None, tx_size=None, event_time_ms=es,
            tx_id=event.get("tx_id"),
        )
        if event["kind"] == "ddl" or event["op"] == "t":
            ddl = event.get("ddl")
            if event["kind"] == "data" and not ddl:
                ddl = f"TRUNCATE TABLE {'.'.join(f'`{p}`' for p in (event['database'], event['table']) if p)}"
            out.update(before=None, after=None, primary_key=None, columns=None, ddl=ddl)
            return out
        types = self._types(event)
        spark = {k: mysql_spark_type(v) for k, v in (types or {}).items()}
        data, old = self._rows(event)

        def back(row: dict | None) -> dict | None:
            return None if row is None else {k: read_back(v, spark.get(k, "string")) for k, v in row.items()}

        if event["op"] == "d":
            before, after = back(data), None
        elif event["op"] == "u":
            before, after = back({**{k: v for k, v in data.items() if k not in old}, **old}), back(data)
        else:
            before, after = None, back(data)
        columns = []
        for name, text in (types or {}).items():
            precision, scale = mysql_precision_scale(text)
            columns.append(
                {
                    "name": name,
                    "source_type": text,
                    "spark_type": spark[name],
                    "precision": precision,
                    "scale": scale,
                    "nullable": None,
                }
            )
        out.update(
            before=before, after=after, ddl=None, columns=columns,
            primary_key=list(event["primary_key"]) if event.get("primary_key") else None,
        )
        return out


def _full_ts(text: str) -> str:
    day_time, _, frac = text.partition(".")
    return f"{day_time}.{(frac + '000000')[:6]}"
