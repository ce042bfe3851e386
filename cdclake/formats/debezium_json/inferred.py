"""Column DDL read from a table's successive column lists, for a connector that sends none.

Debezium's PostgreSQL connector writes no schema-change events (PostgreSQL's logical decoding
carries no DDL): after ``ALTER TABLE ... DROP COLUMN`` or ``RENAME COLUMN`` the table's changes
simply come with another Kafka Connect schema. Its fields are the table's columns in
PostgreSQL's order (``attnum``; a dropped column leaves it, an added one goes last, a renamed
one keeps its place). :func:`column_changes` reads the statements back from two successive
column lists; the decoder turns them into DDL events, so the applier drops and renames target
columns as it does for a DDL text (:mod:`cdclake.apply.ddl`). Added columns need no statement:
the applier adds a column the events declare.

Rules, for an old list ``old`` and the next one ``new`` (names and Spark types):

* a column of ``old`` not in ``new`` was renamed when a column of ``new`` not in ``old`` takes
  its place: the same column of both lists before it (or both first), the same number of
  such columns between, and the same Spark type; it was dropped otherwise;
* so ``[a, b, c] -> [a, x, c]`` renames ``b`` to ``x``, ``[a, b, c] -> [a, c, x]`` drops ``b``
  (and adds ``x``); the last column cannot be told apart: ``[a, b] -> [a, x]`` (``x`` of
  ``b``'s type) is read as a rename, though ``DROP b`` then ``ADD x`` with no change between
  them gives the same lists (README "Known limits").

:func:`column_ddl` finds a batch's statements, per table, from its signature rows (on the
driver). Pure Python: tested without Spark (``tests/formats/debezium_json/test_inferred.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdclake.model import qualified_name

from cdclake.sqltext import quote_ident

Column = tuple[str, str]  # (name, Spark type)


def _slots(cols: Sequence[Column], common: set[str]) -> list[tuple[str | None, int, Column]]:
    """Each column not in ``common`` with its place: the nearest earlier column in ``common``
    (None: none) and how many columns not in ``common`` lie between."""
    out, anchor, k = [], None, 0
    for c in cols:
        if c[0] in common:
            anchor, k = c[0], 0
        else:
            out.append((anchor, k, c))
            k += 1
    return out


def column_changes(old: Sequence[Column], new: Sequence[Column]) -> list[tuple[str, ...]]:
    """The column statements that turn ``old`` into ``new`` (see the module docstring):
    ``("rename", a, b)`` and ``("drop", c)``, in ``old``'s order; none when the names are the
    same (a type change or a new order needs no statement)."""
    old_names, new_names = {n for n, _ in old}, {n for n, _ in new}
    common = old_names & new_names
    gone = _slots(old, common)
    came = {(anchor, k): c for anchor, k, c in _slots(new, common)}
    out: list[tuple[str, ...]] = []
    for anchor, k, (name, typ) in gone:
        c = came.get((anchor, k))
        if c is not None and c[1] == typ:
            out.append(("rename", name, c[0]))
        else:
            out.append(("drop", name))
    return out


def ddl_text(table: str, change: tuple[str, ...]) -> str:
    """The MySQL-dialect statement of one :func:`column_changes` entry on ``table`` (its bare
    name): what :mod:`cdclake.apply.ddl` reads."""
    if change[0] == "rename":
        return f"ALTER TABLE {quote_ident(table)} RENAME COLUMN {quote_ident(change[1])} TO {quote_ident(change[2])}"
    return f"ALTER TABLE {quote_ident(table)} DROP COLUMN {quote_ident(change[1])}"


@dataclass(frozen=True)
class InferredDdl:
    """Column DDL statements the data shows: they happen just before the change at ``order``
    (a ``position.order``) of the records of schema signature ``sig_s``."""

    sig_s: int
    order: tuple
    statements: tuple[str, ...]


def column_ddl(rows, plans: dict, target_tables) -> list[InferredDdl]:
    """The column DDL that the batch's PostgreSQL changes show (Debezium's PostgreSQL connector
    writes no schema-change events; :mod:`cdclake.formats.debezium_json.inferred`): per table,
    its distinct column lists (one per Connect schema, from the signature rows ``rows`` with
    their ``first``/``last`` position order and ``ident``) in position order, each compared with
    the one before it, the first with the target's table (``target_tables``) when the target
    has applied nothing of the table at or after it. A table whose column lists' positions
    overlap (a change of an older schema after one of a newer) shows nothing certain: none."""
    by_table: dict[tuple, dict[int, list]] = {}
    for r in rows:
        p = plans[r["sig"]]
        if r["first"] is None or p.inferred or p.ids["s"] is None:
            continue
        ident = tuple(r["ident"])
        cols = tuple((c["name"], c["spark_type"]) for c in p.declared)
        d = by_table.setdefault(ident, {}).setdefault(p.ids["s"], [cols, r["first"], r["last"]])
        d[1], d[2] = min(d[1], r["first"], key=tuple), max(d[2], r["last"], key=tuple)
    out = []
    for (db, schema, table), decls in by_table.items():
        seq = sorted(([s, *d] for s, d in decls.items()), key=lambda x: tuple(x[2]))
        if any(tuple(a[3]) >= tuple(b[2]) for a, b in zip(seq, seq[1:])):
            continue
        known = target_tables(qualified_name(db, schema, table)) if target_tables and table else None
        prev = None
        if known is not None and known.last_order is not None and tuple(known.last_order) < tuple(seq[0][2]):
            prev = known.columns
        for sig_s, cols, first, _last in seq:
            if prev is not None:
                changes = column_changes(prev, cols)
                if changes:
                    out.append(InferredDdl(sig_s, tuple(first), tuple(ddl_text(table, c) for c in changes)))
            prev = cols
    return out
