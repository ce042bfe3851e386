"""Spark type arithmetic for target tables: parsing type text, widening two types into one.

Widening follows what a database does when a column grows: integers widen to longer integers,
then to decimals wide enough, then to double; ``float`` widens to ``double``; two decimals widen
to one that holds both (capped at 38 digits); ``date`` widens to ``timestamp``; any other pair
becomes ``string`` (text loses nothing).
"""

from __future__ import annotations

import re

_DEC = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_INT_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_INT_ORDER = ["tinyint", "smallint", "int", "bigint"]


def normalize(t: str | None) -> str:
    """Lower-case canonical spelling of a Spark type text; None -> ``string``."""
    if not t:
        return "string"
    t = t.strip().lower().replace(" ", "")
    return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float"}.get(t, t)


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DEC.match(t)
    if m:
        return int(m.group(1)), int(m.group(2))
    if t in _INT_DIGITS:
        return _INT_DIGITS[t], 0
    return None


def widen(a: str | None, b: str | None) -> str:
    """The narrowest Spark type that holds every value of both ``a`` and ``b``."""
    a, b = normalize(a), normalize(b)
    if a == b:
        return a
    if a in _INT_ORDER and b in _INT_ORDER:
        return max(a, b, key=_INT_ORDER.index)
    if {a, b} <= {"float", "double"} | set(_INT_ORDER):
        return "double"
    da, db = _decimal(a), _decimal(b)
    if da and db:
        scale = max(da[1], db[1])
        whole = max(da[0] - da[1], db[0] - db[1])
        if whole + scale > 38:
            return "string"
        return f"decimal({whole + scale},{scale})"
    if (da and b in ("float", "double")) or (db and a in ("float", "double")):
        return "double"
    if {a, b} == {"date", "timestamp"}:
        return "timestamp"
    return "string"


def can_widen_in_place(old: str, new: str) -> bool:
    """True when Delta's type widening (table feature ``typeWidening``) can change a column
    from ``old`` to ``new`` without rewriting data (Delta 4.0: integer widening, float ->
    double, decimal precision/scale increase, date -> timestamp_ntz is not ours)."""
    old, new = normalize(old), normalize(new)
    if old in _INT_ORDER and new in _INT_ORDER:
        return _INT_ORDER.index(new) >= _INT_ORDER.index(old)
    if old == "float" and new == "double":
        return True
    do, dn = _decimal(old), _decimal(new)
    if old.startswith("decimal") and do and dn and new.startswith("decimal"):
        return dn[1] >= do[1] and (dn[0] - dn[1]) >= (do[0] - do[1])
    return False
