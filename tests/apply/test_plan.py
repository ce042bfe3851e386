"""The batch planner's driver-side logic (cdclake.apply.plan.build_plan), without Spark: rows
shaped as the one planning aggregate returns them."""

from __future__ import annotations

from decimal import Decimal

from cdclake.apply.plan import build_plan, order_key, ranked_key


def col(name, spark_type):
    return {"name": name, "source_type": spark_type, "spark_type": spark_type, "precision": None, "scale": None, "nullable": None}


def pos(*order, text=None):
    return {"order": [Decimal(o) for o in order], "text": text or ":".join(map(str, order))}


def table_row(cols=None, keys=None, first=(1,), table="t", **kw):
    row = {
        "by_table": 1, "source": None, "database": "db", "schema": None, "table": table,
        "cols": cols, "keys": keys, "first_order": [Decimal(o) for o in first],
        "n_c": 0, "n_u": 0, "n_d": 0, "n_r": 0, "n_t": 0, "partial": 0, "halves": 0,
        "pk": None, "pk_order": None, "truncate": None, "min_data": None, "max_delete": None, "ddls": [],
        "last_position": None, "last_event_time_ms": None, "last_heartbeat_ms": None,
    }
    row.update(kw)
    row.setdefault("n_ranked", sum(row[f"n_{o}"] for o in "cudrt"))  # no format ordering snapshots by position
    return row


def source_row(source, table, last, time_ms, heartbeat=None):
    return {
        "by_table": 0, "source": source, "database": "db" if table else None, "schema": None, "table": table,
        "cols": None, "keys": None, "last_position": last, "last_event_time_ms": time_ms, "last_heartbeat_ms": heartbeat,
    }


def test_order_keys_compare_like_spark_arrays():
    assert order_key([1, 2]) < order_key([1, 3]) < order_key([2])
    assert order_key([1]) < order_key([1, 0])  # a shorter prefix first
    assert order_key(None) < order_key([])
    assert ranked_key(0, [99]) < ranked_key(1, [1])  # a snapshot read is older than any streamed change


def test_columns_widen_across_declarations_in_first_seen_order():
    rows = [
        table_row([col("id", "int"), col("v", "decimal(10,2)")], ["id", "v"], first=(5,), n_c=2),
        table_row([col("id", "bigint"), col("v", "decimal(12,4)"), col("w", "date")], ["id", "v", "w"], first=(9,), n_u=1),
        table_row(None, ["id", "extra"], first=(1,), n_d=1),  # undeclared image keys: strings
    ]
    [p] = build_plan(rows).tables
    assert list(p.columns) == ["id", "extra", "v", "w"]
    assert p.columns == {"id": "string", "extra": "string", "v": "decimal(12,4)", "w": "date"}
    assert p.counts == {"c": 2, "u": 1, "d": 1, "r": 0, "t": 0}


def test_null_type_counts_only_when_no_declaration_has_one():
    rows = [
        table_row([col("a", None), col("b", None)], ["a", "b"], first=(1,)),
        table_row([col("a", "bigint")], ["a"], first=(2,)),
    ]
    [p] = build_plan(rows).tables
    assert p.columns == {"a": "bigint", "b": "string"}
    assert p.untyped == ["b"]  # a table that has it keeps its type
    # a new untyped column's type from its source type name (DTS codes of value-typed columns)
    untyped = [dict(col(n, None), source_type=f"MYSQL_TYPE_{t}") for n, t in (("d", "DECIMAL_NEW"), ("x", "BLOB"), ("v", "VARCHAR"))]
    [p] = build_plan([table_row(untyped, ["d", "x", "v"])]).tables
    assert p.columns == {"d": "decimal(38,10)", "x": "binary", "v": "string"} and p.untyped == ["d", "x", "v"]


def test_rows_of_the_transaction_set_are_the_gates():
    # a gated batch's aggregate also has one row per transaction (by_tx 0): not a table's
    # (whatever else the row holds)
    tx = {**table_row(None, ["b"], n_c=5), "by_tx": 0, "tx": "t1", "open": True, "n_tx": 5}
    plan = build_plan([{**table_row([col("a", "int")], ["a"], n_c=1), "by_tx": 1}, tx])
    [p] = plan.tables
    assert (p.name, list(p.columns), p.counts["c"]) == ("db.t", ["a"], 1)


def test_key_configuration_then_message_then_whole_image():
    rows = [table_row([col("id", "int"), col("#alibaba_rds_row_id#", "bigint")], None, pk=["id"], pk_order=[Decimal(3)])]
    assert build_plan(rows).tables[0].key == ["id"]
    assert build_plan(rows, {"db.t": ["x"]}).tables[0].key == ["x"]
    assert build_plan(rows, {"t": ["y"]}).tables[0].key_source == "configuration"
    # a column named like a producer's row id is the user's own column unless the message
    # says it is the key (the DataWorks decoder does, for the formats that add one): the
    # applier never picks it by its name
    rows[0]["pk"] = None
    p = build_plan(rows).tables[0]
    assert (p.key, p.key_source) == ([], "none (whole before image)")
    rows[0]["cols"] = [col("id", "int"), col("rowid", "string")]
    assert build_plan(rows).tables[0].key == []


def test_latest_message_key_wins():
    rows = [
        table_row([col("a", "int")], None, pk=["a"], pk_order=[Decimal(7)]),
        table_row([col("a", "int"), col("b", "int")], None, pk=["a", "b"], pk_order=[Decimal(9)]),
    ]
    assert build_plan(rows).tables[0].key == ["a", "b"]


def test_positions_truncate_min_data_and_deletes_merge_over_rows():
    rows = [
        table_row([col("a", "int")], None, truncate=dict(pos(4), record=("f", 9, None, None)), min_data={"rank": 1, "order": [Decimal(3)]},
                  max_delete=[Decimal(8)]),
        table_row([col("a", "int"), col("b", "int")], None, truncate=dict(pos(6), record=("f", 7, None, None)),
                  min_data={"rank": 0, "order": [Decimal(9)]}, max_delete=[Decimal(2)]),
        # the same position, a later record: the later truncate (equal positions keep arrival order)
        table_row([col("a", "int")], None, truncate=dict(pos(6), record=("f", 8, None, None))),
        table_row([col("a", "int")], None, truncate=dict(pos(6), record=("f", 5, None, None))),
    ]
    p = build_plan(rows).tables[0]
    assert (p.truncate, p.truncate_record) == (([Decimal(6)], "6"), ("f", 8, None, None))
    assert p.min_data == (0, [Decimal(9)])  # a snapshot row is the oldest whatever its position
    assert p.max_delete == [Decimal(8)]


def test_progress_per_source_and_table_and_per_source():
    rows = [
        table_row([col("a", "int")], None),
        table_row([col("a", "int")], None, table="u"),
        source_row("f1", "t", pos(3), 300),
        source_row("f1", "u", pos(5), 200),
        source_row("f1", None, pos(9), 900, heartbeat=900),  # heartbeats: no table
        source_row("f2", "t", pos(1), 100),
    ]
    plan = build_plan(rows)
    got = {(s.source, s.table): (s.last_position_text, s.last_event_time_ms, s.last_heartbeat_ms) for s in plan.progress}
    assert got == {
        ("f1", "db.t"): ("3", 300, None),
        ("f1", "db.u"): ("5", 200, None),
        ("f2", "db.t"): ("1", 100, None),
        ("f1", None): ("9", 900, 900),
        ("f2", None): ("1", 100, None),
    }
    assert [p.name for p in plan.tables] == ["db.t", "db.u"]


def test_ddl_rows_sorted_by_position_and_events_without_table_ignored():
    rows = [
        table_row([col("a", "int")], None, ddls=[{"order": [Decimal(9)], "text": "9", "ddl": "ALTER 2"},
                                                 {"order": [Decimal(2)], "text": "2", "ddl": "ALTER 1"}]),
        table_row(None, None, table=None),
    ]
    [p] = build_plan(rows).tables
    assert [d[2] for d in p.ddl] == ["ALTER 1", "ALTER 2"]
    assert not p.has_changes


def test_key_range_is_given_only_when_every_event_has_a_value_of_the_one_key():
    from cdclake.apply.plan import KeyStats

    rows = [
        {"k_name_lo": "id", "k_name_hi": "id", "k_missing": 0, "k_bad_num": 0, "k_bad_ts": 3,
         "k_num_lo": Decimal("7"), "k_num_hi": Decimal("20.5"), "k_text_lo": "20.5", "k_text_hi": "7"},
        {"k_name_lo": "id", "k_name_hi": "id", "k_missing": 0, "k_bad_num": 0, "k_bad_ts": 1,
         "k_num_lo": Decimal("-3.25"), "k_num_hi": Decimal("4"), "k_text_lo": "-3.25", "k_text_hi": "4"},
    ]
    ks = KeyStats()
    for r in rows:
        ks.add(r)
    assert ks.range_for("id", "bigint") == (-4, 21)  # floor and ceiling: a superset of the values
    assert ks.range_for("id", "decimal(10,2)") == (-4, 21)
    assert ks.range_for("id", "string") == ("-3.25", "7")
    assert ks.range_for("id", "timestamp") is None  # values that are not timestamps
    assert ks.range_for("id", "double") is None  # no range for floating point keys
    assert ks.range_for("other", "bigint") is None  # measured on another column
    two = KeyStats()
    two.add(rows[0])
    two.add({**rows[1], "k_name_lo": "code"})
    assert two.range_for("id", "bigint") is None  # two key names in one batch
    gap = KeyStats()
    gap.add({**rows[0], "k_missing": 1})
    assert gap.range_for("id", "bigint") is None  # an image without the key's value
    dates = KeyStats()
    dates.add({"k_name_lo": "d", "k_name_hi": "d", "k_ts_lo": "2024-01-02 00:00:00.000000", "k_ts_hi": "2024-03-01 00:00:00.000000"})
    assert dates.range_for("d", "date") == ("2024-01-02 00:00:00.000000", "2024-03-01 00:00:00.000000")
    assert KeyStats().range_for("id", "bigint") is None  # no event measured


def test_drops_and_renames_of_the_batch_ddl_shape_the_columns():
    def ddl(at, text):
        return {"order": [Decimal(at)], "text": str(at), "ddl": text}

    before = table_row([col("id", "int"), col("a", "string"), col("b", "string")], None, first=(1,), last_order=[Decimal(1)])
    after = table_row(
        [col("id", "int"), col("a2", "bigint")], None, first=(2,), last_order=[Decimal(6)],
        ddls=[ddl(5, "ALTER TABLE `db`.`t` RENAME COLUMN `a` TO `a2`"), ddl(2, "ALTER TABLE t DROP COLUMN b")],
    )
    [p] = build_plan([before, after]).tables
    assert (p.columns, p.drops, p.renames) == ({"id": "int", "a2": "string"}, ["b"], {"a2": "a"})
    # b declared again after its drop (re-added): it stays; MySQL CHANGE with a new name renames
    again = table_row([col("id", "int"), col("b", "string")], None, first=(7,), last_order=[Decimal(7)],
                      ddls=[ddl(8, "ALTER TABLE t CHANGE COLUMN id ident bigint")])
    [p] = build_plan([before, after, again]).tables
    assert (p.columns, p.drops, p.renames) == ({"ident": "int", "a2": "string", "b": "string"}, [], {"a2": "a", "ident": "id"})
    # an untyped column (its values all NULL, TablePlan.untyped) renamed: its stand-in type
    # never widens the typed side's; renamed alone, the new name stays untyped
    price = dict(col("price", None), source_type="MYSQL_TYPE_DECIMAL_NEW")
    old = table_row([col("id", "int"), price], None, first=(1,), last_order=[Decimal(1)])
    new = table_row([col("id", "int"), col("cost", "decimal(20,15)")], None, first=(6,), last_order=[Decimal(6)],
                    ddls=[ddl(5, "ALTER TABLE t RENAME COLUMN price TO cost")])
    [p] = build_plan([old, new]).tables
    assert (p.columns, p.untyped) == ({"id": "int", "cost": "decimal(20,15)"}, [])
    [p] = build_plan([{**old, "ddls": [ddl(5, "ALTER TABLE t RENAME COLUMN price TO cost")]}]).tables
    assert (p.columns, p.untyped) == ({"id": "int", "cost": "decimal(38,10)"}, ["cost"])


def test_a_rename_whose_later_step_arrived_first_goes_on_to_the_chain_end():
    # a -> b at 2 arrives in a batch after b -> c (or DROP COLUMN b) at 36 was applied (the
    # progress's column_ddl): the table has a (events older than 2) and c; the batch's
    # rename is a -> c, merged into c as of 2 (delta_table.evolve_table); a drop at the chain's
    # end drops a. Found by the applier property's simulated shape (seed 10, shuffle seed 1,
    # recreate_renamed on: audit_log kept its column at beside renamed_2)
    from cdclake.apply.plan import follow_past_column_ddl

    def known(at, text):
        return ([Decimal(at)], str(at), f"ALTER TABLE t {text}")

    late = {"order": [Decimal(2)], "text": "2", "ddl": "ALTER TABLE t RENAME COLUMN a TO b"}
    for later, renames, drops in ((["RENAME COLUMN b TO c"], {"c": "a"}, []), (["RENAME COLUMN b TO x", "RENAME COLUMN x TO c"], {"c": "a"}, []),
                                  (["DROP COLUMN b"], {}, ["a"]), (["RENAME COLUMN b TO a"], {"a": "a"}, [])):
        for declared in ([col("id", "int"), col("a", "string")], None):  # with events older than 2, or the DDL alone
            plan = build_plan([table_row(declared, None, ddls=[late])])
            follow_past_column_ddl(plan, {"db.t": [known(36 + i, text) for i, text in enumerate(later)]})
            [p] = plan.tables
            assert (p.renames, p.drops, p.earlier_renames) == (renames, drops, []), (later, declared)
            assert {n: o for n, o in p.rename_orders.items()} == {n: [Decimal(2)] for n in renames}, later
            if declared:
                assert p.columns == {"id": "int", **{n: "string" for n in renames}}, later
    # interleaved: a -> b at 2 applied before; this batch brings b -> c at 36 and events that
    # declare a (older than 2), b and c: one pass in position order reads a and b as c, and
    # the table's b (not a, which it no longer has) is renamed, or merged into c
    mid = {"order": [Decimal(36)], "text": "36", "ddl": "ALTER TABLE t RENAME COLUMN b TO c"}
    plan = build_plan([table_row([col("id", "int"), col("a", "string")], None, ddls=[mid], last_order=[Decimal(1)]),
                       table_row([col("id", "int"), col("b", "string")], None, first=(5,), last_order=[Decimal(30)]),
                       table_row([col("id", "int"), col("c", "string")], None, first=(37,), last_order=[Decimal(40)])])
    follow_past_column_ddl(plan, {"db.t": [known(2, "RENAME COLUMN a TO b")]})
    [p] = plan.tables
    assert (p.columns, p.renames, p.rename_from, p.rename_orders, p.earlier_renames, p.drops) == (
        {"id": "int", "c": "string"}, {"c": "b"}, {"c": ["b", "a"]}, {"c": [Decimal(36)]}, [], [])
    # the later step delivered again with the earlier one (a -> b new, b -> c applied before and
    # in this batch too): a -> c, as above (seed 6, shuffle seed 1); the whole batch delivered
    # again: nothing to apply, its events read as c
    again = {"order": [Decimal(36)], "text": "36", "ddl": "ALTER TABLE t RENAME COLUMN b TO c"}
    for applied, renames, earlier in (([known(36, "RENAME COLUMN b TO c")], {"c": "a"}, []),
                                      ([known(2, "RENAME COLUMN a TO b"), known(36, "RENAME COLUMN b TO c")], {"c": "a"}, ["b", "c"])):
        plan = build_plan([table_row([col("id", "int"), col("a", "string")], None, ddls=[late, again], last_order=[Decimal(1)])])
        follow_past_column_ddl(plan, {"db.t": applied})
        [p] = plan.tables
        assert (p.columns, p.renames, p.earlier_renames, p.drops_or_renames_columns) == (
            {"id": "int", "c": "string"}, renames, earlier, not earlier), applied
    # a statement older than the batch's rename is not its chain: b -> c at 1 named another column b
    plan = build_plan([table_row([col("id", "int"), col("a", "string")], None, ddls=[late])])
    follow_past_column_ddl(plan, {"db.t": [known(1, "RENAME COLUMN b TO c")]})
    assert (plan.tables[0].renames, plan.tables[0].rename_orders) == ({"b": "a"}, {"b": [Decimal(2)]})


def test_table_end_reads_drop_and_truncate_statements():
    from cdclake.apply.ddl import table_end

    assert table_end("DROP TABLE shop.orders", "orders") == "drop"
    assert table_end("drop table if exists `shop`.`Orders`", "orders") == "drop"
    assert table_end("/* ERASE */ DROP TABLE a, orders", "orders") == "drop"
    assert table_end('DROP TABLE "ORDERS" PURGE', "orders") == "drop"
    assert table_end("TRUNCATE TABLE orders", "orders") == "truncate"
    # not this table's, or not a table's end
    assert table_end("DROP TABLE customers", "orders") is None
    assert table_end("DROP VIEW orders", "orders") is None
    assert table_end("ALTER TABLE orders DROP COLUMN note", "orders") is None
    assert table_end("DROP INDEX idx ON orders", "orders") is None
    assert table_end("this is not sql ((", "orders") is None
    assert table_end(None, "orders") is None


def test_snapshot_end_is_followed_as_a_null_record_truncate_only_by_position():
    # the latest snapshot_end of the table (a later one in another group) becomes the truncate
    # point with no record, unless a truncate of the batch is later; events whose snapshot rows
    # rank below streamed changes (n_ranked) leave it unapplied, with the reason
    def end(p, etime):
        return dict(pos(p), etime=etime)

    rows = [
        table_row([col("a", "int")], ["a"], n_r=2, n_ranked=0, snapshot_end=end(5, 50), n_snapshot_end=1),
        table_row(None, None, n_ranked=0, snapshot_end=end(7, 70), n_snapshot_end=1,
                  truncate=dict(pos(6), record=("f", 1, None, None)), n_t=1),
        table_row([col("a", "int")], ["a"], table="u", n_r=1, snapshot_end=end(5, 50), n_snapshot_end=1),
    ]
    by_name = {p.table: p for p in build_plan(rows).tables}
    t, u = by_name["t"], by_name["u"]
    assert (t.truncate, t.truncate_record, t.ends, t.snapshot_ends) == (([Decimal(7)], "7"), None, [([Decimal(7)], "7", 70)], 2)
    assert t.ended == ["full snapshot of the table completed (position 7): its older rows removed, as by a truncate"]
    assert (u.truncate, u.ends, u.ended) == (None, [], [])
    assert u.unapplied and "end of a full snapshot at position 5" in u.unapplied[0]


def test_table_renames_read_every_spelling():
    from cdclake.apply.ddl import table_renames

    assert table_renames("RENAME TABLE a TO b, db2.c TO db3.d") == ((("a",), ("b",)), (("db2", "c"), ("db3", "d")))
    assert table_renames("rename table `shop`.`x y` to `shop`.`z`") == ((("shop", "x y"), ("shop", "z")),)
    assert table_renames("RENAME old_t TO new_t") == ((("old_t",), ("new_t",)),)  # Oracle
    assert table_renames("ALTER TABLE a RENAME TO b") == ((("a",), ("b",)),)
    assert table_renames("ALTER TABLE `shop`.`a` RENAME AS `b`") == ((("shop", "a"), ("b",)),)
    assert table_renames("ALTER TABLE a RENAME b") == ((("a",), ("b",)),)  # MySQL: TO/AS may be left out
    assert table_renames("ALTER TABLE a ADD COLUMN c int, RENAME TO b") == ((("a",), ("b",)),)
    assert table_renames('ALTER TABLE IF EXISTS ONLY "S"."A" RENAME TO "B"') == ((("S", "A"), ("B",)),)
    # gh-ost's cut-over swap: two renames in one statement, in order
    assert table_renames("RENAME TABLE t TO _t_del, _t_gho TO t") == ((("t",), ("_t_del",)), (("_t_gho",), ("t",)))
    assert table_renames("ALTER TABLE a RENAME TO b; RENAME TABLE b TO c") == ((("a",), ("b",)), (("b",), ("c",)))
    # column, index renames and other statements are not table renames
    assert table_renames("ALTER TABLE a RENAME COLUMN x TO y, RENAME TO b") == ((("a",), ("b",)),)
    assert table_renames("ALTER ONLINE IGNORE TABLE a RENAME INDEX i TO j, RENAME b") == ((("a",), ("b",)),)  # MariaDB
    for text in ("ALTER TABLE a RENAME COLUMN x TO y", "ALTER TABLE a RENAME x TO y", "ALTER TABLE t RENAME INDEX i TO j",
                 "ALTER TABLE t RENAME PARTITION p1 TO p2", "ALTER TABLE t RENAME SUBPARTITION p1 TO p2",
                 "ALTER TABLE a ADD COLUMN rename int", "ALTER TABLE a ALTER COLUMN rename SET DEFAULT 1",
                 "CREATE TABLE rename_me (a int)", "DROP TABLE a", None, ""):
        assert table_renames(text) == (), text


def test_table_renames_are_planned_once_with_names_resolved_and_grouped():
    from cdclake.apply.renames import rename_point, waves

    def ddl(at, text, line):
        return {"order": [Decimal(at)], "text": str(at), "ddl": text, "etime": 1000 * at, "format": "canal-json",
                "record": ("f", line, None, None)}

    swap = ddl(5, "RENAME TABLE a TO tmp, b TO a, tmp TO b", 2)
    rows = [table_row(None, None, table="a", ddls=[swap, ddl(3, "RENAME TABLE other.x TO y", 1)]),
            table_row(None, None, table="b", ddls=[swap]),  # the same statement as an event of another table
            table_row(None, None, table="p", schema="public", ddls=[ddl(7, "ALTER TABLE s2.p RENAME TO q", 3)])]
    renames = build_plan(rows).renames
    assert [(r.old, r.new, r.step, r.text, r.event_time_ms, r.record) for r in renames] == [
        (("other", None, "x"), ("db", None, "y"), 1, "3", 3000, ("f", 1, None, None)),
        (("db", None, "a"), ("db", None, "tmp"), 1, "5", 5000, ("f", 2, None, None)),
        (("db", None, "b"), ("db", None, "a"), 2, "5", 5000, ("f", 2, None, None)),
        (("db", None, "tmp"), ("db", None, "b"), 3, "5", 5000, ("f", 2, None, None)),
        (("db", "s2", "p"), ("db", "public", "q"), 1, "7", 7000, ("f", 3, None, None)),  # a source with schemas
    ]
    assert [rename_point(r) for r in renames[1:3]] == [[5, 1], [5, 2]]
    # one unqualified statement of two databases at the same position and record coordinates
    # (two topics' partition and offset; the applier property's examples, which share one
    # simulated file): a rename of each (the second was lost when the key left the names out)
    two = [table_row(None, None, database=db, table="t", ddls=[ddl(9, "RENAME TABLE `t` TO `t_r1`", 4)]) for db in ("x0", "x1")]
    # each its own step 1: its point does not depend on another source's renames in the batch
    assert [(r.old, r.new, r.step) for r in build_plan(two).renames] == [(("x0", None, "t"), ("x0", None, "t_r1"), 1),
                                                                         (("x1", None, "t"), ("x1", None, "t_r1"), 1)]
    # steps that share a table wait for the earlier one; others go together
    assert [[(r.old[2], r.new[2]) for r in w] for w in waves(renames)] == [
        [("x", "y"), ("a", "tmp")], [("b", "a")], [("tmp", "b"), ("p", "q")]]


def test_late_events_follow_every_later_rename_of_the_new_name():
    # t -> n at [10, 1], n -> z at [20, 1]; t created again and renamed -> u at [30, 1]; a swap in
    # one statement at 40: a -> c, b -> a, c -> b. An event of the old table older than a point
    # goes to the last name, at the points' prefix followed by its own position
    from cdclake.apply.delta_table import TableState
    from cdclake.apply.renames import follow_renames

    def st(*steps):
        return TableState(renamed=[([Decimal(x) for x in pt], None, ("db", None, to)) for pt, to in steps])

    states = {"db.t": st(((10, 1), "n"), ((30, 1), "u")), "db.n": st(((20, 1), "z")), "db.x": TableState(),
              "db.a": st(((40, 1), "c")), "db.b": st(((40, 2), "a")), "db.c": st(((40, 3), "b"))}
    got = {(name, tuple(int(x) for x in pt)): (to[2], [int(x) for x in pre]) for name, pt, to, pre in follow_renames(states)}
    assert got == {
        ("db.t", (10, 1)): ("z", [20, 1, 10, 1]), ("db.t", (30, 1)): ("u", [30, 1]), ("db.n", (20, 1)): ("z", [20, 1]),
        # a's rows went to c at step 1, then on to b at step 3; b's to a at step 2 (a's own later
        # rename, step 1, is before it); c's, at step 3, to b
        ("db.a", (40, 1)): ("b", [40, 3, 40, 1]), ("db.b", (40, 2)): ("a", [40, 2]), ("db.c", (40, 3)): ("b", [40, 3]),
    }


def test_a_configured_key_goes_on_with_the_renames_of_its_table():
    # t (key configured by its bare name) -> n at 10, n -> z at 20 (earlier batches); o has
    # its own key and keeps it when p is renamed to it; the batch renames z -> w and q -> r
    # (q has no key: r gets none)
    from cdclake.apply.delta_table import TableState
    from cdclake.apply.plan import TableRename
    from cdclake.apply.renames import keys_through_renames

    def st(*steps):
        return TableState(renamed=[([Decimal(x) for x in pt], None, ("db", None, to)) for pt, to in steps])

    states = {"db.t": st(((10, 1), "n")), "db.n": st(((20, 1), "z")), "db.p": st(((5, 1), "o"))}
    renames = [TableRename([Decimal(30)], "30", None, None, "test", "", 1, ("db", None, old), ("db", None, new))
               for old, new in (("z", "w"), ("q", "r"))]
    configured = {"t": ["id"], "db.p": ["a"], "db.o": ["b"]}
    got = keys_through_renames(configured, states, renames)
    assert got == {**configured, "db.n": ["id"], "db.z": ["id"], "db.w": ["id"]}
    assert configured == {"t": ["id"], "db.p": ["a"], "db.o": ["b"]}  # (the caller's dict stays as it was)
    assert keys_through_renames(configured, {}) is configured  # nothing renamed: the same dict
    assert keys_through_renames({}, states, renames) == {}  # nothing configured: nothing to go on


def test_names_back_follow_renames_and_stop_where_the_name_was_another_column():
    from cdclake.apply.plan import names_back

    def ddl(pos, text):
        return ([Decimal(pos)], str(pos), f"ALTER TABLE t {text}")

    # a -> b at 5, b -> c at 7: c was b before 7 and a before 5 (each statement read once:
    # a re-delivered one may come twice); x was dropped at 3 and added again later; y was
    # renamed away at 4 (to z) and the name taken again later; q never changed
    history = [ddl(3, "DROP COLUMN x"), ddl(4, "RENAME COLUMN y TO z"), ddl(5, "RENAME COLUMN a TO b"),
               ddl(7, "RENAME COLUMN b TO c")]
    assert names_back(["c", "x", "y", "z", "q"], history) == {
        "c": (None, [("b", [7]), ("a", [5])]),
        "x": ([3], []),
        "y": ([4], []),
        "z": (None, [("y", [4])]),
        "q": (None, []),
    }
    # renamed back (a -> t -> a): the old name at each step, newest first
    back = [ddl(5, "RENAME COLUMN a TO t"), ddl(6, "RENAME COLUMN t TO a")]
    assert names_back(["a"], back) == {"a": (None, [("t", [6]), ("a", [5])])}
    assert names_back(["a"], []) == {"a": (None, [])}


def test_remembered_images_are_read_with_the_names_now(spark):
    # one query: JSON written before a rename (old name), after it (new name), and a column
    # whose name was dropped and added again (null for a change older than the drop)
    from cdclake.apply.delta_table import remembered_struct_sql

    history = [([Decimal(3)], "3", "ALTER TABLE t DROP COLUMN x"), ([Decimal(5)], "5", "ALTER TABLE t RENAME COLUMN a TO b")]
    read = remembered_struct_sql("key", {"b": "int", "x": "string"}, history)
    rows = spark.sql(
        f"SELECT to_json({read}) AS k FROM (SELECT key, CAST(array(p) AS array<decimal(38,0)>) AS position FROM VALUES"
        " ('{\"a\":1,\"x\":\"old\"}', 2), ('{\"b\":2,\"x\":\"new\"}', 6),"
        " ('{\"b\":3}', 4), ('{\"a\":4,\"x\":\"late\"}', 6) AS v(key, p))"
    ).collect()
    # (the last: a change newer than the rename is read by the new name only)
    assert [r.k for r in rows] == ['{"b":1}', '{"b":2,"x":"new"}', '{"b":3}', '{"x":"late"}']
    assert remembered_struct_sql("key", {"b": "int"}, []) == "from_json(key, '`b` int')"
