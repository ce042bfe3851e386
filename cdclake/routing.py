"""Which source tables a run writes, under which names, laid out how: the ``cdclake ingest``
options ``--include-tables``/``--exclude-tables``, ``--table-name``/``--table-prefix``/
``--table-suffix``, ``--partition-by``, ``--table-property`` and ``--catalog-database``, as one
:class:`Routing` the pipeline and the appliers consult.

Names:

* a source table's *qualified name* is ``database[.schema].table`` as the source spells it
  (:func:`cdclake.model.qualified_name`); include and exclude patterns are Python regular
  expressions matched against the whole of it (``shop\\.(orders|items)``, ``shop\\..*``);
* a table *pattern* in ``--partition-by``/``--table-property``/``--primary-key`` is the
  qualified name or a glob over it (``shop.*``, ``*.orders``, ``shop.order_?``: ``*`` any
  characters, ``?`` one, everything else itself, case-sensitive: :func:`glob_regex`);
* a table's *target name* (its folder under the target, :func:`cdclake.targets.table_folder`)
  comes from a template over the parts of the qualified name: ``{name}`` (the whole, the
  default), ``{database}``, ``{schema}``, ``{table}``; ``--table-prefix``/``--table-suffix``
  wrap ``{table}``. The template is fixed when a target is made (it is kept in the target's
  ``_cdclake/layout.json``): a later run with another one is refused, since the tables already
  written would be left under their old names.

The naming of a target is registered in this process by :func:`register_naming` (called when
the target's layout is read, :func:`cdclake.apply.audit.check_layout`) and looked up by
:func:`naming_of`: every writer of a table folder asks the same question and gets one answer.
"""

from __future__ import annotations

import re
import string
import threading
from dataclasses import dataclass, field

from cdclake.errors import CdclakeError
from cdclake.sqltext import sql_str

#: the fields a table-name template may use
TEMPLATE_FIELDS = ("name", "database", "schema", "table")
DEFAULT_TEMPLATE = "{name}"

#: a partition expression: ``years|months|days|hours(column)`` (a generated column) or a column
_TRANSFORM = re.compile(r"^\s*(years|months|days|hours)\s*\(\s*([^()]+?)\s*\)\s*$", re.IGNORECASE)
#: transform -> (suffix of the generated column's name, its SQL over the source column ``{c}``,
#: its Spark type): the generation expressions Delta accepts for partition pruning
TRANSFORMS = {
    "years": ("_year", "YEAR({c})", "int"),
    "months": ("_month", "DATE_FORMAT({c}, 'yyyy-MM')", "string"),
    "days": ("_day", "CAST({c} AS DATE)", "date"),
    "hours": ("_hour", "DATE_FORMAT({c}, 'yyyy-MM-dd-HH')", "string"),
}


def is_glob(pattern: str) -> bool:
    """True when table pattern ``pattern`` has a wildcard (``*`` or ``?``)."""
    return "*" in pattern or "?" in pattern


def glob_regex(pattern: str) -> str:
    """The regular expression, for Python's ``re`` and Java's (Spark's ``rlike``) alike, that
    matches a whole name against glob ``pattern``: ``*`` any characters (none too), ``?`` one
    character, every other character itself. Java's ``.`` does not match a line break:
    Spark is given ``(?s)`` before it (:func:`glob_sql`)."""
    out = []
    for ch in pattern:
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
    return "^" + "".join(out) + "$"


def glob_match(pattern: str, name: str) -> bool:
    """``name`` matches table pattern ``pattern`` (a name, or a glob: :func:`glob_regex`)."""
    return re.fullmatch(glob_regex(pattern)[1:-1], name, re.S) is not None if is_glob(pattern) else pattern == name


def glob_sql(pattern: str, name_sql: str) -> str:
    """SQL: the name ``name_sql`` (an SQL expression) matches table pattern ``pattern`` (Java's
    ``\\z``, the very end: its ``$`` would also match before a last line break)."""
    if not is_glob(pattern):
        return f"({name_sql} = {sql_str(pattern)})"
    return f"({name_sql} rlike {sql_str('(?s)' + glob_regex(pattern)[:-1] + chr(92) + 'z')})"


def glob_case_sql(entries: list[tuple[str, str]], name_sql: str) -> str:
    """SQL: the value (SQL) of the first ``(glob, value)`` of ``entries`` whose glob the name
    ``name_sql`` matches (:func:`glob_sql`), else NULL."""
    return "(case " + " ".join(f"when {glob_sql(g, name_sql)} then {v}" for g, v in entries) + " end)"


def name_parts(name: str) -> dict[str, str]:
    """The template fields of qualified name ``name``: ``database`` (first part), ``schema`` (the
    middle of a three-part name, else empty), ``table`` (the last part), ``name`` (the whole).
    A one-part name is its own ``table`` with an empty ``database``."""
    parts = name.split(".")
    if len(parts) == 1:
        return {"name": name, "database": "", "schema": "", "table": name}
    return {"name": name, "database": parts[0], "schema": ".".join(parts[1:-1]), "table": parts[-1]}


@dataclass(frozen=True)
class Naming:
    """How a target names its tables: ``template`` over :data:`TEMPLATE_FIELDS`, ``prefix`` and
    ``suffix`` around the ``{table}`` part. The default is the qualified source name itself.

    Raises (on construction):
        CdclakeError(BAD_OPTION): a template field that is not one of :data:`TEMPLATE_FIELDS`,
            or a template without ``{name}`` or ``{table}`` (every table would get one name).
    """

    template: str = DEFAULT_TEMPLATE
    prefix: str = ""
    suffix: str = ""

    def __post_init__(self) -> None:
        try:
            used = {f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None}
        except ValueError as e:
            raise CdclakeError("BAD_OPTION", f"--table-name {self.template!r}: {e}") from None
        unknown = used - set(TEMPLATE_FIELDS)
        if unknown:
            raise CdclakeError("BAD_OPTION", f"--table-name {self.template!r}: unknown field(s) {sorted(unknown)};"
                                             f" use {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}")
        if not used & {"name", "table"}:
            raise CdclakeError("BAD_OPTION", f"--table-name {self.template!r} names no table: use {{table}} or {{name}}")

    @property
    def is_default(self) -> bool:
        """True when tables are named by their qualified source name."""
        return self == Naming()

    def target_name(self, name: str) -> str:
        """The target name of source table ``name`` (qualified)."""
        if self.is_default:
            return name
        parts = name_parts(name)
        if self.prefix or self.suffix:
            parts["table"] = f"{self.prefix}{parts['table']}{self.suffix}"
            parts["name"] = ".".join(p for p in (parts["database"], parts["schema"], parts["table"]) if p)
        return self.template.format(**parts)

    def as_json(self) -> dict:
        """The naming as it is kept in ``_cdclake/layout.json`` (nothing for the default)."""
        return {} if self.is_default else {"table_name": self.template, "table_prefix": self.prefix, "table_suffix": self.suffix}

    @staticmethod
    def from_json(doc: dict) -> "Naming":
        """The naming a ``_cdclake/layout.json`` document keeps (the default when it keeps none)."""
        return Naming(doc.get("table_name", DEFAULT_TEMPLATE), doc.get("table_prefix", ""), doc.get("table_suffix", ""))

    def describe(self) -> str:
        """The options that give this naming, as a user would type them."""
        out = [f"--table-name {self.template}"]
        if self.prefix:
            out.append(f"--table-prefix {self.prefix}")
        if self.suffix:
            out.append(f"--table-suffix {self.suffix}")
        return " ".join(out)


@dataclass(frozen=True)
class PartitionColumn:
    """One partition column of a target table: ``name`` (the column), and for a transform
    (``days(created_at)``) the source column it is generated from, ``generated`` (its SQL,
    Delta's ``GENERATED ALWAYS AS``) and ``spark_type``; a plain column partitions by itself
    (``source`` None)."""

    name: str
    source: str | None = None
    generated: str | None = None
    spark_type: str | None = None


def partition_column(expr: str) -> PartitionColumn:
    """The partition column of one ``--partition-by`` expression: ``years(c)``, ``months(c)``,
    ``days(c)``, ``hours(c)`` (a column generated from timestamp or date column ``c``, named
    ``c_year``/``c_month``/``c_day``/``c_hour``) or a column name.

    Raises:
        CdclakeError(BAD_OPTION): an empty expression, or a call that is not one of the four.
    """
    text = expr.strip()
    m = _TRANSFORM.match(text)
    if m:
        fn, col = m.group(1).lower(), m.group(2).strip().strip("`")
        suffix, sql, typ = TRANSFORMS[fn]
        return PartitionColumn(f"{col}{suffix}", col, sql.format(c="`" + col.replace("`", "``") + "`"), typ)
    if not text or "(" in text or ")" in text:
        raise CdclakeError("BAD_OPTION", f"--partition-by expression {expr!r}: use a column, or "
                                         f"{', '.join(f + '(column)' for f in TRANSFORMS)}")
    return PartitionColumn(text.strip("`"))


@dataclass(frozen=True)
class TableLayout:
    """How a new target table is laid out: its partition columns and Delta table properties
    (``delta.enableChangeDataFeed`` -> ``true`` ...). Empty: as cdclake makes it by default."""

    partition_by: tuple[PartitionColumn, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.partition_by or self.properties)


def _compile(patterns: list[str], option: str) -> tuple[re.Pattern, ...]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise CdclakeError("BAD_OPTION", f"{option} {p!r} is not a regular expression: {e}") from None
    return tuple(out)


@dataclass(frozen=True)
class Routing:
    """A run's table selection, naming and layout (see the module docstring).

    include: patterns (regular expressions, whole qualified name); empty: every table.
    exclude: patterns; a table matching one is never written, even when included.
    naming: the target's :class:`Naming`.
    partition_by: ``(table glob, partition expressions)`` pairs; the first that matches wins.
    properties: ``(table glob, property, value)`` triples; every match applies (a later one wins
        for the same property).
    catalog_database: register each table in the session's catalog under this database (a
        template over :data:`TEMPLATE_FIELDS`, e.g. ``{database}``); None: no catalog.
    """

    include: tuple[re.Pattern, ...] = ()
    exclude: tuple[re.Pattern, ...] = ()
    naming: Naming = field(default_factory=Naming)
    partition_by: tuple[tuple[str, tuple[str, ...]], ...] = ()
    properties: tuple[tuple[str, str, str], ...] = ()
    catalog_database: str | None = None

    @staticmethod
    def of(include: list[str] = (), exclude: list[str] = (), naming: Naming | None = None,
           partition_by: dict[str, list[str]] | None = None, properties: list[tuple[str, str, str]] = (),
           catalog_database: str | None = None) -> "Routing":
        """A routing from option values; the partition expressions are checked here.

        Raises:
            CdclakeError(BAD_OPTION): a pattern that is not a regular expression, a partition
                expression :func:`partition_column` refuses, a catalog database template with
                an unknown field.
        """
        for exprs in (partition_by or {}).values():
            for e in exprs:
                partition_column(e)
        if catalog_database is not None:
            try:
                catalog_database.format(**name_parts("d.t"))
            except (KeyError, IndexError, ValueError) as e:
                raise CdclakeError("BAD_OPTION", f"--catalog-database {catalog_database!r}: unknown field {e}") from None
        return Routing(_compile(list(include), "--include-tables"), _compile(list(exclude), "--exclude-tables"),
                       naming or Naming(), tuple((t, tuple(e)) for t, e in (partition_by or {}).items()),
                       tuple(properties), catalog_database)

    @property
    def filters(self) -> bool:
        """True when some tables may be left out."""
        return bool(self.include or self.exclude)

    def included(self, name: str) -> bool:
        """Source table ``name`` (qualified) is written by this run."""
        if self.include and not any(p.fullmatch(name) for p in self.include):
            return False
        return not any(p.fullmatch(name) for p in self.exclude)

    def layout(self, name: str) -> TableLayout:
        """The :class:`TableLayout` of source table ``name`` when it is created."""
        parts = next((exprs for glob, exprs in self.partition_by if glob_match(glob, name)), ())
        props: dict[str, str] = {}
        for glob, key, value in self.properties:
            if glob_match(glob, name):
                props[key] = value
        return TableLayout(tuple(partition_column(e) for e in parts), tuple(props.items()))

    def catalog_name(self, name: str) -> tuple[str, str] | None:
        """``(catalog database, catalog table)`` of source table ``name``, or None without a
        catalog. The catalog table is the last dot-separated part of the target name
        (``shop.orders`` -> ``orders``; ``{database}_{table}`` -> ``shop_orders``)."""
        if self.catalog_database is None:
            return None
        return self.catalog_database.format(**name_parts(name)), self.naming.target_name(name).split(".")[-1]


def check_names(routing: Routing, names) -> None:
    """Refuse a naming or a catalog that gives two of the source tables ``names`` (qualified)
    one target table, or one catalog table, or a blank catalog database: checked on the driver
    before a batch writes anything.

    Raises:
        CdclakeError(BAD_OPTION): two names share a target name (``--table-name``
            ``{table}`` over ``shop.orders`` and ``crm.orders``) or a catalog name, or a
            table's catalog database is blank.
    """
    seen: dict[str, str] = {}
    where: dict[tuple, str] = {}
    for name in sorted(set(names)):
        if not routing.naming.is_default:
            folder = routing.naming.target_name(name).casefold()  # (one folder on a case-insensitive file system)
            other = seen.setdefault(folder, name)
            if other != name:
                raise CdclakeError("BAD_OPTION", f"{routing.naming.describe()} names both {other} and {name}"
                                                 f" {routing.naming.target_name(name)}: use a template that tells them apart")
        at = routing.catalog_name(name)
        if at is not None:
            if not at[0].strip():
                raise CdclakeError("BAD_OPTION", f"--catalog-database {routing.catalog_database} is blank for table {name}")
            other = where.setdefault((at[0].casefold(), at[1].casefold()), name)
            if other != name:
                raise CdclakeError("BAD_OPTION", f"--catalog-database {routing.catalog_database} puts both {other} and {name}"
                                                 f" at {at[0]}.{at[1]}: use --table-name to tell them apart")


_NAMINGS: dict[str, Naming] = {}
_LOCK = threading.Lock()


def register_naming(target: str, naming: Naming) -> None:
    """Record that the tables of ``target`` (its canonical spelling,
    :func:`cdclake.targets.resolve`) are named by ``naming`` in this process."""
    with _LOCK:
        if naming.is_default:
            _NAMINGS.pop(target, None)
        else:
            _NAMINGS[target] = naming


def naming_of(target: str) -> Naming:
    """The naming registered for ``target`` (the default when none is)."""
    return _NAMINGS.get(target, Naming())
