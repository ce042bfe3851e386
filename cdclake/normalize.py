"""Normalisation between decoding and applying: what is true of events whatever their format.

Update halves: some producers write one update as two records, a before half (before image
only) and an after half (after image only), with the same position: DataWorks
``UPDATE_BEFOR`` + ``UPDATE_AFTER`` (same ``sequenceId``), DataHub TUPLE ``U`` rows (same
``_sequence_id_``). Decoders emit each half as an ``u`` event with one image;
:func:`pair_update_halves` makes each pair one update. An after half whose before half never
arrived stays an update with the after image (an upsert). A before half alone is dropped
here, or kept as it is (``keep_lone_before``): the applier turns it into a delete of its row
ordered before its own position's changes, so that an update whose halves reach it in two
batches still ends as one update (:func:`cdclake.apply.delta_table._fold`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.model import EVENT_COLUMNS


def pair_update_halves(events: DataFrame, keep_lone_before: bool = False) -> DataFrame:
    """Return ``events`` (EVENT_SCHEMA) with update halves of one table and position paired:
    one ``u`` event with the before half's before image and the after half's after image.

    Only the halves are shuffled; every other event passes through untouched. A lone after
    half stays (an upsert); a lone before half is dropped, or kept when ``keep_lone_before``
    (a ``u`` event with only its before image).
    """
    one_sided = F.col("before").isNull() != F.col("after").isNull()
    is_half = (F.col("kind") == "data") & (F.col("op") == "u") & one_sided & F.col("present").isNull()
    whole = events.where(~is_half | is_half.isNull())
    halves = events.where(is_half)
    ident = ["format", "database", "schema", "table", "position"]
    paired = halves.groupBy(*[F.col(c) for c in ident]).agg(
        F.max_by(F.struct(*[c for c in EVENT_COLUMNS if c not in ident]), F.col("after").isNotNull()).alias("e"),
        F.first("before", ignorenulls=True).alias("_before"),
    )
    if not keep_lone_before:
        paired = paired.where(F.col("e.after").isNotNull())
    paired = paired.select(*ident, "e.*", "_before").withColumn("before", F.col("_before")).select(*EVENT_COLUMNS)
    return whole.unionByName(paired)
