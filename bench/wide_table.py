"""Seconds per batch on a wide table: canonical events (no decoder) applied by
``cdclake.pipeline.apply_events``, to see what the column count costs the applier.

One insert batch of ``--events`` rows over ``--keys`` keys, then ``--batches`` batches of
updates of those keys: ``full`` (whole before and after images) or ``partial`` (``present``
= the key and one column; a third of them with the whole row before, the rest with the key
only, as SharePlex and Qlik send). Prints each batch's seconds. Run on demand, never by the
tests::

    .venv/bin/python bench/wide_table.py --columns 150 --mode partial
    CDCLAKE_SPARK_CONF="spark.sql.codegen.wholeStage=false" .venv/bin/python bench/wide_table.py ...
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OUT = Path(__file__).resolve().parent / "out" / "wide_table"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--columns", type=int, default=150, help="string columns besides the int key (default 150)")
    ap.add_argument("--mode", choices=["full", "partial"], default="partial")
    ap.add_argument("--events", type=int, default=200, help="events per batch (default 200)")
    ap.add_argument("--keys", type=int, default=300, help="distinct keys (default 300)")
    ap.add_argument("--batches", type=int, default=3, help="update batches after the insert batch (default 3)")
    args = ap.parse_args()
    if args.columns < 2:
        ap.error("--columns: at least 2 (a partial update carries column c1)")

    from cdclake.model import EVENT_SCHEMA
    from cdclake.pipeline import apply_events
    from cdclake.spark import get_spark

    spark = get_spark()
    cols = [{"name": "id", "source_type": "int", "spark_type": "int", "precision": None, "scale": None, "nullable": False}] + [
        {"name": f"c{i}", "source_type": "varchar", "spark_type": "string", "precision": None, "scale": None, "nullable": True}
        for i in range(args.columns)
    ]
    line = [0]

    def ev(op, pos, after=None, before=None, present=None):
        line[0] += 1
        return {
            "format": "bench", "kind": "data", "op": op, "database": "db", "schema": None, "table": "wide",
            "before": before, "after": after, "present": present, "primary_key": ["id"], "columns": cols,
            "position": {"order": [Decimal(pos)], "text": str(pos)}, "tx_id": None, "tx_seq": None, "tx_last": None,
            "tx_size": None, "ddl": None, "event_time_ms": 1000 * pos,
            "source_record": {"topic": None, "partition": None, "offset": None, "timestamp_ms": None, "file": "mem", "line": line[0]},
        }

    def row(i, v):
        return {"id": str(i), **{f"c{j}": f"{v}-{j}" for j in range(args.columns)}}

    shutil.rmtree(OUT, ignore_errors=True)
    rnd = random.Random(1)
    pos = 1
    print("command: bench/wide_table.py " + " ".join(sys.argv[1:]), flush=True)
    for b in range(args.batches + 1):
        events = []
        for k in range(args.events):
            i = rnd.randrange(args.keys)
            if b == 0:
                events.append(ev("c", pos, row(i, pos)))
            elif args.mode == "partial":
                before = row(i, "x") if k % 3 == 0 else {"id": str(i)}
                events.append(ev("u", pos, {"id": str(i), "c1": str(pos)}, before, present=["id", "c1"]))
            else:
                events.append(ev("u", pos, row(i, pos), row(i, "x")))
            pos += 1
        df = spark.createDataFrame(events, EVENT_SCHEMA)
        t = time.time()
        apply_events(spark, df, str(OUT), None)
        print(f"batch {b} ({'insert' if b == 0 else args.mode}): {time.time() - t:.2f} s, {args.events} events, {args.columns + 1} columns", flush=True)


if __name__ == "__main__":
    main()
