"""Planning: one small aggregate over the batch's events says, per target table, which columns
with which types it needs, which key, and what kinds of change it holds.

Only this summary (a few rows per table) reaches the driver; the events stay in Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.apply import types as T
from cdclake.model import qualified_name

#: columns producers add to tables that have no primary key (DataWorks/DTS MySQL, Oracle)
ROW_ID_COLUMNS = ("#alibaba_rds_row_id#", "rowid")


@dataclass
class TablePlan:
    """What one batch does to one target table.

    columns: source columns in first-seen order, name -> Spark type (widened over the batch).
    key: key columns chosen for the table (configuration > message > producer row id); empty
        means "no key: match on the whole before image".
    counts: events per op code (``c``, ``u``, ``d``, ``r``, ``t``) in the batch.
    partial: the batch holds images that carry only some columns (``present`` set).
    """

    database: str | None
    schema: str | None
    table: str
    columns: dict[str, str] = field(default_factory=dict)
    message_key: list[str] | None = None
    key: list[str] = field(default_factory=list)
    key_source: str = "none"
    counts: dict[str, int] = field(default_factory=dict)
    partial: bool = False
    ddl: list[tuple[list, str, str]] = field(default_factory=list)  # (position order, text, ddl)

    @property
    def name(self) -> str:
        return qualified_name(self.database, self.schema, self.table)


def plan_tables(events: DataFrame, primary_keys: dict[str, list[str]] | None = None) -> list[TablePlan]:
    """Summarise ``events`` (EVENT_SCHEMA rows) per target table.

    ``primary_keys`` maps a qualified name (``db.table``, ``db.schema.table``) or a bare table
    name to key columns (from ``--primary-key``); it wins over the key a message states.
    Runs three small aggregations; returns one :class:`TablePlan` per table with data or DDL.
    """
    primary_keys = primary_keys or {}
    ident = ["database", "schema", "table"]
    tabled = events.where(F.col("table").isNotNull() & F.col("kind").isin("data", "ddl"))

    stats = (
        tabled.groupBy(*ident)
        .agg(
            F.max_by("primary_key", F.when(F.col("primary_key").isNotNull(), F.col("position"))).alias("pk"),
            F.count_if(F.col("op") == "c").alias("c"),
            F.count_if(F.col("op") == "u").alias("u"),
            F.count_if(F.col("op") == "d").alias("d"),
            F.count_if(F.col("op") == "r").alias("r"),
            F.count_if(F.col("op") == "t").alias("t"),
            F.count_if(F.col("present").isNotNull()).alias("partial"),
        )
        .collect()
    )
    # Columns with declared types, in first-seen order (position, then index in the message).
    declared = (
        tabled.where(F.col("columns").isNotNull())
        .select(*ident, "position", F.posexplode("columns").alias("idx", "col"))
        .groupBy(*ident, F.col("col.name").alias("name"))
        .agg(
            F.collect_set(F.col("col.spark_type")).alias("types"),
            F.min(F.struct("position", "idx")).alias("first"),
        )
    )
    # Columns that only appear as image keys (no declared type): strings.
    undeclared = (
        tabled.where(F.col("kind") == "data")
        .select(
            *ident,
            "position",
            F.array_except(
                F.map_keys(F.coalesce("after", "before")),
                F.coalesce(F.transform("columns", lambda c: c["name"]), F.array().cast("array<string>")),
            ).alias("extra"),
        )
        .where(F.size("extra") > 0)
        .select(*ident, "position", F.posexplode("extra").alias("idx", "name"))
        .groupBy(*ident, "name")
        .agg(F.array(F.lit("string")).alias("types"), F.min(F.struct("position", "idx")).alias("first"))
    )
    cols = declared.unionByName(undeclared).collect()
    ddls = (
        tabled.where(F.col("kind") == "ddl")
        .select(*ident, F.col("position.order").alias("order"), F.col("position.text").alias("text"), "ddl")
        .collect()
    )

    plans: dict[tuple, TablePlan] = {}
    for row in stats:
        k = (row["database"], row["schema"], row["table"])
        p = plans[k] = TablePlan(*k)
        p.message_key = list(row["pk"]) if row["pk"] else None
        p.counts = {op: row[op] for op in "cudrt"}
        p.partial = row["partial"] > 0
    by_table: dict[tuple, list] = {}
    for row in cols:
        by_table.setdefault((row["database"], row["schema"], row["table"]), []).append(row)
    for k, rows in by_table.items():
        p = plans[k]
        for r in sorted(rows, key=lambda r: (list(r["first"]["position"]["order"] or []), r["first"]["idx"])):
            t = None
            for candidate in r["types"]:
                t = candidate if t is None else T.widen(t, candidate)
            if r["name"] in p.columns:
                p.columns[r["name"]] = T.widen(p.columns[r["name"]], t)
            else:
                p.columns[r["name"]] = T.normalize(t)
    for row in ddls:
        k = (row["database"], row["schema"], row["table"])
        if k in plans:
            plans[k].ddl.append((list(row["order"] or []), row["text"], row["ddl"]))
    for p in plans.values():
        _choose_key(p, primary_keys)
    return sorted(plans.values(), key=lambda p: p.name)


def _choose_key(p: TablePlan, configured: dict[str, list[str]]) -> None:
    for name in (p.name, f"{p.database}.{p.table}" if p.database else None, p.table):
        if name and name in configured:
            p.key, p.key_source = list(configured[name]), "configuration"
            return
    if p.message_key:
        p.key, p.key_source = list(p.message_key), "message"
        return
    for rid in ROW_ID_COLUMNS:
        if rid in p.columns:
            p.key, p.key_source = [rid], "producer row id"
            return
    p.key, p.key_source = [], "none (whole before image)"
