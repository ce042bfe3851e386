"""The events of ``debezium-json`` records beside their images: each record's position, the
schema-change events (written by the connector, or read from a PostgreSQL table's column lists),
transaction and heartbeat events.

Position (``order`` compared lexicographically gives commit order within one connector):

================  ==========================================================  =====================
connector         order                                                       text
================  ==========================================================  =====================
db2, sqlserver    commit_lsn hi, lo, change_lsn hi, lo, event_serial_no,      commit_lsn=… change_lsn=…
                  total_order (an LSN's hex digits, colons removed, read as
                  one unsigned number split into hi = digits before the last
                  16, lo = the last 16; a missing LSN counts as 0, the
                  smallest, as Debezium's ``Lsn.NULL``)
postgresql        lsn, total_order                                            lsn=34078720
mysql, mariadb    binlog file number (``mysql-bin.000003`` -> 3), pos, row,   mysql-bin.000003:154:0
                  total_order
oracle            scn, total_order                                            scn=…
mongodb           source.ts_ms, ord, total_order                              ts_ms=… ord=…
other / none      event_time_ms, total_order                                  ts_ms=…
================  ==========================================================  =====================

The connector is ``source.connector``; without it the fields present decide. ``total_order``
is 0 when the event has no ``transaction`` block; `` total_order=N`` is appended to the text
when it has. A coordinate that is present but not a number (an LSN that is not hex or longer
than 32 digits), or no coordinate and no ``ts_ms`` at all -> ``BAD_POSITION``.

* ``event_time_ms = source.ts_ms`` (commit time) when positive, else the payload's ``ts_ms``
  (snapshots of old MySQL connectors write ``source.ts_ms = 0``).
* transactions: ``tx_id = transaction.id``, ``tx_seq = transaction.total_order``; a record of
  the transaction topic -> ``tx_begin``/``tx_end`` with ``tx_id = id``, ``tx_size =
  event_count`` (END), ``position = [ts_ms]``. A PostgreSQL id ``<txId>:<LSN>`` (Debezium 2.0
  and later: the LSN differs from record to record of one transaction) is read as its
  ``txId`` (:func:`cdclake.formats.debezium_json.wire.tx_id_sql`).
* schema change -> one ``ddl`` event per ``tableChanges`` element (one event when the list is
  empty), ``ddl`` = the statement text (null for Db2 and SQL Server, whose events carry only
  ``tableChanges``). Table from ``tableChanges[i].id``: three parts are
  ``"db"."schema"."table"``; two parts are ``"schema"."table"`` when the event has a schema
  (Db2: ``"DB2INST1"."CUSTOMERS"``, database from ``source.db``) and ``"db"."table"`` otherwise
  (MySQL); no id -> ``source``. ``columns`` from ``tableChanges[i].table.columns`` (spark type
  from ``jdbcType``, decimal precision/scale from ``length``/``scale``), ``primary_key`` from
  ``primaryKeyColumnNames``. A database-level statement (no table anywhere) is kept as a ddl
  event with a null table.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from cdclake.formats.base import position_sql
from cdclake.formats.debezium_json.inferred import InferredDdl
from cdclake.formats.debezium_json.wire import ID_SPLIT, tx_id_sql
from cdclake.formats.skeleton import EventDecl
from cdclake.formats.sqltypes import jdbc_spark_type
from cdclake.sqltext import sql_let, sql_str


#: how a record's position is read, per connector (``source.connector``; without it the fields
#: present decide)
_STYLE = """(case when lower(src.connector) in ('sqlserver', 'db2') then 'lsn'
                 when lower(src.connector) = 'postgresql' then 'pg'
                 when lower(src.connector) in ('mysql', 'mariadb') then 'binlog'
                 when lower(src.connector) = 'oracle' then 'scn'
                 when lower(src.connector) = 'mongodb' then 'mongo'
                 when src.commit_lsn is not null or src.change_lsn is not null then 'lsn'
                 when src.lsn is not null then 'pg'
                 when src.file is not null or src.pos is not null then 'binlog'
                 when src.scn is not null then 'scn'
                 else 'ts' end)"""


def _dec(e: str) -> str:
    return f"coalesce(try_cast({e} as decimal(38,0)), 0)"


def _lsn_hi_lo(hexcol: str) -> tuple[str, str]:
    """SQL: (hi, lo) decimals of an LSN's hex digits: lo = the last 16 digits, hi = the rest
    (0 when the LSN is missing or longer than 32 digits, which is a BAD_POSITION)."""
    hexcol = f"(case when length({hexcol}) <= 32 then {hexcol} end)"
    hi = f"coalesce(try_cast(conv(nullif(substr({hexcol}, 1, greatest(length({hexcol}) - 16, 0)), ''), 16, 10) as decimal(38,0)), 0)"
    lo = f"coalesce(try_cast(conv(nullif(substr({hexcol}, greatest(length({hexcol}) - 15, 1)), ''), 16, 10) as decimal(38,0)), 0)"
    return hi, lo


def add_position(df: DataFrame) -> DataFrame:
    """``df`` (``src``: the payload's ``source`` struct, ``b``: the payload, ``event_time``) with
    ``pstyle`` (how its position is read: ``lsn``, ``pg``, ``binlog``, ``scn``, ``mongo``, ``ts``),
    ``pos`` (the position struct, see the module docstring) and ``pos_ok`` (its coordinates are
    numbers; false: ``BAD_POSITION``)."""
    df = df.selectExpr(
        "*",
        f"{_STYLE} as pstyle",
        # at most 32 hex digits (Db2: 16 bytes) so that conv() never overflows (also under ANSI)
        "regexp_replace(src.commit_lsn, '[^0-9A-Fa-f]', '') as commit_hex",
        "regexp_replace(src.change_lsn, '[^0-9A-Fa-f]', '') as change_hex",
        "try_cast(b.`transaction`.total_order as decimal(38,0)) as total_order",
    )
    c_hi, c_lo = _lsn_hi_lo("commit_hex")
    ch_hi, ch_lo = _lsn_hi_lo("change_hex")
    tot = "coalesce(total_order, 0)"
    tot_text = "(case when total_order is not null then concat(' total_order=', b.`transaction`.total_order) else '' end)"
    styles = {
        "lsn": (
            [c_hi, c_lo, ch_hi, ch_lo, _dec("src.event_serial_no"), tot],
            "concat_ws(' ', concat('commit_lsn=', src.commit_lsn), concat('change_lsn=', src.change_lsn), "
            "concat('event_serial_no=', src.event_serial_no))",
        ),
        "pg": ([_dec("src.lsn"), tot], "concat('lsn=', src.lsn)"),
        "binlog": (
            [_dec(r"regexp_extract(src.file, '([0-9]+)$', 1)"), _dec("src.pos"), _dec("src.`row`"), tot],
            "concat_ws(':', src.file, src.pos, src.`row`)",
        ),
        "scn": ([_dec("src.scn"), tot], "concat_ws(' ', concat('scn=', src.scn), concat('commit_scn=', src.commit_scn))"),
        "mongo": ([_dec("src.ts_ms"), _dec("src.ord"), tot], "concat('ts_ms=', src.ts_ms, ' ord=', coalesce(src.ord, ''))"),
    }
    fallback_text = f"concat('ts_ms=', event_time, {tot_text})"
    position = (
        "(case "
        + " ".join(f"when pstyle = '{s}' then {position_sql(parts, f'concat({text}, {tot_text})')}" for s, (parts, text) in styles.items())
        + f" else {position_sql([_dec('event_time'), tot], fallback_text)} end)"
    )
    lsn_ok = "(src.{f} is null or (src.{f} rlike '^[0-9A-Fa-f:]+$' and length({h}) <= 32))"
    pos_ok = f"""(case
        when pstyle = 'lsn' then coalesce(src.commit_lsn, src.change_lsn) is not null
                                 and {lsn_ok.format(f='commit_lsn', h='commit_hex')} and {lsn_ok.format(f='change_lsn', h='change_hex')}
        when pstyle = 'pg' then src.lsn is null or try_cast(src.lsn as decimal(38,0)) is not null
        when pstyle = 'binlog' then (src.pos is null or try_cast(src.pos as decimal(38,0)) is not null)
                                    and (src.`row` is null or try_cast(src.`row` as decimal(38,0)) is not null)
        when pstyle = 'scn' then src.scn is null or try_cast(src.scn as decimal(38,0)) is not null
        when pstyle = 'mongo' then true
        else event_time is not null end)"""
    return df.selectExpr("*", f"{position} as pos", f"coalesce({pos_ok}, false) as pos_ok")


def _ddl_spark_type_sql(c: str) -> str:
    """SQL: Spark type of a ``tableChanges`` column (``jdbcType``, ``length``, ``scale``)."""
    code = f"try_cast({c}.jdbcType as int)"
    length, scale = f"try_cast({c}.length as int)", f"coalesce(try_cast({c}.scale as int), 0)"
    return f"""(case
      when {code} in (2, 3) and {length} between 1 and 38 then concat('decimal(', greatest({length}, {scale}), ',', {scale}, ')')
      when {code} in (2, 3) and {length} > 38 then 'string'
      when {code} = -5 and upper({c}.typeName) like '%UNSIGNED%' then 'decimal(20,0)'
      when {code} = 4 and upper({c}.typeName) like '%UNSIGNED%' then 'bigint'
      else {jdbc_spark_type_sql(code)} end)"""


#: the ``java.sql.Types`` constants (JDK ``java.sql.Types``)
_JDBC_TYPES = (
    -16, -15, -9, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 70, 91, 92, 93,
    1111, 2000, 2001, 2002, 2003, 2004, 2005, 2006, 2009, 2011, 2012, 2013, 2014,
)


def jdbc_spark_type_sql(code: str) -> str:
    """SQL: the Spark type of the ``java.sql.Types`` code ``code`` (an int expression), written
    out from the driver-side mapping :func:`cdclake.formats.sqltypes.jdbc_spark_type` (no SQL
    twin of it to keep in step)."""
    groups: dict[str, list[int]] = {}
    for t in _JDBC_TYPES:
        st = jdbc_spark_type(t)
        if st != "string":
            groups.setdefault(st, []).append(t)
    whens = " ".join(f"when {code} in ({', '.join(map(str, ts))}) then '{st}'" for st, ts in groups.items())
    return f"(case {whens} else 'string' end)"


def ddl_event(record: EventDecl, x: str | None) -> str:
    """SQL: the DDL event of a schema-change record (columns as :func:`add_position` and the
    decoder's ``ddl_text``, ``db_name``, ``schema_name``): of its ``tableChanges`` element ``x``
    (a lambda variable), or of the record itself when ``x`` is None. ``record``: what every
    event of the record shares (format, event time)."""
    if x is None:
        ident = dict(
            database="coalesce(src.db, db_name)",
            schema="coalesce(src.`schema`, schema_name)",
            table="src.`table`",
        )
        extra: dict[str, str] = {}
    else:
        n = "coalesce(size(idp), 0)"
        has_schema = "(coalesce(schema_name, src.`schema`) is not null)"
        ident = dict(
            database=f"(case when {n} >= 3 then idp[{n} - 3] when {n} = 2 and not {has_schema} then idp[0] else coalesce(src.db, db_name) end)",
            schema=f"(case when {n} >= 3 then idp[{n} - 2] when {n} = 2 and {has_schema} then idp[0] when {n} = 2 then cast(null as string) else coalesce(src.`schema`, schema_name) end)",
            table=f"(case when {n} >= 1 then idp[{n} - 1] else src.`table` end)",
        )
        extra = dict(
            columns=f"""transform({x}.`table`.columns, c -> named_struct('name', c.name, 'source_type', c.typeName,
                         'spark_type', {_ddl_spark_type_sql('c')}, 'precision', try_cast(c.length as int),
                         'scale', try_cast(c.scale as int), 'nullable', try_cast(c.optional as boolean)))""",
            primary_key=f"(case when size({x}.`table`.primaryKeyColumnNames) > 0 then {x}.`table`.primaryKeyColumnNames end)",
        )
    ev = record.ddl("ddl_text", **ident, **extra, position="pos", tx_id=tx_id_sql("b.`transaction`.id"))
    if x is None:
        return ev
    return sql_let(f"""transform(split({x}.id, {ID_SPLIT}), p -> regexp_replace(p, '^"|"$', ''))""", "idp", ev)


def tx_event(record: EventDecl) -> str:
    """SQL: the ``tx_begin``/``tx_end`` event of a transaction-topic record."""
    return record.tx(
        "(case when upper(b.status) = 'BEGIN' then 'tx_begin' else 'tx_end' end)",
        tx_id=tx_id_sql("b.id"),
        tx_size="try_cast(b.event_count as bigint)",
        position=position_sql(["coalesce(ts, 0)"], "concat_ws(' ', concat('tx=', b.id), upper(b.status))"),
    )


def heartbeat_event(record: EventDecl) -> str:
    """SQL: the heartbeat event of a heartbeat record (``ts``: its ``ts_ms``)."""
    return record.heartbeat(position=position_sql(["ts"], "concat('ts_ms=', ts)"))


# ---- column DDL read from a PostgreSQL table's successive column lists ---------------------------

#: the column :func:`add_column_ddl` adds: the DDL statements to apply just before the record
COLUMN_DDL = "col_ddl"
_COLUMN_DDL_TYPE = "struct<statements: array<string>, point: array<decimal(38,0)>, text: string>"


def add_column_ddl(df: DataFrame, found: list[InferredDdl]) -> DataFrame:
    """``df`` with :data:`COLUMN_DDL`, the statements of ``found`` (:func:`cdclake.formats.debezium_json.inferred.column_ddl`) that come
    just before each record (``struct<statements: array<string>, point: array<decimal(38,0)>,
    text: string>``: ``point`` is the position order of the first one without its index, ``text``
    the positions' text), NULL for the records none comes before; ``df`` itself (no such
    column) when the batch shows none."""
    if not found:
        return df
    whens = []
    for d in found:
        order = [int(v) for v in d.order]
        point = [*order[:-1], order[-1] - 1]
        value = (
            f"named_struct('statements', array({', '.join(sql_str(s) for s in d.statements)}), "
            f"'point', array({', '.join(f'cast({v} as decimal(38,0))' for v in point)}), "
            f"'text', {sql_str(f'lsn={order[0]} (before: columns changed)')})"
        )
        at = "array(" + ", ".join(f"cast({v} as decimal(38,0))" for v in order) + ")"
        whens.append(f"when rt = 'data' and sig_s = {d.sig_s} and pg_order = {at} then {value}")
    return df.selectExpr("*", f"cast((case {' '.join(whens)} end) as {_COLUMN_DDL_TYPE}) as {COLUMN_DDL}")


def column_ddl_events(record: EventDecl) -> str:
    """SQL: the DDL events of a record's :data:`COLUMN_DDL` statements, the ``i``-th at the
    point with ``i`` appended: between the change before it (of the old schema: a PostgreSQL
    change's LSN differs from the one before it, and changes of one statement share a schema)
    and the record's change."""
    ev = record.ddl(
        "s", database="src.db", schema="src.`schema`", table="tbl",
        position=f"named_struct('order', concat({COLUMN_DDL}.point, array(cast(i as decimal(38,0)))), 'text', {COLUMN_DDL}.text)",
        columns="cols",
    )
    return f"transform({COLUMN_DDL}.statements, (s, i) -> {ev})"
