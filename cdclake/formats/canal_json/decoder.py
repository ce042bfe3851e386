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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.errors import RejectCode
from cdclake.formats.base import Capabilities, Decoder, DecodeOptions, event_sql, finish, first_error, position_sql
from cdclake.formats.json_common import parse_json
from cdclake.values import jdbc_to_spark_sql, mysql_to_spark_sql, normalize_image_sql

NAME = "canal-json"

SCHEMA = (
    "data array<map<string,string>>, old array<map<string,string>>, database string, "
    "table string, pkNames array<string>, isDdl boolean, mysqlType map<string,string>, "
    "sqlType map<string,string>, sql string, es string, ts string, id string, type string, "
    "gtid string"
)

DATA_TYPES = {"INSERT": "c", "UPDATE": "u", "DELETE": "d", "INIT": "r"}
DDL_TYPES = ("CREATE", "ALTER", "ERASE", "RENAME", "CINDEX", "DINDEX", "QUERY", "INIT_DDL", "DDL")
SKIP_TYPES = ("GTID", "XACOMMIT", "XAROLLBACK", "BEGIN", "COMMIT")


def _in(col: str, values) -> str:
    return f"{col} in ({', '.join(repr(v) for v in values)})"


class CanalJsonDecoder(Decoder):
    """Canal flat-message JSON; see the module docstring for the mapping."""

    name = NAME
    capabilities = Capabilities(
        key="message (pkNames)",
        column_types="mysqlType (MySQL type text), sqlType (java.sql.Types)",
        position="es, id, row index",
        transactions="gtid only (no boundaries)",
        ddl=True,
        heartbeats=True,
        snapshot_marker="type INIT",
    )

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        df = parse_json(raw, SCHEMA)
        inverted = "true" if options.canal_dts_inverted else "false"
        df = df.selectExpr(
            "*",
            "upper(j.type) as t",
            "try_cast(j.es as bigint) as es",
            "try_cast(j.id as bigint) as mid",
            "try_cast(j.ts as bigint) as ts",
            # column name -> Spark type: mysqlType first, sqlType for the columns it lacks
            f"""map_concat(
                  coalesce(transform_values(map_filter(j.sqlType, (k, v) -> not array_contains(map_keys(coalesce(j.mysqlType, map())), k)),
                                            (k, v) -> {jdbc_to_spark_sql('v')}), map()),
                  coalesce(transform_values(j.mysqlType, (k, v) -> {mysql_to_spark_sql('v')}), map())
               ) as types""",
        )
        # Which array holds the after / before images of each row, per the (inverted) layout.
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
        # Before image of an open-source UPDATE: the after image overlaid with the old values.
        df = df.selectExpr(
            "*",
            """(case when old_raw is not null then
                  transform(after_raw, (a, i) -> map_concat(map_filter(a, (k, v) -> not map_contains_key(coalesce(element_at(old_raw, i + 1), map()), k)),
                                                            coalesce(element_at(old_raw, i + 1), map())))
                  else before_raw end) as before_imgs""",
        )
        norm = lambda arr: f"transform({arr}, m -> {normalize_image_sql('m', 'types', 'latin1')})"  # noqa: E731
        df = df.selectExpr("*", f"{norm('after_raw')} as after_n", f"{norm('before_imgs')} as before_n")

        columns = """transform(map_entries(types), e -> named_struct(
                       'name', e.key,
                       'source_type', coalesce(element_at(j.mysqlType, e.key), element_at(j.sqlType, e.key)),
                       'spark_type', e.value,
                       'precision', try_cast(nullif(regexp_extract(element_at(j.mysqlType, e.key), '\\\\(\\\\s*([0-9]+)', 1), '') as int),
                       'scale', try_cast(nullif(regexp_extract(element_at(j.mysqlType, e.key), '\\\\(\\\\s*[0-9]+\\\\s*,\\\\s*([0-9]+)', 1), '') as int),
                       'nullable', cast(null as boolean)))"""
        pk = "(case when size(j.pkNames) > 0 then j.pkNames end)"
        common = dict(
            format=f"'{NAME}'",
            database="j.database",
            table="j.table",
            event_time_ms="es",
            tx_id="j.gtid",
        )
        n_rows = "greatest(coalesce(size(after_raw), 0), coalesce(size(before_imgs), 0))"
        op = "(case " + " ".join(f"when t = '{k}' then '{v}'" for k, v in DATA_TYPES.items()) + " end)"
        data_event = event_sql(
            **common,
            kind="'data'",
            op=op,
            before="element_at(before_n, i + 1).image",
            after="element_at(after_n, i + 1).image",
            primary_key=pk,
            columns=columns,
            position=position_sql(["coalesce(es, ts)", "coalesce(mid, 0)", "i"], "concat_ws(':', j.es, j.id, i)"),
        )
        def single(**kw: str) -> str:
            fields = {
                **common,
                "position": position_sql(["coalesce(es, ts)", "coalesce(mid, 0)", "0"], "concat_ws(':', j.es, j.id)"),
                **kw,
            }
            return event_sql(**fields)

        events = F.expr(
            f"""case
              when is_tombstone then array()
              when t in ('INSERT', 'UPDATE', 'DELETE', 'INIT') then transform(sequence(0, {n_rows} - 1), i -> {data_event})
              when t = 'TRUNCATE' then array({single(kind="'data'", op="'t'", ddl='j.sql')})
              when {_in('t', DDL_TYPES)} or (j.isDdl and t not in ('TRUNCATE', 'MHEARTBEAT')) then array({single(kind="'ddl'", ddl='j.sql', primary_key=pk)})
              when t = 'MHEARTBEAT' then array({single(kind="'heartbeat'", database='cast(null as string)', table='cast(null as string)')})
              else array() end"""
        )
        is_data = F.expr("t in ('INSERT', 'UPDATE', 'DELETE', 'INIT')")
        known = F.expr(
            f"t in ('INSERT','UPDATE','DELETE','INIT','TRUNCATE','MHEARTBEAT') or {_in('t', DDL_TYPES + SKIP_TYPES)} or coalesce(j.isDdl, false)"
        )
        code, message = first_error(
            (F.col("parse_error").isNotNull(), "", F.col("parse_message")),
            (F.col("is_tombstone"), "", "tombstone"),
            (F.col("t").isNull(), RejectCode.SCHEMA_MISMATCH.value, "no 'type' field"),
            (~known, RejectCode.UNKNOWN_OP.value, F.concat(F.lit("unknown Canal type "), F.col("j.type"))),
            (
                (is_data | F.expr(f"{_in('t', DDL_TYPES)} or t = 'TRUNCATE'")) & F.expr("j.database is null or (j.table is null and t != 'QUERY' and t not like '%DDL%')"),
                RejectCode.MISSING_TABLE.value,
                "message has no database/table",
            ),
            (is_data & F.expr("coalesce(size(after_raw), size(before_imgs), 0) = 0"), RejectCode.MISSING_IMAGE.value, "data change without rows in 'data'"),
            (
                is_data & F.expr("t = 'UPDATE' and old_raw is not null and size(old_raw) != size(after_raw)"),
                RejectCode.SCHEMA_MISMATCH.value,
                "'old' and 'data' have different lengths",
            ),
            (F.expr("coalesce(es, ts) is null and t != 'MHEARTBEAT'"), RejectCode.BAD_POSITION.value, "no numeric 'es' or 'ts'"),
            (
                is_data & F.expr("not (coalesce(forall(after_n, x -> x.ok), true) and coalesce(forall(before_n, x -> x.ok), true))"),
                RejectCode.BAD_VALUE.value,
                "a value does not match its mysqlType/sqlType",
            ),
        )
        # parse errors keep their own code; a tombstone is not an error at all
        code = F.when(F.col("parse_error").isNotNull(), F.col("parse_error")).when(F.col("is_tombstone"), F.lit(None)).otherwise(code)
        return finish(df, events, code, message)

    def detect_score(self, sample: list[bytes]) -> float:
        import json

        hits = 0
        for v in sample:
            try:
                d = json.loads(v)
            except Exception:
                continue
            if isinstance(d, dict) and "type" in d and ("isDdl" in d or "pkNames" in d or "mysqlType" in d) and "data" in d:
                hits += 1
        return hits / max(len(sample), 1)
