"""Benchmark: decode and apply throughput on generated canal-json events.

    .venv/bin/python bench/canal_throughput.py [--events 1000000] [--keys 200000] [--master local[*]]

Generates N single-row canal-json messages (inserts for the first K keys, then updates, every
10th change a delete) with Spark itself into ``bench/out/canal-<N>.jsonl``, then measures:

* decode: read the file and decode every record to canonical events (``noop`` sink);
* apply: the whole ingest (decode, changelog, plan, MERGE into Delta, progress) into a fresh
  target folder.

Prints events per second for both, and the command line that reproduces the run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F  # noqa: E402

from cdclake import formats  # noqa: E402
from cdclake.formats.base import DecodeOptions  # noqa: E402
from cdclake.pipeline import IngestConfig, ingest  # noqa: E402
from cdclake.sources.files import read_lines  # noqa: E402
from cdclake.spark import get_spark  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def generate(spark, n: int, keys: int) -> Path:
    path = OUT / f"canal-{n}-{keys}.jsonl"
    if path.exists():
        return path
    tmp = OUT / f"tmp-{n}"
    i = F.col("id")
    k = (i % keys).cast("string")
    typ = F.when(i < keys, "INSERT").when(i % 10 == 0, "DELETE").otherwise("UPDATE")
    row = F.create_map(
        F.lit("id"), k,
        F.lit("name"), F.concat(F.lit("name-"), i.cast("string")),
        F.lit("price"), F.format_number((i % 100000) / 100, 2),
        F.lit("updated_at"), F.date_format(F.timestamp_seconds(F.lit(1700000000) + i), "yyyy-MM-dd HH:mm:ss"),
    )
    msg = F.struct(
        F.array(row).alias("data"),
        F.when(typ == "UPDATE", F.array(F.create_map(F.lit("name"), F.lit("old")))).alias("old"),
        F.lit("shop").alias("database"),
        F.lit("orders").alias("table"),
        F.array(F.lit("id")).alias("pkNames"),
        F.lit(False).alias("isDdl"),
        F.create_map(F.lit("id"), F.lit("bigint(20)"), F.lit("name"), F.lit("varchar(64)"),
                     F.lit("price"), F.lit("decimal(12,2)"), F.lit("updated_at"), F.lit("datetime")).alias("mysqlType"),
        F.lit("").alias("sql"),
        (F.lit(1700000000000) + i).alias("es"),
        (F.lit(1700000000000) + i).alias("ts"),
        i.alias("id"),
        typ.alias("type"),
    )
    spark.range(n).select(F.to_json(msg).alias("value")).coalesce(1).write.mode("overwrite").text(str(tmp))
    part = next(tmp.glob("part-*"))
    OUT.mkdir(exist_ok=True)
    shutil.move(str(part), path)
    shutil.rmtree(tmp)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args()
    spark = get_spark(master=args.master)
    path = generate(spark, args.events, args.keys)
    size_mb = path.stat().st_size / 1e6

    t = time.perf_counter()
    decoded = formats.get("canal-json").decode(read_lines(spark, [str(path)]), DecodeOptions())
    decoded.select(F.explode("events").alias("e")).select("e.*").write.format("noop").mode("overwrite").save()
    decode_s = time.perf_counter() - t
    print(f"decode: {decode_s:8.1f} s  {args.events / decode_s:10.0f} events/s", flush=True)

    target = OUT / "lake"
    shutil.rmtree(target, ignore_errors=True)
    t = time.perf_counter()
    summary = ingest(spark, IngestConfig("canal-json", [str(path)], str(target)))
    apply_s = time.perf_counter() - t
    assert summary.events == args.events and summary.rejected == 0, summary

    print(f"command: .venv/bin/python bench/canal_throughput.py --events {args.events} --keys {args.keys} --master '{args.master}'")
    print(f"machine: {os.cpu_count()} cores, load average at the end {os.getloadavg()[0]:.1f}; input {size_mb:.0f} MB, {args.events} events, {args.keys} keys")
    print(f"decode: {decode_s:8.1f} s  {args.events / decode_s:10.0f} events/s")
    print(f"ingest (decode + changelog + MERGE + progress): {apply_s:8.1f} s  {args.events / apply_s:10.0f} events/s")
    for r in summary.tables:
        print(f"  {r.table}: inserted {r.inserted}, updated {r.updated}, deleted {r.deleted}, rows now {r.rows_now}")


if __name__ == "__main__":
    main()
