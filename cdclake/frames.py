"""A batch's intermediate DataFrames kept once, with a plan that is a single leaf.

Every DataFrame operation (``select``, ``where``, ``join``, ``unionByName``, the plans Delta's
MERGE builds over its source) makes Spark analyse the whole logical plan below it again, and
Spark 4.0's ``DeduplicateRelations`` walks every expression of it each time. A decoded batch's
plan holds the decoder's expressions (a ``CASE WHEN`` per column and signature, ``from_json``
schemas), so each later step of the batch paid for them again, and ``persist`` does not help:
a persisted DataFrame keeps its whole plan, and every query is also compared with every cached
plan (``CacheManager``). Measured (session 43, Java Flight Recorder over
``tests/formats/qlik_json/test_roundtrip.py::test_ingest_scrambled``): 42 % of the JVM's CPU in
the analyser, 21 % in ``DeduplicateRelations`` alone; keeping the decoded batch with
:func:`keep` instead of ``persist`` took that test from 102-111 s to 79-86 s, and keeping
the applier's frames too to 59 s.

:func:`keep` is Spark's local checkpoint (``DataFrame.localCheckpoint``, whose documented use is
to truncate a plan that grows): the rows are computed once, at the first action on the frame
(or on one built from it), and kept in Spark's block store (memory, then local disk), and the
frame's plan is one ``LogicalRDD`` leaf. Unlike a persisted frame, a kept one cannot be computed
again: when an executor that holds some of its blocks is lost (a cluster), the batch fails and
is run again from its source (the stream's checkpoint; exactly once, see :mod:`cdclake.stream`).

:func:`release` frees a frame's blocks (a kept frame's, or a persisted one's cache entry); a
frame built from a released kept frame must not be used after it.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame


def keep(df: DataFrame) -> DataFrame:
    """``df``'s rows, kept (memory, then local disk) from the first action that computes them,
    as a DataFrame with the same columns whose plan is one leaf. Release with :func:`release`."""
    return df.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)


def release(df: DataFrame) -> None:
    """Free what :func:`keep` (or ``persist``) holds for ``df``; a frame that holds nothing is
    left as it is."""
    plan = df._jdf.queryExecution().logical()
    if plan.nodeName() == "LogicalRDD":
        plan.rdd().unpersist(False)
    else:
        df.unpersist()
