"""Column drops and renames, table drops and truncates, read from a DDL statement's text with
sqlglot.

The applier follows added and widened columns from the events' own column lists; a dropped or
renamed column shows only in the DDL text (Canal ``sql``, DataWorks/DTS/Debezium ``ddl``). This
module reads that text on the driver (a batch holds few DDL events): MySQL's dialect first (the
sources of Canal, DataWorks and most DTS and Debezium tasks), sqlglot's generic one next.

* ``ALTER TABLE t DROP [COLUMN] c`` -> ``("drop", "c")``
* ``ALTER TABLE t RENAME COLUMN a TO b`` and MySQL ``ALTER TABLE t CHANGE [COLUMN] a b <type>``
  (with another name) -> ``("rename", "a", "b")``

* an ``ALTER TABLE`` that sqlglot cannot read (it falls back to a bare command, or fails)
  -> ``("unknown", <statement text, first 200 characters>)``: recorded as not applied

Everything else (ADD, MODIFY, indexes, keys, other statements) gives no change: added and
widened columns come from the column lists. sqlglot's own warnings are silenced (they would
reach the command's output).

:func:`table_end` reads a statement that ends a table's rows: ``DROP TABLE`` (Canal and
DataWorks ``ERASE``, a Debezium or DTS DDL text) -> ``"drop"``, ``TRUNCATE TABLE`` written as
DDL text -> ``"truncate"``; the applier treats both as a truncate at the statement's position.
"""

from __future__ import annotations

from functools import lru_cache


def _parse(ddl: str):
    """sqlglot's statements of ``ddl`` (MySQL's dialect first, then the generic one), or None."""
    import logging

    import sqlglot

    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    for dialect in ("mysql", None):
        try:
            return sqlglot.parse(ddl, read=dialect)
        except Exception:  # sqlglot's ParseError/TokenError: try the next dialect
            continue
    return None


@lru_cache(maxsize=1024)
def table_end(ddl: str | None, table: str) -> str | None:
    """``"drop"`` when ``ddl`` drops table ``table`` (``DROP TABLE``, the bare name compared
    without case; a statement that names no table of that name is not this table's),
    ``"truncate"`` when it truncates it (``TRUNCATE TABLE``), else None (other statements,
    text sqlglot cannot read)."""
    if not ddl or not table or not any(w in ddl.lower() for w in ("drop", "truncate")):
        return None
    from sqlglot import exp

    for st in _parse(ddl) or []:
        if isinstance(st, exp.Drop) and (st.args.get("kind") or "").upper() == "TABLE":
            verb = "drop"
        elif isinstance(st, exp.TruncateTable):
            verb = "truncate"
        else:
            continue
        if any(t.name.lower() == table.lower() for t in st.find_all(exp.Table)):
            return verb
    return None


@lru_cache(maxsize=1024)
def column_changes(ddl: str | None) -> tuple[tuple[str, ...], ...]:
    """The column drops and renames of ``ddl``, in statement order: ``("drop", name)`` and
    ``("rename", old, new)`` tuples; empty when it has none or cannot be parsed."""
    if not ddl or "alter" not in ddl.lower():
        return ()
    from sqlglot import exp

    statements = _parse(ddl)
    out: list[tuple[str, ...]] = []
    if statements is None and ddl.lstrip().lower().startswith("alter table"):
        return (("unknown", ddl.strip()[:200]),)
    for st in statements or []:
        text = " ".join(f"{st.this} {st.expression or ''}".split()) if isinstance(st, exp.Command) else ""
        if text.lower().startswith("alter table"):
            out.append(("unknown", text[:200]))
            continue
        if not isinstance(st, exp.Alter) or (st.args.get("kind") or "TABLE").upper() != "TABLE":
            continue
        for action in st.args.get("actions") or []:
            if isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
                for col in action.args.get("tables") or []:
                    out.append(("drop", col.name))
            elif isinstance(action, exp.RenameColumn):
                out.append(("rename", action.this.name, action.args["to"].name))
            elif isinstance(action, exp.ModifyColumn) and action.args.get("rename_from") is not None:
                old, new = action.args["rename_from"].name, action.this.name
                if old != new:
                    out.append(("rename", old, new))
    return tuple(out)
