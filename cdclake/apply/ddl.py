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

:func:`table_renames` reads the table renames of a statement: MySQL's ``RENAME TABLE a TO b[,
c TO d ...]``, Oracle's ``RENAME a TO b`` and ``ALTER TABLE a RENAME [TO|AS] b`` (MySQL,
PostgreSQL, Oracle, Db2); the applier moves the rows (:mod:`cdclake.apply.renames`). sqlglot
parses none of MySQL's ``RENAME TABLE`` (it falls back to a bare command), so the names are read
from sqlglot's tokens, which know the dialect's quoting.
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


#: a table name as written in DDL: its parts, outermost first (``("shop", "orders")``)
Name = tuple[str, ...]


def _tokens(text: str):
    """sqlglot's tokens of ``text`` (MySQL's dialect first, then the generic one); a bare
    command's remainder (MySQL's tokenizer gives ``RENAME`` and the rest as one string) is
    tokenized again, so the result holds every word of the statement."""
    import sqlglot
    from sqlglot.tokens import TokenType

    for dialect in ("mysql", None):
        try:
            tokens = sqlglot.tokenize(text, read=dialect)
        except Exception:  # sqlglot's TokenError: try the next dialect
            continue
        out = []
        for i, t in enumerate(tokens):
            if t.token_type == TokenType.STRING and i > 0 and tokens[i - 1].token_type == TokenType.RENAME:
                out.extend(_tokens(t.text) or [])
            else:
                out.append(t)
        return out
    return None


def _name(ts: list, i: int) -> tuple[Name | None, int]:
    """The table name that starts at token ``i`` of ``ts`` (``a``, ``db.a``, quoted parts) and
    the index after it; None when no name starts there."""
    from sqlglot.tokens import TokenType

    parts: list[str] = []
    while i < len(ts):
        t = ts[i]
        quoted = t.token_type == TokenType.IDENTIFIER
        if not quoted and (t.token_type in (TokenType.COMMA, TokenType.SEMICOLON, TokenType.DOT, TokenType.L_PAREN)
                           or t.text.upper() in ("TO", "AS")):
            break
        parts.append(t.text)
        i += 1
        if i < len(ts) and ts[i].token_type == TokenType.DOT:
            i += 1
            continue
        break
    return (tuple(parts) if parts else None), i


def _word(ts: list, i: int, *words: str) -> bool:
    """Token ``i`` of ``ts`` is one of ``words`` (unquoted, any case)."""
    from sqlglot.tokens import TokenType

    return i < len(ts) and ts[i].token_type != TokenType.IDENTIFIER and ts[i].text.upper() in words


@lru_cache(maxsize=1024)
def table_renames(ddl: str | None) -> tuple[tuple[Name, Name], ...]:
    """The table renames of ``ddl``, in statement order: ``(old, new)`` name pairs
    (:data:`Name`: the parts as written, ``("db", "a")`` or ``("a",)``, unquoted).

    Read: ``RENAME TABLE a TO b [, c TO d ...]`` (MySQL: a chain or a swap is one statement,
    its renames done in order), ``RENAME a TO b`` (Oracle), ``ALTER TABLE [IF EXISTS] [ONLY] a
    ... RENAME [TO | AS] b`` (the ``TO``/``AS`` may be left out in MySQL). PostgreSQL's
    ``ALTER TABLE a RENAME [COLUMN] x TO y`` renames a column, not the table, and gives none;
    so does text the tokenizer cannot read."""
    if not ddl or "rename" not in ddl.lower():
        return ()
    ts = _tokens(ddl)
    if ts is None:
        return ()
    from sqlglot.tokens import TokenType

    out: list[tuple[Name, Name]] = []
    starts = [0] + [i + 1 for i, t in enumerate(ts) if t.token_type == TokenType.SEMICOLON]
    for s in starts:
        if _word(ts, s, "RENAME"):
            i = s + 1 + (1 if _word(ts, s + 1, "TABLE", "TABLES") else 0)
            while True:
                old, i = _name(ts, i)
                if old is None or not _word(ts, i, "TO"):
                    break
                new, i = _name(ts, i + 1)
                if new is None:
                    break
                out.append((old, new))
                if i < len(ts) and ts[i].token_type == TokenType.COMMA:
                    i += 1
                    continue
                break
        elif _word(ts, s, "ALTER"):
            i = s + 1
            while _word(ts, i, "IGNORE", "ONLINE"):  # MariaDB's ALTER [ONLINE] [IGNORE] TABLE
                i += 1
            if not _word(ts, i, "TABLE"):
                continue
            i += 1
            while _word(ts, i, "IF", "EXISTS", "ONLY"):
                i += 1
            old, i = _name(ts, i)
            if old is None:
                continue
            depth, clause_start = 0, True  # a clause starts after the table name and after each comma
            while i < len(ts) and ts[i].token_type != TokenType.SEMICOLON:
                t = ts[i]
                depth += t.token_type == TokenType.L_PAREN
                depth -= t.token_type == TokenType.R_PAREN
                if depth == 0 and clause_start and _word(ts, i, "RENAME"):
                    j = i + 1
                    if not _word(ts, j, "COLUMN", "INDEX", "KEY", "CONSTRAINT", "PARTITION", "SUBPARTITION", "TRIGGER"):
                        to = _word(ts, j, "TO", "AS")
                        new, k = _name(ts, j + 1 if to else j)
                        # ``RENAME x TO y`` without COLUMN: PostgreSQL's column rename
                        if new is not None and not (not to and _word(ts, k, "TO")):
                            out.append((old, new))
                            break
                clause_start = depth == 0 and t.token_type == TokenType.COMMA
                i += 1
    return tuple(out)
