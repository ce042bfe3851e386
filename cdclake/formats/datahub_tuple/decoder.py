"""Decoder for ``datahub-tuple``: records of Alibaba Cloud DataHub TUPLE topics written by DTS /
Data Integration, one record per line as a JSON object (or read from Parquet files of such
records by :func:`cdclake.formats.datahub_tuple.files.read_parquet_records`).

Sources: seed ``000_d2c269d42c40e542.txt`` (DataHub: topic types; "データ形式", TUPLE: the
metadata columns and the example table of an INSERT, an UPDATE's BEFORE and AFTER rows and a
DELETE) and ``shared/FORMATS.md`` (section ``datahub-tuple``). No public sample of
DTS-written TUPLE records exists; the DataHub SDK fixtures are mock GetRecords responses, not CDC
records (``shared/fixtures/SOURCES.md``).

Wire shape (one JSON object per record: the table's own columns beside the metadata columns)::

    {"id": 1, "name": "a",                       the source row (TUPLE topic schema)
     "_sequence_id_": "1649991610688000001",     decimal digits, a STRING; equal for the two
                                                 rows of one update
     "_operation_type_": "U",                    I | U | D
     "_excute_time_": 1649991756000,             (sic) when the change was made, ms since epoch
     "_source_table_": "db.table",               the source table (``db.table`` or ``table``)
     "_before_image_": "Y", "_after_image_": "N"}  which image the row is

Rows (seed 000's example table): insert = ``I`` with ``N``/``Y`` (after image); update = ``U``
``Y``/``N`` (the row before) + ``U`` ``N``/``Y`` (the row after), same ``_sequence_id_``;
delete = ``D`` with ``Y``/``N`` (before image).

Mapping to the canonical event (one record -> one event):

* ``I`` -> ``c`` (after = the row); ``D`` -> ``d`` (before = the row); ``U`` -> ``u`` with one
  image, before or after as the flags say. The applier pairs the two halves of one table and
  ``_sequence_id_`` into one update (:func:`cdclake.normalize.pair_update_halves`), so an update
  that changes the key removes the old key's row. ``_operation_type_`` is read upper-cased and
  trimmed; any other value -> ``UNKNOWN_OP``; absent -> ``SCHEMA_MISMATCH``.
* Image flags (``Y``/``N``, case-insensitive) must agree with the op: ``I`` is ``N``/``Y``,
  ``D`` is ``Y``/``N``, ``U`` is ``Y``/``N`` or ``N``/``Y``; anything else (``I`` with
  ``_before_image_`` ``Y``, ``U`` with ``Y``/``Y``, a flag ``X``) -> ``SCHEMA_MISMATCH``. For
  ``I`` and ``D`` an absent flag is taken to be the expected one; ``U`` needs both.
* Images: every key of the object except the six metadata columns (``_sequence_id_``,
  ``_operation_type_``, ``_excute_time_``, ``_source_table_``, ``_before_image_``,
  ``_after_image_``), which never reach the target table. Whole rows: ``present`` is null. A
  record with no data column -> ``MISSING_IMAGE``.
* Table: ``_source_table_`` split on the first dot: ``database`` = the part before it,
  ``table`` = the rest (``db.table`` -> ``db`` / ``table``; a bare ``table`` has ``database``
  null); ``schema`` is null. When a record has no ``_source_table_`` (a topic holds one table,
  so producers may omit it), ``DecodeOptions.extra["table"]`` (same spelling) names it; neither
  -> ``MISSING_TABLE``.
* Key: not in the record (TUPLE topics shard by it but do not mark it). ``primary_key`` = the
  columns configured for the table in ``DecodeOptions.primary_keys`` (qualified ``db.table``
  first, then the bare table name), else null (the applier then matches on the whole row).
* Types: a TUPLE topic's schema is not in the record, so each column's type is inferred per
  record from its JSON value kind, as ``debezium-json`` does for messages without a schema:
  integral number -> ``bigint`` (beyond the bigint range ``decimal(38,0)``), number with a
  fraction or exponent -> ``double``, string -> ``string``, ``true``/``false`` -> ``boolean``,
  object/array -> ``string`` holding the JSON text, null -> unknown (``spark_type`` null; the
  applier uses the column's type from other rows of the batch, else keeps the table's, else
  ``string``). ``columns[].source_type`` is
  ``json:integer|number|string|boolean|object|array|null``. The applier widens a column's types
  over the batch (``bigint`` and ``double`` -> ``double``; a number and a string -> ``string``).
  Consequences: DataHub ``TIMESTAMP`` values (µs since epoch as a number) land as ``bigint``;
  ``DECIMAL`` values written as JSON numbers land as ``double`` (write them as JSON strings to
  keep every digit: they then land as ``string``).
* Order: ``position.order = [_sequence_id_]``, ``position.text = _sequence_id_``; a missing or
  non-numeric ``_sequence_id_`` -> ``BAD_POSITION``.
* ``event_time_ms`` = ``_excute_time_`` (ms since epoch, UTC) when it is an integer, else null
  (not an error).
* No transactions, DDL or heartbeats (TUPLE topics carry none: seed 000's topic-type table).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions, configured_key_sql, position_sql
from cdclake.formats.facts import Capabilities, OpTable
from cdclake.formats.datahub_tuple.files import read_records
from cdclake.formats.json_common import JsonDecoder, loads_object
from cdclake.values import normalize_image_sql
from cdclake.sqltext import sql_str

NAME = "datahub-tuple"

#: the metadata columns Data Integration adds to a TUPLE topic (seed 000); never in images
META_COLUMNS = (
    "_sequence_id_",
    "_operation_type_",
    "_excute_time_",
    "_source_table_",
    "_before_image_",
    "_after_image_",
)

SCHEMA = ", ".join(f"{c} string" for c in META_COLUMNS)

#: ``_operation_type_`` -> op code
#: ``_operation_type_`` -> op (facts.json ``ops``)
OPS = OpTable.load(__package__)

_DECIMAL_RE = "^[0-9]{1,38}$"
_MS_RE = "^-?[0-9]{1,18}$"




def json_kind_sql(text: str, vk: str) -> str:
    """SQL: the JSON kind of a value (``integer``, ``number``, ``string``, ``boolean``,
    ``object``, ``array``, ``null``) from its text and ``schema_of_variant`` name."""
    return f"""(case when {vk} is null or {vk} = 'VOID' then 'null'
          when {vk} = 'STRING' then 'string' when {vk} = 'BOOLEAN' then 'boolean'
          when {vk} like 'OBJECT%' then 'object' when {vk} like 'ARRAY%' then 'array'
          when {vk} in ('DOUBLE', 'FLOAT') or {text} rlike '[.eE]' then 'number'
          else 'integer' end)"""


def kind_to_spark_sql(kind: str, vk: str) -> str:
    """SQL: the Spark type inferred for a JSON kind (see the module docstring); null for null."""
    return f"""(case {kind}
          when 'null' then cast(null as string)
          when 'integer' then (case when {vk} like 'DECIMAL%' then 'decimal(38,0)' else 'bigint' end)
          when 'number' then 'double'
          when 'boolean' then 'boolean'
          else 'string' end)"""


class DatahubTupleDecoder(JsonDecoder):
    """DataHub TUPLE records as JSON objects; see the module docstring for the mapping.

    Files may be JSON lines or Parquet (:meth:`read_files` tells them apart by the Parquet magic
    bytes ``PAR1``)."""

    name = NAME
    capabilities = Capabilities.load(__package__)  # facts.json beside this module
    wire_schema = SCHEMA

    def read_files(self, spark, paths: list[str]) -> DataFrame:
        """Raw records (RAW_SCHEMA) from JSON-lines files and Parquet files of TUPLE records."""
        return read_records(spark, paths)

    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        meta = "array(" + ", ".join(sql_str(c) for c in META_COLUMNS) + ")"
        configured_table = sql_str(options.extra["table"]) if options.extra.get("table") else "cast(null as string)"
        parsed = "(parse_error is null and not is_tombstone)"
        df = df.selectExpr(
            "*",
            "upper(trim(j._operation_type_)) as op_t",
            "nullif(trim(j._sequence_id_), '') as seq_text",
            f"(case when trim(j._excute_time_) rlike '{_MS_RE}' then cast(trim(j._excute_time_) as bigint) end) as et",
            "upper(trim(j._before_image_)) as bf",
            "upper(trim(j._after_image_)) as af",
            f"coalesce(nullif(trim(j._source_table_), ''), nullif(trim({configured_table}), '')) as tname",
            # the row: every key but the metadata columns, as text and as JSON kinds
            f"(case when {parsed} then map_filter(from_json(text, 'map<string,string>'), (k, v) -> not array_contains({meta}, k)) end) as row_text",
            f"""(case when {parsed} then map_filter(transform_values(from_json(text, 'map<string,variant>'), (k, v) -> schema_of_variant(v)),
                                                    (k, v) -> not array_contains({meta}, k)) end) as row_vk""",
        )
        df = df.selectExpr(
            "*",
            f"(case when seq_text rlike '{_DECIMAL_RE}' then cast(seq_text as decimal(38,0)) end) as seq",
            "(case when instr(tname, '.') > 0 then nullif(substring_index(tname, '.', 1), '') end) as db",
            "(case when instr(tname, '.') > 0 then nullif(substr(tname, instr(tname, '.') + 1), '') else tname end) as tbl",
            # which image the row is; null when the flags do not fit the op
            """(case
                  when op_t = 'I' and coalesce(bf, 'N') = 'N' and coalesce(af, 'Y') = 'Y' then 'after'
                  when op_t = 'D' and coalesce(bf, 'Y') = 'Y' and coalesce(af, 'N') = 'N' then 'before'
                  when op_t = 'U' and bf = 'Y' and af = 'N' then 'before'
                  when op_t = 'U' and bf = 'N' and af = 'Y' then 'after' end) as side""",
            # column -> (JSON kind, Spark type); map_zip_with joins text and kind by key
            f"""map_zip_with(row_text, row_vk, (k, t, vk) -> named_struct(
                  'kind', {json_kind_sql('t', 'vk')}, 'vk', vk)) as kinds""",
        )
        df = df.selectExpr(
            "*",
            f"transform_values(kinds, (k, x) -> {kind_to_spark_sql('x.kind', 'x.vk')}) as types",
        )
        df = df.selectExpr(
            "*",
            f"{normalize_image_sql('row_text', 'types', 'base64')} as row_n",
            f"{configured_key_sql(options.primary_keys, 'db', 'tbl')} as pk",
        )
        return df

    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        columns = """transform(map_entries(kinds), e -> named_struct(
                       'name', e.key,
                       'source_type', concat('json:', e.value.kind),
                       'spark_type', element_at(types, e.key),
                       'precision', cast(null as int),
                       'scale', cast(null as int),
                       'nullable', cast(null as boolean)))"""
        record = self.declare(position=position_sql(["seq"], "seq_text"))
        data_event = record.data(
            OPS.case_sql("op_t"),
            before="(case when side = 'before' then row_n.image end)",
            after="(case when side = 'after' then row_n.image end)",
            primary_key="pk",
            columns=columns,
        )
        return F.expr(f"case when is_tombstone then array() else array({data_event}) end")

    def checks(self, df: DataFrame, options: DecodeOptions) -> list[tuple[Column, str, Column | str]]:
        return [
            (F.expr("nullif(op_t, '') is null"), RejectCode.SCHEMA_MISMATCH.value, "no '_operation_type_' column"),
            (
                ~F.expr(OPS.in_sql("op_t")),
                RejectCode.UNKNOWN_OP.value,
                F.concat(F.lit("unknown _operation_type_ "), F.col("j._operation_type_")),
            ),
            (
                F.col("side").isNull(),
                RejectCode.SCHEMA_MISMATCH.value,
                F.concat(
                    F.lit("_before_image_/_after_image_ "),
                    F.coalesce(F.col("j._before_image_"), F.lit("(none)")),
                    F.lit("/"),
                    F.coalesce(F.col("j._after_image_"), F.lit("(none)")),
                    F.lit(" do not fit _operation_type_ "),
                    F.col("op_t"),
                ),
            ),
            (F.expr("tbl is null or (instr(tname, '.') > 0 and db is null)"), RejectCode.MISSING_TABLE.value, "no _source_table_ (and no configured table)"),
            (F.expr("coalesce(size(row_text), 0) <= 0"), RejectCode.MISSING_IMAGE.value, "record has no data columns"),
            (F.col("seq").isNull(), RejectCode.BAD_POSITION.value, "_sequence_id_ missing or not a decimal number"),
            (~F.col("row_n.ok"), RejectCode.BAD_VALUE.value, "a value does not match its inferred type"),
        ]

    def looks_like(self, value: bytes) -> bool:
        if value[:4] == b"PAR1":  # the head of a Parquet file: only this format reads Parquet
            return True
        d = loads_object(value)
        return d is not None and "_operation_type_" in d and "_sequence_id_" in d
