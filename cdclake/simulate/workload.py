"""A seeded, deterministic model of a source database and of the change stream it produces.

``Workload(seed, ...).generate()`` returns a :class:`SimResult`: the canonical events
(:data:`cdclake.model.EVENT_SCHEMA` rows as dicts, ``format = "simulated"``, ready for
``spark.createDataFrame(result.events, EVENT_SCHEMA)``) and the exact final content, schema and
key of every table. The same seed always gives the same events and the same final state
(only :class:`random.Random` seeded with ``seed`` is used, and nothing iterates a set).

The model (database ``shop``; ``tables`` tables, cycling through three templates):

* ``shop.customers`` (and ``customers_1``, ...): single-column primary key ``id int``;
* ``shop.sales.order_lines``: composite key ``(region string, order_no bigint, line_no int)``,
  a three-part name (database, schema, table);
* ``shop.audit_log``: no key at all (``primary_key`` is null on its events, ``keys`` holds
  ``[]``). The applier matches such rows on the whole before image, and keeps identical rows
  apart as a multiset (a delete or update takes one copy). By default the model never lets a
  keyless table hold two identical rows: an insert or update that would create a duplicate is
  drawn again (or replaced by another change); ``identical_rows=True`` inserts copies too.

Column types: ``int``, ``bigint``, ``decimal(10,2)``, ``decimal(18,4)``, ``decimal(38,10)``,
``string`` (accents, Japanese, emoji, RTL scripts, quotes, backslashes, tabs, newlines, empty
and blank strings), ``binary`` (random bytes, sometimes empty), ``date``, ``timestamp``
(microsecond precision, UTC), ``boolean``, and NULLs in every nullable column. Values are
drawn with a bias to edge cases (0, -1, type limits, all-nines decimals, the epoch, the
microsecond before the epoch).

The stream, in commit order:

1. An initial snapshot: ``snapshot_rows`` rows per table, op ``r``, positions ``[0, i]``
   (i = 1, 2, ...; below every streamed change), no transaction, one shared event time.
2. ``events`` streamed events, each with position ``[n]``, ``n`` = 1, 2, ... strictly
   increasing over the whole stream (``position.text = str(n)``):

   * transactions of 1..6 data events on any tables: ``tx_id`` ``sim-<k>``, ``tx_seq``
     1..size, ``tx_size``, ``tx_last`` true on the last event. Inserts (``c``, after image),
     updates (``u``, full before and after images; some change the primary key), deletes
     (``d``, full before image);
   * truncates (``truncates=True``): op ``t`` with no images, a transaction of its own;
   * DDL (``ddl=True``): ``kind = ddl`` with MySQL-style ``ddl`` text, outside transactions.
     By default only changes the applier follows today: ``ADD COLUMN`` (nullable, existing
     rows hold NULL) and widening ``MODIFY COLUMN`` (``int -> bigint``,
     ``decimal(p,s) -> decimal(p+2,s)``). ``DROP COLUMN`` and ``RENAME COLUMN`` are modelled
     too but only generated with ``drop_rename=True``: the applier follows them from the DDL
     text when every older event that names the old column arrives in the same batch as the
     DDL or before it, but an older event delivered in a *later* batch brings the dropped or
     old column back (so scrambled property workloads leave them off);
   * heartbeats (``heartbeats=True``): ``kind = heartbeat``, no database, no table, no op.

   The stream ends with exactly ``events`` streamed events (a transaction is cut short to fit).

Every data event (``r c u d t``) and every DDL event carries ``columns``, the table's schema at
its position (after the change, for DDL, so a target table can follow a DDL that no data event
follows): name, source type (MySQL spelling, as :func:`cdclake.formats.sqltypes.mysql_spark_type` reads
it), Spark type, precision and scale (decimals only), nullable (false for key columns); and
``primary_key`` (null for the keyless table). ``truncate_columns=False`` leaves ``columns`` off
truncates, as Canal and Debezium write them (the applier mishandles that today: see
``tests/simulate/test_workload.py``). Image values are the canonical text of the column's Spark
type (:func:`encode_value`). ``event_time_ms`` never decreases: it grows from one transaction
(or DDL, heartbeat) to the next, the events of one transaction share their commit time, and the
snapshot rows share one time before the first streamed change. ``source_record`` is
``{file: "simulated", line: i + 1}`` for the event at index ``i`` of the list (topic, partition,
offset and timestamp null).

Rates, per step of the stream: heartbeat 4 %, DDL 5 %, truncate 1.5 %, else a transaction;
within a transaction, on a random table: 22 % delete, 8 % key-changing update (keyed tables),
30 % other update, 40 % insert (an empty table gets an insert).

``final`` is the model's content after the last event: every change is applied to the
in-memory tables as it is generated, so it is exactly what applying the events in order gives.
"""

from __future__ import annotations

import base64
import decimal
import random
import re
from collections import Counter
import dataclasses
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from cdclake.model import EVENT_COLUMNS, qualified_name

FORMAT = "simulated"
SOURCE_FILE = "simulated"
#: event time of the snapshot: 2024-01-01T00:00:00Z, in ms since the epoch
BASE_TIME_MS = 1_704_067_200_000

NULL_RATE = 0.12  # chance that a nullable column is NULL in a drawn row
EDGE_RATE = 0.1  # chance that a drawn value is an edge case of its type
COPY_RATE = 0.3  # identical_rows: chance that an insert of a keyless table copies one of its rows
MAX_ADDED_COLUMNS = 6  # per table: ADD COLUMN stops being drawn after that many
MAX_TX_SIZE = 6

_DEC = re.compile(r"^decimal\((\d+),(\d+)\)$")

TEXT_PIECES = [
    "Ada", "Grace", "Linus", "café", "crème brûlée", "naïve", "Zürich", "São Paulo", "Ñandú",
    "Łódź", "Ærøskøbing", "日本語", "東京都渋谷区", "こんにちは", "カタカナ", "漢字かな交じり文",
    "😀", "🚀✨", "👩‍💻", "🇯🇵", "Ωμέγα", "Привет", "مرحبا", "שלום", "it's", 'say "hi"',
    "back\\slash", "tab\there", "line\nbreak", "100%", "a,b;c", "{\"json\": [1]}", "<b>&amp;</b>",
    "   ", "",
]
REGIONS = ["eu-west", "us-east", "ap-東京", "sa-são-paulo", "emoji-🌍"]
HOSTS = ["db-1", "db-2.example.com", "ホスト-3", "host ñ 4"]
ADD_TYPES = ["int", "bigint", "decimal(10,2)", "decimal(38,10)", "string", "binary", "date", "timestamp", "boolean"]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_BIG_MIN, _BIG_MAX = -(2**63), 2**63 - 1
_EPOCH = datetime(1970, 1, 1)


@dataclass
class SimResult:
    """What :meth:`Workload.generate` returns.

    events: canonical events in commit order, each a dict with exactly EVENT_SCHEMA's fields.
    final: qualified table name -> the table's rows after the last event, each row a dict
        column -> typed value (int, Decimal, str, bytes, date, naive UTC datetime, bool, None);
        rows sorted by key (by every column for the keyless table), no row twice unless
        ``identical_rows`` (copies of a keyless table's row, side by side).
    schemas: qualified table name -> final columns, name -> Spark type, in table order.
    keys: qualified table name -> key columns ([] for the table without a key).
    """

    events: list[dict]
    final: dict[str, list[dict]]
    schemas: dict[str, dict[str, str]]
    keys: dict[str, list[str]]


def split_batches(events: list[dict], n: int) -> list[list[dict]]:
    """``events`` cut into ``n`` consecutive batches of (nearly) equal size, order kept.
    Cuts fall anywhere, also inside a transaction."""
    size, extra = divmod(len(events), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(events[start:end])
        start = end
    return out


def _decimal_type(spark_type: str) -> tuple[int, int] | None:
    m = _DEC.match(spark_type)
    return (int(m.group(1)), int(m.group(2))) if m else None


def encode_value(value: Any, spark_type: str) -> str | None:
    """The canonical text (see :mod:`cdclake.model`) of a typed value of ``spark_type``."""
    if value is None:
        return None
    if spark_type == "boolean":
        return "true" if value else "false"
    if spark_type in ("tinyint", "smallint", "int", "bigint"):
        return str(int(value))
    dec = _decimal_type(spark_type)
    if dec:
        with decimal.localcontext() as ctx:
            ctx.prec = 100
            return format(Decimal(value).quantize(Decimal(1).scaleb(-dec[1])), "f")
    if spark_type == "string":
        return value
    if spark_type in ("double", "float"):
        return repr(float(value))
    if spark_type == "binary":
        return base64.b64encode(value).decode("ascii")
    if spark_type == "date":
        return value.isoformat()
    if spark_type == "timestamp":
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    raise ValueError(f"no canonical encoding for type {spark_type}")


def _source_type(spark_type: str) -> str:
    """MySQL spelling of a Spark type (what ``cdclake.formats.sqltypes.mysql_spark_type`` maps back)."""
    return {
        "int": "int",
        "bigint": "bigint",
        "string": "varchar(255)",
        "binary": "varbinary(64)",
        "date": "date",
        "timestamp": "datetime(6)",
        "boolean": "boolean",
    }.get(spark_type, spark_type)


@dataclass
class Column:
    """One column of a modelled table. ``domain`` names a special value generator."""

    name: str
    spark_type: str
    nullable: bool = True
    domain: str | None = None
    source_type: str = ""

    def __post_init__(self) -> None:
        self.source_type = self.source_type or _source_type(self.spark_type)

    def schema(self) -> dict:
        """This column as a COLUMN_SCHEMA struct (dict)."""
        dec = _decimal_type(self.spark_type)
        return {
            "name": self.name,
            "source_type": self.source_type,
            "spark_type": self.spark_type,
            "precision": dec[0] if dec else None,
            "scale": dec[1] if dec else None,
            "nullable": self.nullable,
        }


class _Rows:
    """Rows by id with O(1) random choice and removal (ids kept in a list, removal swaps the
    last id into the hole), deterministic for a given sequence of operations."""

    def __init__(self) -> None:
        self.ids: list = []
        self.index: dict = {}
        self.rows: dict = {}

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, rid) -> bool:
        return rid in self.rows

    def add(self, rid, row: dict) -> None:
        assert rid not in self.rows, rid
        self.index[rid] = len(self.ids)
        self.ids.append(rid)
        self.rows[rid] = row

    def remove(self, rid) -> dict:
        i = self.index.pop(rid)
        last = self.ids.pop()
        if last != rid:
            self.ids[i] = last
            self.index[last] = i
        return self.rows.pop(rid)

    def choice(self, rnd: random.Random):
        return self.ids[rnd.randrange(len(self.ids))]

    def clear(self) -> None:
        self.ids.clear()
        self.index.clear()
        self.rows.clear()


def _not_null(c: Column) -> str:
    """The ``NOT NULL`` of column ``c`` in DDL text ('' when nullable)."""
    return "" if c.nullable else " NOT NULL"


@dataclass
class _Table:
    database: str
    schema: str | None
    table: str
    columns: list[Column]
    key: list[str]
    rows: _Rows = field(default_factory=_Rows)
    sigs: Counter = field(default_factory=Counter)  # keyless: whole-row signature -> rows holding it
    #: keyless: every image the table held, current or not, also before a truncate or drop (an
    #: SCD type 2 history keeps those versions, and a batch that drops a column counts them
    #: again): a change older than a DROP COLUMN that arrives after it is matched on the columns left
    seen: list = field(default_factory=list)
    added: int = 0
    renamed: int = 0
    moved: int = 0  # RENAME TABLE of this table so far
    next_id: int = 0  # keyless: surrogate row ids (never emitted)

    def empty(self) -> None:
        """Forget every row (a truncate, a drop); :attr:`seen` keeps the images."""
        self.rows.clear()
        self.sigs.clear()

    @property
    def name(self) -> str:
        return qualified_name(self.database, self.schema, self.table)

    @property
    def ref(self) -> str:
        return ".".join(f"`{p}`" for p in (self.database, self.schema, self.table) if p)

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    def sig(self, row: dict) -> tuple:
        return tuple(row[c.name] for c in self.columns)

    def rid(self, row: dict):
        return tuple(row[k] for k in self.key)

    def rebuild_sigs(self) -> None:
        if not self.key:
            self.sigs = Counter(self.sig(self.rows.rows[r]) for r in self.rows.ids)


def _templates(i: int) -> _Table:
    """The i-th modelled table: customers, order_lines, audit_log, customers_1, ..."""
    kind, n = i % 3, i // 3
    suffix = f"_{n}" if n else ""
    if kind == 0:
        cols = [
            Column("id", "int", nullable=False, domain="id"),
            Column("name", "string"),
            Column("balance", "decimal(10,2)"),
            Column("visits", "int"),
            Column("lifetime_bytes", "bigint"),
            Column("vip", "boolean"),
            Column("birthday", "date"),
            Column("updated_at", "timestamp"),
            Column("avatar", "binary"),
        ]
        return _Table("shop", None, "customers" + suffix, cols, ["id"])
    if kind == 1:
        cols = [
            Column("region", "string", nullable=False, domain="region", source_type="varchar(32)"),
            Column("order_no", "bigint", nullable=False, domain="order_no"),
            Column("line_no", "int", nullable=False, domain="line_no"),
            Column("amount", "decimal(38,10)"),
            Column("unit_price", "decimal(18,4)"),
            Column("qty", "int"),
            Column("note", "string", source_type="text"),
            Column("shipped_on", "date"),
            Column("created_at", "timestamp"),
            Column("gift", "boolean"),
        ]
        return _Table("shop", "sales", "order_lines" + suffix, cols, ["region", "order_no", "line_no"])
    cols = [
        Column("host", "string", domain="host", source_type="varchar(64)"),
        Column("level", "int"),
        Column("message", "string", source_type="text"),
        Column("at", "timestamp"),
        Column("metric", "decimal(10,2)"),
        Column("raw", "binary"),
        Column("ok", "boolean"),
        Column("day", "date"),
    ]
    return _Table("shop", None, "audit_log" + suffix, cols, [])


class Workload:
    """A seeded workload: a few source tables and the change stream they produce.

    Args:
        seed: the only source of randomness; same seed (and arguments) -> same result.
        tables: number of tables (>= 1); templates cycle single key, composite key, no key.
        events: number of streamed events after the snapshot (data, DDL, heartbeats).
        snapshot_rows: rows per table in the initial snapshot (op ``r``).
        ddl: generate DDL (ADD COLUMN and widening MODIFY COLUMN).
        truncates: generate ``TRUNCATE`` (op ``t``).
        heartbeats: generate heartbeats.
        drop_rename: also generate DROP COLUMN and RENAME COLUMN (only with ``ddl``). Off by
            default: the applier does not follow them yet.
        drop_tables: also generate ``DROP TABLE`` of a random table, then ``CREATE TABLE`` of it
            again with the same columns (two DDL events; its rows are gone). Off by default.
        rename_tables: also generate ``RENAME TABLE a TO b`` (MySQL's statement, the names
            unqualified in the table's database; a DDL event of ``a``) of a random table, once
            per table at most: its rows and columns go on under the new name ``<table>_r1``
            (later events and :attr:`SimResult.final` use it), and the old name is never used
            again. Off by default (the same seed then gives the same stream as before the
            option existed).
        recreate_renamed: with ``rename_tables``, right after a rename a table is created again
            under the old name (``CREATE TABLE``, the same columns and key, empty) and written
            to like the others, as gh-ost's and pt-online-schema-change's cut-over leave it; it
            is never renamed itself. Off by default (the same seed then gives the same stream).
        rename_keyless: with ``rename_tables``, a table without a key may be renamed too (on by
            default; off, only keyed tables are: cdclake's SCD type 2 histories of a keyless
            table renamed while its changes arrive late are not exact).
        identical_rows: a table without a key also gets rows identical to one it holds (an
            insert of a copy, :data:`COPY_RATE` of its inserts once it has rows; a delete or an
            update then takes one copy, a database does not say which). Off by default (the
            same seed then gives the same stream as before the option existed); off, a keyless
            table's rows are all different.
        truncate_columns: truncates carry ``columns`` like every data event. False gives
            truncates without a column schema, as Canal and Debezium write them; the applier
            then ignores a truncate whose batch holds no other event of its table (a known bug,
            see ``tests/simulate``), so it is on by default.
    """

    def __init__(
        self,
        seed: int,
        tables: int = 3,
        events: int = 1000,
        snapshot_rows: int = 20,
        ddl: bool = True,
        truncates: bool = True,
        heartbeats: bool = True,
        drop_rename: bool = False,
        truncate_columns: bool = True,
        drop_tables: bool = False,
        rename_tables: bool = False,
        identical_rows: bool = False,
        rename_keyless: bool = True,
        recreate_renamed: bool = False,
    ) -> None:
        if tables < 1:
            raise ValueError("tables must be >= 1")
        if events < 0 or snapshot_rows < 0:
            raise ValueError("events and snapshot_rows must be >= 0")
        self.seed = seed
        self.tables = tables
        self.events = events
        self.snapshot_rows = snapshot_rows
        self.ddl = ddl
        self.truncates = truncates
        self.heartbeats = heartbeats
        self.drop_rename = drop_rename
        self.truncate_columns = truncate_columns
        self.drop_tables = drop_tables
        self.rename_tables = rename_tables
        self.identical_rows = identical_rows
        self.rename_keyless = rename_keyless
        self.recreate_renamed = recreate_renamed

    def __repr__(self) -> str:
        return (
            f"Workload(seed={self.seed}, tables={self.tables}, events={self.events}, "
            f"snapshot_rows={self.snapshot_rows}, ddl={self.ddl}, truncates={self.truncates}, "
            f"heartbeats={self.heartbeats}, drop_rename={self.drop_rename}, "
            f"truncate_columns={self.truncate_columns}, drop_tables={self.drop_tables}, "
            f"rename_tables={self.rename_tables}, identical_rows={self.identical_rows}"
            + ("" if self.rename_keyless else ", rename_keyless=False")
            + (", recreate_renamed=True" if self.recreate_renamed else "") + ")"
        )

    def generate(self) -> SimResult:
        """Build the stream and the final state (a new, independent run on every call)."""
        return _Run(self).run()


class _Run:
    """One generation: the model's state and the events emitted so far."""

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.rnd = random.Random(w.seed)
        # identical_rows draws from its own stream: the main one is the same until a first copy
        self.copy_rnd = random.Random(f"{w.seed}:copies")
        self.tables = [_templates(i) for i in range(w.tables)]
        self.events: list[dict] = []
        self.n = 0  # last streamed position
        self.time_ms = BASE_TIME_MS
        self.tx_count = 0
        self.streamed = 0

    # ---- values -------------------------------------------------------------------------

    def text(self) -> str:
        rnd = self.rnd
        if rnd.random() < 0.03:
            return "".join(rnd.choice(TEXT_PIECES) for _ in range(rnd.randint(20, 60)))  # long
        parts = [rnd.choice(TEXT_PIECES) for _ in range(rnd.randint(1, 3))]
        if rnd.random() < 0.5:
            parts.append(str(rnd.randint(0, 9999)))
        return rnd.choice([" ", "", "-"]).join(parts)

    def integer(self, lo: int, hi: int) -> int:
        rnd = self.rnd
        if rnd.random() < EDGE_RATE:
            return rnd.choice([0, -1, 1, lo, hi])
        if rnd.random() < 0.5:
            return rnd.randint(-1000, 100_000)
        return rnd.randint(lo, hi)

    def decimal(self, p: int, s: int) -> Decimal:
        rnd = self.rnd
        if rnd.random() < EDGE_RATE:
            unscaled = rnd.choice([0, 1, -1, 10**p - 1, -(10**p - 1)])
        else:
            digits = rnd.randint(1, p)
            unscaled = rnd.randint(0, 10**digits - 1) * rnd.choice([1, 1, -1])
        sign = "-" if unscaled < 0 else ""
        u = str(abs(unscaled)).rjust(s + 1, "0")
        return Decimal(f"{sign}{u[:-s]}.{u[-s:]}" if s else f"{sign}{u}")

    def value(self, col: Column, allow_null: bool = True) -> Any:
        rnd, t = self.rnd, col.spark_type
        if allow_null and col.nullable and rnd.random() < NULL_RATE:
            return None
        if col.domain == "id":
            return rnd.randint(1, 10**6) if rnd.random() < 0.7 else rnd.randint(1, _INT_MAX if t == "int" else _BIG_MAX)
        if col.domain == "line_no":
            return rnd.randint(1, 40)
        if col.domain == "order_no":
            return rnd.randint(1, 10**12)
        if col.domain == "region":
            return rnd.choice(REGIONS)
        if col.domain == "host":
            return rnd.choice(HOSTS)
        if t == "int":
            return self.integer(_INT_MIN, _INT_MAX)
        if t == "bigint":
            return self.integer(_BIG_MIN, _BIG_MAX)
        dec = _decimal_type(t)
        if dec:
            return self.decimal(*dec)
        if t == "string":
            return self.text()
        if t == "binary":
            return rnd.randbytes(rnd.choice([0, 1, 3, 8, 16, 33]))
        if t == "boolean":
            return rnd.random() < 0.5
        if t == "date":
            if rnd.random() < EDGE_RATE:
                return rnd.choice([date(1970, 1, 1), date(1900, 1, 1), date(2000, 2, 29), date(2099, 12, 31)])
            return date(1900, 1, 1) + timedelta(days=rnd.randint(0, 73_000))
        if t == "timestamp":
            if rnd.random() < EDGE_RATE:
                return rnd.choice(
                    [_EPOCH, datetime(1969, 12, 31, 23, 59, 59, 999_999), datetime(2038, 1, 19, 3, 14, 7, 999_999),
                     datetime(2024, 2, 29, 12, 0, 0, 1)]
                )
            return datetime(1950, 1, 1) + timedelta(microseconds=rnd.randint(0, 140 * 365 * 86_400 * 10**6))
        raise ValueError(f"cannot draw a value of type {t}")

    # ---- rows ---------------------------------------------------------------------------

    def new_key(self, t: _Table, base: dict | None = None) -> dict:
        """Key values not used by any row of ``t``; with ``base``, a changed key of that row
        (one or more key columns drawn again)."""
        for _ in range(1000):
            if base is None:
                vals = {k: self.value(t.column(k), allow_null=False) for k in t.key}
            else:
                change = [k for k in t.key if self.rnd.random() < 0.5] or [self.rnd.choice(t.key)]
                vals = {k: self.value(t.column(k), allow_null=False) if k in change else base[k] for k in t.key}
            if tuple(vals[k] for k in t.key) not in t.rows:
                return vals
        raise RuntimeError(f"no free key in {t.name}")

    def new_row(self, t: _Table) -> dict | None:
        for _ in range(50):
            key = self.new_key(t) if t.key else {}
            row = {c.name: key[c.name] if c.name in key else self.value(c) for c in t.columns}
            if t.key or t.sig(row) not in t.sigs:
                return row
        return None

    def changed_row(self, t: _Table, old: dict, change_key: bool) -> dict | None:
        """A full after image of ``old``: some non-key columns drawn again (and the key, when
        ``change_key``); never equal to ``old``, never a duplicate row of a keyless table."""
        others = [c for c in t.columns if c.name not in t.key]
        for _ in range(50):
            row = dict(old)
            if change_key:
                row.update(self.new_key(t, old))
            if others:
                for c in self.rnd.sample(others, self.rnd.randint(1 if not change_key else 0, min(3, len(others)))):
                    row[c.name] = self.value(c)
            if row == old:
                continue
            if t.key or t.sig(row) not in t.sigs:
                return row
        return None

    def _store(self, t: _Table, row: dict) -> None:
        if t.key:
            t.rows.add(t.rid(row), row)
        else:
            rid = t.next_id
            t.next_id += 1
            t.rows.add(rid, row)
            t.sigs[t.sig(row)] += 1
            t.seen.append(dict(row))

    def _drop(self, t: _Table, rid) -> dict:
        row = t.rows.remove(rid)
        if not t.key:
            sig = t.sig(row)
            t.sigs[sig] -= 1
            if not t.sigs[sig]:
                del t.sigs[sig]
        return row

    # ---- events -------------------------------------------------------------------------

    def image(self, t: _Table, row: dict) -> dict:
        return {c.name: encode_value(row[c.name], c.spark_type) for c in t.columns}

    def emit(self, kind: str, *, op=None, t: _Table | None = None, before=None, after=None, ddl=None,
             order: list[int] | None = None, text: str | None = None, tx: tuple[str, int] | None = None) -> dict:
        if order is None:
            self.n += 1
            order, text = [self.n], str(self.n)
            self.streamed += 1
        with_table = t is not None
        e = {
            "format": FORMAT,
            "kind": kind,
            "op": op,
            "database": t.database if with_table else None,
            "schema": t.schema if with_table else None,
            "table": t.table if with_table else None,
            "before": self.image(t, before) if before is not None else None,
            "after": self.image(t, after) if after is not None else None,
            "present": None,
            "primary_key": list(t.key) if with_table and t.key else None,
            "columns": [c.schema() for c in t.columns] if with_table else None,
            "position": {"order": [Decimal(v) for v in order], "text": text},
            "tx_id": tx[0] if tx else None,
            "tx_seq": tx[1] if tx else None,
            "tx_last": None,
            "tx_size": None,
            "ddl": ddl,
            "event_time_ms": self.time_ms,
            "source_record": {
                "topic": None, "partition": None, "offset": None, "timestamp_ms": None,
                "file": SOURCE_FILE, "line": len(self.events) + 1, "headers": None,
            },
        }
        assert list(e) == EVENT_COLUMNS
        self.events.append(e)
        return e

    def tick(self) -> None:
        """Advance the commit clock (before each transaction, DDL or heartbeat)."""
        self.time_ms += self.rnd.randint(1, 5000)

    # ---- the stream ---------------------------------------------------------------------

    def snapshot(self) -> None:
        i = 0
        for t in self.tables:
            for _ in range(self.w.snapshot_rows):
                row = self.new_row(t)
                if row is None:
                    continue
                self._store(t, row)
                i += 1
                self.emit("data", op="r", t=t, after=row, order=[0, i], text=f"0:{i}")

    def data_change(self, tx: tuple[str, int]) -> None:
        """One insert, update, key-changing update or delete on a random table."""
        rnd = self.rnd
        t = rnd.choice(self.tables)
        r = rnd.random()
        if len(t.rows) and r < 0.6:
            rid = t.rows.choice(rnd)
            old = t.rows.rows[rid]
            if r < 0.22:
                self._drop(t, rid)
                self.emit("data", op="d", t=t, before=old, tx=tx)
                return
            new = self.changed_row(t, old, change_key=bool(t.key) and r < 0.3)
            if new is not None:
                self._drop(t, rid)
                self._store(t, new)
                self.emit("data", op="u", t=t, before=old, after=new, tx=tx)
                return
        if self.w.identical_rows and not t.key and len(t.rows) and self.copy_rnd.random() < COPY_RATE:
            row = dict(t.rows.rows[t.rows.choice(self.copy_rnd)])  # a copy of a row the table holds
        else:
            row = self.new_row(t)
        if row is None:  # a keyless table where every drawn row already exists
            rid = t.rows.choice(rnd)
            self.emit("data", op="d", t=t, before=self._drop(t, rid), tx=tx)
            return
        self._store(t, row)
        self.emit("data", op="c", t=t, after=row, tx=tx)

    def transaction(self, size: int) -> None:
        self.tick()
        self.tx_count += 1
        tx_id = f"sim-{self.tx_count}"
        first = len(self.events)
        for seq in range(1, size + 1):
            self.data_change((tx_id, seq))
        self.close_tx(first)

    def close_tx(self, first: int) -> None:
        evs = self.events[first:]
        for e in evs:
            e["tx_size"] = len(evs)
            e["tx_last"] = False
        evs[-1]["tx_last"] = True

    def truncate(self) -> None:
        self.tick()
        self.tx_count += 1
        t = self.rnd.choice(self.tables)
        t.empty()
        first = len(self.events)
        e = self.emit("data", op="t", t=t, tx=(f"sim-{self.tx_count}", 1))
        if not self.w.truncate_columns:
            e["columns"] = None
        self.close_tx(first)

    def drop_table(self) -> None:
        """``DROP TABLE`` of a random table, then ``CREATE TABLE`` of it again (same columns)."""
        t = self.rnd.choice(self.tables)
        t.empty()
        self.tick()
        self.emit("ddl", t=t, ddl=f"DROP TABLE {t.ref}")
        self.create_table(t)

    def create_table(self, t: _Table) -> None:
        """``CREATE TABLE`` of ``t`` with its columns and key (a DDL event)."""
        cols = ", ".join(f"`{c.name}` {c.source_type.upper()}{_not_null(c)}" for c in t.columns)
        key = f", PRIMARY KEY ({', '.join(f'`{k}`' for k in t.key)})" if t.key else ""
        self.tick()
        self.emit("ddl", t=t, ddl=f"CREATE TABLE {t.ref} ({cols}{key})")

    def rename_table(self) -> bool:
        """``RENAME TABLE a TO b`` of a random table (a DDL event of ``a``); False when that
        table was renamed already."""
        t = self.rnd.choice(self.tables if self.w.rename_keyless else [t for t in self.tables if t.key] or self.tables)
        if t.moved or not (t.key or self.w.rename_keyless):
            return False
        t.moved += 1
        new = f"{t.table}_r{t.moved}"
        self.tick()
        # the names unqualified, as a user in the table's database writes them (MySQL's binlog
        # keeps the statement's text; the event names the database)
        self.emit("ddl", t=t, ddl=f"RENAME TABLE `{t.table}` TO `{new}`")
        old, t.table = t.table, new
        if self.w.recreate_renamed:
            # (numbered on from the old table's: an added or renamed column gets a name it never had)
            again = _Table(t.database, t.schema, old, [dataclasses.replace(c) for c in t.columns], list(t.key),
                           added=t.added, renamed=t.renamed, moved=1)
            self.tables.append(again)
            self.create_table(again)
        return True

    def ddl_choices(self, t: _Table) -> list[tuple[str, Column | None]]:
        out: list[tuple[str, Column | None]] = []
        if t.added < MAX_ADDED_COLUMNS:
            out.append(("add", None))
        for c in t.columns:
            dec = _decimal_type(c.spark_type)
            if c.spark_type == "int" or (dec and dec[0] + 2 <= 38):
                out.append(("widen", c))
        if self.w.drop_rename:
            others = [c for c in t.columns if c.name not in t.key]
            if len(others) > 3:  # keep a few columns (and the key) in every table
                out += [("drop", c) for c in others]
            out += [("rename", c) for c in others]
        return out

    def schema_change(self) -> bool:
        """One DDL on a random table; False when that table has no change left to draw."""
        rnd = self.rnd
        t = rnd.choice(self.tables)
        choices = self.ddl_choices(t)
        if not choices:
            return False
        what, col = rnd.choice(choices)
        if what == "add":
            t.added += 1
            typ = rnd.choice(ADD_TYPES)
            col = Column(f"extra_{t.added}", typ)
            t.columns.append(col)
            for row in [*t.rows.rows.values(), *t.seen]:
                row[col.name] = None
            text = f"ALTER TABLE {t.ref} ADD COLUMN `{col.name}` {col.source_type.upper()} NULL"
        elif what == "widen":
            dec = _decimal_type(col.spark_type)
            col.spark_type = f"decimal({dec[0] + 2},{dec[1]})" if dec else "bigint"
            col.source_type = _source_type(col.spark_type)
            text = f"ALTER TABLE {t.ref} MODIFY COLUMN `{col.name}` {col.source_type.upper()}{_not_null(col)}"
        elif what == "drop":
            rest = [c.name for c in t.columns if c is not col]
            # two different images the keyless table ever held would become
            # identical: a change older than the drop that arrives after it (read with the
            # columns left, README "Schema changes") could take the other one's row, which the
            # source never did (seed 603/509 of the SCD type 2 property, session 39)
            if not t.key and len({tuple(r[c] for c in rest) for r in t.seen}) != len({t.sig(r) for r in t.seen}):
                return False
            t.columns.remove(col)
            for row in [*t.rows.rows.values(), *t.seen]:
                del row[col.name]
            text = f"ALTER TABLE {t.ref} DROP COLUMN `{col.name}`"
        else:
            t.renamed += 1
            old = col.name
            col.name = f"renamed_{t.renamed}"
            for row in [*t.rows.rows.values(), *t.seen]:
                row[col.name] = row.pop(old)
            text = f"ALTER TABLE {t.ref} RENAME COLUMN `{old}` TO `{col.name}`"
        distinct = len(t.sigs)
        t.rebuild_sigs()
        assert t.key or len(t.sigs) == distinct, f"DDL made different rows of {t.name} identical"
        self.tick()
        self.emit("ddl", t=t, ddl=text)
        return True

    def run(self) -> SimResult:
        w, rnd = self.w, self.rnd
        self.snapshot()
        self.time_ms += 1000
        while self.streamed < w.events:
            left = w.events - self.streamed
            r = rnd.random()
            if w.heartbeats and r < 0.04:
                self.tick()
                self.emit("heartbeat")
                continue
            if w.ddl and 0.04 <= r < 0.09 and self.schema_change():
                continue
            if w.truncates and 0.09 <= r < 0.105:
                self.truncate()
                continue
            if w.drop_tables and 0.105 <= r < 0.13:
                self.drop_table()
                continue
            if w.rename_tables and 0.13 <= r < 0.145 and self.rename_table():
                continue
            self.transaction(min(rnd.randint(1, MAX_TX_SIZE), left))
        return self.result()

    def result(self) -> SimResult:
        final, schemas, keys = {}, {}, {}
        for t in self.tables:
            sort_cols = t.key or [c.name for c in t.columns]
            types = {c.name: c.spark_type for c in t.columns}

            def order(row: dict, sort_cols=sort_cols, types=types) -> tuple:
                return tuple((row[c] is None, encode_value(row[c], types[c]) or "") for c in sort_cols)

            final[t.name] = [{c: r[c] for c in types} for r in sorted(t.rows.rows.values(), key=order)]
            schemas[t.name] = types
            keys[t.name] = list(t.key)
        return SimResult(self.events, final, schemas, keys)
