"""A seeded workload for a real PostgreSQL database captured by Debezium: the tables, the rows
the initial snapshot reads, then transactions streamed after it. The database is its own oracle
(the tests compare each target table with its rows), so the workload only has to write.

Tables (schema ``public``):

* ``customers``: a serial key; ``numeric(12,2)``, ``timestamptz``, ``date``, ``boolean``; key
  changes (``UPDATE ... SET id``).
* ``orders``: a ``bigint`` key; ``numeric`` without a scale (values of 45 digits and of tiny
  scale: Debezium's VariableScaleDecimal), ``smallint``, ``text``, ``timestamp``, ``text[]``,
  ``jsonb``, ``uuid``.
* ``types_all``: one column of each type of :data:`tests.real.postgres_types.MAPPINGS`.
* ``log_lines``: no key, ``REPLICA IDENTITY FULL``, identical rows in the snapshot and later.
* ``docs``: a large out-of-line (TOASTed) ``text`` under ``REPLICA IDENTITY DEFAULT``: an update
  that leaves it unchanged carries Debezium's unavailable-value placeholder.
* ``docs_full``: the same under ``REPLICA IDENTITY FULL``.
* ``marker``: one row per :meth:`Workload.mark`, to know when the connector caught up.

Streaming (:meth:`Workload.stream`): transactions of one statement and of several over several
tables, two transactions interleaved on two connections, updates, deletes, key changes, the
keyless table's duplicates; :meth:`Workload.ddl` then ADD, DROP and RENAME COLUMN with changes
around them and a TRUNCATE.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SCHEMA = """
create type mood as enum ('sad', 'ok', 'happy');
create table customers (id serial primary key, name text not null, email varchar(100), balance numeric(12,2),
  created_at timestamptz, birthday date, active boolean);
create table orders (id bigint primary key, customer_id int, amount numeric, qty smallint, note text,
  placed_at timestamp, tags text[], data jsonb, uid uuid);
create table types_all (id int primary key, c_int2 smallint, c_int4 int, c_int8 bigint, c_real real,
  c_double double precision, c_num numeric(50,10), c_num_var numeric, c_money money, c_char char(5),
  c_varchar varchar(20), c_text text, c_bytea bytea, c_bool boolean, c_date date, c_time time, c_timetz timetz,
  c_ts timestamp, c_tstz timestamptz, c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb, c_xml xml,
  c_int_arr int[], c_bigint_arr bigint[], c_text_arr text[], c_inet inet, c_cidr cidr, c_macaddr macaddr,
  c_point point, c_bit bit(8), c_bit1 bit(1), c_varbit varbit(16), c_enum mood, c_range int4range,
  c_tsvector tsvector, c_num_arr numeric[]);
create table log_lines (ts int, msg text);
alter table log_lines replica identity full;
create table docs (id int primary key, title text, body text);
alter table docs alter column body set storage external;
create table docs_full (id int primary key, title text, body text);
alter table docs_full alter column body set storage external;
alter table docs_full replica identity full;
create table marker (id int primary key);
"""

#: SQL literals per column of ``types_all``: each row takes one at random (NULL among them)
TYPE_VALUES = {
    "c_int2": ["-32768", "32767", "0", "null"],
    "c_int4": ["2147483647", "-2147483648", "7"],
    "c_int8": ["-9223372036854775808", "9223372036854775807", "42"],
    "c_real": ["1.5", "-0.25", "3.4e38", "null"],
    "c_double": ["2.25", "-1e-300", "1.7976931348623157e308"],
    "c_num": ["12345678901234567890123456789012345678.1234567891", "-99999999999999999999999999999999999999.9999999999",
              "0.0000000001", "null"],
    "c_num_var": ["1e-30", "123456789012345678901234567890123456789012345.5", "-7", "'NaN'", "null"],
    "c_money": ["12.34", "-0.01", "null"],
    "c_char": ["'ab'", "'abcde'", "null"],
    "c_varchar": ["'varchar'", "'Ñandú 😀'", "''"],
    "c_text": ["'text'", "E'line\\nbreak'", "'it''s'"],
    "c_bytea": ["'\\x00ff10'::bytea", "''::bytea", "null"],
    "c_bool": ["true", "false", "null"],
    "c_date": ["'2000-01-01'", "'1900-02-28'", "'2099-12-31'"],
    "c_time": ["'13:14:15.123456'", "'00:00:00'", "'23:59:59.999999'"],
    "c_timetz": ["'13:14:15+02'", "'00:00:01.5-05:30'", "null"],
    "c_ts": ["'2020-01-01 00:00:00.5'", "'1970-01-01 00:00:00'", "'2038-01-19 03:14:08.123456'"],
    "c_tstz": ["'2020-01-01 00:00:00+05'", "'1999-12-31 23:59:59.999999+00'", "null"],
    "c_interval": ["'1 year 2 months 3 days 04:05:06.5'", "'-3 days'", "'00:00:00.000001'", "null"],
    "c_uuid": ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "gen_random_uuid()"],
    "c_json": ["'{\"a\": 1}'", "'[1, \"x\", null]'", "null"],
    "c_jsonb": ["'{\"b\": [true, null]}'", "'\"s\"'", "null"],
    "c_xml": ["'<x>1</x>'", "null"],
    "c_int_arr": ["'{1,2,3}'", "'{}'", "'{5,null}'", "null"],
    "c_bigint_arr": ["'{9223372036854775807,-1}'", "null"],
    "c_text_arr": ["'{\"x\",\"y z\"}'", "'{\"a,b\",null}'", "null"],
    "c_inet": ["'192.168.0.1'", "'::1'", "null"],
    "c_cidr": ["'10.0.0.0/8'", "null"],
    "c_macaddr": ["'08:00:2b:01:02:03'", "null"],
    "c_point": ["'(1.5,2.5)'", "'(-3,0)'", "null"],
    "c_bit": ["B'10101010'", "B'00000001'", "null"],
    "c_bit1": ["B'1'", "B'0'", "null"],
    "c_varbit": ["B'101'", "B'1111000011110000'", "null"],
    "c_enum": ["'happy'", "'sad'", "null"],
    "c_range": ["'[1,5)'", "'empty'", "null"],
    "c_tsvector": ["'a fat cat'", "null"],
    "c_num_arr": ["'{1.5,2.25}'", "null"],
}

#: about 12 kB: stored out of line (``SET STORAGE EXTERNAL``), so an update that leaves it
#: unchanged does not carry it under REPLICA IDENTITY DEFAULT
BIG = "lorem ipsum dolor " * 700


@dataclass
class Workload:
    """The statements of one seeded run; ``scale`` multiplies the streamed transactions."""

    seed: int = 50
    scale: int = 1
    rnd: random.Random = field(init=False)
    next_order: int = field(init=False, default=100)
    marks: int = field(init=False, default=0)
    #: after :meth:`ddl`: ``orders.note`` is ``remark`` and ``orders.qty`` is gone
    altered: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.rnd = random.Random(self.seed)

    # -- the tables and the rows the snapshot reads -------------------------------------------

    def create(self, pg, db: str) -> None:
        pg.execute(SCHEMA, dbname=db)
        rows = [self.types_row(i) for i in range(1, 4)] + ["(4" + ", null" * len(TYPE_VALUES) + ")"]
        pg.execute(
            "insert into customers (name, email, balance, created_at, birthday, active) values "
            "('ann', 'ann@x.org', 10.50, '2026-01-02 03:04:05.123456+02', '1990-05-06', true), "
            "('bob', null, -3.25, '2026-01-03 00:00:00+00', null, false), ('cy', 'c@y', 0, now(), '2000-02-29', null);"
            "insert into orders values (1, 1, 123456789012345678901234567890123456789012345.5, 2, 'first', "
            "'2026-02-03 04:05:06.789', '{a,b}', '{\"k\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), "
            "(2, 2, 0.000000000000000000000000000000000000000001, 1, null, null, null, null, null), "
            "(3, 1, -5, 3, 'third', now(), '{}', '[]', gen_random_uuid());"
            f"insert into types_all values {', '.join(rows)};"
            "insert into log_lines values (1, 'dup'), (1, 'dup'), (2, 'other'), (1, 'dup');"
            f"insert into docs values (1, 'd1', '{BIG}'), (2, 'd2', 'small');"
            f"insert into docs_full values (1, 'd1', '{BIG}'), (2, 'd2', 'small');",
            dbname=db,
        )

    def types_row(self, key: int) -> str:
        return f"({key}, " + ", ".join(self.rnd.choice(v) for v in TYPE_VALUES.values()) + ")"

    # -- streamed changes ------------------------------------------------------------------------

    def stream(self, pg, db: str) -> None:
        """Transactions after the snapshot (no DDL): ``10 * scale`` random ones, then the fixed
        cases (interleaved transactions, a key change, TOASTed values left unchanged)."""
        for _ in range(10 * self.scale):
            self.random_transaction(pg, db)
        # two transactions interleaved on two connections: b commits first
        with pg.connect(db) as a, pg.connect(db) as b:
            a.execute("insert into orders values (10, 1, 1, 1, 'a1', null, null, null, null)")
            b.execute("insert into orders values (20, 2, 2, 1, 'b1', null, null, null, null)")
            a.execute("update customers set balance = balance + 1 where id = 1")
            b.execute("delete from orders where id = 2")
            b.commit()
            a.execute("insert into orders values (11, 1, 1, 1, 'a2', null, null, null, null)")
            a.commit()
        pg.execute("update customers set id = 10 where id = 2", dbname=db)  # a key change
        pg.execute("update docs set title = 'd1 changed' where id = 1; update docs_full set title = 'd1 changed' where id = 1",
                   dbname=db)
        pg.execute("update docs set body = 'now small' where id = 2", dbname=db)
        pg.execute("insert into log_lines values (1, 'dup'), (3, 'new');"
                   "delete from log_lines where ctid = (select min(ctid) from log_lines where ts = 1);"
                   "update log_lines set msg = 'changed' where ts = 2", dbname=db)

    def random_transaction(self, pg, db: str) -> None:
        """One transaction of one to four random statements over the keyed tables."""
        statements = [self.random_statement() for _ in range(self.rnd.choice((1, 1, 2, 4)))]
        pg.execute(";".join(statements), dbname=db)

    def random_statement(self) -> str:
        r = self.rnd.random()
        note = "remark" if self.altered else "note"
        if r < 0.3:
            self.next_order += 1
            amount = self.rnd.choice(["1", "0.5", "99999999999999999999999999999999999999999.125", "-3e-20"])
            qty = "" if self.altered else f"{self.rnd.randint(0, 9)}, "
            columns = "id, customer_id, amount, " + ("" if self.altered else "qty, ") + f"{note}, placed_at, tags, data, uid"
            return (f"insert into orders ({columns}) values ({self.next_order}, {self.rnd.randint(1, 3)}, {amount}, {qty}"
                    f"'o{self.next_order}', now(), '{{x,y}}', '{{\"n\": {self.next_order}}}', gen_random_uuid())")
        if r < 0.5:
            qty = "" if self.altered else "qty = qty + 1, "
            return f"update orders set {qty}{note} = {note} || '+' where id % 3 = {self.rnd.randint(0, 2)}"
        if r < 0.6:
            return f"delete from orders where id = {self.rnd.randint(100, self.next_order)}"
        if r < 0.75:
            return f"update customers set balance = coalesce(balance, 0) + {self.rnd.randint(-5, 5)}.25, active = not coalesce(active, false)"
        if r < 0.9:
            key = self.rnd.randint(1, 6)
            return f"delete from types_all where id = {key}; insert into types_all values {self.types_row(key)}"
        return f"update types_all set c_text = 'upd{self.rnd.randint(0, 99)}', c_num_var = {self.rnd.choice(TYPE_VALUES['c_num_var'])} where id = 1"

    def ddl(self, pg, db: str) -> None:
        """Column DDL with changes around it, and a TRUNCATE."""
        pg.execute("alter table customers add column tier int", dbname=db)
        pg.execute("insert into customers (name, tier) values ('dan', 3); update customers set tier = 1 where id = 1", dbname=db)
        pg.execute("alter table orders rename column note to remark", dbname=db)
        pg.execute("update orders set remark = 'renamed' where id = 1", dbname=db)
        pg.execute("alter table orders drop column qty", dbname=db)
        self.altered = True
        pg.execute("insert into orders (id, customer_id, amount, remark) values (4, 1, 7, 'after drop')", dbname=db)
        pg.execute("truncate log_lines", dbname=db)
        pg.execute("insert into log_lines values (9, 'after truncate'), (9, 'after truncate')", dbname=db)
        for _ in range(3 * self.scale):
            self.random_transaction(pg, db)

    def mark(self, pg, db: str) -> int:
        """Insert the next marker row (its own transaction) and return its id."""
        self.marks += 1
        pg.execute(f"insert into marker values ({self.marks})", dbname=db)
        return self.marks
