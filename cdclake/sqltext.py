"""Spark SQL text, written one way for the whole project: string literals and identifiers.

Decoders and appliers build SQL expressions as text (one ``F.expr`` / ``where`` string is one
py4j call, a tree of Column calls is many); every value from a message or a configuration that
enters such a text goes through these functions.
"""

from __future__ import annotations


def sql_str(s: str) -> str:
    """A Spark SQL string literal of ``s``: ``'...'`` with backslashes and single quotes
    escaped (Spark's default, ``spark.sql.parser.escapedStringLiterals=false``)."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_ident(name: str) -> str:
    """A back-quoted Spark SQL identifier: ``name`` between backquotes, a backquote in it
    doubled."""
    return "`" + name.replace("`", "``") + "`"


def sql_in(expr: str, values) -> str:
    """SQL: ``expr in (v1, v2 ...)`` over ``values``, strings (:func:`sql_str` each) or ints;
    ``false`` when there are none."""
    vals = list(values)
    if not vals:
        return "false"
    return f"{expr} in ({', '.join(sql_str(v) if isinstance(v, str) else str(int(v)) for v in vals)})"


def sql_case(expr: str, mapping: dict[str, str], default: str = "null") -> str:
    """SQL: ``CASE expr WHEN 'key' THEN value ... ELSE default END``: ``mapping``'s keys are
    strings (:func:`sql_str` each), its values SQL expressions."""
    if not mapping:
        return default
    whens = " ".join(f"when {sql_str(k)} then {v}" for k, v in mapping.items())
    return f"(case {expr} {whens} else {default} end)"


def sql_lookup(expr: str, mapping: dict, default: str = "null") -> str:
    """SQL: the value ``mapping`` gives ``expr``, else ``default``: ``mapping``'s keys are ints or
    strings (:func:`sql_str`), its values SQL literals of one type (so that the map folds to one
    literal), looked up in one map (``try_element_at(map(k, v, ...), expr)``).

    Use it instead of a ``CASE expr WHEN ...`` table inside a lambda: Spark 4.0 evaluates a
    lambda's body interpreted, and ``CaseWhen.eval`` indexes its branches, a Scala ``List``, from
    the head for every arm it tries (quadratic in the arms); the map literal is folded once and
    its keys scanned as an array."""
    if not mapping:
        return default
    pairs = ", ".join(f"{sql_str(k) if isinstance(k, str) else int(k)}, {v}" for k, v in mapping.items())
    found = f"try_element_at(map({pairs}), {expr})"
    return found if default == "null" else f"coalesce({found}, {default})"


def sql_let(expr: str, var: str, body: str) -> str:
    """SQL: ``body`` with the lambda variable ``var`` bound to ``expr``, evaluated once
    (``element_at(transform(array(expr), var -> body), 1)``): for a value a lambda body reads
    several times."""
    return f"element_at(transform(array({expr}), {var} -> {body}), 1)"
