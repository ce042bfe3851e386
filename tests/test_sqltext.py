"""The SQL text helpers (cdclake/sqltext.py), evaluated by Spark where the text is an expression."""

from cdclake.sqltext import quote_ident, sql_in, sql_lookup, sql_str


def test_literals_and_identifiers_are_escaped():
    assert sql_str("it's a \\ test") == "'it\\'s a \\\\ test'"
    assert quote_ident("we`ird") == "`we``ird`"
    assert sql_in("x", []) == "false"


def test_a_lookup_gives_what_the_case_table_gives(spark):
    """sql_lookup (a map literal) against the CASE it replaces: keys found, missing, NULL, with
    and without a default, inside a lambda as the DTS decoder uses it."""
    table = {1: "'one'", 8: "'eight'", 246: "'decimal'"}
    case = "(case c when 1 then 'one' when 8 then 'eight' when 246 then 'decimal' else concat('code ', c) end)"
    lookup = sql_lookup("c", table, "concat('code ', c)")
    bare = sql_lookup("c", table)
    row = spark.sql(f"""select transform(array(1, 8, 246, 7, null), c -> {case}) as want,
                               transform(array(1, 8, 246, 7, null), c -> {lookup}) as got,
                               transform(array(1, 7, null), c -> {bare}) as bare""").first()
    assert row["got"] == row["want"] == ["one", "eight", "decimal", "code 7", None]
    assert row["bare"] == ["one", None, None]
    assert sql_lookup("c", {}, "'x'") == "'x'"
