"""Spark jobs and seconds per warm batch: where a small batch's fixed cost goes.

Ingests ``--base`` (a canal-json file) into a fresh lake, then each of ``--batch`` files as one
more batch in the same session, with Spark's event log on; prints per batch its seconds and
the Spark jobs that ran in it (all threads), and for the last batch each job's start offset,
duration, stage count and description. Run on demand, never by the tests::

    .venv/bin/python bench/jobs_per_batch.py \\
        --base bench/out/inputs/canal-json-0-20000-k4000-g1.jsonl \\
        --batch bench/out/inputs/canal-json-1000500-1001000-k200000-g1.jsonl ...

(inputs: see ``bench/compare.py``, which generates and caches them in ``bench/out/inputs``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OUT = Path(__file__).resolve().parent / "out" / "jobs_per_batch"


def read_jobs(log_dir: Path) -> list[dict]:
    """Job start/end events of the (uncompressed) event log files in ``log_dir``."""
    starts, jobs = {}, []
    for f in sorted(log_dir.rglob("*")):
        if not f.is_file():
            continue
        for line in f.open(encoding="utf-8"):
            e = json.loads(line)
            if e["Event"] == "SparkListenerJobStart":
                p = e.get("Properties") or {}
                starts[e["Job ID"]] = (e["Submission Time"], len(e["Stage Infos"]), p.get("spark.job.description") or p.get("callSite.short") or "")
            elif e["Event"] == "SparkListenerJobEnd" and e["Job ID"] in starts:
                t, stages, desc = starts[e["Job ID"]]
                jobs.append({"id": e["Job ID"], "start_ms": t, "ms": e["Completion Time"] - t, "stages": stages, "what": desc})
    return sorted(jobs, key=lambda j: j["start_ms"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="file of the first (untimed) batch")
    ap.add_argument("--batch", nargs="+", required=True, help="files, one batch each")
    ap.add_argument("--format", default="canal-json", help="the files' format (default canal-json)")
    ap.add_argument("--primary-key", action="append", default=[], metavar="TABLE=COLS",
                    help="as cdclake ingest's (debezium-json files: shop.orders=id)")
    ap.add_argument("--scd-type", type=int, choices=[1, 2], default=1, help="2: history tables (SCD type 2)")
    args = ap.parse_args()

    from cdclake.pipeline import IngestConfig, ingest
    from cdclake.spark import get_spark

    shutil.rmtree(OUT, ignore_errors=True)
    logs = OUT / "eventlog"
    logs.mkdir(parents=True)
    spark = get_spark(conf={"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(logs),
                            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"})
    lake = str(OUT / "lake")
    keys = {t: c.split(",") for t, c in (k.split("=", 1) for k in args.primary_key)}
    ingest(spark, IngestConfig(args.format, [args.base], lake, keys, scd_type=args.scd_type))
    windows = []
    for path in args.batch:
        t0 = time.time()
        s = ingest(spark, IngestConfig(args.format, [path], lake, keys, scd_type=args.scd_type))
        windows.append((Path(path).name, t0, time.time(), s.events))
    spark.stop()
    jobs = read_jobs(logs)
    print(f"command: {' '.join(sys.argv)}")
    for name, t0, t1, events in windows:
        inside = [j for j in jobs if t0 * 1000 <= j["start_ms"] <= t1 * 1000]
        print(f"{name}: {t1 - t0:6.2f} s, {events} events, {len(inside)} Spark jobs")
    name, t0, t1, _ = windows[-1]
    print(f"\njobs of the last batch ({name}):")
    for j in jobs:
        if t0 * 1000 <= j["start_ms"] <= t1 * 1000:
            print(f"  +{j['start_ms'] - int(t0 * 1000):6d} ms {j['ms']:6d} ms  {j['stages']} stage(s)  {j['what'][:90]}")


if __name__ == "__main__":
    main()
