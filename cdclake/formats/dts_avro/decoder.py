"""Decoder for ``dts-avro``: Alibaba Cloud DTS "DTS Avro" records (change tracking / DTS to Kafka).

Sources:

* seed ``001_a1c6319148bc2083.txt`` (DTS message-queue data formats, "DTS Avro": parse with the
  DTS Avro schema; "in DTS Avro, DDL statements are of type STRING");
* the schema, ``avsc/`` (Alibaba's ``aliyun-dts-subscribe-demo``, Apache-2.0, see
  ``avsc/NOTICE.md``), and ``shared/FORMATS.md`` (``dts-avro``);
* where the seed is silent, Alibaba's own readers of the format: the official Java SDK
  ``aliyun/aliyun-dts-subscribe-sdk-java`` (``AvroRecordParser``, ``DefaultValueDeserializer``,
  ``ObjectNameUtils``, ``TimeUtils``) and the subscribe demo's MySQL field converter (the
  ``dataTypeNumber`` codes, the MySQL charset -> Java charset table). No real DTS Avro record is
  public; the tests build records from the schema.

Wire shape: each Kafka value is one Avro *binary datum* of ``com.alibaba.dts.formats.avro.Record``
(no container header, no schema registry prefix)::

    {version: int, id: long (unique, increasing in the stream), sourceTimestamp: long (seconds),
     sourcePosition: "4165@1001", safeSourcePosition: "", sourceTxid: "", source: {sourceType:
     MySQL|Oracle|..., version: "5.7"}, operation: INSERT|UPDATE|DELETE|DDL|BEGIN|COMMIT|...,
     objectName: "db.table" | null, processTimestamps: [long] | null,
     tags: {"pk_uk_info": "{\\"PRIMARY\\":[\\"id\\"]}", ...},
     fields: null | string | [{name: "id", dataTypeNumber: 3}, ...],
     beforeImages / afterImages: null | string (DDL text) | [VALUE, ...] (one per field, same order),
     bornTimestamp: long (ms)}

    VALUE = null | Integer{precision, value: "123"} | Character{charset: "utf8mb4", value: bytes}
          | Decimal{value: "1.50", precision, scale} | Float{value: double, precision, scale}
          | Timestamp{timestamp: seconds, millis: MICROseconds} | DateTime{year, month, day,
            hour, minute, second, millis: MICROseconds (all nullable)}
          | TimestampWithTimeZone{value: DateTime, timezone} | BinaryGeometry{type, value: bytes}
          | TextGeometry{type, value} | BinaryObject{type, value: bytes} | TextObject{type, value}
          | EmptyObject (enum NULL | NONE)

Decoding is one ``from_avro(value, Record schema, PERMISSIVE)``; Spark 4.0 gives a struct whose
fields are all null for bytes that are not a ``Record`` datum (random bytes, truncated datum, an
operation symbol out of range): such records are rejected with ``AVRO_DECODE_ERROR``. A null
value (Kafka tombstone) decodes to no event.

Mapping to the canonical event (one record -> zero or one event):

* ``operation``: INSERT -> ``c``; UPDATE -> ``u``; DELETE -> ``d``; INIT (full-load rows) ->
  ``r`` (snapshot read); DDL -> kind ``ddl`` with the text of the ``string`` branch of
  ``afterImages`` (``beforeImages`` when only that one holds it), except a ``TRUNCATE``
  statement on a table named by ``objectName``, which is a data event with op ``t`` (DTS has
  no truncate operation: the binlog's statement reaches the stream as a DDL record; its text is
  kept in ``ddl``); BEGIN -> ``tx_begin``; COMMIT ->
  ``tx_end`` (the transaction's changes, which carry the same ``sourceTxid``, are held back
  until its COMMIT arrives: ``transaction_bounds``); ROLLBACK -> ``tx_end`` as well: a MySQL binlog transaction that ends in ROLLBACK
  is one whose changes to non-transactional tables stayed applied (only such transactions reach
  the binlog), so the changes DTS delivered before it are real and the transaction is over;
  HEARTBEAT -> ``heartbeat``; ABORT, CHECKPOINT, COMMAND, FILL, FINISH, CONTROL, RDB, NOOP
  carry nothing to apply and decode to no event (never an error).
* Table: ``objectName`` is split on ``.`` and each part un-escaped (``\\u002E`` -> ``.``), as the
  official SDK's ``ObjectNameUtils`` does: ``db.table`` -> database, table (schema null);
  ``db.schema.table`` (PostgreSQL, SQL Server, Oracle sources) -> database, schema, table;
  ``db`` alone -> database only. Data changes without a table (no objectName, one part, more
  than three parts) are rejected with ``MISSING_TABLE``; DDL without a table is kept (its
  ``table`` is null), transaction markers keep the database only, heartbeats have neither.
* Key: the ``PRIMARY`` entry of the JSON in ``tags["pk_uk_info"]`` (as the official SDK reads
  it), else null (``--primary-key`` or the applier's fallbacks apply).
* Order: ``position.order = [id]``, ``position.text = "<id>:<sourcePosition>"``;
  ``tx_id = sourceTxid`` (null when empty); ``event_time_ms`` = ``sourceTimestamp`` in ms:
  the value is seconds (the demo formats it with ``datetime.fromtimestamp``); a value of 10^10 or
  more is already milliseconds and kept (the SDK's ``TimeUtils.getTimestampSeconds`` rule).
* Columns: ``fields[i]`` names column *i* and gives its ``dataTypeNumber``; ``beforeImages[i]`` /
  ``afterImages[i]`` hold its values; types and canonical text: :mod:`cdclake.formats.dts_avro.types`
  and :mod:`cdclake.formats.dts_avro.values`.
* Images: INSERT / INIT use ``afterImages``, DELETE ``beforeImages``, UPDATE both (the before
  image may be absent). Columns whose value is EmptyObject ``NONE`` are left out of the image;
  when the after image leaves any out, ``present`` lists the columns it carries (a partial
  image), else ``present`` is null.

Rejects: ``AVRO_DECODE_ERROR`` (not a Record datum); ``MISSING_TABLE`` (data change without a
table in objectName); ``MISSING_IMAGE`` (INSERT/UPDATE/INIT without an afterImages array,
DELETE without a beforeImages array, an empty image, DDL without its text); ``SCHEMA_MISMATCH``
(data change without a ``fields`` array, an image whose length differs from ``fields``, a column
name twice); ``BAD_VALUE`` (a value that contradicts its column's type or cannot be read).
"""

from __future__ import annotations

import io

from fastavro import parse_schema, schemaless_reader
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions, position_sql
from cdclake.formats.facts import Capabilities, OpTable
from cdclake.formats.dts_avro.files import read_avro_records
from cdclake.formats.dts_avro.values import columns_sql, legacy_charsets_enabled, zone_ids
from cdclake.formats.dts_avro.schema import OPERATIONS, RECORD_SCHEMA, RECORD_SCHEMA_JSON
from cdclake.formats.skeleton import Check, StagedDecoder, image_missing, persist_stage, table_missing
from cdclake.sqltext import sql_in

#: the DTS ``Record`` schema as fastavro reads it (``looks_like``)
_PARSED_RECORD_SCHEMA = parse_schema(RECORD_SCHEMA)

NAME = "dts-avro"

#: ``operation`` -> what it means (facts.json ``ops``); the schema's other operations are skipped
OPS = OpTable.load(__package__)
DATA_OPS = OPS.named(*OpTable.DATA)
TX_OPS = OPS.named("tx_begin", "tx_end")
DDL_OP = OPS.one("ddl")
HEARTBEAT_OP = OPS.one("heartbeat")
#: operations that carry nothing to apply: no event, not an error
SKIP_OPS = tuple(o for o in OPERATIONS if o not in OPS.ops)



class DtsAvroDecoder(StagedDecoder):
    """Alibaba DTS "DTS Avro" records; see the module docstring for the mapping."""

    name = NAME
    file_kind = "avro"
    capabilities = Capabilities.load(__package__)  # facts.json beside this module

    def parse(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """``raw`` with ``r``, the record read once (``from_avro``, PERMISSIVE: all fields null
        for bytes that are not a Record datum), and ``is_tombstone`` (a null value)."""
        # The parsed records are cut from their plan (a lazy local checkpoint: computed once, on
        # first use) so that no later query holds the from_avro expression: Spark 4.0's FromAvro
        # evaluates its options map (a CreateMap, whose map builder is shared by every copy of
        # the expression) whenever a plan holding it is canonicalized, and the batch's tables
        # are planned in concurrent threads: two threads at once fail with DUPLICATED_MAP_KEY
        # "mode" (seen once in CI, tests/formats/dts_avro/test_roundtrip.py::test_ingest_scrambled).
        # In a batch it is released at the batch's end (it was held until the JVM's garbage
        # collector freed it, and stored as objects: a 1M-record decode peaked at 6 GB).
        df = persist_stage(raw.withColumn("r", from_avro(F.col("value"), RECORD_SCHEMA_JSON, {"mode": "PERMISSIVE"})), cut=True)
        return df.withColumn("is_tombstone", F.col("value").isNull())

    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        """The record's fields (``op``, ``names``, ``flds``, ``aimg``/``bimg``, ``ddl_text``,
        ``et``, ``pk_uk``), its table (``db``, ``sch``, ``tbl``), per column its type and texts
        (``cols``), the images (``after_map``/``before_map``), ``present_cols`` and the first
        bad column (``bad``)."""
        df = df.selectExpr(
            "*",
            "r.operation as op",
            # objectName: split on '.', each part un-escaped ('\u002E' stands for a dot in a name)
            "case when instr(r.objectName, '\\\\u002E') > 0 then transform(split(r.objectName, '\\\\.'), p -> replace(p, '\\\\u002E', '.'))"
            " else split(r.objectName, '\\\\.') end as names",
            "coalesce(r.source.sourceType in ('MySQL', 'DRDS'), false) as is_mysql",
            "r.fields.member1 as flds",
            "case when r.operation in ('INSERT', 'UPDATE', 'INIT') then r.afterImages.member1 end as aimg",
            "case when r.operation in ('UPDATE', 'DELETE') then r.beforeImages.member1 end as bimg",
            "coalesce(r.afterImages.member0, r.beforeImages.member0) as ddl_text",
            "case when abs(r.sourceTimestamp) >= 10000000000 then r.sourceTimestamp else r.sourceTimestamp * 1000 end as et",
            "from_json(try_element_at(r.tags, 'pk_uk_info'), 'map<string,array<string>>') as pk_uk",
        )
        df = df.selectExpr(
            "*",
            "case when size(names) between 1 and 3 then nullif(try_element_at(names, 1), '') end as db",
            "case when size(names) = 3 then nullif(try_element_at(names, 2), '') end as sch",
            "case when size(names) = 2 then nullif(try_element_at(names, 2), '') when size(names) = 3 then nullif(try_element_at(names, 3), '') end as tbl",
            "size(array_distinct(flds.name)) != size(flds) as dup_names",
            f"{columns_sql(zone_ids(df.sparkSession), legacy_charsets_enabled(df.sparkSession))} as cols",
        )
        # the usual image carries every column: its map is built from the columns' fields
        # without a lambda (cols.name is one array read); one that leaves columns out is filtered
        image = lambda side: (  # noqa: E731
            f"case when dup_names or {side}img is null then null when array_contains(cols.{side}_none, true) then "
            f"map_from_entries(transform(filter(cols, c -> not c.{side}_none), c -> struct(c.name, c.{side}_text))) "
            f"else map_from_arrays(cols.name, cols.{side}_text) end"
        )
        return df.selectExpr(
            "*",
            f"{image('a')} as after_map",
            f"{image('b')} as before_map",
            "case when array_contains(cols.a_none, true) then transform(filter(cols, c -> not c.a_none), c -> c.name) end as present_cols",
            "try_element_at(filter(cols, c -> c.reason is not null), 1) as bad",
        )

    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        columns = """transform(cols, c -> named_struct(
                        'name', c.name,
                        'source_type', c.source_type,
                        'spark_type', c.t,
                        'precision', case when c.t like 'decimal(%' then try_cast(nullif(regexp_extract(c.t, '^decimal\\\\(([0-9]+),', 1), '') as int) end,
                        'scale', case when c.t like 'decimal(%' then try_cast(nullif(regexp_extract(c.t, '^decimal\\\\([0-9]+,([0-9]+)\\\\)', 1), '') as int) end,
                        'nullable', cast(null as boolean)))"""
        pk = "(case when size(filter(try_element_at(pk_uk, 'PRIMARY'), k -> k is not null and k != '')) > 0 then filter(try_element_at(pk_uk, 'PRIMARY'), k -> k is not null and k != '') end)"
        position = position_sql(["r.id"], "concat_ws(':', cast(r.id as string), nullif(r.sourcePosition, ''))")
        record = self.declare(
            schema="sch",
            position=position,
            tx_id="nullif(r.sourceTxid, '')",
        )
        data_event = record.data(
            OPS.case_sql("op", *OpTable.DATA),
            before="before_map",
            after="after_map",
            present="case when op != 'DELETE' then present_cols end",
            primary_key=pk,
            columns=columns,
        )
        ddl_event = record.ddl("ddl_text", primary_key=pk)
        truncate_event = record.truncate(ddl="ddl_text", primary_key=pk)
        is_truncate = f"op = '{DDL_OP}' and tbl is not null and ddl_text rlike '(?i)^\\\\s*truncate\\\\s'"
        tx_event = record.tx(OPS.case_sql("op", "tx_begin", "tx_end"))
        heartbeat_event = record.heartbeat()
        return F.expr(
            f"""case
              when is_tombstone or op is null then array()
              when {sql_in('op', DATA_OPS)} then array({data_event})
              when {is_truncate} then array({truncate_event})
              when op = '{DDL_OP}' then array({ddl_event})
              when {sql_in('op', TX_OPS)} then array({tx_event})
              when op = '{HEARTBEAT_OP}' then array({heartbeat_event})
              else array() end"""
        )

    def checks(self, df: DataFrame, options: DecodeOptions) -> list[Check]:
        is_data = F.expr(sql_in("op", DATA_OPS))
        return [
            (
                F.col("op").isNull(),
                RejectCode.AVRO_DECODE_ERROR.value,
                "value is not an Avro binary datum of com.alibaba.dts.formats.avro.Record",
            ),
            table_missing(
                is_data, "db", "tbl",
                F.concat(F.lit("objectName "), F.coalesce(F.concat(F.lit("'"), F.col("r.objectName"), F.lit("'")), F.lit("null")), F.lit(" names no table")),
            ),
            image_missing("op", ("INSERT", "UPDATE", "INIT"), "aimg", "an afterImages array"),
            image_missing("op", ("DELETE",), "bimg", "a beforeImages array"),
            (F.expr(f"op = '{DDL_OP}' and ddl_text is null"), RejectCode.MISSING_IMAGE.value, "DDL without its text in afterImages"),
            (is_data & F.col("flds").isNull(), RejectCode.SCHEMA_MISMATCH.value, "data change without a 'fields' array"),
            (
                is_data & F.expr("(aimg is not null and size(aimg) != size(flds)) or (bimg is not null and size(bimg) != size(flds))"),
                RejectCode.SCHEMA_MISMATCH.value,
                "an image does not have one value per entry of 'fields'",
            ),
            (is_data & F.col("dup_names"), RejectCode.SCHEMA_MISMATCH.value, "a column name appears twice in 'fields'"),
            (
                is_data & F.col("bad").isNotNull(),
                RejectCode.BAD_VALUE.value,
                F.concat(F.lit("column "), F.col("bad.name"), F.lit(": "), F.col("bad.reason")),
            ),
        ]

    def read_files(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        """Raw records from Avro object container files of ``Record`` (see :mod:`.files`)."""
        return read_avro_records(spark, paths)

    def detect_score(self, sample: list[bytes]) -> float:
        """How sure we are that ``sample`` is DTS Avro: 1.0 when it holds the header of an Avro
        container file naming the DTS ``Record`` schema (the first "line" of such a file), else
        the share of values :meth:`looks_like` accepts."""
        if any(v.startswith(b"Obj\x01") and b"com.alibaba.dts.formats.avro.Record" in v for v in sample):
            return 1.0
        return super().detect_score(sample)

    def looks_like(self, value: bytes) -> bool:
        """fastavro reads ``value`` as a DTS ``Record`` datum with nothing left over."""
        try:
            buf = io.BytesIO(value)
            rec = schemaless_reader(buf, _PARSED_RECORD_SCHEMA)
        except Exception:  # not a Record datum
            return False
        return isinstance(rec, dict) and rec.get("operation") in OPERATIONS and buf.tell() == len(value)
