"""Remembered moves resolved on the driver (:mod:`cdclake.apply.moves`), without Spark: which
stretch of a key's history leads where. The Spark side (the range join, deletes of the batch
cutting a chain, copies landing in the new key's row) is checked end to end by the ``colpos``
scenario of tests/apply/test_semantics.py and Qlik's scrambled ingest."""

from __future__ import annotations

from decimal import Decimal

from cdclake.apply.moves import MOVE_HOPS, Entry, Reach, Segment, order_sort_key, resolve


def o(pos: int, sub: int = 1, line: int | None = None) -> tuple:
    """An order struct as collected from ``_cdclake/deletes`` (rank 1, position ``[pos]``)."""
    return (1, [Decimal(pos)], sub, None if line is None else "f", line, None, None)


def move(key: str, at: tuple, to: str) -> Entry:
    return Entry(key, at, order_sort_key(at), to)


def delete(key: str, at: tuple) -> Entry:
    return Entry(key, at, order_sort_key(at), None)


def test_order_sort_key_orders_as_spark_orders_the_struct():
    # position first (a shorter prefix and a null element first), then sub, then the record
    # (a null field first)
    got = sorted([o(5), o(3, sub=0), o(3), (1, [Decimal(3), Decimal(1)], 1, None, None, None, None),
                  (1, [Decimal(3), None], 1, None, None, None, None), (1, [Decimal(3)], 1, "f", 2, None, None),
                  (1, [Decimal(3)], 1, "f", 1, None, None), (0, [Decimal(9)], 1, None, None, None, None)], key=order_sort_key)
    assert got == [(0, [Decimal(9)], 1, None, None, None, None), o(3, sub=0), o(3), (1, [Decimal(3)], 1, "f", 1, None, None),
                   (1, [Decimal(3)], 1, "f", 2, None, None), (1, [Decimal(3), None], 1, None, None, None, None),
                   (1, [Decimal(3), Decimal(1)], 1, None, None, None, None), o(5)]


def test_a_single_move_and_the_stretches_around_it():
    # a: deleted at 2, moved to b at 5 (its own delete of a at the same order comes after the
    # move), deleted again at 9: only changes of a in (2, 5] follow, to b as of 5
    got = resolve([delete("a", o(2)), move("a", o(5, sub=0), "b"), delete("a", o(5, sub=0)), delete("a", o(9))])
    assert got == [Reach("a", o(2), o(5, sub=0), "b", o(5, sub=0), (Segment("b", o(5, sub=0), None),))]


def test_the_first_move_of_a_key_has_no_lower_bound():
    assert resolve([move("a", o(5), "b")]) == [Reach("a", None, o(5), "b", o(5), (Segment("b", o(5), None),))]


def test_a_chain_goes_to_its_last_key_and_a_delete_ends_it():
    # a -> b at 3, b -> c at 6: a's changes before 3 land in c as of 6; b's between 3 and 6 too
    chain = [move("a", o(3), "b"), move("b", o(6), "c")]
    assert resolve(chain) == [
        Reach("a", None, o(3), "c", o(6), (Segment("b", o(3), o(6)), Segment("c", o(6), None))),
        Reach("b", None, o(6), "c", o(6), (Segment("c", o(6), None),)),
    ]
    # c deleted after the move: the row the chain brought there is gone, nothing follows
    assert resolve([*chain, delete("c", o(8))]) == []
    # c deleted before the move came: c's delete is of an earlier row, the chain holds
    assert [r.to for r in resolve([*chain, delete("c", o(4))])] == ["c", "c"]
    # b deleted between the two moves: a's row ended in b; b's later row goes on to c
    assert resolve([*chain, delete("b", o(4))]) == [Reach("b", o(4), o(6), "c", o(6), (Segment("c", o(6), None),))]


def test_a_key_used_again_follows_only_the_move_after_the_change():
    # a -> b at 3, then (a re-created) a -> c at 7: a's changes before 3 go to b, after 3 to c
    got = resolve([move("a", o(3), "b"), move("a", o(7), "c")])
    assert [(r.lo, r.hi, r.to) for r in got] == [(None, o(3), "b"), (o(3), o(7), "c")]


def test_a_chain_longer_than_the_limit_goes_nowhere():
    keys = "abcdefg"
    chain = [move(keys[i], o(i + 1), keys[i + 1]) for i in range(MOVE_HOPS + 1)]
    got = {r.key: r.to for r in resolve(chain)}
    # from the first key: MOVE_HOPS + 1 moves, too many; from the second on: within the limit
    assert got == {keys[i]: keys[MOVE_HOPS + 1] for i in range(1, MOVE_HOPS + 1)}
    assert len(resolve(chain, hops=MOVE_HOPS + 1)) == MOVE_HOPS + 1


def test_a_cycle_ends_at_the_limit():
    # a -> b at 1, b -> a at 2, a -> b at 3: a's changes before 1 go a -> b -> a -> b
    got = {(r.key, int(r.hi[1][0])): r.to for r in resolve([move("a", o(1), "b"), move("b", o(2), "a"), move("a", o(3), "b")])}
    assert got == {("a", 1): "b", ("b", 2): "b", ("a", 3): "b"}
