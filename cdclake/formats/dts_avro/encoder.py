"""Encoder for ``dts-avro``: canonical events -> Alibaba DTS "DTS Avro" ``Record`` datums.

Sources: seed ``001_a1c6319148bc2083.txt`` ("DTS Avro": parse with the DTS Avro schema; "DDL
statements are of type STRING"), the schema ``avsc/`` (Alibaba's ``aliyun-dts-subscribe-demo``)
and ``shared/FORMATS.md`` (section ``dts-avro``); where the seed is silent, the conventions the
decoder documents from Alibaba's SDK (``sourceTimestamp`` in seconds, ``millis`` of DateTime in
microseconds, ``tags["pk_uk_info"]`` for the key, ``\\u002E`` for a dot inside a name).

Wire shape: each record is one Avro binary datum of ``com.alibaba.dts.formats.avro.Record``
(fastavro ``schemaless_writer``, the bytes DTS puts in a Kafka value); :meth:`DtsAvroEncoder.write`
puts them in an Avro object container file (fastavro ``writer`` with the same schema), which
the decoder's ``read_files`` reads. The source is written as a MySQL source (``source =
{sourceType: MySQL, version: 8.0.32}``)::

    {version: 1, id: <1-based index in commit order>, sourceTimestamp: <event time, seconds>,
     sourcePosition: "<id*100>@1", safeSourcePosition: (same), sourceTxid: tx_id | "",
     source: {sourceType: MySQL, version: "8.0.32"}, operation: INSERT|UPDATE|DELETE|INIT|DDL|
     HEARTBEAT|BEGIN|COMMIT, objectName: "shop.customers" | "shop.sales.order_lines" | null,
     processTimestamps: null, tags: {"pk_uk_info": "{\\"PRIMARY\\":[\\"id\\"]}"} (data records of
     keyed tables), fields: [{name, dataTypeNumber}] | null,
     beforeImages / afterImages: [VALUE, ...] | "<DDL text>" | null, bornTimestamp: <event ms>}

Operations: ``c`` -> INSERT (afterImages), ``u`` -> UPDATE (both), ``d`` -> DELETE
(beforeImages), ``r`` -> INIT (full-load row), ``t`` -> a DDL record whose text is ``TRUNCATE
TABLE `db`.`table``` (DTS has no truncate operation; the binlog holds the statement), ``ddl``
-> DDL with the text in ``afterImages``, heartbeat -> HEARTBEAT (no objectName), ``tx_begin`` /
``tx_end`` -> BEGIN / COMMIT (written only when the input has such events; the simulator's
streams have none).

Columns (``dataTypeNumber`` = MySQL column type code as the binlog names it) and values:

==================  =========================  ==========================================
canonical type      dataTypeNumber             VALUE
==================  =========================  ==========================================
tinyint/smallint    1/2 MYSQL_TYPE_INT8/INT16  Integer{precision: bytes, value: "12"}
int / bigint        3 INT32 / 8 INT64          Integer{precision 4 / 8, value}
boolean             1 INT8 (TINYINT(1))        Integer{precision 1, value "1" | "0"}
decimal(p,s)        246 DECIMAL_NEW            Decimal{value: "12.50", precision p, scale s}
float / double      4 FLOAT / 5 DOUBLE         Float{value: double, precision 0, scale 0}
string (varchar)    15 VARCHAR                 Character{charset utf8mb4, value: UTF-8 bytes}
string (text)       252 BLOB (TEXT in binlog)  Character{charset utf8mb4, value}
binary              15 VARCHAR (VARBINARY)     Character{charset binary, value: bytes}
date                10 DATE                    DateTime{year, month, day}
timestamp           18 DATETIME_NEW (DATETIME2) DateTime{year..second, millis: microseconds}
==================  =========================  ==========================================

A SQL NULL is the union's ``null``; a column a partial image (``present``) leaves out is
``EmptyObject NONE``.

What does not survive (counted in :attr:`Encoded.dropped`; :meth:`DtsAvroEncoder.carried` gives
the event as the decoder returns it):

* ``tx_seq``, ``tx_last``, ``tx_size``: DTS records carry the transaction id only;
* event time below the second (``sourceTimestamp`` is seconds);
* column types: every integer column reads back as ``bigint`` (an Integer value says no width),
  ``boolean`` is TINYINT(1) (``1``/``0``, bigint); columns' ``nullable`` is not written;
* a value-less column (NULL in every image of the record) whose type the value decides (a
  DECIMAL, a VARCHAR or BLOB code) reads back without a type (``spark_type`` null);
* DDL and truncate records carry the statement only: no column list, no key;
* the schema level of a name survives only as a third part of ``objectName``.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from fastavro import parse_schema, reader, schemaless_reader, schemaless_writer, writer

from cdclake.formats.dts_avro.decoder import NAME
from cdclake.formats.dts_avro.types import MYSQL_TYPES
from cdclake.formats.dts_avro.schema import NAMESPACE, RECORD_SCHEMA
from cdclake.formats.encoding import Encoded, Encoder, sequence_numbers, two_level

PARSED_SCHEMA = parse_schema(RECORD_SCHEMA)

#: canonical integer types -> (MySQL type code, Integer.precision)
_INT_CODES = {"tinyint": (1, 1), "smallint": (2, 2), "int": (3, 4), "bigint": (8, 8), "boolean": (1, 1)}
_DEC = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_NONE = "NONE"  # EmptyObject symbol: the column is not in the image
_BIGINT = (-(2**63), 2**63 - 1)

SOURCE = {"sourceType": "MySQL", "version": "8.0.32"}
VERSION = 1


def escape_name(part: str) -> str:
    """One part of ``objectName``: a dot inside a name is written ``\\u002E`` (the SDK's rule)."""
    return part.replace(".", "\\u002E")


def object_name(database: str | None, schema: str | None, table: str | None) -> str | None:
    """``db.table`` / ``db.schema.table`` / ``db`` with each part escaped; None without a name."""
    parts = [p for p in (database, schema, table) if p]
    return ".".join(escape_name(p) for p in parts) or None


def java_double_text(x: float) -> str:
    """``Double.toString`` of ``x`` (what Spark's ``cast(double as string)`` prints): the
    shortest digits, plain with at least one fraction digit for 1e-3 <= |x| < 1e7, else
    ``d.dddE<n>``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    _s, digit_tuple, exp = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exp  # the decimal point sits after this many digits
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _kind(col: dict) -> str:
    """How a canonical column is written: int, decimal, float, varchar, text, binary, date,
    timestamp (anything else: varchar)."""
    t = (col.get("spark_type") or "string").strip().lower()
    src = (col.get("source_type") or "").strip().lower()
    if t in _INT_CODES:
        return "boolean" if t == "boolean" else "int"
    if _DEC.match(t):
        return "decimal"
    if t in ("float", "double"):
        return "float"
    if t == "binary":
        return "binary"
    if t in ("date", "timestamp"):
        return t
    if t == "string" and re.match(r"^(tiny|medium|long)?text\b", src):
        return "text"
    return "varchar"


def _code(col: dict) -> int:
    """The column's ``dataTypeNumber`` (MySQL type code)."""
    k = _kind(col)
    t = (col.get("spark_type") or "").strip().lower()
    if k in ("int", "boolean"):
        return _INT_CODES[t][0]
    return {"decimal": 246, "float": 4 if t == "float" else 5, "varchar": 15, "text": 252, "binary": 15, "date": 10, "timestamp": 18}[k]


def _int_type(text: str) -> str:
    """Spark type the decoder gives an Integer value's text (bigint, else wide decimals)."""
    n = int(text)
    if _BIGINT[0] <= n <= _BIGINT[1]:
        return "bigint"
    digits = len(str(abs(n)).lstrip("0"))
    return "decimal(20,0)" if digits <= 20 else "decimal(38,0)"


_INT_RANK = ["bigint", "decimal(20,0)", "decimal(38,0)"]


class _Column:
    """A column as written: name, code, how values are written, and the decoder's reading."""

    def __init__(self, col: dict) -> None:
        self.name = col["name"]
        self.col = col
        self.kind = _kind(col)
        self.code = _code(col)
        t = (col.get("spark_type") or "string").strip().lower()
        m = _DEC.match(t)
        self.precision, self.scale = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        self.int_precision = _INT_CODES[t][1] if t in _INT_CODES else 0

    def value(self, text: str | None):
        """The union value of canonical text ``text`` (None: SQL NULL)."""
        if text is None:
            return None
        k = self.kind
        if k == "int":
            return (f"{NAMESPACE}.Integer", {"precision": self.int_precision, "value": str(int(text))})
        if k == "boolean":
            return (f"{NAMESPACE}.Integer", {"precision": 1, "value": "1" if text == "true" else "0"})
        if k == "decimal":
            return (f"{NAMESPACE}.Decimal", {"value": text, "precision": self.precision, "scale": self.scale})
        if k == "float":
            return (f"{NAMESPACE}.Float", {"value": float(text), "precision": 0, "scale": 0})
        if k == "binary":
            return (f"{NAMESPACE}.Character", {"charset": "binary", "value": base64.b64decode(text)})
        if k == "date":
            d = datetime.strptime(text[:10], "%Y-%m-%d")
            return (f"{NAMESPACE}.DateTime", _datetime(d.year, d.month, d.day))
        if k == "timestamp":
            ts = _parse_ts(text)
            return (
                f"{NAMESPACE}.DateTime",
                _datetime(ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond),
            )
        return (f"{NAMESPACE}.Character", {"charset": "utf8mb4", "value": text.encode("utf-8")})

    def text(self, text: str | None) -> str | None:
        """The canonical text the decoder gives back for ``text`` (as written by :meth:`value`)."""
        if text is None:
            return None
        if self.kind == "int":
            return str(int(text))
        if self.kind == "boolean":
            return "1" if text == "true" else "0"
        if self.kind == "float":
            return java_double_text(float(text))
        if self.kind == "date":
            return text[:10]
        if self.kind == "timestamp":
            return _parse_ts(text).strftime("%Y-%m-%d %H:%M:%S.%f")
        return text

    def spark_type(self, after: str | None, before: str | None, has_after: bool, has_before: bool) -> str | None:
        """The Spark type the decoder derives for this column in one record, from the value
        it reads first (the after value when it is a value, else the before value); None (not
        stated) for a column whose type the value decides when no value is there (DECIMAL,
        and the VARCHAR and BLOB codes, whose charset tells text from bytes)."""
        hint = after if has_after and after is not None else (before if has_before else None)
        k = self.kind
        if k in ("int", "boolean"):
            values = (after if has_after else None, before if has_before else None)
            ranks = [_INT_RANK.index(_int_type(self.text(v))) for v in values if v is not None]
            return _INT_RANK[max(ranks, default=0)]
        if k == "float":
            return "double"
        if k in ("date", "timestamp"):
            return k
        if hint is None:
            return None
        if k == "decimal":
            if 1 <= self.precision <= 38 and 0 <= self.scale <= self.precision:
                return f"decimal({self.precision},{self.scale})"
            return "string" if self.precision > 38 else "decimal(38,10)"
        return "binary" if k == "binary" else "string"


def _datetime(year, month, day, hour=None, minute=None, second=None, micros=None) -> dict:
    return {"year": year, "month": month, "day": day, "hour": hour, "minute": minute, "second": second, "millis": micros}


def _parse_ts(text: str) -> datetime:
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            pass
    return datetime.fromisoformat(text)


def _columns_of(event: dict) -> list[dict]:
    """The event's columns, or (a source without types) the image keys as strings."""
    if event.get("columns"):
        return list(event["columns"])
    names: list[str] = []
    for img in (event.get("before"), event.get("after")):
        for n in img or {}:
            if n not in names:
                names.append(n)
    return [{"name": n, "source_type": "varchar(255)", "spark_type": "string"} for n in names]


def _seconds(ms: int | None) -> int:
    return 0 if ms is None else ms // 1000


def truncate_text(event: dict) -> str:
    """The statement a truncate is written as: the event's own DDL text when it is one, else
    ``TRUNCATE TABLE `db`.`table```."""
    ddl = event.get("ddl") or ""
    if re.match(r"^\s*truncate\b", ddl, re.I):
        return ddl
    return "TRUNCATE TABLE " + ".".join(f"`{p}`" for p in (event.get("database"), event.get("schema"), event.get("table")) if p)


class DtsAvroEncoder(Encoder):
    """Canonical events -> DTS Avro ``Record`` datums of a MySQL source; see the module docstring."""

    name = NAME
    file_kind = "avro"

    def _plan(self, event: dict, rid: int) -> tuple[dict | None, dict | None, Counter]:
        """(Record, the event as decoded, what was dropped) for ``event`` written with id ``rid``."""
        event = two_level(event)
        drops: Counter = Counter()
        kind, op = event.get("kind"), event.get("op")
        ms = event.get("event_time_ms")
        if any(event.get(f) is not None for f in ("tx_seq", "tx_last", "tx_size")):
            drops["transaction event numbers and sizes (tx_seq, tx_last, tx_size)"] += 1
        if ms is not None and ms % 1000:
            drops["event time below the second (sourceTimestamp is in seconds)"] += 1
        rec = {
            "version": VERSION,
            "id": rid,
            "sourceTimestamp": _seconds(ms),
            "sourcePosition": f"{rid * 100}@1",
            "safeSourcePosition": f"{rid * 100}@1",
            "sourceTxid": event.get("tx_id") or "",
            "source": dict(SOURCE),
            "operation": None,
            "objectName": object_name(event.get("database"), event.get("schema"), event.get("table")),
            "processTimestamps": None,
            "tags": {},
            "fields": None,
            "beforeImages": None,
            "afterImages": None,
            "bornTimestamp": ms or 0,
        }
        carried = {
            "kind": kind, "op": None, "database": event.get("database"), "schema": event.get("schema"),
            "table": event.get("table"), "before": None, "after": None, "present": None, "primary_key": None,
            "columns": None, "tx_id": event.get("tx_id") or None, "tx_seq": None, "tx_last": None, "tx_size": None,
            "ddl": None, "event_time_ms": _seconds(ms) * 1000,  # sourceTimestamp is required: an unknown time is written 0
        }  # fmt: skip
        if kind == "heartbeat":
            rec.update(operation="HEARTBEAT", objectName=None)
            carried.update(database=None, schema=None, table=None)
            return rec, carried, drops
        if kind in ("tx_begin", "tx_end"):
            rec.update(operation="BEGIN" if kind == "tx_begin" else "COMMIT", objectName=object_name(event.get("database"), None, None))
            carried.update(schema=None, table=None)
            return rec, carried, drops
        if kind == "ddl" or op == "t":
            text = truncate_text(event) if op == "t" else event.get("ddl")
            if text is None:
                return None, None, Counter({"DDL events without DDL text": 1})
            if event.get("columns"):
                drops["column lists of DDL and truncate events (DTS writes the statement only)"] += 1
            rec.update(operation="DDL", afterImages=text)
            carried.update(ddl=text)
            if op == "t":
                carried.update(op="t")
            return rec, carried, drops
        if kind != "data" or op not in ("c", "u", "d", "r"):
            return None, None, Counter({f"events of kind {kind!r} op {op!r}": 1})
        if not event.get("table"):
            return None, None, Counter({"data events without a table": 1})

        return self._plan_data(event, op, rec, carried, drops)

    def _plan_data(self, event: dict, op: str, rec: dict, carried: dict, drops: Counter) -> tuple[dict | None, dict | None, Counter]:
        """:meth:`_plan` of a data event (``op`` c/u/d/r, a table named): its fields and images
        written into ``rec``, what decoding gives back into ``carried``."""
        cols = [_Column(c) for c in _columns_of(event)]
        before = event.get("before") if op in ("u", "d") else None
        after = event.get("after") if op in ("c", "u", "r") else None
        if (op in ("u", "d") and before is None and op == "d") or (op != "d" and after is None):
            return None, None, Counter({"data events without their image": 1})
        present = event.get("present")
        in_after = {c.name: after is not None and c.name in after and (present is None or c.name in present) for c in cols}
        in_before = {c.name: before is not None and c.name in before for c in cols}

        def image(img: dict | None, inside: dict) -> list | None:
            if img is None:
                return None
            return [c.value(img.get(c.name)) if inside[c.name] else _NONE for c in cols]

        rec.update(
            operation={"c": "INSERT", "u": "UPDATE", "d": "DELETE", "r": "INIT"}[op],
            fields=[{"name": c.name, "dataTypeNumber": c.code} for c in cols],
            beforeImages=image(before, in_before),
            afterImages=image(after, in_after),
        )
        pk = [k for k in (event.get("primary_key") or []) if k]
        if pk:
            rec["tags"] = {"pk_uk_info": json.dumps({"PRIMARY": pk}, separators=(",", ":"))}
        columns = []
        for c in cols:
            a = after.get(c.name) if after is not None else None
            b = before.get(c.name) if before is not None else None
            t = c.spark_type(a, b, in_after[c.name], in_before[c.name])
            m = _DEC.match(t) if t is not None else None
            columns.append({
                "name": c.name, "source_type": MYSQL_TYPES[c.code], "spark_type": t,
                "precision": int(m.group(1)) if m else None, "scale": int(m.group(2)) if m else None, "nullable": None,
            })  # fmt: skip
            declared = (c.col.get("spark_type") or "string").strip().lower()
            if t is None:
                drops[f"column types: {declared} not stated by a NULL value"] += 1
            elif declared != t:
                drops[f"column types: {declared} read back as {t}"] += 1
        carried.update(
            op=op,
            before=None if before is None else {c.name: c.text(before.get(c.name)) for c in cols if in_before[c.name]},
            after=None if after is None else {c.name: c.text(after.get(c.name)) for c in cols if in_after[c.name]},
            present=[c.name for c in cols if in_after[c.name]] if after is not None and op != "d" and not all(in_after.values()) else None,
            primary_key=pk or None,
            columns=columns,
        )
        return rec, carried, drops

    def encode(self, events: Iterable[dict]) -> Encoded:
        """One ``Record`` datum per event (ids = 1-based index in commit order); events the
        format cannot hold are counted in ``dropped``."""
        events = list(events)
        out = Encoded()
        for event, rid in zip(events, sequence_numbers(events)):
            rec, _carried, drops = self._plan(event, rid)
            out.dropped.update(drops)
            if rec is not None:
                out.records.append((None, datum(rec)))
        return out

    def carried(self, event: dict) -> dict | None:
        """``event`` as the decoder gives it back (see the module docstring for what changes)."""
        return self._plan(event, 1)[1]

    def write(self, encoded: Encoded, path: str | Path) -> Path:
        """An Avro object container file of the ``Record`` datums (fastavro ``writer``, the
        ``Record`` schema, null codec); tombstones are left out."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        recs = [read_datum(v) for _k, v in encoded.records if v is not None]
        with p.open("wb") as out:
            writer(out, PARSED_SCHEMA, recs)
        return p


def datum(record: dict) -> bytes:
    """``record`` as one Avro binary datum of ``Record`` (fastavro ``schemaless_writer``)."""
    buf = io.BytesIO()
    schemaless_writer(buf, PARSED_SCHEMA, record)
    return buf.getvalue()


def read_datum(value: bytes) -> dict:
    """One ``Record`` datum read back, union branches named (fastavro's tuple notation), so that
    it writes back exactly as it was."""
    rec = schemaless_reader(io.BytesIO(value), PARSED_SCHEMA, return_record_name=True, return_record_name_override=False)
    # fastavro names an EmptyObject branch only where the schema refers to the enum by name
    # (afterImages), not where it defines it (beforeImages): one spelling, the bare symbol
    for side in ("beforeImages", "afterImages"):
        if isinstance(rec.get(side), list):
            rec[side] = [v[1] if isinstance(v, tuple) and v[0] == f"{NAMESPACE}.EmptyObject" else v for v in rec[side]]
    return rec


def read_container(path: str | Path) -> list[dict]:
    """The records of an Avro container file (for tests and inspection)."""
    with open(path, "rb") as f:
        return list(reader(f))

