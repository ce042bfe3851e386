"""Source column types -> Spark types, on the driver (plain Python, once per signature).

One mapping per type system, used by the decoders (per batch, per signature) and by the
encoders (which write the source spelling back): there is no SQL twin of these any more.

Sources:
* MySQL type text (Canal ``mysqlType``, DTS, DataWorks): MySQL reference manual, data types
  chapter. ``decimal`` without precision (DTS writes type names bare: seed 001, "mysqlType ...
  precision is not supported") maps to ``decimal(38,10)``; precision above 38 to ``string``;
  ``int unsigned`` to ``bigint``, ``bigint unsigned`` to ``decimal(20,0)``.
* ``java.sql.Types`` codes (Canal ``sqlType``, Debezium ``jdbcType``): JDK constants.
"""

from __future__ import annotations

import re

_BASE = re.compile(r"^([a-z ]+?)\s*(\(|unsigned|zerofill|$)")
_P = re.compile(r"\(\s*([0-9]+)")
_S = re.compile(r"\(\s*[0-9]+\s*,\s*([0-9]+)")
BINARY_TYPES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")


def untyped_spark_type(source_type: str | None) -> str:
    """The Spark type of a column new to a table that no event of its batch gives a type (every
    value NULL, in a format whose type comes from the value: DTS, DataHub TUPLE), from its
    source type name alone: one naming DECIMAL (DTS ``MYSQL_TYPE_DECIMAL_NEW``) ->
    ``decimal(38,10)``, BLOB or GEOMETRY (``MYSQL_TYPE_BLOB``: TEXT columns too) -> ``binary``,
    anything else -> ``string`` (as a bare ``decimal`` and the BLOB codes map when typed)."""
    t = (source_type or "").upper()
    if "DECIMAL" in t:
        return "decimal(38,10)"
    if "BLOB" in t or "GEOMETRY" in t:
        return "binary"
    return "string"


def mysql_precision_scale(type_text: str | None) -> tuple[int | None, int | None]:
    """``(precision, scale)`` written in a MySQL type text (``decimal(10,2)`` -> (10, 2),
    ``varchar(20)`` -> (20, None), ``text`` -> (None, None))."""
    if type_text is None:
        return None, None
    pm, sm = _P.search(type_text), _S.search(type_text)
    p = int(pm.group(1)) if pm else None
    s = int(sm.group(1)) if sm else None
    return (p if p is not None and p < 2**31 else None), (s if s is not None and s < 2**31 else None)


def mysql_base_type(type_text: str | None) -> str:
    """The base name of a MySQL column type text, lower case: ``int(11) unsigned`` -> ``int``,
    ``DOUBLE PRECISION`` -> ``double precision``; "" when the text starts with no name."""
    m = _BASE.match((type_text or "").strip(" ").lower())
    return m.group(1) if m else ""


def mysql_spark_type(type_text: str | None) -> str:
    """The Spark type for a MySQL column type text such as ``int(11) unsigned``,
    ``decimal(10,2)``, ``VARCHAR(255)``, ``datetime(3)``: ``int``, ``bigint``, ``decimal(20,0)``,
    ``decimal(10,2)``, ``float``, ``double``, ``boolean``, ``date``, ``timestamp``, ``binary`` or
    ``string`` (unknown types: the value is kept as text, never lost)."""
    t = (type_text or "").strip(" ").lower()
    m = _BASE.match(t)
    base = m.group(1) if m else ""
    p, s = mysql_precision_scale(t)
    unsigned = "unsigned" in t
    if base in ("tinyint", "smallint", "mediumint", "year"):
        return "int"
    if base in ("int", "integer"):
        return "bigint" if unsigned else "int"
    if base == "bigint":
        return "decimal(20,0)" if unsigned else "bigint"
    if base == "serial":
        return "decimal(20,0)"
    if base in ("decimal", "numeric", "dec", "fixed"):
        if p is None:
            return "decimal(38,10)"
        return "string" if p > 38 else f"decimal({p},{s or 0})"
    if base == "float":
        return "float"
    if base in ("double", "real", "double precision"):
        return "double"
    if base in ("bool", "boolean"):
        return "boolean"
    if base == "bit":
        return "boolean" if (1 if p is None else p) == 1 else "bigint"
    if base == "date":
        return "date"
    if base in ("datetime", "timestamp"):
        return "timestamp"
    if base in BINARY_TYPES:
        return "binary"
    return "string"


_JDBC = {
    -7: "boolean", 16: "boolean",
    -6: "int", 5: "int", 4: "int",
    -5: "bigint",
    7: "float",
    6: "double", 8: "double",
    2: "decimal(38,10)", 3: "decimal(38,10)",
    91: "date",
    93: "timestamp", 2014: "timestamp",
    -2: "binary", -3: "binary", -4: "binary", 2004: "binary",
}


def jdbc_code(code) -> int | None:
    """A ``java.sql.Types`` code given as text or number, or None when it is not an integer."""
    try:
        return int(str(code).strip())
    except (TypeError, ValueError):
        return None


def jdbc_spark_type(code) -> str:
    """The Spark type for a ``java.sql.Types`` code (text or number); ``string`` when unknown."""
    return _JDBC.get(jdbc_code(code), "string")
