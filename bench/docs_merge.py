"""The Delta Lake documentation's CDC upsert pattern, over canal-json or debezium-json files of the benchmark table.

    .venv/bin/python bench/docs_merge.py --input FILE [FILE ...] --target DIR [--format debezium-json] [--master local[*]]

What the Delta docs give for "write change data into a Delta table" ("Upsert from streaming
queries using foreachBatch" / "merge: change data"): parse the changes, keep the last change per
key by sequence, then one MERGE::

    changes = spark.read.text(paths).select(from_json(value, schema)) ... explode(data)
    latest  = changes.groupBy(key).agg(max_by(struct(cols..., deleted), sequence))
    target.merge(latest, "t.id = s.id")
          .whenMatchedDelete("s.deleted")
          .whenMatchedUpdate(set=cols)
          .whenNotMatchedInsert("not s.deleted", values=cols)

Written for the one table of ``bench/bench_workload.py`` (``shop.orders``: id bigint, name
string, price decimal(12,2), updated_at timestamp), as a user who knows the table writes it:
a typed ``from_json`` schema for that table, the sequence the format gives (Canal: ``es``,
``id``, row index; Debezium: the binlog file, position and row of ``source``; Debezium's
decimal is its unscaled bytes in base64, its timestamp microseconds), the target created empty on the first run (a plain Delta table: no column mapping, no
type widening, no audit tables, which cdclake's tables have). The session is ``cdclake.spark.get_spark``,
so every Spark setting is the one cdclake runs with.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

SCHEMA = {"id": "bigint", "name": "string", "price": "decimal(12,2)", "updated_at": "timestamp"}
KEY = "id"
CANAL_SCHEMA = (
    "struct<data: array<struct<id: string, name: string, price: string, updated_at: string>>, "
    "database: string, table: string, isDdl: boolean, es: bigint, id: bigint, type: string>"
)
_ROW = "struct<id: bigint, name: string, price: string, updated_at: bigint>"
DEBEZIUM_SCHEMA = (
    f"struct<payload: struct<before: {_ROW}, after: {_ROW}, op: string, "
    "source: struct<db: string, table: string, file: string, pos: bigint, row: int>>>"
)
FORMATS = ("canal-json", "debezium-json")


def changes_of(spark: SparkSession, paths: list[str], fmt: str = "canal-json") -> DataFrame:
    """Every row change of canal-json or debezium-json files (``fmt``), parsed once: ``table``,
    the typed columns of :data:`SCHEMA`, ``deleted`` and ``seq`` (Canal: ``es``, message ``id``,
    row index; Debezium: the binlog ``file``, ``pos``, ``row`` of ``source``)."""
    text = spark.read.text(paths)
    if fmt == "debezium-json":
        p = F.col("m.payload")
        msgs = text.select(F.from_json("value", DEBEZIUM_SCHEMA).alias("m")).where(p["source"]["db"] == "shop")
        row = F.coalesce(p["after"], p["before"])
        cents = F.conv(F.hex(F.unbase64(row["price"])), 16, 10).cast("decimal(38,0)")  # Connect Decimal: unscaled bytes
        return msgs.select(
            p["source"]["table"].alias("table"),
            row["id"].alias("id"), row["name"].alias("name"), (cents / 100).cast("decimal(12,2)").alias("price"),
            F.timestamp_micros(row["updated_at"]).alias("updated_at"),
            (p["op"] == "d").alias("deleted"),
            F.struct(p["source"]["file"].alias("file"), p["source"]["pos"].alias("pos"), p["source"]["row"].alias("row")).alias("seq"),
        )
    m = F.col("m")
    msgs = text.select(F.from_json("value", CANAL_SCHEMA).alias("m")).where((m["database"] == "shop") & ~m["isDdl"])
    rows = msgs.select(m["table"].alias("table"), m["es"].alias("es"), m["id"].alias("msg"), m["type"].alias("type"),
                       F.posexplode(m["data"]).alias("row", "d"))
    d = F.col("d")
    return rows.select(
        "table",
        d["id"].cast("bigint").alias("id"),
        d["name"].alias("name"),
        d["price"].cast("decimal(12,2)").alias("price"),
        d["updated_at"].cast("timestamp").alias("updated_at"),
        (F.col("type") == "DELETE").alias("deleted"),
        F.struct("es", "msg", "row").alias("seq"),
    )


def latest_changes(spark: SparkSession, paths: list[str], parsed: DataFrame | None = None, table: str = "orders",
                   fmt: str = "canal-json") -> DataFrame:
    """The last change per key of ``table`` in the files (or in ``parsed``, their
    :func:`changes_of`): key columns, values, ``deleted``."""
    changes = (parsed if parsed is not None else changes_of(spark, paths, fmt)).where(F.col("table") == table)
    cols = [c for c in SCHEMA if c != KEY]
    return changes.groupBy(KEY).agg(F.max_by(F.struct(*cols, "deleted"), "seq").alias("s")).select(KEY, "s.*")


def upsert(spark: SparkSession, latest: DataFrame, target: str) -> None:
    """One MERGE of ``latest`` into the Delta table at ``target`` (created empty when missing)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, target):
        builder = DeltaTable.createIfNotExists(spark).location(target)
        for name, typ in SCHEMA.items():
            builder = builder.addColumn(name, typ, nullable=name != KEY)
        builder.execute()
    values = {c: f"s.{c}" for c in SCHEMA}
    (
        DeltaTable.forPath(spark, target).alias("t")
        .merge(latest.alias("s"), f"t.{KEY} = s.{KEY}")
        .whenMatchedDelete(condition="s.deleted")
        .whenMatchedUpdate(set=values)
        .whenNotMatchedInsert(condition="not s.deleted", values=values)
        .execute()
    )


def apply(spark: SparkSession, paths: list[str], target: str, fmt: str = "canal-json") -> None:
    upsert(spark, latest_changes(spark, paths, fmt=fmt), target)


def apply_tables(spark: SparkSession, paths: list[str], root: str, tables: list[str], fmt: str = "canal-json") -> None:
    """The same pattern for a whole database per batch, as a Structured Streaming
    ``foreachBatch`` over many tables is written: the batch parsed once (cached), then one MERGE
    per table in turn, into ``<root>/shop.<table>``."""
    parsed = changes_of(spark, paths, fmt).cache()
    try:
        for t in tables:
            upsert(spark, latest_changes(spark, paths, parsed, t), f"{root}/shop.{t}")
    finally:
        parsed.unpersist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", nargs="+", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--master", default=None)
    ap.add_argument("--format", default="canal-json", choices=FORMATS)
    args = ap.parse_args()
    from cdclake.spark import get_spark

    t = time.perf_counter()
    spark = get_spark(master=args.master)
    apply(spark, args.input, str(Path(args.target).resolve()), args.format)
    print(f"docs pattern: merged {', '.join(args.input)} into {args.target} in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
