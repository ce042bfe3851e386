"""Round-trip tests of the ``shareplex-json`` encoder (:mod:`cdclake.formats.shareplex_json.encoder`).

* Wire output for hand-made canonical events, pinned against literal messages shaped like the
  insert / update / delete examples of seed ``001_a1c6319148bc2083.txt`` ("Shareplex Json").
* decode(encode(events)) == carried(events) over simulator workloads, and scrambled ingests
  through the real pipeline compared with the oracle (:mod:`tests.roundtrip`). SharePlex
  messages do not carry the key: every Spark test configures the simulator's keys
  (``SimResult.keys``).
"""

from __future__ import annotations

from datetime import datetime, timezone


from cdclake.formats.shareplex_json import ShareplexJsonEncoder
from cdclake.simulate import Workload
from tests.roundtrip import (
    INGEST_CASES, check_round_trips, decode_property, decode_round_trip, decode_round_trips, ingest_case,
    ingest_scrambled,
)

FMT = "shareplex-json"


def ms(text: str, extra_ms: int = 0) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000) + extra_ms


def event(op, *, before=None, after=None, t=None, tx=None, pk=("MIO_LOG_ID",), kind="data"):
    """A canonical event of CL_BIZ1.MIO_LOG (no column types, as an Oracle source via SharePlex)."""
    return {
        "format": "simulated", "kind": kind, "op": op, "database": "CL_BIZ1", "schema": None, "table": "MIO_LOG",
        "before": before, "after": after, "present": None, "primary_key": list(pk) if pk else None, "columns": None,
        "position": None, "tx_id": tx[0] if tx else None, "tx_seq": tx[1] if tx else None,
        "tx_last": tx[1] == tx[2] if tx else None, "tx_size": tx[2] if tx else None, "ddl": None,
        "event_time_ms": t, "source_record": None,
    }


def keys(res) -> dict[str, list[str]]:
    """``--primary-key`` configuration from the simulator's keys (keyless tables left out)."""
    return {name: cols for name, cols in res.keys.items() if cols}


# the seed's update example: "key" is the row before, "data" the changed column
SEED_KEY = {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None, "CNTR_NO": "1171201606syui26"}
SEED_DELETED = {"MIO_LOG_ID": "32539739", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None, "CG_NO": None}


def test_seed_001_insert_update_delete():
    # seed 001 "Shareplex Json" 例: 挿入されたデータ / 更新されたデータ / 削除されたデータ. The seed
    # elides the update's and the delete's other meta fields ("…. その他のメタデータ"): here they
    # get their own scn and no transaction. userid, rowid and posttime are not written.
    events = [
        event("c", after={"MIO_LOG_ID": "32539737"}, t=ms("2017-06-16T14:24:34", 250), tx=("7.0.411499", 1, 11)),
        event("u", before=SEED_KEY, after={**SEED_KEY, "CNTR_NO": "1171201606"}, t=ms("2017-06-16T15:38:13")),
        event("d", before=SEED_DELETED, t=ms("2017-06-16T15:51:35")),
    ]
    enc = ShareplexJsonEncoder(first_scn=14589063118712)
    out = enc.encode(events)
    assert [v.decode() for _k, v in out.records] == [
        '{"meta":{"time":"2017-06-16T14:24:34","op":"ins","scn":"14589063118712","trans":"7.0.411499","seq":1,"size":11,'
        '"table":"CL_BIZ1.MIO_LOG","idx":"1/11"},"data":{"MIO_LOG_ID":"32539737"}}',
        '{"meta":{"time":"2017-06-16T15:38:13","op":"upd","scn":"14589063118713","table":"CL_BIZ1.MIO_LOG"},'
        '"data":{"CNTR_NO":"1171201606"},"key":{"MIO_LOG_ID":"32537893","PLNMIO_REC_ID":"31557806","POL_CODE":null,'
        '"CNTR_TYPE":null,"CNTR_NO":"1171201606syui26"}}',
        '{"meta":{"time":"2017-06-16T15:51:35","op":"del","scn":"14589063118714","table":"CL_BIZ1.MIO_LOG"},'
        '"data":{"MIO_LOG_ID":"32539739","PLNMIO_REC_ID":"31557806","POL_CODE":null,"CNTR_TYPE":null,"CG_NO":null}}',
    ]
    assert out.units == [0, 1, 2]
    assert out.dropped == {
        "primary keys (not on the wire: configure --primary-key)": 3,
        "event times: milliseconds cut (meta.time has whole seconds)": 1,
    }
    ins = enc.carried(events[0])
    assert (ins["database"], ins["table"], ins["tx_id"], ins["tx_seq"], ins["tx_size"], ins["tx_last"]) == (
        "CL_BIZ1", "MIO_LOG", "7.0.411499", 1, 11, False,
    )
    assert ins["event_time_ms"] == ms("2017-06-16T14:24:34")
    # the partial update as the decoder gives it back: the configured key from `key`, then `data`
    upd = enc.carried(events[1])
    assert (upd["before"], upd["after"], upd["present"], upd["primary_key"]) == (
        SEED_KEY, {"MIO_LOG_ID": "32537893", "CNTR_NO": "1171201606"}, ["MIO_LOG_ID", "CNTR_NO"], ["MIO_LOG_ID"],
    )
    # without a configured key every column of `key` is carried
    loose = ShareplexJsonEncoder(keys_configured=False).carried(events[1])
    assert (loose["after"], loose["present"], loose["primary_key"]) == (
        {**SEED_KEY, "CNTR_NO": "1171201606"}, list(SEED_KEY), None,
    )


def test_key_change_truncate_and_drops():
    old = {"MIO_LOG_ID": "1", "CNTR_NO": "a"}
    new = {"MIO_LOG_ID": "2", "CNTR_NO": "a"}
    key_change = event("u", before=old, after=new, t=2000, tx=("t1", 2, 2))
    trunc = event("t", t=3000, tx=("t2", 1, 1))
    ddl = {**event(None, kind="ddl", t=4000), "ddl": "ALTER TABLE x DROP COLUMN y"}
    beat = {**event(None, kind="heartbeat", t=5000), "database": None, "table": None}
    enc = ShareplexJsonEncoder()
    out = enc.encode([key_change, trunc, ddl, beat])
    assert [v.decode() for _k, v in out.records] == [
        # a key change: the seed table's UPDATE BEFORE / UPDATE AFTER, same scn and seq, one unit
        '{"meta":{"time":"1970-01-01T00:00:02","op":"UPDATE BEFORE","scn":"1","trans":"t1","seq":2,"size":2,'
        '"table":"CL_BIZ1.MIO_LOG","idx":"2/2"},"data":{"MIO_LOG_ID":"1","CNTR_NO":"a"}}',
        '{"meta":{"time":"1970-01-01T00:00:02","op":"UPDATE AFTER","scn":"1","trans":"t1","seq":2,"size":2,'
        '"table":"CL_BIZ1.MIO_LOG","idx":"2/2"},"data":{"MIO_LOG_ID":"2","CNTR_NO":"a"}}',
        '{"meta":{"time":"1970-01-01T00:00:03","op":"TRUNCATE","scn":"2","trans":"t2","seq":1,"size":1,'
        '"table":"CL_BIZ1.MIO_LOG","idx":"1/1"}}',
    ]
    assert out.units == [0, 0, 2]
    c = enc.carried(key_change)
    assert (c["op"], c["before"], c["after"], c["present"], c["tx_last"]) == ("u", old, new, None, True)
    assert enc.carried(trunc)["op"] == "t"
    assert enc.carried(ddl) is None and enc.carried(beat) is None
    assert out.dropped["DDL events (Shareplex Json writes no DDL text)"] == 1
    assert out.dropped["heartbeat events"] == 1


def test_round_trip_workload(spark, tmp_path):
    res = Workload(11, events=300).generate()
    decoded, carried = decode_round_trip(spark, FMT, res.events, tmp_path, primary_keys=keys(res))
    assert len(decoded) > 250
    assert any(e["present"] is not None for e in decoded)  # partial updates went through
    assert decoded == carried


@decode_property
def test_round_trip_property(spark, tmp_path_factory, seeds):
    # every example decoded with its keys configured (keys=True), as a user must run SharePlex
    examples = [Workload(seed, events=60, tables=3).generate().events for seed in seeds]
    trips = decode_round_trips(spark, FMT, examples, tmp_path_factory.mktemp("splex"), keys=True)
    check_round_trips([f"seed={s}" for s in seeds], trips)


def test_ingest_scrambled(spark, tmp_path):
    # seed 1 cut into 3 batches (units shuffled, 30 % delivered twice), transactions held back
    # by seq/size between the batches. It ended with
    # extra keyless audit_log rows until session 15: an update written before an ADD COLUMN
    # has a before image without the new column, so it was not completed into a full update
    # and did not move its row. The applier's semantics over many scrambled workloads:
    # tests/apply/test_properties.py.
    summaries = ingest_case(spark, FMT, INGEST_CASES[FMT], tmp_path)
    assert sum(s.held_transactions for s in summaries) > 0  # the gate held something back


# once a strict xfail (found by the ingest property, seed=0, shuffle_seed=0, batches=2,
# duplicate=0.0): the target row keeps one position for all its columns, so a partial update
# applied in a batch before its row's older insert lost the columns it does not carry. A
# SharePlex upd carries the whole row before (`key`), so the applier now completes its after
# image from it and applies it as a full update
def test_partial_update_before_its_row_in_an_earlier_batch(spark, tmp_path):
    res = Workload(0, events=80, tables=2).generate()
    ingest_scrambled(spark, FMT, res.events, tmp_path, 0, batches=2, duplicate=0.0, primary_keys=keys(res))


def keyless_insert_and_update() -> list[dict]:
    """A keyless row's insert, then its update (written as a SharePlex ``upd``: partial, with
    the whole row before in ``key``), each a transaction of its own."""
    row = {"MIO_LOG_ID": "1", "CNTR_NO": "a"}
    events = [
        event("c", after=row, t=1000, pk=None, tx=("t1", 1, 1)),
        event("u", before=row, after={**row, "CNTR_NO": "b"}, t=2000, pk=None, tx=("t2", 1, 1)),
    ]
    assert b'"op":"upd"' in ShareplexJsonEncoder().encode(events).records[1][1]
    return events


# once a strict xfail (found by the ingest property, seed=0, shuffle_seed=0, batches=1,
# duplicate=0.0: extra audit_log rows): a SharePlex upd carries the whole row before in `key`,
# so the applier completes its after image from it and matches the keyless row like a full update
def test_keyless_partial_update_replaces_the_row(spark, tmp_path):
    events = keyless_insert_and_update()
    ingest_scrambled(spark, FMT, events, tmp_path, 0, batches=1, duplicate=0.0, replay_all=False)


# found by the 3-batch scrambled ingest (seed 0, session 14; NOTES.md): the planning aggregate
# counted only a full update's before image as a delete of the row it moves, not a partial
# update's. A SharePlex upd is partial and carries the whole row before, so the applier
# completes it into a full update that moves the keyless row and remembers the old image in
# _cdclake/deletes; but the table's latest delete position (progress) did not move, so a later
# batch bringing the row's older insert did not look at the deletes and the insert landed
# again. The table must hold the updated row only (the oracle's table).
def test_keyless_update_before_its_insert_in_an_earlier_batch(spark, tmp_path):
    events = keyless_insert_and_update()
    # the update first, its row's insert in the next batch
    summaries = ingest_scrambled(spark, FMT, events, tmp_path, 0, parts=[[1], [0]], replay_all=False)
    assert [s.held_transactions for s in summaries] == [0, 0]
