"""The DTS Avro ``Record`` schema, built once at import from the shipped ``.avsc`` files.

Source: ``avsc/`` (Alibaba's ``aliyun-dts-subscribe-demo``, ``python/dts_record_avsc/``, Apache-2.0;
see ``avsc/NOTICE.md``). ``Record.avsc`` refers to the other named types by full name
(``com.alibaba.dts.formats.avro.Integer`` ...); ``fastavro.schema.load_schema`` resolves them
from the files beside it (one file per full name). The result is turned into one
self-contained schema JSON, every named type defined inline at its first use and referred to by
name afterwards, which is what Spark's ``from_avro`` / ``to_avro`` and
``spark.read.format("avro").option("avroSchema", ...)`` take.

Runs on the driver only (at import); never on rows.

Shape of a decoded record (Spark type of ``from_avro(value, RECORD_SCHEMA_JSON)``): a struct
with ``version`` int, ``id`` long, ``sourceTimestamp`` long, ``sourcePosition`` string,
``safeSourcePosition`` string, ``sourceTxid`` string, ``source`` struct<sourceType string (enum),
version string>, ``operation`` string (enum), ``objectName`` string, ``processTimestamps``
array<long>, ``tags`` map<string,string>, ``fields`` struct<member0 string, member1
array<struct<name string, dataTypeNumber int>>>, ``beforeImages`` / ``afterImages``
struct<member0 string, member1 array<VALUE>>, ``bornTimestamp`` long; ``VALUE`` is the union of
image values as struct<member0 .. member11> in :data:`VALUE_BRANCHES` order (the union's
``null`` is a null element).
"""

from __future__ import annotations

import json
from pathlib import Path

from fastavro.schema import load_schema

AVSC_DIR = Path(__file__).resolve().parent / "avsc"
NAMESPACE = "com.alibaba.dts.formats.avro"
RECORD_AVSC = AVSC_DIR / f"{NAMESPACE}.Record.avsc"

#: the non-null branches of an image value's union, in schema order: Spark's ``from_avro``
#: names them ``member0`` .. ``member11``
VALUE_BRANCHES = (
    "Integer",
    "Character",
    "Decimal",
    "Float",
    "Timestamp",
    "DateTime",
    "TimestampWithTimeZone",
    "BinaryGeometry",
    "TextGeometry",
    "BinaryObject",
    "TextObject",
    "EmptyObject",
)

#: the ``Operation`` enum's symbols, in schema order
OPERATIONS = (
    "INSERT", "UPDATE", "DELETE", "DDL", "BEGIN", "COMMIT", "ROLLBACK", "ABORT", "HEARTBEAT",
    "CHECKPOINT", "COMMAND", "FILL", "FINISH", "CONTROL", "RDB", "NOOP", "INIT",
)  # fmt: skip


def _strip(node):
    """Drop fastavro's bookkeeping keys (``__fastavro_parsed``, ``__named_schemas``)."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if not k.startswith("__")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def build_record_schema() -> dict:
    """The ``Record`` schema as a JSON-able dict with every named type inlined once."""
    return _strip(load_schema(str(RECORD_AVSC)))


#: the self-contained ``Record`` schema (dict and JSON text)
RECORD_SCHEMA: dict = build_record_schema()
RECORD_SCHEMA_JSON: str = json.dumps(RECORD_SCHEMA)
#: the top-level field names of ``Record``, in schema order
RECORD_FIELDS: tuple[str, ...] = tuple(f["name"] for f in RECORD_SCHEMA["fields"])
