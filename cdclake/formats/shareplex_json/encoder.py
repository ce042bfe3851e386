"""Encoder for ``shareplex-json``: canonical events -> Alibaba DTS "Shareplex Json" messages, one
JSON object per line.

Sources: seed ``001_a1c6319148bc2083.txt`` (DTS: data formats of a message queue, "Shareplex
Json": the ``meta`` parameter table and the insert / update / delete examples) and
``shared/FORMATS.md`` (``shareplex-json``).

Wire shape (key order as in the seed's insert example)::

    {"meta": {"time": "2024-01-01T00:00:03",   the event time, UTC, whole seconds, no "Z" (as the
                                               seed's examples write it)
              "op": "ins" | "upd" | "del" | "TRUNCATE" | "UPDATE BEFORE" | "UPDATE AFTER",
              "scn": "7",                      one per transaction: first_scn, first_scn + 1, ...
              "trans": "sim-3", "seq": 2, "size": 4,   transaction id, 1-based index, size
              "table": "shop.customers",       OWNER.TABLE: the qualified source name
              "idx": "2/4"},                   seq/size
     "data": {col: "text" | null},             ins: the new row; upd: ONLY the changed columns
                                               (their after values); del: the deleted row
     "key":  {col: "text" | null}}             upd: the whole row before the change

* Ops: ``c`` (and ``r``: SharePlex has no snapshot marker) -> ``ins``; ``d`` -> ``del``; ``u``
  -> ``upd``, a *partial* update: ``data`` holds the columns whose value changed, ``key`` the row
  before (when nothing changed, ``data`` repeats the whole after image). An update that changes
  the row's key is written as the seed table's ``UPDATE BEFORE`` (``data`` = the row before)
  and ``UPDATE AFTER`` (``data`` = the row after) with the same ``scn``/``seq``, one
  :attr:`~cdclake.formats.encoding.Encoded.units` entry: the decoder turns a key-changing
  ``upd`` into two events (a delete of the old key and a partial update), which the one-event
  round-trip contract cannot state; the halves pair back into one update. An update without a
  before image is an ``UPDATE AFTER`` alone (an upsert). ``t`` -> ``TRUNCATE`` (no images).
* Values: every value is written as a JSON string of its canonical text (the seed's examples
  write numbers as strings); NULL as ``null``. The wire has no types: every column comes back as
  a ``string`` column with the same text.
* Order: ``scn`` (a new one for each transaction, and for each event outside a transaction),
  then ``seq``. Events outside a transaction have no ``trans``/``seq``/``size``/``idx``.
* Key: none on the wire. :meth:`ShareplexJsonEncoder.carried` assumes the decoder is
  configured with each table's key as the events state it (``DecodeOptions.primary_keys`` /
  ``--primary-key``); with ``keys_configured=False`` it expects no key (then the decoder carries
  every column of ``key`` in an update's after image).
* ``userid``, ``rowid`` and ``posttime`` are not known to canonical events: not written.

Dropped (counted in ``Encoded.dropped``): DDL events (the seed's only DDL op, DROP COLUMN, has no
statement text), heartbeats and transaction markers, column types and attributes (everything is
text), the snapshot marker (``r`` is written as ``ins``), milliseconds of event times, primary
keys (configuration), partial updates without a before image, updates that change the key of a
partial after image, and events without a table name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta

from cdclake.formats.encoding import Encoded, Encoder, dumps, not_written
from cdclake.model import qualified_name

NAME = "shareplex-json"
_EPOCH = datetime(1970, 1, 1)


def wire_time(ms: int) -> str:
    """``meta.time`` for an event time: UTC ``yyyy-MM-ddTHH:mm:ss`` (the ms are cut)."""
    return (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S")


def _same(a, b) -> bool:
    return a == b  # null-safe on Python values: None == None


#: why an event is not written (:func:`cdclake.formats.encoding.not_written`); beyond them, a
#: data event without the images its shape needs (:meth:`ShareplexJsonEncoder._shape`)
_NOT_WRITTEN = (
    ("ddl", "DDL events (Shareplex Json writes no DDL text)"),
    "heartbeat",
    "tx",
    "no_table",
)


class ShareplexJsonEncoder(Encoder):
    """Canonical events -> DTS "Shareplex Json" messages; see the module docstring.

    Args:
        first_scn: the ``scn`` of the first transaction (each next one adds 1).
        keys_configured: :meth:`carried` expects each table's key (as the event states it) to
            be configured in the decoder (``--primary-key``); False: no key.
    """

    name = NAME
    file_kind = "lines"

    def __init__(self, first_scn: int = 1, keys_configured: bool = True) -> None:
        self.first_scn = first_scn
        self.keys_configured = keys_configured

    def _pk(self, e: dict) -> list[str] | None:
        """The key the decoder is configured with for the event's table (see the class)."""
        return list(e["primary_key"]) if self.keys_configured and e.get("primary_key") else None

    def _shape(self, e: dict) -> str | None:
        """How a data event is written: ``ins``, ``del``, ``upd``, ``halves`` (UPDATE BEFORE +
        UPDATE AFTER), ``after`` (UPDATE AFTER alone), ``TRUNCATE``; a reason when it is not."""
        reason = not_written(e, _NOT_WRITTEN)
        if reason is not None:
            return reason
        op = e.get("op")
        if op == "t":
            return "TRUNCATE"
        if op in ("c", "r"):
            return "ins" if e.get("after") else "inserts without an after image"
        if op == "d":
            return "del" if e.get("before") else "deletes without a before image"
        after, before, present = e.get("after"), e.get("before"), e.get("present")
        if not after:
            return "updates without an after image"
        if not before:
            return "after" if present is None else "partial updates without a before image"
        pk = self._pk(e)
        if pk and any(k in after and not _same(after[k], before.get(k)) for k in pk):
            return "halves" if present is None else "key changes of partial after images"
        if pk and any(k not in before and k not in after for k in pk):
            return "updates whose images lack a key column"
        return "upd"

    def _data(self, e: dict) -> dict:
        """An ``upd``'s ``data``: the after values of the changed columns (all when none did)."""
        after, before = e["after"], e["before"]
        cols = [n for n in after if e.get("present") is None or n in e["present"]]
        changed = {n: after[n] for n in cols if n not in before or not _same(after[n], before[n])}
        return changed or {n: after[n] for n in cols}

    # ---- encoding ---------------------------------------------------------------------------

    def encode(self, events: Iterable[dict]) -> Encoded:
        out = Encoded(records=[], units=[], dropped=Counter())
        scn = self.first_scn - 1
        last_tx = None
        for e in events:
            shape = self._shape(e)
            if shape not in ("ins", "del", "upd", "halves", "after", "TRUNCATE"):
                out.dropped[shape] += 1
                continue
            tx = e.get("tx_id")
            if tx is None or tx != last_tx:
                scn += 1
            last_tx = tx
            self._count_losses(e, out.dropped)
            meta = {}
            if e.get("event_time_ms") is not None:
                meta["time"] = wire_time(e["event_time_ms"])
            meta["op"] = None  # set below, kept in the seed's key order
            meta["scn"] = str(scn)
            if tx is not None:
                meta["trans"] = str(tx)
            seq, size = e.get("tx_seq"), e.get("tx_size")
            if seq is not None:
                meta["seq"] = seq
            if size is not None:
                meta["size"] = size
            meta["table"] = qualified_name(e.get("database"), e.get("schema"), e["table"])
            if seq is not None and size is not None:
                meta["idx"] = f"{seq}/{size}"

            def message(op: str, data: dict | None = None, key: dict | None = None) -> dict:
                m = {"meta": {**meta, "op": op}}
                if data is not None:
                    m["data"] = data
                if key is not None:
                    m["key"] = key
                return m

            if shape == "ins":
                msgs = [message("ins", e["after"])]
            elif shape == "del":
                msgs = [message("del", e["before"])]
            elif shape == "TRUNCATE":
                msgs = [message("TRUNCATE")]
            elif shape == "upd":
                msgs = [message("upd", self._data(e), e["before"])]
            elif shape == "after":
                msgs = [message("UPDATE AFTER", e["after"])]
            else:
                msgs = [message("UPDATE BEFORE", e["before"]), message("UPDATE AFTER", e["after"])]
            start = len(out.records)
            for m in msgs:
                out.records.append((None, dumps(m)))
                out.units.append(start)
        return out

    def _count_losses(self, e: dict, dropped: Counter) -> None:
        if e.get("columns") is not None:
            dropped["column types and attributes (every value is text)"] += 1
        if e["op"] == "r":
            dropped["snapshot reads (written as ins)"] += 1
        if e.get("primary_key"):
            dropped["primary keys (not on the wire: configure --primary-key)"] += 1
        if e.get("event_time_ms") is not None and e["event_time_ms"] % 1000:
            dropped["event times: milliseconds cut (meta.time has whole seconds)"] += 1

    # ---- what comes back -----------------------------------------------------------------------

    def carried(self, event: dict) -> dict | None:
        e = event
        shape = self._shape(e)
        if shape not in ("ins", "del", "upd", "halves", "after", "TRUNCATE"):
            return None
        name = qualified_name(e.get("database"), e.get("schema"), e["table"])
        owner, dot, rest = name.partition(".")
        database, table = (owner or None, rest) if dot else (None, name)
        pk = self._pk(e)
        before = after = present = None
        if shape == "ins":
            after = dict(e["after"])
        elif shape == "del":
            before = dict(e["before"])
        elif shape == "halves":
            before, after = dict(e["before"]), dict(e["after"])
        elif shape == "after":
            after = dict(e["after"])
        elif shape == "upd":
            # as the decoder builds it: the key columns from `key` (every column of `key` when
            # no key is configured), overlaid with `data`; present = the after image's columns
            key, data = e["before"], self._data(e)
            base = key if pk is None else {k: v for k, v in key.items() if k in pk}
            after = {**{k: v for k, v in base.items() if k not in data}, **data}
            before, present = dict(key), list(after)
        seq, size = e.get("tx_seq"), e.get("tx_size")
        ms = e.get("event_time_ms")
        return {
            "kind": "data",
            "op": {"ins": "c", "del": "d", "TRUNCATE": "t"}.get(shape, "u"),
            "database": database,
            "schema": None,
            "table": table,
            "before": before,
            "after": after,
            "present": present,
            "primary_key": pk,
            "columns": None,
            "tx_id": None if e.get("tx_id") is None else str(e["tx_id"]),
            "tx_seq": seq,
            "tx_last": None if seq is None or size is None else seq == size,
            "tx_size": size,
            "ddl": None,
            "event_time_ms": None if ms is None else ms - ms % 1000,
        }
