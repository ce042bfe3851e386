"""``cdclake status --target DIR``: what a target holds and how far behind its source it is, read
from the target's own ``_cdclake`` tables (a live target too: Delta readers see the last commit).

Per table: rows (as the applier counted them), its Delta version after the last batch (every
table read as of its ``delta_version`` is the state one batch left, across tables), the last applied position and its event time
(ms since the epoch), the event-time lag at that batch (``lag_ms``: the batch's wall clock minus
the newest event time it applied), when it was last applied, and per source (Kafka
``topic:partition``, or the input) the newest heartbeat. Rejects: counts by error code.
Transactions: how many open transactions the gate holds back (:mod:`cdclake.apply.transactions`),
their events, and since when.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdclake import targets
from cdclake.apply import audit, transactions
from cdclake.apply.plan import order_key
from cdclake.errors import CdclakeError


def target_status(spark: SparkSession, target: str) -> dict:
    """The status of ``target`` as plain data (JSON-ready)::

        {"target": str, "tables": [{"table", "rows", "last_position", "last_event_time_ms",
          "lag_ms", "updated_at_ms", "delta_version", "sources"}], "heartbeats": [{"source", "last_heartbeat_ms"}],
         "rejects": {code: count}, "rejected": int, "held_transactions": int, "held_events": int,
         "held_since_ms": int or None, "timed_out_transactions": int (given up by the timeout, all
         batches), "held": [one dict per held transaction: see
         :func:`cdclake.apply.transactions.held_transactions`]}

    Raises:
        CdclakeError(INPUT_NOT_FOUND): ``target`` is not a folder that cdclake wrote.
    """
    from delta.tables import DeltaTable

    root = targets.resolve(target)
    if not targets.TargetFiles(root, spark).exists(audit.LAYOUT_FILE):
        raise CdclakeError("INPUT_NOT_FOUND", f"{target} is not a cdclake target (no {audit.LAYOUT_FILE})")
    audit.check_layout(root, spark, writer=False)
    read = audit.read_progress(spark, root)
    progress, held = read.rows, read.held()
    tables: dict[str, dict] = {}
    heartbeats: dict[str, int] = {}
    for r in progress:
        if r.get("last_heartbeat_ms") is not None and r.get("source"):
            heartbeats[r["source"]] = max(heartbeats.get(r["source"], 0), r["last_heartbeat_ms"])
        name = r.get("table")
        if not name:
            continue
        t = tables.setdefault(name, {"table": name, "rows": None, "last_position": None, "last_event_time_ms": None,
                                     "lag_ms": None, "updated_at_ms": None, "delta_version": None, "sources": [],
                                     "_order": None})
        if r.get("rows") is not None:
            t["rows"] = r["rows"]
        if r.get("source") is None and r.get("delta_version") is not None:
            t["delta_version"] = r["delta_version"]
        if r.get("source"):
            t["sources"].append(r["source"])
        order = r.get("last_position")
        if order is not None and (t["_order"] is None or order_key(order) > order_key(t["_order"])):
            t["_order"], t["last_position"] = order, r.get("last_position_text")
        for f, pick in (("last_event_time_ms", max), ("updated_at_ms", max)):
            if r.get(f) is not None:
                t[f] = r[f] if t[f] is None else pick(t[f], r[f])
        if r.get("lag_ms") is not None and (t["updated_at_ms"] is None or r.get("updated_at_ms") == t["updated_at_ms"]):
            t["lag_ms"] = r["lag_ms"]
    rejects: dict[str, int] = {}
    rejects_path = targets.join(root, audit.REJECTS)
    if DeltaTable.isDeltaTable(spark, rejects_path):
        for row in spark.read.format("delta").load(rejects_path).groupBy("error_code").agg(F.count(F.lit(1)).alias("n")).collect():
            rejects[row["error_code"]] = int(row["n"])
    out_tables = []
    for name in sorted(tables):
        t = tables[name]
        t.pop("_order")
        t["sources"] = sorted(set(t["sources"]))
        out_tables.append(t)
    return {
        "target": root,
        "tables": out_tables,
        "heartbeats": [{"source": s, "last_heartbeat_ms": v} for s, v in sorted(heartbeats.items())],
        "rejects": dict(sorted(rejects.items())),
        "rejected": sum(rejects.values()),
        "held_transactions": held["held_transactions"],
        "held_events": held["held_events"],
        "held_since_ms": held["held_since_ms"],
        "timed_out_transactions": held["timed_out_transactions"],
        "held": ([] if not held["held_events"] else
                 transactions.held_transactions(transactions.read_held(spark, root, held["held_version"]))),
    }
