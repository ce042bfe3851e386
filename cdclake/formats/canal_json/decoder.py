"""Decoder for ``canal-json``: Canal flat messages (open-source Canal and DTS "Canal Json").

Source: seed ``001_a1c6319148bc2083.txt`` (DTS Kafka data formats, Canal Json section) and
``shared/FORMATS.md``; real messages from Apache Flink's and Apache Paimon's tests.

Wire shape (one JSON object per record)::

    {"data": [{col: "text"}...] | null, "old": [{col: "old text"}...] | null,
     "database": "db", "table": "t", "pkNames": ["id"] | null, "isDdl": false,
     "mysqlType": {col: "decimal(10,2)"}, "sqlType": {col: 3}, "sql": "",
     "es": 1589373515000, "ts": 1589373515477, "id": 3, "type": "INSERT", "gtid": "..."}

Mapping to the canonical event:

* one event per element of ``data``; ``old[i]`` pairs with ``data[i]``;
* ``type``: INSERT -> ``c`` (after = data[i]); UPDATE -> ``u`` (after = data[i], before =
  data[i] overlaid with old[i]: open-source Canal's ``old`` holds only the changed columns);
  DELETE -> ``d`` (before = data[i]); INIT -> ``r`` (full-sync rows: snapshot reads);
  TRUNCATE -> ``t``; CREATE/ALTER/ERASE/RENAME/CINDEX/DINDEX/QUERY/INIT_DDL or ``isDdl`` ->
  ``ddl`` (text in ``sql``); MHEARTBEAT -> heartbeat; GTID/XACOMMIT/XAROLLBACK carry nothing to
  apply and decode to no event; any other type is rejected with ``UNKNOWN_OP``;
* values are strings: the column's Spark type comes from ``mysqlType`` (MySQL type text with
  precision, scale, ``unsigned``) and, where a column has none, from ``sqlType``
  (``java.sql.Types``); binary values are ISO-8859-1 text, as Canal writes them;
* order: ``es`` (binlog time, ms), then ``id`` (serial number), then the row's index in the
  message: ``position.order = [es, id, i]``; ``event_time_ms = es``; ``tx_id = gtid``;
* DTS instances created before 2022-03-20 swap ``data`` and ``old``: with
  ``DecodeOptions.canal_dts_inverted`` an UPDATE's after image is ``old[i]`` and its before image
  ``data[i]``; a DELETE whose ``data`` is null and ``old`` is not (that era's DELETE shape) is
  read from ``old`` with or without the option.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions, position_sql
from cdclake.formats.facts import Capabilities, OpTable
from cdclake.formats.json_common import JsonDecoder, loads_object
from cdclake.formats.canal_json.types import NotAnObject, entries, signature
from cdclake.formats.skeleton import bad_values, persist_stage, table_missing
from cdclake.formats.typed import Sig, TypedImage, add_typed_images, collect_signatures, columns_literal, image_struct_sql, sig_case
from cdclake.sqltext import sql_in, sql_let, sql_str

NAME = "canal-json"

SCHEMA = (
    "data array<map<string,string>>, old array<map<string,string>>, database string, "
    "table string, pkNames array<string>, isDdl boolean, mysqlType string, "
    "sqlType string, sql string, es string, ts string, id string, type string, "
    "gtid string"
)

#: the Canal type -> what it means (facts.json ``ops``)
OPS = OpTable.load(__package__)
DDL_TYPES = OPS.named("ddl")

#: what a data message's signature is hashed from: its type declarations and its rows' columns
#: (``mysqlType`` and ``sqlType`` stay raw JSON text per record: they are read once per signature,
#: on the driver)
SIG_PARTS = ["coalesce(j.mysqlType, '')", "coalesce(j.sqlType, '')", "keys0"]


#: SQL: the columns whose value could not be read (``array<string>``), over the typed images;
#: in the checks, so that its lambda joins the final projection (whose events have lambdas too)
#: instead of keeping a projection of its own out of whole-stage code generation
_BAD_COLS = """(case when fast then array_distinct(concat(after1_bad, before1_bad))
                 else array_distinct(flatten(array(
                     coalesce(flatten(transform(after_m, x -> x.bad)), cast(array() as array<string>)),
                     coalesce(flatten(transform(before_m, x -> x.bad)), cast(array() as array<string>))))) end)"""

#: SQL over the parse stage: a message's first row (its after image, else its before image), a
#: one-row message's first row's values (after, before) and its ``old`` row (empty when none)
_IMG0 = "coalesce(element_at(after_raw, 1), element_at(before_raw, 1))"
_VALS_A = "map_values(element_at(after_raw, 1))"
_VALS_B = "map_values(element_at(before_raw, 1))"
_OLD0 = "coalesce(element_at(old_raw, 1), cast(map() as map<string,string>))"

#: SQL: the message is a row change (its Canal type)
_IS_DATA = OPS.in_sql("t", *OpTable.DATA)


class CanalJsonDecoder(JsonDecoder):
    """Canal flat-message JSON; see the module docstring for the mapping."""

    name = NAME
    capabilities = Capabilities.load(__package__)  # facts.json beside this module
    wire_schema = SCHEMA
    record_fields = {"database": "j.database", "table": "j.table", "event_time_ms": "es"}

    def derive(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        return self._typed(self._fields(df, options))

    def _fields(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        """The message's fields as columns (rows stay raw), which arrays hold the after and
        before rows, whether the message is the common one-row case (``fast``), its signature
        ``sig``; persisted once (the rows once, not also inside ``j``)."""
        inverted = "true" if options.canal_dts_inverted else "false"
        df = df.selectExpr(
            "source_record", "key", "value", "j", "parse_error", "parse_message", "is_tombstone",
            "upper(j.type) as t",
            "try_cast(j.es as bigint) as es",
            "try_cast(j.id as bigint) as mid",
            "try_cast(j.ts as bigint) as ts",
        )
        # Which array holds the after / before rows of each row, per the (inverted) layout.
        df = df.selectExpr(
            "*",
            f"""(case when t = 'DELETE' and j.data is null and j.old is not null then j.old
                      when t = 'UPDATE' and {inverted} then j.data
                      when t = 'DELETE' then j.data else null end) as before_raw""",
            f"""(case when t in ('INSERT', 'INIT') then j.data
                      when t = 'UPDATE' and {inverted} then j.old
                      when t = 'UPDATE' then j.data else null end) as after_raw""",
            f"""(case when t = 'UPDATE' and not {inverted} then j.old else null end) as old_raw""",
        )
        df = df.selectExpr(
            "*",
            "greatest(coalesce(size(after_raw), 0), coalesce(size(before_raw), 0)) as n_rows",
            f"{_IMG0} as img0",
            f"{_OLD0} as old0",
        )
        # The common message: one row, whose before and after images have the same columns in
        # the same order (and 'old' no others): its values are read by position. Other messages
        # (several rows, rows with different columns) read each row's values by name.
        df = df.selectExpr(
            "*",
            """coalesce(n_rows = 1 and coalesce(size(old_raw), 0) <= 1 and (old_raw is null or size(array_except(map_keys(old0), map_keys(img0))) = 0)
                and (after_raw is null or before_raw is null or map_keys(element_at(after_raw, 1)) = map_keys(element_at(before_raw, 1))), false) as fast""",
        )
        df = df.selectExpr(
            "*",
            """(case when fast then map_keys(img0)
                     else array_distinct(flatten(concat(
                          coalesce(transform(after_raw, m -> map_keys(m)), array()),
                          coalesce(transform(before_raw, m -> map_keys(m)), array()),
                          coalesce(transform(old_raw, m -> map_keys(m)), array())))) end) as keys0""",
        )
        df = df.selectExpr("*", f"case when {_IS_DATA} and img0 is not null then xxhash64({', '.join(SIG_PARTS)}) end as sig")
        # persisted: what the typed stage reads, once (the rows once, not also inside j)
        kept = ("database", "table", "pkNames", "isDdl", "mysqlType", "sqlType", "sql", "es", "id", "type", "gtid")
        df = df.select(
            "source_record", "key", "value", "parse_error", "parse_message", "is_tombstone", "t", "es", "mid", "ts",
            "before_raw", "after_raw", "old_raw", "n_rows", "fast", "keys0", "sig",
            F.struct(*[F.col(f"j.`{f}`").alias(f) for f in kept]).alias("j"),
        )
        df = persist_stage(df)
        return df

    def _typed(self, df: DataFrame) -> DataFrame:
        """Types once per signature on the driver, then the typed images: ``after1``/``before1``
        for one-row messages, ``after_m``/``before_m`` per row otherwise, the
        columns ``cols`` (one literal per signature) and ``bad_types`` (the signature's column
        types are not objects)."""
        sigs, bad_sigs = [], []
        for r in collect_signatures(df, "sig", SIG_PARTS):
            try:
                sigs.append(signature(r["sig"], entries(r["lo"]["p0"]), entries(r["lo"]["p1"]), list(r["lo"]["p2"])))
            except (NotAnObject, ValueError):
                bad_sigs.append(r["sig"])
        bad_types = f"sig in ({', '.join(str(b) for b in bad_sigs)})" if bad_sigs else "false"

        # ---- typed images: one conversion per column ------------------------------------------
        # one-row messages (the common case): plain expressions over the row's values, read by
        # position (the values of the first row's maps: views, nothing copied)
        def after_value(s: Sig, i: int) -> str:
            return f"{_VALS_A}[{i}]"

        def before_value(s: Sig, i: int) -> str:
            n = sql_str(s.names[i])
            return f"(case when old_raw is not null then (case when map_contains_key({_OLD0}, {n}) then {_OLD0}[{n}] else {_VALS_A}[{i}] end) else {_VALS_B}[{i}] end)"

        images = [
            TypedImage("after1", "sig", sigs, after_value, f"fast and {_VALS_A} is not null"),
            TypedImage("before1", "sig", sigs, before_value,
                       f"fast and ((old_raw is not null and {_VALS_A} is not null) or (old_raw is null and {_VALS_B} is not null))"),
        ]
        columns = sig_case("sig", sigs, lambda s: columns_literal(s.declared), columns_literal(None))

        # other messages: the same conversions inside a lambda over the rows, by name; each
        # image keeps the columns its row carries
        def by_name(s: Sig, i: int) -> str:
            return f"element_at(m, {sql_str(s.names[i])})"

        def overlay(s: Sig, i: int) -> str:
            n = sql_str(s.names[i])
            return f"(case when map_contains_key(coalesce(element_at(old_raw, ri + 1), map()), {n}) then element_at(old_raw, ri + 1)[{n}] else element_at(m, {n}) end)"

        row_img = image_struct_sql("sig", sigs, by_name)
        keep = "map_filter(x.img, (k, v) -> map_contains_key(m, k))"
        keep_overlay = "map_filter(x.img, (k, v) -> map_contains_key(m, k) or map_contains_key(coalesce(element_at(old_raw, ri + 1), map()), k))"
        return add_typed_images(df, images, also=[
            f"{columns} as cols",
            f"{bad_types} as bad_types",
            f"""case when not fast and sig is not null then
                   transform(after_raw, m -> {sql_let(row_img, 'x', f"named_struct('img', {keep}, 'bad', x.bad)")}) end as after_m""",
            f"""case when not fast and sig is not null then
                   (case when old_raw is not null
                         then transform(after_raw, (m, ri) -> {sql_let(image_struct_sql("sig", sigs, overlay), 'x', f"named_struct('img', {keep_overlay}, 'bad', x.bad)")})
                         else transform(before_raw, m -> {sql_let(row_img, 'x', f"named_struct('img', {keep}, 'bad', x.bad)")}) end) end as before_m""",
        ])

    def events(self, df: DataFrame, options: DecodeOptions) -> Column:
        columns = "cols"
        pk = "(case when size(j.pkNames) > 0 then j.pkNames end)"
        record = self.declare(tx_id="j.gtid")
        op = OPS.case_sql("t", *OpTable.DATA)

        def data_event(before: str, after: str, i: str) -> str:
            return record.data(
                op,
                before=before,
                after=after,
                primary_key=pk,
                columns=columns,
                position=position_sql(["coalesce(es, ts)", "coalesce(mid, 0)", i], f"concat_ws(':', j.es, j.id, {i})"),
            )

        # a message that is one event (not a row change): positioned as its first row
        single = record.but(position=position_sql(["coalesce(es, ts)", "coalesce(mid, 0)", "0"], "concat_ws(':', j.es, j.id)"))
        multi = data_event("element_at(before_m, i + 1).img", "element_at(after_m, i + 1).img", "i")
        return F.expr(
            f"""case
              when is_tombstone then array()
              when {_IS_DATA} and fast then array({data_event('before1', 'after1', '0')})
              when {_IS_DATA} then transform(sequence(0, n_rows - 1), i -> {multi})
              when t = 'TRUNCATE' then array({single.truncate(ddl='j.sql')})
              when {sql_in('t', DDL_TYPES)} or (j.isDdl and t not in ('TRUNCATE', 'MHEARTBEAT')) then array({single.ddl('j.sql', primary_key=pk)})
              when t = 'MHEARTBEAT' then array({single.heartbeat()})
              else array() end"""
        )

    def checks(self, df: DataFrame, options: DecodeOptions) -> list[tuple[Column, str, Column | str]]:
        data = F.expr(_IS_DATA)
        known = F.expr(
            f"{OPS.in_sql('t')} or coalesce(j.isDdl, false)"
        )
        return [
            (F.col("bad_types"), RejectCode.SCHEMA_MISMATCH.value, "'mysqlType' or 'sqlType' is not an object of column types"),
            (F.col("t").isNull(), RejectCode.SCHEMA_MISMATCH.value, "no 'type' field"),
            (~known, RejectCode.UNKNOWN_OP.value, F.concat(F.lit("unknown Canal type "), F.col("j.type"))),
            table_missing(
                data | F.expr(f"{sql_in('t', DDL_TYPES)} or t = 'TRUNCATE'"), "j.database", "j.table", "message has no database/table",
                needs_table="t != 'QUERY' and t not like '%DDL%'",
            ),
            (data & F.expr(f"n_rows = 0 or {_IMG0} is null"), RejectCode.MISSING_IMAGE.value, "data change without rows in 'data'"),
            (
                data & F.expr("t = 'UPDATE' and old_raw is not null and size(old_raw) != size(after_raw)"),
                RejectCode.SCHEMA_MISMATCH.value,
                "'old' and 'data' have different lengths",
            ),
            (F.expr("coalesce(es, ts) is null and t != 'MHEARTBEAT'"), RejectCode.BAD_POSITION.value, "no numeric 'es' or 'ts'"),
            bad_values(data, _BAD_COLS, "a value does not match its mysqlType/sqlType"),
        ]

    def looks_like(self, value: bytes) -> bool:
        d = loads_object(value)
        return d is not None and "type" in d and ("isDdl" in d or "pkNames" in d or "mysqlType" in d) and "data" in d
