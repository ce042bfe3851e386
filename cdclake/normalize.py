"""Normalisation between decoding and applying: what is true of events whatever their format.

Update halves: some producers write one update as two records, a before half (before image
only) and an after half (after image only), with the same position: DataWorks
``UPDATE_BEFOR`` + ``UPDATE_AFTER`` (same ``sequenceId``), DataHub TUPLE ``U`` rows (same
``_sequence_id_``). Decoders emit each half as an ``u`` event with one image;
:func:`pair_update_halves` makes each pair one update. An after half whose before half never
arrived stays an update with the after image (an upsert); a before half alone carries nothing
to apply and is dropped (it stays in the changelog).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.model import EVENT_COLUMNS


def pair_update_halves(events: DataFrame) -> DataFrame:
    """Return ``events`` (EVENT_SCHEMA) with update halves of one table and position paired.

    Only the halves are shuffled; every other event passes through untouched.
    """
    one_sided = F.col("before").isNull() != F.col("after").isNull()
    is_half = (F.col("kind") == "data") & (F.col("op") == "u") & one_sided & F.col("present").isNull()
    whole = events.where(~is_half | is_half.isNull())
    halves = events.where(is_half)
    ident = ["format", "database", "schema", "table", "position"]
    paired = (
        halves.groupBy(*[F.col(c) for c in ident])
        .agg(
            F.max_by(F.struct(*[c for c in EVENT_COLUMNS if c not in ident]), F.col("after").isNotNull()).alias("e"),
            F.first("before", ignorenulls=True).alias("_before"),
        )
        .where(F.col("e.after").isNotNull())
        .select(*ident, "e.*", "_before")
        .withColumn("before", F.col("_before"))
        .select(*EVENT_COLUMNS)
    )
    return whole.unionByName(paired)
