"""Remembered moves resolved on the driver: where a late change of a key that a partial update
moved goes (:func:`cdclake.apply.delta_table.follow_moves`).

A partial update that changes its row's key (a *move*, Qlik and SharePlex partial images) is
remembered in ``_cdclake/deletes`` with op ``m``: the old key, the new key (``to``) and the
move's order. A change of the old key older than the move, arriving in a later batch, belongs
to the row the move took away; it follows the move (and the moves after it, a *chain*, up to
:data:`MOVE_HOPS`) to the key the row has now. The remembered moves and the deletes of the keys
they touch are few next to the batch; resolving every chain once on the driver turns the
per-change lookup into one range join of the batch's changes with a small table of
:class:`Reach` rows (no window, no join per hop).

Pure Python: no Spark here. Orders are the deletes table's order structs as collected
(:data:`cdclake.apply.delta_table._ORDER_OF_DELETE`: ``rank``, ``pos``, ``sub``, ``file``,
``line``, ``part``, ``off``), kept opaque and handed back to Spark; :func:`order_sort_key`
orders them as Spark orders the struct.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from cdclake.apply.plan import order_key, record_key

#: how many remembered moves one change of a batch follows (a chain of key changes: a -> b in
#: one batch, b -> c in a later one); the rest of a longer chain is not followed
MOVE_HOPS = 3


def order_sort_key(o: Any) -> tuple:
    """A sort key of an order struct as collected (a Row or tuple ``(rank, pos, sub, file,
    line, part, off)``, ``pos`` a list of Decimal) that orders as Spark orders the struct (a
    null field first)."""
    rank, pos, sub, file, line, part, off = o
    return ((0,) if rank is None else (1, rank), order_key(pos), (0,) if sub is None else (1, sub), record_key((file, line, part, off)))


@dataclass(frozen=True)
class Entry:
    """A remembered delete (``to`` None) or move of ``key`` (key JSON as written with the
    table's key types now) at ``order`` (an order struct as collected; ``sort`` its
    :func:`order_sort_key`); a move's ``to`` is the new key's JSON."""

    key: str
    order: Any
    sort: tuple
    to: str | None = None


@dataclass(frozen=True)
class Segment:
    """A stretch of a chain that a delete of the batch itself may cut: a delete of ``key`` in
    the batch with an order after ``lo`` (exclusive) and before ``hi`` (exclusive; None: no
    bound) ends the row between two moves, and the change does not follow. The first stretch
    of a chain, from the change itself to the first move, is not here: its lower bound is the
    change's own order (inclusive), which only Spark knows."""

    key: str
    lo: Any
    hi: Any | None


@dataclass(frozen=True)
class Reach:
    """Where the changes of ``key`` with an order after ``lo`` (exclusive; None: no bound) and
    not after ``hi`` (the first move's order, inclusive: the move wins a tie with a delete of
    the same order) go: to the key ``to`` (JSON), as of ``via``, the order of the last move of
    the chain; unless a delete of the batch cuts the chain (the stretch from the change to
    ``hi`` of ``key``, then each of ``segments``)."""

    key: str
    lo: Any | None
    hi: Any
    to: str
    via: Any
    segments: tuple[Segment, ...]


def resolve(entries: list[Entry], hops: int = MOVE_HOPS) -> list[Reach]:
    """The reaches of a table's remembered ``entries`` (deletes and moves, any order).

    For each key, its entries sorted by order (a move before a delete of the same order) cut
    the key's history into stretches: a change in the stretch that a move ends follows that
    move. From a move of ``a`` to ``b`` at order ``o``, ``b``'s first entry after ``o``
    decides: none, the change lands in ``b`` as of ``o``; a delete, the row ``b`` got was
    deleted and the change goes nowhere; another move, the chain goes on, at most ``hops``
    moves in all (a longer chain goes nowhere). Stretches ended by a delete, or whose chain
    goes nowhere, give no :class:`Reach`."""
    by_key: dict[str, list[Entry]] = defaultdict(list)
    for e in sorted(entries, key=lambda e: (e.sort, e.to is None)):
        by_key[e.key].append(e)
    sorts = {k: [e.sort for e in es] for k, es in by_key.items()}

    def after(key: str, sort: tuple) -> Entry | None:
        es = by_key.get(key)
        if not es:
            return None
        i = bisect_right(sorts[key], sort)
        return es[i] if i < len(es) else None

    def follow(move: Entry, depth: int) -> tuple[str, Any, list[Segment]] | None:
        nxt = after(move.to, move.sort)
        seg = Segment(move.to, move.order, None if nxt is None else nxt.order)
        if nxt is None:
            return move.to, move.order, [seg]
        if nxt.to is None or depth >= hops:
            return None
        rest = follow(nxt, depth + 1)
        return None if rest is None else (rest[0], rest[1], [seg, *rest[2]])

    out = []
    for key, es in by_key.items():
        prev = None
        for e in es:
            if e.to is not None:
                got = follow(e, 1)
                if got is not None:
                    out.append(Reach(key, None if prev is None else prev.order, e.order, got[0], got[1], tuple(got[2])))
            prev = e
    return out
