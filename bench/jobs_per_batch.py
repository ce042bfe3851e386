"""Spark jobs and seconds per warm batch: where a small batch's fixed cost goes.

Ingests ``--base`` (a canal-json file) into a fresh lake, then each of ``--batch`` files as one
more batch in the same session, with Spark's event log on; prints per batch its seconds and
the Spark jobs that ran in it (all threads), what it spent against the per-batch budget
(:data:`BUDGET`: Spark actions before the MERGEs, Delta commits per touched table and to
``_cdclake``, read from the event log and the tables' ``_delta_log``), and for the last batch
each job's start offset, duration, stage count and description. Run on demand, never by the
tests::

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
    """Job start/end events of the (uncompressed) event log files in ``log_dir``, with the query
    execution each job belongs to (``root``) and that execution's description (``action``:
    ``collect at ...``, ``save at ...``, ``localCheckpoint at ...``)."""
    starts, jobs, actions = {}, [], {}
    for f in sorted(log_dir.rglob("*")):
        if not f.is_file():
            continue
        for line in f.open(encoding="utf-8"):
            e = json.loads(line)
            if e["Event"].endswith("SparkListenerSQLExecutionStart"):
                actions[str(e["executionId"])] = e.get("description") or ""
            elif e["Event"] == "SparkListenerJobStart":
                p = e.get("Properties") or {}
                starts[e["Job ID"]] = (e["Submission Time"], len(e["Stage Infos"]), p.get("spark.job.description") or p.get("callSite.short") or "",
                                       p.get("spark.sql.execution.root.id") or p.get("spark.sql.execution.id"))
            elif e["Event"] == "SparkListenerJobEnd" and e["Job ID"] in starts:
                t, stages, desc, root = starts[e["Job ID"]]
                jobs.append({"id": e["Job ID"], "start_ms": t, "ms": e["Completion Time"] - t, "stages": stages, "what": desc, "root": root})
    for j in jobs:
        j["action"] = actions.get(j["root"] or "", j["what"])
    return sorted(jobs, key=lambda j: j["start_ms"])


def delta_versions(lake: Path) -> dict[str, int]:
    """The latest commit version of every Delta table under ``lake`` (the target tables and
    ``_cdclake/*``), by folder relative to ``lake``: read from the ``_delta_log`` listings."""
    out = {}
    for log in sorted(lake.glob("*/_delta_log")) + sorted(lake.glob("_cdclake/*/_delta_log")):
        versions = [int(f.name.split(".")[0]) for f in log.glob("*.json") if f.name.split(".")[0].isdigit()]
        if versions:
            out[str(log.parent.relative_to(lake))] = max(versions)
    return out


#: the per-batch budget of an ordinary batch (one keyed table, full images, no DDL, no open
#: transaction), issue 51 and README "Performance": Spark actions before the MERGEs, commits
#: per touched table, commits to everything else
BUDGET = {"actions before the MERGEs": 2, "commits per touched table": 1, "other commits": 2}


def budget(jobs: list[dict], before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What a batch spent against :data:`BUDGET`: ``jobs`` are the batch's, ``before``/``after``
    the Delta versions (:func:`delta_versions`) around it. An action is one query execution
    that reads (``collect``, ``localCheckpoint`` ...): the writes (``save``, with Delta's own
    ``Delta: ...`` jobs, a write's snapshot) are the commits, counted apart."""
    first_merge = min((j["start_ms"] for j in jobs if "MERGE" in j["what"] or "Writing modified data" in j["what"]), default=None)
    early = {j["root"] or f"job{j['id']}" for j in jobs
             if (first_merge is None or j["start_ms"] < first_merge) and not j["action"].startswith("save at")
             and not j["what"].startswith("Delta:")}
    commits = {t: after[t] - before.get(t, -1) for t in after if after[t] != before.get(t, -1)}
    tables = {t: n for t, n in commits.items() if not t.startswith("_cdclake")}
    return {"actions before the MERGEs": len(early), "commits per touched table": max(tables.values(), default=0),
            "other commits": sum(n for t, n in commits.items() if t.startswith("_cdclake")), "_commits": commits}


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
        before = delta_versions(Path(lake))
        t0 = time.time()
        s = ingest(spark, IngestConfig(args.format, [path], lake, keys, scd_type=args.scd_type))
        windows.append((Path(path).name, t0, time.time(), s.events, before, delta_versions(Path(lake))))
    spark.stop()
    jobs = read_jobs(logs)
    print(f"command: {' '.join(sys.argv)}")
    for name, t0, t1, events, before, after in windows:
        inside = [j for j in jobs if t0 * 1000 <= j["start_ms"] <= t1 * 1000]
        spent = budget(inside, before, after)
        print(f"{name}: {t1 - t0:6.2f} s, {events} events, {len(inside)} Spark jobs")
        print("  budget (issue 51): " + "; ".join(
            f"{k} {spent[k]} (<= {limit}{'' if spent[k] <= limit else ': OVER'})" for k, limit in BUDGET.items()))
        print("  commits: " + ", ".join(f"{t} {n}" for t, n in sorted(spent["_commits"].items())))
    name, t0, t1 = windows[-1][:3]
    print(f"\njobs of the last batch ({name}):")
    for j in jobs:
        if t0 * 1000 <= j["start_ms"] <= t1 * 1000:
            print(f"  +{j['start_ms'] - int(t0 * 1000):6d} ms {j['ms']:6d} ms  {j['stages']} stage(s)  {(j['what'] or j['action'])[:90]}")


if __name__ == "__main__":
    main()
