"""Spark SQL text, written one way for the whole project: string literals and identifiers.

Decoders and appliers build SQL expressions as text (one ``F.expr`` / ``where`` string is one
py4j call, a tree of Column calls is many); every value from a message or a configuration that
enters such a text goes through these two functions.
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
