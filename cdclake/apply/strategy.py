"""One table's write in a batch: the strategy its kind of table takes.

* keyed current rows (SCD type 1, a table with a key): :func:`cdclake.apply.delta_table.write_keyed`,
  the batch's last change per key in one MERGE;
* keyless current rows (a multiset of rows): :func:`cdclake.apply.keyless.write_keyless`;
* history (SCD type 2, keyed or keyless): :func:`cdclake.apply.history.write_history`.

Each strategy owns its MERGE; they share the preparation (:func:`cdclake.apply.delta_table.prepare_table`:
schema evolution, a truncate) and the order of changes. This module only chooses; it sits above
the three so that none of them imports another's caller.
"""

from __future__ import annotations

from typing import Callable

from pyspark.sql import DataFrame, SparkSession

from cdclake.apply.delta_table import Prepared, TableApply, count_rows, write_keyed
from cdclake.apply.history import history_deletes, truncates, write_history
from cdclake.apply.keyless import write_keyless


def _nothing(_deletes: DataFrame | None) -> None:
    """The default ``remember`` of :func:`write_table`: the caller reads :attr:`TableApply.deletes`."""


def write_table(spark: SparkSession, events: DataFrame, prep: Prepared, deletes_path: str,
                remember: Callable[[DataFrame | None], None] = _nothing) -> TableApply:
    """The second step of a table's batch (after :func:`cdclake.apply.delta_table.prepare_table`):
    the batch's changes of the table written by its strategy, one commit (none for a table the
    batch does not touch).

    ``events``: EVENT_SCHEMA rows of the whole batch (kept by the caller: :mod:`cdclake.frames`;
    each strategy filters its table's ``data`` events). ``deletes_path``: the deletes table
    (``_cdclake/deletes``), read only when the batch holds a change older than what it
    remembers. Returns the Delta operation metrics as an
    :class:`~cdclake.apply.delta_table.ApplyResult` inside a :class:`TableApply`; with the
    batch identity in the session, a table that committed it already is skipped by Delta
    (``ApplyResult.replayed``). ``remember``: called with the table's ``_cdclake/deletes`` rows
    (:attr:`TableApply.deletes`, None: nothing) as soon as they are known, before the MERGE of
    a keyed or history table (:class:`cdclake.apply.audit.DeletesAppend`); not called for a
    table that remembers nothing here (keyless tables remember before their MERGE themselves).
    """
    out, plan = prep.out, prep.plan
    if prep.history:
        if not out.touched:  # remember the truncate: a late change older than it ends there
            out.deletes = history_deletes(spark, events, plan)
            remember(out.deletes)
            return out
        # (not a DDL-only batch, unless it drops or renames a column of a table without a key,
        # whose images are counted again: cdclake.apply.keyless)
        if plan.has_changes or truncates(plan) or (not plan.key and prep.exists and plan.drops_or_renames_columns):
            write_history(spark, events, prep, deletes_path, remember)
        count_rows(spark, prep)
        return out
    if not out.touched:
        return out
    if not plan.key and (plan.has_changes or prep.exists and plan.drops_or_renames_columns):  # a multiset of rows
        write_keyless(spark, events, prep, deletes_path)
        count_rows(spark, prep)
        return out
    return write_keyed(spark, events, prep, deletes_path, remember)
