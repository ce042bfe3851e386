"""The canonical change event: one row per change, the same for every format.

Every decoder turns its wire format into rows of :data:`EVENT_SCHEMA`; the applier reads nothing
else. The model is defined here once (Spark schema, op and kind enums, value encoding); how a
format is read lives in ``cdclake/formats/<name>/``.

Columns of :data:`EVENT_SCHEMA` (nullability as the applier relies on it; the Spark schema
itself marks every field nullable so that decoders' expressions cast to it without fuss):

=================  ==========================  ==============================================
column             type                        meaning
=================  ==========================  ==============================================
format             string, never null          decoder name, e.g. ``canal-json``
kind               string, never null          :class:`Kind`: data, ddl, heartbeat, tx_begin, tx_end, snapshot_end
op                 string, null unless data    :class:`Op` wire code: c, u, d, r, t
database           string, may be null         source database (null for heartbeats)
schema             string, may be null         source schema; null where the source has none
table              string, may be null         source table (null for heartbeats, tx markers)
before             map<string,string>          before image, column -> value text; may be null
after              map<string,string>          after image, column -> value text; may be null
present            array<string>               columns the image carries; null = all columns
primary_key        array<string>               key columns as the message states them, else null
columns            array<COLUMN>               the message's own column schema, else null
position           struct<order, text>         ``order``: array<decimal(38,0)> compared
                                               lexicographically gives commit order within one
                                               source; ``text``: the coordinates as the source
                                               writes them (``mysql-bin.000003:154:0``)
tx_id              string, may be null         transaction id
tx_seq             long, may be null           1-based index of the event in its transaction
tx_last            boolean, may be null        true on the last event of its transaction
tx_size            long, may be null           number of events in the transaction
ddl                string, null unless ddl     DDL text
event_time_ms      long, may be null           commit time at the source, ms since epoch, UTC
source_record      struct SOURCE_RECORD        where the record came from (never null)
=================  ==========================  ==============================================

Image values are text in the *canonical encoding* of the column's ``spark_type`` so that one
``cast`` turns them into the target type (see :mod:`cdclake.values`): integers and decimals as
plain decimal text, doubles as Java double text, booleans ``true``/``false``, dates
``yyyy-MM-dd``, timestamps ``yyyy-MM-dd HH:mm:ss[.ffffff]`` in UTC, binary as base64, strings
as themselves. A SQL NULL value in a map is a column that is NULL at the source.
"""

from __future__ import annotations

from enum import Enum

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)


class Op(str, Enum):
    """Operation of a data change, with Debezium's wire codes."""

    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"  # a snapshot read: never overwrites a streamed change
    TRUNCATE = "t"


class Kind(str, Enum):
    """What a canonical event is."""

    DATA = "data"
    DDL = "ddl"
    HEARTBEAT = "heartbeat"
    TX_BEGIN = "tx_begin"
    TX_END = "tx_end"
    #: the source finished a full snapshot of the table at the event's position (Debezium
    #: ``source.snapshot`` ``last_in_data_collection`` / ``last`` on the table's last read row),
    #: emitted only under ``--snapshot-removes-missing``: the applier then removes the table's
    #: rows older than that position (the snapshot did not read them), as a truncate there
    #: whose record sorts before every row of the snapshot (README "Snapshots")
    SNAPSHOT_END = "snapshot_end"


#: One column of a message's own schema. ``source_type`` is the type as the source names it
#: (``decimal(10,2) unsigned``, ``int32``, ``LONG``); ``spark_type`` is the Spark SQL type the
#: decoder derived from it (``decimal(10,2)``, ``bigint``, ``timestamp`` ...), which is also the
#: type whose canonical text encoding the image values use.
COLUMN_SCHEMA = StructType(
    [
        StructField("name", StringType(), True),
        StructField("source_type", StringType(), True),
        StructField("spark_type", StringType(), True),
        StructField("precision", IntegerType(), True),
        StructField("scale", IntegerType(), True),
        StructField("nullable", BooleanType(), True),
    ]
)

#: Ordering coordinates; compare ``order`` (array of decimals) lexicographically.
POSITION_SCHEMA = StructType(
    [
        StructField("order", ArrayType(DecimalType(38, 0), True), True),
        StructField("text", StringType(), True),
    ]
)

#: A Kafka record header as Spark's Kafka source gives it (``includeHeaders``): the value's
#: bytes as sent (null: a header without a value).
HEADER_SCHEMA = StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)])

#: Where a record came from: Kafka coordinates (topic, partition, offset, the record's timestamp
#: in ms since the epoch, its headers in order), or file path and 1-based line number. The
#: record's Kafka key is the reject's ``raw_key`` and, for Debezium, the event's primary key.
SOURCE_RECORD_SCHEMA = StructType(
    [
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp_ms", LongType(), True),
        StructField("file", StringType(), True),
        StructField("line", LongType(), True),
        StructField("headers", ArrayType(HEADER_SCHEMA, True), True),
    ]
)


def source_record_col(**fields):
    """A ``source_record`` column (SOURCE_RECORD_SCHEMA) from columns given by field name
    (``file=F.col("path")``, ``line=...``); fields not given are null.

    Raises:
        ValueError: a name that is not a field of SOURCE_RECORD_SCHEMA.
    """
    from pyspark.sql import functions as F

    unknown = set(fields) - {f.name for f in SOURCE_RECORD_SCHEMA.fields}
    if unknown:
        raise ValueError(f"not source_record fields: {sorted(unknown)}")
    return F.struct(
        *[(fields[f.name] if f.name in fields else F.lit(None)).cast(f.dataType).alias(f.name) for f in SOURCE_RECORD_SCHEMA.fields]
    )

IMAGE_TYPE = MapType(StringType(), StringType(), True)

EVENT_SCHEMA = StructType(
    [
        StructField("format", StringType(), True),
        StructField("kind", StringType(), True),
        StructField("op", StringType(), True),
        StructField("database", StringType(), True),
        StructField("schema", StringType(), True),
        StructField("table", StringType(), True),
        StructField("before", IMAGE_TYPE, True),
        StructField("after", IMAGE_TYPE, True),
        StructField("present", ArrayType(StringType(), True), True),
        StructField("primary_key", ArrayType(StringType(), True), True),
        StructField("columns", ArrayType(COLUMN_SCHEMA, True), True),
        StructField("position", POSITION_SCHEMA, True),
        StructField("tx_id", StringType(), True),
        StructField("tx_seq", LongType(), True),
        StructField("tx_last", BooleanType(), True),
        StructField("tx_size", LongType(), True),
        StructField("ddl", StringType(), True),
        StructField("event_time_ms", LongType(), True),
        StructField("source_record", SOURCE_RECORD_SCHEMA, True),
    ]
)

EVENT_COLUMNS = [f.name for f in EVENT_SCHEMA.fields]

#: What every source (files, Kafka) hands to a decoder: one row per record.
RAW_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),  # null: a Kafka tombstone
        StructField("source_record", SOURCE_RECORD_SCHEMA, True),
    ]
)

#: What every decoder returns: one row per *input record*. ``events`` holds the canonical events
#: the record decodes to (several for a multi-row Canal message, none for a tombstone or a
#: record the format defines as carrying nothing to apply); when ``error_code`` is set the record
#: is a reject and ``events`` is empty. ``raw_key``/``raw_value`` are the record's bytes.
DECODED_SCHEMA = StructType(
    [
        StructField("source_record", SOURCE_RECORD_SCHEMA, True),
        StructField("raw_key", BinaryType(), True),
        StructField("raw_value", BinaryType(), True),
        StructField("events", ArrayType(EVENT_SCHEMA, True), True),
        StructField("error_code", StringType(), True),
        StructField("error_message", StringType(), True),
    ]
)


def qualified_name(database: str | None, schema: str | None, table: str) -> str:
    """The target table's name: ``database[.schema].table`` with the source's own spelling."""
    return ".".join(p for p in (database, schema, table) if p)


def event_type_ddl() -> str:
    """EVENT_SCHEMA as a Spark DDL string (for ``cast(... as <ddl>)`` in SQL)."""
    return EVENT_SCHEMA.simpleString()
