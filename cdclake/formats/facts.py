"""Format facts as data: each format package's ``facts.json`` (its capabilities, the documents
they come from, its op table with the seed line that lists it), read once per process, and
the two views the decoders and ``cdclake formats`` use: :class:`Capabilities` and
:class:`OpTable`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from cdclake.sqltext import sql_case, sql_in, sql_str


@functools.cache
def _facts_text(package: str) -> str:
    return resources.files(package).joinpath("facts.json").read_text(encoding="utf-8")


def format_facts(package: str) -> dict:
    """A format's facts as data: ``facts.json`` in its package (``format``; ``sources``, the
    documents they come from; ``capabilities``; ``notes``; ``ops``, the wire op -> what it
    means, with ``ops_source``, where the seed lists them).

    Raises:
        FileNotFoundError: the package has no ``facts.json``.
    """
    return json.loads(_facts_text(package))


class OpTable:
    """A format's op table as data (``facts.json`` ``ops``: wire op -> what it means: an op code
    ``c``/``u``/``d``/``r``/``t``, ``ddl``, ``tx_begin``/``tx_end``, ``heartbeat``, ``skip``),
    and the SQL the decoders write from it. ``meanings`` arguments select entries by meaning;
    none selects all."""

    #: the meanings of a row change
    DATA = ("c", "u", "d", "r")

    def __init__(self, ops: dict[str, str]) -> None:
        self.ops = dict(ops)

    @classmethod
    def load(cls, package: str) -> "OpTable":
        """The op table of the format package ``package`` (:func:`format_facts`).

        Raises:
            FileNotFoundError: the package has no ``facts.json``.
            KeyError: its facts have no ``ops``.
        """
        return cls(format_facts(package)["ops"])

    def of(self, *meanings: str) -> dict[str, str]:
        """The entries (wire op -> meaning) whose meaning is one of ``meanings``."""
        return {k: v for k, v in self.ops.items() if not meanings or v in meanings}

    def named(self, *meanings: str) -> tuple[str, ...]:
        """The wire ops whose meaning is one of ``meanings``, in table order."""
        return tuple(self.of(*meanings))

    def one(self, meaning: str) -> str:
        """The single wire op meaning ``meaning``.

        Raises:
            ValueError: none or several mean it.
        """
        (op,) = self.named(meaning)
        return op

    def case_sql(self, expr: str, *meanings: str) -> str:
        """SQL: the meaning (a string) of the wire op ``expr``, NULL for other ops."""
        return sql_case(expr, {k: sql_str(v) for k, v in self.of(*meanings).items()})

    def in_sql(self, expr: str, *meanings: str) -> str:
        """SQL: the wire op ``expr`` is one of those meaning one of ``meanings``."""
        return sql_in(expr, self.named(*meanings))


@dataclass(frozen=True)
class Capabilities:
    """What a format carries, as the ``cdclake formats`` table shows it."""

    key: str  # where the primary key comes from, e.g. "message (pkNames)", "configuration"
    column_types: str  # "mysqlType / sqlType", "Kafka Connect schema", "none" ...
    position: str  # the ordering coordinate, e.g. "es, id"
    transactions: str  # "none", "BEGIN/END topic + event_count" ...
    ddl: bool
    heartbeats: bool
    snapshot_marker: str  # "type INIT", "op r", "none" ...
    partial_images: bool = False
    #: snapshot rows carry the source position the snapshot was read at, which orders with
    #: the streamed changes' positions (Debezium: every ``r`` row of a snapshot carries the
    #: offset read before it, and streaming goes on from there): the applier then orders them
    #: by position like streamed changes, so a snapshot taken again after a delete or
    #: truncate lands. Else snapshot rows rank below every streamed change.
    snapshot_positions: bool = False
    #: the format's events carry enough to tell a transaction that is not complete yet (its
    #: size, its last event, or BEGIN/END markers with the changes' transaction id): the
    #: applier then holds an open transaction back until the rest arrives
    #: (:mod:`cdclake.apply.transactions`)
    transaction_bounds: bool = False
    #: the format marks the last row of a table's full snapshot (Debezium's ``source.snapshot``
    #: ``last_in_data_collection`` / ``last``): ``--snapshot-removes-missing`` can follow it
    #: (:attr:`DecodeOptions.snapshot_ends`)
    snapshot_ends: bool = False
    #: the format writes an update as two records, a before half and an after half of one
    #: position (DataWorks ``UPDATE_BEFOR``/``UPDATE_AFTER``, TUPLE's two rows): the applier
    #: holds a half back until the other arrives, as a transaction of two
    #: (:func:`cdclake.apply.plan.update_half_sql`, :mod:`cdclake.apply.transactions`)
    update_halves: bool = False
    #: the documents these facts come from (the seeds in ``shared/seeds``, the producer's own
    #: documentation, the public fixtures), as ``facts.json`` names them
    sources: tuple[str, ...] = ()
    #: ``(field, why)``: the reason behind a field's value, where it is not obvious
    notes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def load(cls, package: str) -> "Capabilities":
        """The capabilities a format declares as data: ``facts.json`` in the format's package
        (``{"format", "sources": [...], "capabilities": {field: value}, "notes": {field: why}}``).

        Raises:
            FileNotFoundError: the package has no ``facts.json``.
            TypeError: ``capabilities`` names a field this class does not have, or lacks one it
                must have.
        """
        facts = format_facts(package)
        return cls(**facts["capabilities"], sources=tuple(facts.get("sources", ())),
                   notes=tuple(sorted(facts.get("notes", {}).items())))
