"""Pure tests (no Spark) of what the Debezium decoder reads without a schema-change event:
column DDL from successive column lists (:mod:`cdclake.formats.debezium_json.inferred`), the
forms of the unavailable-value placeholder, and transaction ids."""

from __future__ import annotations

import base64

from cdclake.formats.debezium_json.wire import PLACEHOLDER, placeholder_forms
from cdclake.formats.debezium_json.inferred import column_changes, ddl_text

A, B, C = ("a", "int"), ("b", "string"), ("c", "int")


def test_a_column_in_the_place_of_one_gone_is_a_rename():
    assert column_changes([A, B, C], [A, ("x", "string"), C]) == [("rename", "b", "x")]
    assert column_changes([B, A], [("x", "string"), A]) == [("rename", "b", "x")]  # first column
    # PostgreSQL puts an added column last: a column gone from the middle was dropped
    assert column_changes([A, B, C], [A, C, ("x", "string")]) == [("drop", "b")]
    # another type in its place: dropped, and the new one added
    assert column_changes([A, B, C], [A, ("x", "int"), C]) == [("drop", "b")]
    # two renames and a drop at once; the order of the old list
    assert column_changes([A, B, C, ("d", "date")], [("y", "int"), ("z", "string"), C]) == [
        ("rename", "a", "y"), ("rename", "b", "z"), ("drop", "d")]


def test_lists_of_the_same_names_need_no_statement():
    assert column_changes([A, B], [A, B]) == []
    assert column_changes([A, B], [A, ("b", "bigint")]) == []  # a type change: the events carry it
    assert column_changes([A, B], [A, B, C]) == []  # an added column: the events carry it


def test_statements_are_what_the_ddl_reader_reads():
    from cdclake.apply.ddl import column_changes as read

    assert read(ddl_text("orders", ("rename", "note", "re`mark"))) == (("rename", "note", "re`mark"),)
    assert read(ddl_text("my table", ("drop", "qty"))) == (("drop", "qty"),)


def test_placeholder_forms_follow_the_column_type():
    forms = placeholder_forms(PLACEHOLDER)
    raw = PLACEHOLDER.encode()
    b64 = base64.b64encode(raw).decode()
    assert PLACEHOLDER in forms and b64 in forms and raw.hex() in forms
    assert f'["{PLACEHOLDER}"]' in forms and f'["{b64}"]' in forms  # text[] and bytea[]
    assert "[" + ",".join(str(b) for b in raw) + "]" in forms  # int[] and bigint[]
    assert f'{{"{PLACEHOLDER}":"{PLACEHOLDER}"}}' in forms  # hstore as JSON
    # a connector's own placeholder (unavailable.value.placeholder)
    assert "N/A" in placeholder_forms("N/A") and PLACEHOLDER not in placeholder_forms("N/A")
