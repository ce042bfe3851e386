"""SCD type 2 (``--scd-type 2``, cdclake/apply/history.py) on canonical events built by hand:
what the history property of test_properties.py does not look at: event times, the op that
ended a version, partial images recomputed when a change arrives late between them, a late
change older than a remembered truncate, re-delivery counts, delta-rs, and a table applied with
the other SCD type."""

from __future__ import annotations

import datetime as dt

import pytest

from cdclake.errors import CdclakeError
from cdclake.model import EVENT_SCHEMA
from cdclake.pipeline import apply_events
from tests.apply.test_semantics import COLS, ev, row
from tests.readers import assert_delta_rs_reads_like_spark, lake_rows


def apply(spark, target, events, scd_type=2):
    df = spark.createDataFrame(events, EVENT_SCHEMA)
    return {r.table: r for r in apply_events(spark, df, str(target), None, scd_type=scd_type)}


def history(spark, target, name):
    """(id, name, amount, start, end, end op, valid from s, valid to s, current) per version,
    read by delta-rs (tests/readers.py ``lake_rows``)."""

    def s(ts):
        return None if ts is None else int((ts - dt.datetime(1970, 1, 1)).total_seconds())

    return sorted(
        (r["id"], r["name"], None if r["amount"] is None else str(r["amount"]), r["_cdc_position_text"],
         r["_cdc_end"]["position_text"] if r["_cdc_end"] else None, r["_cdc_end"]["op"] if r["_cdc_end"] else None,
         s(r["_cdc_valid_from"]), s(r["_cdc_valid_to"]), r["_cdc_is_current"])
        for r in lake_rows(spark, f"{target}/{name}")
    )


def test_history_tables(spark, tmp_path):
    # table t: full images; late changes and a truncate in batch 2, a change older than that
    # truncate in batch 4 (the truncate is remembered in _cdclake/deletes)
    t1 = [ev("c", 1, row(1, "a")), ev("u", 5, row(1, "e"), row(1, "a")), ev("c", 2, row(2, "x")), ev("d", 6, before=row(2, "x"))]
    t2 = [ev("u", 3, row(1, "c"), row(1, "a")), ev("u", 4, row(2, "y"), row(2, "x")), ev("c", 3, row(3, "q"))]
    t3 = [ev("t", 7), ev("c", 8, row(4, "n"))]
    t4 = [ev("c", 2, row(5, "late"))]
    # table p: partial images (present): a partial update arrives late between a full image and
    # a later partial update, which then takes its name from it
    p1 = [ev("c", 1, row(1, "a", "1.00"), table="p"), ev("u", 4, {"id": "1", "amount": "4.00"}, table="p", present=["id", "amount"])]
    p2 = [ev("u", 2, {"id": "1", "name": "b"}, table="p", present=["id", "name"])]
    # table k: a key change (the old key's version ends, the new key's begins)
    k1 = [ev("c", 1, row(1, "a"), table="k"), ev("u", 2, row(9, "a"), row(1, "a"), table="k")]
    # table m: a partial update that changes the key (Qlik) in a later batch: the columns it
    # does not carry come from the old key's version (delta_table.fill_moves)
    m1 = [ev("c", 1, row(1, "a", "1.00"), table="m")]
    m2 = [ev("u", 2, {"id": "9", "name": "b"}, {"id": "1", "name": "a"}, table="m", present=["id", "name"])]
    # table mv: partial updates move key 1 to 9 at 4, then 9 to 20 at 6 (a chain, batch 1),
    # before 1's insert and its partial update at 3 (batch 2), and its partial update at 2
    # (batch 4), older than the stored one at 3, arrive: each late batch puts them into 1's
    # history and recomputes 9's and then 20's versions from the moves on (remembered in
    # _cdclake/deletes), the columns a move did not carry taken from the old key as of just
    # before it, as an in-order replay gives them (the stored version at 3 carried its amount
    # from 1: the late change at 2 sets it)
    mv1 = [ev("u", 4, {"id": "9", "name": "b"}, {"id": "1", "name": "a3"}, table="mv", present=["id", "name"]),
           ev("u", 5, {"id": "9", "name": "c"}, table="mv", present=["id", "name"]),
           ev("u", 6, {"id": "20"}, {"id": "9"}, table="mv", present=["id"])]
    mv2 = [ev("c", 1, row(1, "a", "1.00"), table="mv"), ev("u", 3, {"id": "1", "name": "a3"}, table="mv", present=["id", "name"])]
    mv4 = [ev("u", 2, {"id": "1", "amount": "2.00"}, table="mv", present=["id", "amount"])]
    # table n: a move after a truncate of the same batch takes nothing from the truncated row
    n1 = [ev("c", 1, row(1, "a", "1.00"), table="n")]
    n2 = [ev("t", 2, table="n"), ev("u", 3, {"id": "9", "name": "b"}, {"id": "1", "name": "a"}, table="n", present=["id", "name"])]
    # table o: equal positions keep arrival order for truncates (the record after the position):
    # a truncate at a version's own position, arriving later, ends it there; a change of a
    # truncate's position ends there when its record is older, begins there when it is newer
    o1 = [ev("c", 7, row(1, "a"), table="o"), ev("t", 9, table="o"), ev("c", 9, row(3, "after"), table="o")]
    o2 = [ev("t", 7, table="o"), ev("c", 9, row(5, "older record"), table="o", line=1)]
    # table s (Debezium, --snapshot-removes-missing): a completed snapshot at 5 ends every
    # version older than it, as a truncate there; the snapshot's rows begin versions at 5
    def dbz(*a, **kw):
        return dict(ev(*a, table="s", **kw), format="debezium-json")

    s1 = [dbz("c", 1, row(1, "a")), dbz("c", 2, row(2, "b"))]
    snap1 = dbz("r", 5, row(1, "snap1"))  # (a lower line than the snapshot's last row)
    last = dbz("r", 5, row(3, "snap3"))
    s2 = [snap1, last,
          dict(dbz(None, 5, kind="snapshot_end", key=None, columns=None), source_record=last["source_record"])]

    # table r, renamed to rn at 10 (cdclake.apply.renames): r's versions end there (op t), rn's
    # begin there with the rows r held; rn's own update at 11, applied first in the same batch,
    # ends the moved version of key 2 (a move is put into the history at its place)
    r1 = [ev("c", 1, row(1, "a"), table="r"), ev("c", 2, row(2, "b"), table="r"), ev("u", 3, row(1, "a3"), row(1, "a"), table="r"),
          ev("c", 4, row(3, "c"), table="r"), ev("u", 8, row(2, "b8"), row(2, "b"), table="r")]
    r2 = [dict(ev(None, 10, kind="ddl", table="r"), ddl="RENAME TABLE db.r TO db.rn"), ev("u", 11, row(2, "b11"), row(2, "b8"), table="rn")]
    # changes of r older than the rename, in batch 4: each goes into r's history at its place
    # (ended by the rename) and to rn, where per key only the newest change moved in counts:
    # key 1's update at 6 replaces the moved version (deleted), key 2's at 5 is older than
    # the moved one (from 8) and stays out, key 3's delete at 7 removes its moved version,
    # key 5's insert at 9 begins a version; in rn, those versions begin at the rename (its
    # position text and event time), as the moved ones do
    r4 = [ev("u", 6, row(1, "a6"), row(1, "a3"), table="r"), ev("u", 5, row(2, "b5"), row(2, "b"), table="r"),
          ev("d", 7, before=row(3, "c"), table="r"), ev("c", 9, row(5, "late"), table="r")]

    # table c, without a key: identical rows are copies, each with its own history; a delete or
    # an update's before image ends the earliest current copy's version (first in, first out),
    # so the late insert at 0 (batch 2) takes the delete at 3, which batch 1 gave the copy of 1
    same = row(7, "same")
    c1 = [ev(*a, table="c", key=None) for a in (("c", 1, same), ("c", 2, same), ("d", 3, None, same), ("u", 4, row(8, "other"), same))]
    # batch 2 also brings the insert at 1 again from another record (another file or offset):
    # the same atom (image, sign, point), counted once, as a table of current rows counts it
    c2 = [ev("c", 0, same, table="c", key=None), ev("c", 1, same, table="c", key=None, line=10**6)]
    # table d, without a key: after a snapshot read that ranks below the stream (format test:
    # like Canal's INIT) the image keeps one current version, as a table of current rows keeps
    # one row (keyless.py): each point ends the version before it
    d1 = [ev(op, p, row(9, "dup"), table="d", key=None) for op, p in (("r", 1), ("c", 2), ("c", 3))]
    # and in a later batch (4) too, whose oldest change is newer than the read's version: the
    # read is read as a cap point (history.CAP; until session 38 the insert at 5 was a second copy)
    d4 = [ev("c", 5, row(9, "dup"), table="d", key=None)]
    # table dt: the same read and insert, then a truncate at 3 (batch 2): the cap ends there, so
    # the two inserts of batch 4 are two copies
    dt1 = [ev(op, p, row(9, "dup"), table="dt", key=None) for op, p in (("r", 1), ("c", 2))]
    dt2 = [ev("t", 3, table="dt", key=None)]
    dt4 = [ev("c", p, row(9, "dup"), table="dt", key=None) for p in (5, 6)]

    # tables kr (its key column id renamed to kid at 5) and wr (no key; name renamed to label
    # at 5): a delete at 3 arrives a batch before the older insert at 1 it ends, and the
    # insert's batch holds the rename: the delete, remembered with the names of its batch, is
    # read with the names now (delta_table.remembered_struct_sql) and ends the late version
    def renamed(old, new):
        return [dict(c, name=new) if c["name"] == old else c for c in COLS]

    def rename(table, old, new, key=("id",)):
        return dict(ev(None, 5, kind="ddl", table=table, columns=None, key=key), ddl=f"ALTER TABLE db.{table} RENAME COLUMN {old} TO {new}")

    kw1 = [ev("c", 2, row(2, "o"), table="kr"), ev("d", 3, before=row(1, "x"), table="kr"),
           ev("c", 2, row(2, "o"), table="wr", key=None), ev("d", 3, before=row(1, "x"), table="wr", key=None)]
    kw2 = [rename("kr", "id", "kid"), ev("c", 1, row(1, "x"), table="kr"),
           rename("wr", "name", "label", key=None), ev("c", 1, row(1, "x"), table="wr", key=None),
           ev("c", 6, {"kid": "3", "name": "n"}, table="kr", key=("kid",), columns=renamed("id", "kid")),
           ev("c", 6, {"id": "3", "label": "n"}, table="wr", key=None, columns=renamed("name", "label"))]
    # table vd (no key): the update at 10 was written after DROP COLUMN amount at 5 (its before
    # image has no amount) and arrives a batch before it: the drop's batch counts every image
    # of the table again with the columns now, so the update ends the insert's version
    kw1 += [ev("c", 1, row(1, "x", "1.00"), table="vd", key=None),
            ev("u", 10, {"id": "1", "name": "z"}, {"id": "1", "name": "x"}, table="vd", key=None, columns=COLS[:2])]
    kw2 += [dict(ev(None, 5, kind="ddl", table="vd", columns=None, key=None), ddl="ALTER TABLE db.vd DROP COLUMN amount")]

    # tables e and g (no key), renamed to en and gn at 10 by a statement that arrives a batch
    # after changes of tables created again under their names: e's insert of key 1 at 12 and
    # truncate at 13 (a truncate after the point once made the rename look applied, and it was
    # skipped), g's insert at 12 and delete at 13 of an image the old g held twice (the delete
    # took an old copy). The renamed tables get every version the old ones held at 10, and the
    # new tables' versions stay (renames.step_done, renames._apply_again)
    eg1 = [ev("c", 1, row(1, "a"), table="e"), ev("c", 2, row(2, "b"), table="e"), ev("c", 12, row(1, "new"), table="e"),
           ev("t", 13, table="e"), ev("c", 14, row(3, "c"), table="e"),
           *(ev(op, p, **{"after" if op == "c" else "before": same}, table="g", key=None) for op, p in (("c", 1), ("c", 2), ("c", 12), ("d", 13)))]
    eg2 = [dict(ev(None, 10, kind="ddl", table="e"), ddl="RENAME TABLE db.e TO db.en, db.g TO db.gn")]

    # table cr (no key), renamed to crn at 10: its delete of x at 3 comes before x's insert at 2,
    # which arrives after the rename: in cr the late insert's version ends at the delete; in crn
    # the moved insert (at P + 2) meets the carried delete (at P + 3): a copy that began and
    # ended before the rename, no version of crn (history._versions' regions; until session 38
    # crn kept it)
    x, y = row(2, "x"), row(1, "y")
    cr1 = [ev("c", 1, y, table="cr", key=None), ev("d", 3, before=x, table="cr", key=None)]
    cr2 = [dict(ev(None, 10, kind="ddl", table="cr", key=None), ddl="RENAME TABLE db.cr TO db.crn")]
    cr4 = [ev("c", 2, x, table="cr", key=None)]
    # table cp (no key), renamed to cpn at 10: its image x was read by a snapshot ranked below
    # the stream (format test, like Canal's INIT), so it keeps one current version or none
    # (as in d); the read moves as a read (renames.reads_stay), so in cpn too each insert of x,
    # the one at 11 in the rename's batch and the one at 12 in batch 4, ends the version
    # before it (until session 38 cpn held three current copies)
    cp1 = [ev("r", 1, x, table="cp", key=None), ev("c", 2, y, table="cp", key=None)]
    cp2 = [dict(ev(None, 10, kind="ddl", table="cp", key=None), ddl="RENAME TABLE db.cp TO db.cpn"), ev("c", 11, x, table="cpn", key=None)]
    cp4 = [ev("c", 12, x, table="cpn", key=None)]
    # table ce (no key), renamed to cen at 10: images x and z read by a snapshot ranked below
    # the stream, whose reads ended before the rename: x deleted at 3, z inserted again at 4
    # (the insert replaces the read, as the cap says). The caps go on in cen (the old table's
    # ended reads, carried in _cdclake/deletes as op r, read as CAP points:
    # renames._carry_deletes, history._carried_caps): each insert of x or z there, in the
    # rename's batch and in batch 4, ends the version before it (until session 39 cen held two
    # current copies of each)
    z = row(3, "z")
    ce1 = [ev("r", 1, x, table="ce", key=None), ev("r", 2, z, table="ce", key=None), ev("d", 3, before=x, table="ce", key=None),
           ev("c", 4, z, table="ce", key=None)]
    ce2 = [dict(ev(None, 10, kind="ddl", table="ce", key=None), ddl="RENAME TABLE db.ce TO db.cen"), ev("c", 11, x, table="cen", key=None),
           ev("c", 12, z, table="cen", key=None)]
    ce4 = [ev("c", 13, x, table="cen", key=None)]
    # table cz (no key), renamed to czn at 10 with no row left (x inserted and deleted): the
    # move has no data, and the deletes carried with it are not read (until session 39 the
    # batch failed: history._remembered filtered them by the move's oldest change, which it has
    # not)
    cz1 = [ev("c", 1, x, table="cz", key=None), ev("d", 2, before=x, table="cz", key=None)]
    cz2 = [dict(ev(None, 10, kind="ddl", table="cz", key=None), ddl="RENAME TABLE db.cz TO db.czn")]
    # table cc (no key), renamed to ccn at 10: x inserted twice, then deleted once (the delete
    # ends the copy of 1): the copy of 2 moves, and the delete stays behind with the copy it
    # ended (renames._carry_deletes; carried, it ended the moved copy and ccn lost x)
    cc1 = [ev("c", 1, x, table="cc", key=None), ev("c", 2, x, table="cc", key=None), ev("d", 3, before=x, table="cc", key=None)]
    cc2 = [dict(ev(None, 10, kind="ddl", table="cc", key=None), ddl="RENAME TABLE db.cc TO db.ccn")]
    # table cq (no key), renamed to cqn at 10: x inserted at 1 and updated to x3 at 3, both in
    # batch 1; the insert is delivered again after the rename (batch 4): its version in cq ended
    # at 3 (the update's delete of x stays behind with the copy it ended), so the insert is none
    # of cqn's (renames._copies_gone; until session 40 cqn kept a current x beside x3). Table
    # cw: only the insert comes before the rename; the update at 3 comes late (batch 4, first
    # delivery): it goes on to cwn, where it ends the moved x and begins x3
    cq1 = [ev("c", 1, x, table="cq", key=None), ev("u", 3, row(2, "x3"), before=x, table="cq", key=None)]
    cq2 = [dict(ev(None, 10, kind="ddl", table="cq", key=None), ddl="RENAME TABLE db.cq TO db.cqn")]
    cw1 = [ev("c", 1, x, table="cw", key=None)]
    cw2 = [dict(ev(None, 10, kind="ddl", table="cw", key=None), ddl="RENAME TABLE db.cw TO db.cwn")]
    cw4 = [ev("u", 3, row(2, "x3"), before=x, table="cw", key=None)]

    first = apply(spark, tmp_path, t1 + p1 + k1 + m1 + mv1 + n1 + o1 + s1 + r1 + c1 + d1 + kw1 + eg1 + cr1 + cp1 + cc1 + dt1 + ce1 + cz1
                  + cq1 + cw1)
    assert history(spark, tmp_path, "db.c") == [
        (7, "same", None, "1", "3", "d", 1, 3, False),
        (7, "same", None, "2", "4", "d", 2, 4, False),
        (8, "other", None, "4", None, None, 4, None, True),
    ]
    assert (first["db.t"].inserted, first["db.t"].rows_now) == (3, 3)
    apply(spark, tmp_path, t2 + p2 + t3 + m2 + mv2 + n2 + o2 + s2 + r2 + c2 + kw2 + eg2 + cr2 + cp2 + cc2 + dt2 + ce2 + cz2 + cq2 + cw2)
    for name, a, b in (("db.kr", "kid", "name"), ("db.wr", "id", "label")):
        got = sorted((r[a], r[b], r["_cdc_position_text"], r["_cdc_end"]["position_text"] if r["_cdc_end"] else None, r["_cdc_is_current"])
                     for r in lake_rows(spark, f"{tmp_path}/{name}"))
        assert got == [(1, "x", "1", "3", False), (2, "o", "2", None, True), (3, "n", "6", None, True)], name
    got = sorted((r["id"], r["name"], r["_cdc_position_text"], r["_cdc_end"]["position_text"] if r["_cdc_end"] else None, r["_cdc_is_current"])
                 for r in lake_rows(spark, f"{tmp_path}/db.vd"))
    assert got == [(1, "x", "1", "10", False), (1, "z", "10", None, True)]
    assert "amount" not in lake_rows(spark, f"{tmp_path}/db.vd")[0]
    assert history(spark, tmp_path, "db.mv") == [
        (1, "a", "1.00", "1", "3", "u", 1, 3, False),
        (1, "a3", "1.00", "3", "4", "d", 3, 4, False),
        (9, "b", "1.00", "4", "5", "u", 4, 5, False),
        (9, "c", "1.00", "5", "6", "d", 5, 6, False),
        (20, "c", "1.00", "6", None, None, 6, None, True),
    ]
    # batch 3: the other tables' batches re-delivered (nothing changes), with r's late changes
    again = apply(spark, tmp_path, t1 + t2 + t3 + p1 + p2 + k1 + m1 + m2 + mv2 + mv1 + c2 + c1 + d1 + r4, scd_type=None)
    assert {n: (r.inserted, r.updated) for n, r in again.items()} == {
        "db.t": (0, 0), "db.p": (0, 0), "db.k": (0, 0), "db.m": (0, 0), "db.mv": (0, 0), "db.c": (0, 0), "db.d": (0, 0),
        "db.r": (3, 3), "db.rn": (2, 0)}
    assert again["db.rn"].deleted == 2  # key 1's and 5's versions begun; key 1's and 3's moved ones deleted
    # batch 4: late changes of t and mv; r's late changes and first batch again: nothing changes there
    last = apply(spark, tmp_path, t4 + mv4 + r4 + r1 + cr4 + cp4 + d4 + dt4 + ce4 + cq1[:1] + cw4)
    assert {n: (r.inserted, r.updated, r.deleted) for n, r in last.items() if n in ("db.r", "db.rn")} == {
        "db.r": (0, 0, 0), "db.rn": (0, 0, 0)}

    assert history(spark, tmp_path, "db.t") == [
        (1, "a", None, "1", "3", "u", 1, 3, False),
        (1, "c", None, "3", "5", "u", 3, 5, False),
        (1, "e", None, "5", "7", "t", 5, 7, False),
        (2, "x", None, "2", "4", "u", 2, 4, False),
        (2, "y", None, "4", "6", "d", 4, 6, False),
        (3, "q", None, "3", "7", "t", 3, 7, False),
        (4, "n", None, "8", None, None, 8, None, True),
        (5, "late", None, "2", "7", "t", 2, 7, False),
    ]
    assert history(spark, tmp_path, "db.c") == [
        (7, "same", None, "0", "3", "d", 0, 3, False),
        (7, "same", None, "1", "4", "d", 1, 4, False),
        (7, "same", None, "2", None, None, 2, None, True),
        (8, "other", None, "4", None, None, 4, None, True),
    ]
    assert history(spark, tmp_path, "db.d") == [
        (9, "dup", None, "1", "2", "c", 1, 2, False),
        (9, "dup", None, "2", "3", "c", 2, 3, False),
        (9, "dup", None, "3", "5", "c", 3, 5, False),
        (9, "dup", None, "5", None, None, 5, None, True),
    ]
    assert history(spark, tmp_path, "db.dt") == [
        (9, "dup", None, "1", "2", "c", 1, 2, False),
        (9, "dup", None, "2", "3", "t", 2, 3, False),
        (9, "dup", None, "5", None, None, 5, None, True),
        (9, "dup", None, "6", None, None, 6, None, True),
    ]
    assert history(spark, tmp_path, "db.p") == [
        (1, "a", "1.00", "1", "2", "u", 1, 2, False),
        (1, "b", "1.00", "2", "4", "u", 2, 4, False),
        (1, "b", "4.00", "4", None, None, 4, None, True),
    ]
    assert history(spark, tmp_path, "db.k") == [
        (1, "a", None, "1", "2", "d", 1, 2, False),
        (9, "a", None, "2", None, None, 2, None, True),
    ]
    assert history(spark, tmp_path, "db.m") == [
        (1, "a", "1.00", "1", "2", "d", 1, 2, False),
        (9, "b", "1.00", "2", None, None, 2, None, True),
    ]
    assert history(spark, tmp_path, "db.mv") == [
        (1, "a", "1.00", "1", "2", "u", 1, 2, False),
        (1, "a", "2.00", "2", "3", "u", 2, 3, False),
        (1, "a3", "2.00", "3", "4", "d", 3, 4, False),
        (9, "b", "2.00", "4", "5", "u", 4, 5, False),
        (9, "c", "2.00", "5", "6", "d", 5, 6, False),
        (20, "c", "2.00", "6", None, None, 6, None, True),
    ]
    assert history(spark, tmp_path, "db.n") == [
        (1, "a", "1.00", "1", "2", "t", 1, 2, False),
        (9, "b", None, "3", None, None, 3, None, True),
    ]
    assert history(spark, tmp_path, "db.o") == [
        (1, "a", None, "7", "7", "t", 7, 7, False),
        (3, "after", None, "9", None, None, 9, None, True),
        (5, "older record", None, "9", "9", "t", 9, 9, False),
    ]
    assert history(spark, tmp_path, "db.s") == [
        (1, "a", None, "1", "5", "t", 1, 5, False),
        (1, "snap1", None, "5", None, None, 5, None, True),
        (2, "b", None, "2", "5", "t", 2, 5, False),
        (3, "snap3", None, "5", None, None, 5, None, True),
    ]
    assert history(spark, tmp_path, "db.r") == [
        (1, "a", None, "1", "3", "u", 1, 3, False),
        (1, "a3", None, "3", "6", "u", 3, 6, False),
        (1, "a6", None, "6", "10", "t", 6, 10, False),
        (2, "b", None, "2", "5", "u", 2, 5, False),
        (2, "b5", None, "5", "8", "u", 5, 8, False),
        (2, "b8", None, "8", "10", "t", 8, 10, False),
        (3, "c", None, "4", "7", "d", 4, 7, False),
        (5, "late", None, "9", "10", "t", 9, 10, False),
    ]
    assert history(spark, tmp_path, "db.rn") == [
        (1, "a6", None, "10", None, None, 10, None, True),
        (2, "b11", None, "11", None, None, 11, None, True),
        (2, "b8", None, "10", "11", "u", 10, 11, False),
        (5, "late", None, "10", None, None, 10, None, True),
    ]
    assert history(spark, tmp_path, "db.cr") == [
        (1, "y", None, "1", "10", "t", 1, 10, False),
        (2, "x", None, "2", "3", "d", 2, 3, False),
    ]
    assert history(spark, tmp_path, "db.crn") == [(1, "y", None, "10", None, None, 10, None, True)]
    assert history(spark, tmp_path, "db.ccn") == [(2, "x", None, "10", None, None, 10, None, True)]
    assert history(spark, tmp_path, "db.cpn") == [
        (1, "y", None, "10", None, None, 10, None, True),
        (2, "x", None, "10", "11", "c", 10, 11, False),
        (2, "x", None, "11", "12", "c", 11, 12, False),
        (2, "x", None, "12", None, None, 12, None, True),
    ]
    assert history(spark, tmp_path, "db.cen") == [
        (2, "x", None, "11", "13", "c", 11, 13, False),
        (2, "x", None, "13", None, None, 13, None, True),
        (3, "z", None, "10", "12", "c", 10, 12, False),
        (3, "z", None, "12", None, None, 12, None, True),
    ]
    assert (history(spark, tmp_path, "db.cz"), history(spark, tmp_path, "db.czn")) == ([(2, "x", None, "1", "2", "d", 1, 2, False)], [])
    for old_name in ("db.cq", "db.cw"):
        assert history(spark, tmp_path, old_name) == [(2, "x", None, "1", "3", "d", 1, 3, False),
                                                      (2, "x3", None, "3", "10", "t", 3, 10, False)], old_name
        assert history(spark, tmp_path, old_name + "n") == [(2, "x3", None, "10", None, None, 10, None, True)], old_name + "n"
    assert history(spark, tmp_path, "db.e") == [
        (1, "a", None, "1", "10", "t", 1, 10, False),
        (1, "new", None, "12", "13", "t", 12, 13, False),
        (2, "b", None, "2", "10", "t", 2, 10, False),
        (3, "c", None, "14", None, None, 14, None, True),
    ]
    assert history(spark, tmp_path, "db.en") == [(1, "a", None, "10", None, None, 10, None, True),
                                                 (2, "b", None, "10", None, None, 10, None, True)]
    assert history(spark, tmp_path, "db.g") == [
        (7, "same", None, "1", "10", "t", 1, 10, False),
        (7, "same", None, "12", "13", "d", 12, 13, False),
        (7, "same", None, "2", "10", "t", 2, 10, False),
    ]
    assert history(spark, tmp_path, "db.gn") == [(7, "same", None, "10", None, None, 10, None, True)] * 2
    assert assert_delta_rs_reads_like_spark(spark, tmp_path / "db.t") == 8

    # a history table applied as SCD type 1: refused with one line, nothing written
    with pytest.raises(CdclakeError) as e:
        apply(spark, tmp_path, [ev("c", 9, row(6, "z"))], scd_type=1)
    assert e.value.code == "SCD_TYPE_MISMATCH" and "db.t is SCD type 2" in str(e.value)
    assert len(history(spark, tmp_path, "db.t")) == 8
