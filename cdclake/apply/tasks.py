"""Running one batch's writes: where each table lives, the thread pool the writes share, and
what a failed write becomes (one table's failure never stops the others; another writer's
commit stops the batch).

Used by :mod:`cdclake.apply.batch` and by the modules it calls (renames, keyless tables), so it
sits below them and imports nothing of ``cdclake.apply``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession

from cdclake import routing, targets
from cdclake.errors import CdclakeError, RejectCode


def table_path(target: str, name: str) -> str:
    """Where the Delta table of source table ``name`` (qualified, dots kept) lives: always one
    folder directly under ``target``, named by :func:`cdclake.targets.table_folder` after the
    target's naming (:func:`cdclake.routing.naming_of`; by default the qualified name itself).
    Names from messages are never trusted as paths."""
    naming = routing.naming_of(targets.resolve(target))
    return targets.join(target, targets.table_folder(naming.target_name(name)))


def is_history_table(spark: SparkSession, path: str) -> bool:
    """The Delta table at ``path`` exists and keeps its rows' history (SCD type 2: it has
    ``_cdc_is_current``). Reads the table's log (no Spark job but the snapshot's)."""
    return DeltaTable.isDeltaTable(spark, path) and "_cdc_is_current" in spark.read.format("delta").load(path).columns


def threads() -> int:
    """How many writes of a batch run at once (``CDCLAKE_APPLY_THREADS``, default 4)."""
    return max(1, int(os.environ.get("CDCLAKE_APPLY_THREADS", "4")))


def run_all(tasks: list, workers: int | None = None) -> list:
    """Run the callables ``tasks`` in a thread pool; returns their results in order. Every task
    runs to its end even when another fails; then the first failure is raised."""
    if not tasks:
        return []
    if len(tasks) == 1:
        return [tasks[0]()]
    with ThreadPoolExecutor(max_workers=min(workers or threads(), len(tasks)), thread_name_prefix="cdclake-apply") as pool:
        futures = [pool.submit(t) for t in tasks]
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
    return [f.result() for f in futures]


class TableFailed(Exception):
    """One table's part of a batch failed or was refused: its name, the first line of the
    cause, and the reject code its events get (``TABLE_FAILED``, ``TOO_MANY_COLUMNS``)."""

    def __init__(self, table: str, reason: str, code: str = RejectCode.TABLE_FAILED.value):
        super().__init__(f"{table}: {reason}")
        self.table = table
        self.reason = reason
        self.code = code


def error_line(e: BaseException) -> str:
    """The first line of an exception's message (a JVM error's class and message)."""
    java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
    text = java.toString() if java is not None else f"{type(e).__name__}: {e}"
    return text.strip().splitlines()[0][:500] if text.strip() else type(e).__name__


def concurrent_conflict(e: BaseException) -> bool:
    """A Delta optimistic-concurrency conflict: another writer committed first. Delta's
    ``ConcurrentAppendException``, ``ConcurrentDeleteReadException``, ``MetadataChangedException``,
    ``ProtocolChangedException`` (two writers creating one table) ... all extend
    ``java.util.ConcurrentModificationException``; their error classes start ``DELTA_CONCURRENT``,
    ``DELTA_METADATA_CHANGED``, ``DELTA_PROTOCOL_CHANGED``."""
    java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)  # Py4JJavaError / CapturedException
    depth = 0
    while java is not None and depth < 5:  # the exception and its causes
        cls = java.getClass()
        while cls is not None:
            if cls.getName() == "java.util.ConcurrentModificationException":
                return True
            cls = cls.getSuperclass()
        java, depth = java.getCause(), depth + 1
    text = str(e)[:2000]
    return any(code in text for code in ("DELTA_CONCURRENT", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED"))


def guarded(name: str, task):
    """Run one table's ``task``; an error raised by Spark, Delta or the file system becomes
    :class:`TableFailed` (returned, not raised) so one bad table never stops the others. A Delta concurrency conflict (another
    writer committed to the table first) is not the table's fault: it is raised as
    ``CdclakeError(CONCURRENT_WRITE)``, and the batch is applied again by the next run with the
    same identity (nothing twice)."""
    try:
        return task()
    except (Py4JJavaError, CapturedException, OSError) as e:  # Spark, Delta, the file system
        # (a Python error of cdclake's own code is not caught: it is a bug, not the table's)
        if concurrent_conflict(e):
            raise CdclakeError(
                "CONCURRENT_WRITE", f"another writer committed to table {name} first; run the ingest again ({error_line(e)})"
            ) from None
        return TableFailed(name, error_line(e))
