"""Decoder for ``shareplex-json``: Alibaba DTS "Shareplex Json" messages (SharePlex-style JSON,
Oracle sources) written to Kafka.

Sources: seed ``001_a1c6319148bc2083.txt`` (DTS: data formats of a message queue, section
"Shareplex Json": the ``meta`` parameter table and the three example messages) and
``shared/FORMATS.md`` (section ``shareplex-json``). No public sample file exists
(``shared/fixtures/SOURCES.md``): the seed's examples are the reference.

Wire shape (one JSON object per record)::

    {"meta": {"time": "2017-06-16T14:24:34",   commit time at the source, UTC (the seed's table
                                               says yyyy-MM-ddTHH:mm:ssZ; its examples have no Z)
              "userid": 84, "op": "ins",       ins | upd | del, or the long names of the seed's
                                               table: INSERT, UPDATE, DELETE, TRUNCATE,
                                               DROP COLUMN, UPDATE BEFORE, UPDATE AFTER
              "scn": "14589063118712",         system change number, one per committed transaction
              "rowid": "AAATGpAAIAAItcIAAA",   Oracle ROWID of the row
              "trans": "7.0.411499",           transaction id
              "seq": 1, "size": 11,            1-based index of the operation in its transaction,
                                               number of operations in the transaction
              "table": "CL_BIZ1.MIO_LOG",      OWNER.TABLE
              "idx": "1/11",                   seq/size as text
              "posttime": "2017-06-16T14:33:52"},  commit time at the target (not used)
     "data": {col: "text" | null},             ins: the new row; upd: ONLY the changed columns
                                               (after values); del: the deleted row
     "key":  {col: "text" | null}}             upd: the row before the change

Mapping to the canonical event:

* Ops are matched case-insensitively, with runs of spaces/underscores read as one space
  (``UPDATE_BEFORE`` = ``UPDATE BEFORE``). ``ins``/``INSERT`` -> ``c``, after = ``data``.
  ``del``/``DELETE`` -> ``d``, before = ``data`` (``key`` when ``data`` is absent).
  ``upd``/``UPDATE`` -> ``u`` with a *partial* after image: before = ``key``; after = the key
  columns' values taken from ``key`` overlaid with ``data``; ``present`` = the after image's
  columns (so the applier finds the row by its key and changes only the columns ``data``
  carries; a column set to NULL is carried as NULL). The key columns are the configured ones
  (below); without a configured key every column of ``key`` is carried (SharePlex puts the
  row's identifying columns there), which only helps a table whose key is configured later.
  An update whose ``data`` changes a configured key column (a key change) decodes to two
  events at the same position: ``d`` of the old key (before = ``key``) and the partial ``u`` of
  the new key, whose after image is all of ``key`` overlaid with ``data``.
  ``UPDATE BEFORE`` -> ``u`` with the before image only (``data``, else ``key``);
  ``UPDATE AFTER`` -> ``u`` with the after image only (``data``, read as a whole row: the seed
  shows no sample of these two ops). The applier pairs the halves when they share table and
  position (``scn`` and ``seq``; :func:`cdclake.normalize.pair_update_halves`); an after half
  alone is applied as an upsert of its image.
  ``TRUNCATE`` -> data event ``t`` without images. ``DROP COLUMN`` -> ``ddl`` event whose text
  is ``DROP COLUMN`` followed by the JSON of ``data`` (else ``key``) when the message carries
  one (the seed names the op but shows no message: the text is recorded in ``schema_history``;
  no schema change is derived from it).
  Any other op -> ``UNKNOWN_OP``; no ``meta``/``meta.op`` -> ``SCHEMA_MISMATCH``.
* Table: ``meta.table`` split on the first dot: ``database`` = OWNER, ``schema`` = null,
  ``table`` = TABLE (an Oracle owner *is* the schema, but DTS names no database, so the owner
  takes the database slot and the target table is ``T/OWNER.TABLE``, as the seed spells it).
  Double quotes around either part are removed. A name without a dot is the table alone
  (``database`` null). No (or an empty) ``meta.table`` -> ``MISSING_TABLE``.
* Key: none on the wire. ``primary_key`` = the columns configured for the table in
  ``DecodeOptions.primary_keys`` under ``OWNER.TABLE`` (else the bare ``TABLE``), else null (the
  applier then matches on the whole before image). ``meta.rowid`` is not a column of the
  row and is not added to images.
* Types: none on the wire; values are strings or null (JSON numbers/booleans arrive as their
  text, objects as JSON text). ``columns`` is null, so every column is a ``string`` column of
  the target table; the text is already canonical for ``string``.
* Order: ``position.order = [scn, seq]`` (``seq`` 0 when the message has neither ``seq`` nor
  ``idx``), ``position.text = "scn:seq"``. A missing or non-numeric ``scn``, or a non-numeric
  ``seq``, -> ``BAD_POSITION``.
* Transactions: ``tx_id`` = ``trans``, ``tx_seq`` = ``seq``, ``tx_size`` = ``size`` (each taken
  from ``idx`` = ``seq/size`` when missing), ``tx_last`` = (``seq`` = ``size``).
* ``event_time_ms`` = ``meta.time`` read as UTC (``yyyy-MM-ddTHH:mm:ss``, optional fraction; a
  trailing ``Z`` or ``+08:00``-style offset is honoured); null when absent or unreadable (not an
  error).
* Images that a change needs but lacks (``ins``/``UPDATE AFTER`` without ``data``; ``del``/
  ``UPDATE BEFORE`` without ``data`` and ``key``; ``upd`` without ``data``, or whose after image
  lacks a configured key column, or without ``key`` when no key is configured) ->
  ``MISSING_IMAGE``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions, configured_key_sql, position_sql
from cdclake.formats.facts import Capabilities, OpTable
from cdclake.formats.json_common import JsonDecoder, loads_object
from cdclake.formats.shareplex_json.types import UpdateSig
from cdclake.formats.skeleton import persist_stage
from cdclake.formats.typed import collect_signatures, sig_case

NAME = "shareplex-json"

SCHEMA = (
    "meta struct<time string, userid string, op string, scn string, rowid string, trans string, "
    "seq string, size string, table string, idx string, posttime string>, "
    "data map<string,string>, key map<string,string>"
)

#: the wire op (upper-cased, spaces/underscores collapsed to one space) -> what the decoder does
#: (facts.json ``ops``)
OPS = OpTable.load(__package__)
DATA_ACTIONS = ("insert", "update", "delete", "update_before", "update_after")

#: a decimal integer as scn may hold it (decimal(38,0)); seq/size fit a bigint
_SCN_RE = "^[0-9]{1,38}$"
_SEQ_RE = "^[0-9]{1,18}$"

#: what an update's signature is built from: its configured key, the columns of ``key`` and the
#: columns of ``data`` (sizes hashed too, so that the lists' boundaries count)
SIG_PARTS = ["pk", "map_keys(j.key)", "map_keys(j.data)"]
SIG_HASHED = [
    "coalesce(size(pk), -1)", "pk",
    "coalesce(size(j.key), -1)", "map_keys(j.key)",
    "coalesce(size(j.data), -1)", "map_keys(j.data)",
]


def _unquote(part: str) -> str:
    return f"nullif(regexp_replace(trim({part}), '^\"(.*)\"$', '$1'), '')"


class ShareplexJsonDecoder(JsonDecoder):
    """DTS "Shareplex Json"; see the module docstring for the mapping."""

    name = NAME
    capabilities = Capabilities.load(__package__)  # facts.json beside this module
    wire_schema = SCHEMA

    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        return self._update_layout(self._fields(df, options))

    def _fields(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        """The record's fields as columns (images stay raw maps), an update's signature
        ``sig``, and the columns the events read, persisted once."""
        action = OPS.case_sql("op_n")
        df = df.selectExpr(
            "*",
            "regexp_replace(upper(trim(j.meta.op)), '[ _]+', ' ') as op_n",
            "nullif(trim(j.meta.table), '') as tname",
            "nullif(trim(j.meta.scn), '') as scn_text",
            "coalesce(nullif(trim(j.meta.seq), ''), nullif(trim(split_part(j.meta.idx, '/', 1)), '')) as seq_text",
            "coalesce(nullif(trim(j.meta.size), ''), nullif(trim(split_part(j.meta.idx, '/', 2)), '')) as size_text",
            "nullif(trim(j.meta.time), '') as time_text",
        )
        owner = _unquote("substring_index(tname, '.', 1)")
        rest = _unquote("substr(tname, instr(tname, '.') + 1)")
        df = df.selectExpr(
            "*",
            f"{action} as action",
            f"(case when instr(tname, '.') > 0 then {owner} end) as db",
            f"(case when instr(tname, '.') > 0 then {rest} else {_unquote('tname')} end) as tbl",
            f"(case when scn_text rlike '{_SCN_RE}' then cast(scn_text as decimal(38,0)) end) as scn",
            f"(case when seq_text rlike '{_SEQ_RE}' then cast(seq_text as bigint) end) as seq",
            f"(case when size_text rlike '{_SEQ_RE}' then cast(size_text as bigint) end) as tx_size",
            # UTC unless the text names its own offset (independent of the session time zone)
            """unix_millis(try_cast(case when time_text rlike '(Z|[+-][0-9]{2}:?[0-9]{2})$' then time_text
                                         else concat(time_text, 'Z') end as timestamp)) as et""",
        )
        df = df.selectExpr("*", f"{configured_key_sql(options.primary_keys, 'db', 'tbl')} as pk")
        # an update's signature: its configured key and the columns of `key` and `data`, in order
        df = df.selectExpr("*", f"case when action = 'update' then xxhash64({', '.join(SIG_HASHED)}) end as sig")
        # persisted: what the events read, once
        df = df.select(
            "source_record", "key", "value", "parse_error", "parse_message", "is_tombstone",
            "action", "tname", "db", "tbl", "scn", "scn_text", "seq", "seq_text", "tx_size", "et", "pk", "sig",
            F.when(F.col("j").isNotNull(), F.struct(
                F.when(F.col("j.meta").isNotNull(), F.struct(F.col("j.meta.op").alias("op"), F.col("j.meta.trans").alias("trans"))).alias("meta"),
                F.col("j.data").alias("data"),
                F.col("j.key").alias("key"),
            )).alias("j"),
        )
        df = persist_stage(df)
        return df

    def _update_layout(self, df: DataFrame) -> DataFrame:
        """An update's layout, once per signature on the driver, and its images read by
        position (no lambda): ``key_change``, ``upd_after``, ``upd_present``, ``upd_missing``."""
        sigs = [
            UpdateSig.of(r["sig"], r["lo"]["p0"], r["lo"]["p1"], r["lo"]["p2"])
            for r in collect_signatures(df, "sig", SIG_PARTS)
        ]

        # ---- update images: values read by position, no lambda ---------------------------------
        df = df.selectExpr(
            "*",
            "case when sig is not null then map_values(j.key) end as kv",
            "case when sig is not null then map_values(j.data) end as dv",
        )
        df = df.selectExpr("*", f"{sig_case('sig', sigs, lambda s: s.key_change_sql(), 'false')} as key_change")
        df = df.selectExpr(
            "*",
            f"""{sig_case('sig', sigs, lambda s: s.after_sql(), 'cast(null as map<string,string>)')} as upd_after""",
            f"""{sig_case('sig', sigs, lambda s: s.present_sql(), 'cast(null as array<string>)')} as upd_present""",
            f"""{sig_case('sig', sigs, lambda s: 'true' if s.missing else 'false', 'false')} as upd_missing""",
        )
        return df

    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        position = position_sql(["scn", "coalesce(seq, 0)"], "concat_ws(':', scn_text, seq_text)")
        record = self.declare(
            primary_key="pk",
            position=position,
            tx_id="j.meta.trans",
            tx_seq="seq",
            tx_last="(seq = tx_size)",
            tx_size="tx_size",
        )
        before = """(case when action = 'update' then j.key
                          when action in ('delete', 'update_before') then coalesce(j.data, j.key) end)"""
        after = """(case when action in ('insert', 'update_after') then j.data
                         when action = 'update' then upd_after end)"""
        op = "(case action when 'insert' then 'c' when 'delete' then 'd' else 'u' end)"
        data_event = record.data(
            op,
            before=before,
            after=after,
            present="(case when action = 'update' then upd_present end)",
        )
        old_key_delete = record.data("'d'", before="j.key")
        truncate_event = record.truncate()
        ddl_text = "concat('DROP COLUMN', coalesce(concat(' ', to_json(coalesce(j.data, j.key))), ''))"
        ddl_event = record.ddl(ddl_text)

        return F.expr(
            f"""case
              when is_tombstone then array()
              when key_change then array({old_key_delete}, {data_event})
              when action in {DATA_ACTIONS} then array({data_event})
              when action = 'truncate' then array({truncate_event})
              when action = 'drop_column' then array({ddl_event})
              else array() end"""
        )

    def checks(self, df: DataFrame, options: DecodeOptions) -> list[tuple[Column, str, Column | str]]:
        def empty(m: str) -> str:
            return f"coalesce(size({m}), 0) <= 0"

        missing_image = F.expr(
            f"""(action in ('insert', 'update_after') and {empty('j.data')})
             or (action in ('delete', 'update_before') and {empty('coalesce(j.data, j.key)')})
             or (action = 'update' and upd_missing)"""
        )
        return [
            (F.expr("j.meta is null"), RejectCode.SCHEMA_MISMATCH.value, "no 'meta' object"),
            (F.expr("nullif(trim(j.meta.op), '') is null"), RejectCode.SCHEMA_MISMATCH.value, "no 'meta.op' field"),
            (F.col("action").isNull(), RejectCode.UNKNOWN_OP.value, F.concat(F.lit("unknown SharePlex op "), F.col("j.meta.op"))),
            (
                F.expr("tname is null or tbl is null or (instr(tname, '.') > 0 and db is null)"),
                RejectCode.MISSING_TABLE.value,
                "no OWNER.TABLE in meta.table",
            ),
            (missing_image, RejectCode.MISSING_IMAGE.value, F.concat(F.col("j.meta.op"), F.lit(" without the data/key image it needs"))),
            (
                F.expr("scn is null or (seq_text is not null and seq is null)"),
                RejectCode.BAD_POSITION.value,
                "meta.scn missing or not a decimal number (or meta.seq not a number)",
            ),
        ]

    def looks_like(self, value: bytes) -> bool:
        d = loads_object(value)
        meta = d.get("meta") if d is not None else None
        return isinstance(meta, dict) and "op" in meta and ("data" in d or "key" in d) and bool({"scn", "table", "trans", "rowid"} & set(meta))
