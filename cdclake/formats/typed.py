"""Typed images: the decode step every format shares, from a record's raw values to canonical
image text, with the column types worked out once per batch on the driver.

A decoder works in two stages over a batch:

1. *parse* (format code, one pass per record): the record is parsed once; its images stay raw
   (the format's own value text, e.g. ``map<string,string>`` from ``from_json``), and a
   *signature* column names what fixes the record's column types and image layout: a 64-bit
   hash of the table and the record's own type declaration (Canal ``mysqlType``, a Kafka
   Connect schema ...). The parsed batch is persisted
   (:func:`cdclake.formats.skeleton.persist_stage`).
2. *type* (this module): :func:`collect_signatures` reads the few distinct signatures of the
   batch to the driver (one small aggregate); the format turns each into a :class:`Sig` in
   plain Python (source type -> Spark type, converter per column); :func:`add_typed_images`
   then adds each canonical image with plain top-level expressions: for each signature one
   conversion per column (``try_cast`` and friends, specialised to the column's type), chosen
   by one ``CASE`` on the signature. No lambda runs per value and no Python touches a row.

``BAD_VALUE``: a value that is present in the raw image but has no canonical text (its
conversion gave NULL) names its column in ``<image>_bad``; the decoder rejects such records.
Values a source writes for "no value" (MySQL's zero dates ``0000-00-00``) read as NULL and are
not bad.

Canonical text per Spark type (see :mod:`cdclake.model`): integers as plain digits; decimals
and floating point numbers as the source's own text, trimmed, when it reads as the type;
booleans ``true``/``false``; dates ``yyyy-MM-dd``; timestamps ``yyyy-MM-dd HH:mm:ss.SSSSSS``
(UTC); binary as base64; strings as themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdclake.sqltext import sql_str

#: Canonical timestamp text: microseconds, UTC (the session time zone is UTC).
TS_FORMAT = "yyyy-MM-dd HH:mm:ss.SSSSSS"

_INT_RANGES = {"tinyint": "tinyint", "smallint": "smallint", "int": "int", "bigint": "bigint"}


#: MySQL's zero dates (read as NULL, not bad), over the raw value ``{0}``
ZERO_DATE = "{0} like '0000-00-00%'"


def zero_date_null(raw: str, spark_type: str | None) -> str:
    """SQL: ``raw`` with MySQL's zero dates (``0000-00-00...``) read as NULL for date and
    timestamp columns (as Debezium reads them); ``raw`` itself for other types."""
    if (spark_type or "").lower() in ("date", "timestamp"):
        return f"(case when {raw} like '0000-00-00%' then null else {raw} end)"
    return raw


def canonical_sql(raw: str, spark_type: str | None, binary: str = "base64") -> str:
    """SQL: the canonical text of the format's value text ``raw`` for a column of ``spark_type``
    (a literal Spark type such as ``decimal(10,2)``; None: unknown, kept as text), NULL when
    ``raw`` is NULL or cannot be read as that type.

    ``binary`` says how the format writes bytes: ``base64`` (Debezium, DataWorks, Qlik after
    its hex is turned into base64) or ``latin1`` (Canal writes each byte as one ISO-8859-1
    character). One conversion per value, specialised to the type: no CASE over types.
    """
    t = (spark_type or "string").lower().replace(" ", "")
    if t == "string":
        return raw
    if t in _INT_RANGES:
        return f"cast(try_cast(trim({raw}) as {t}) as string)"
    if t.startswith("decimal"):
        return f"(case when try_cast(trim({raw}) as {t}) is not null then trim({raw}) end)"
    if t in ("float", "double"):
        return f"(case when try_cast(trim({raw}) as double) is not null then trim({raw}) end)"
    if t == "boolean":
        return f"(case lower(trim({raw})) when 'true' then 'true' when '1' then 'true' when 'false' then 'false' when '0' then 'false' end)"
    if t == "date":
        return f"cast(try_cast(substr(trim({raw}), 1, 10) as date) as string)"
    if t == "timestamp":
        return f"date_format(coalesce(try_to_timestamp({raw}), try_cast({raw} as timestamp)), '{TS_FORMAT}')"
    if t == "binary":
        if binary == "latin1":
            # Spark 4's encode raises on a character ISO-8859-1 lacks (MALFORMED_CHARACTER_CODING,
            # found by bench/fuzz.py): such text is not Canal's binary, so it reads as NULL (BAD_VALUE)
            return f"(case when {raw} rlike '^[\\\\x00-\\\\xff]*$' then base64(encode({raw}, 'ISO-8859-1')) end)"
        stripped = f"regexp_replace({raw}, '\\\\s', '')"
        return f"(case when try_to_binary({stripped}, 'base64') is not null then {stripped} end)"
    return raw


@dataclass(frozen=True)
class Sig:
    """What one signature fixes, worked out on the driver.

    id: the signature's value in the batch (a 64-bit hash computed by the parse stage).
    names: the image's columns in the order the raw values come in.
    convert: per column, SQL turning its raw value (``{}`` in the template) into canonical
        text (NULL when unreadable); see :func:`canonical_sql`. Zero-date handling included.
    declared: the events' ``columns`` value for this signature: a list of COLUMN_SCHEMA dicts
        (name, source_type, spark_type, precision, scale, nullable), or None.
    void: per column, SQL (``{0}`` = the raw value) that holds when the raw value is the
        source's spelling of "no value" (MySQL's zero dates), whose NULL canonical value is not
        bad; None for a column (or for all) without one.
    """

    id: int
    names: tuple[str, ...]
    convert: tuple[str, ...]
    declared: tuple[dict, ...] | None = None
    void: tuple[str | None, ...] | None = None

    def is_bad(self, i: int, raw: str, canon: str) -> str:
        """SQL: column ``i``'s raw value ``raw`` is present but its canonical value ``canon``
        is NULL (and the raw value is not a "no value" spelling)."""
        void = self.void[i] if self.void is not None else None
        return f"{raw} is not null and {canon} is null" + (f" and not coalesce({void.format(raw)}, false)" if void else "")

    @staticmethod
    def of(sig_id: int, columns: Iterable[tuple[str, str | None]], binary: str = "base64", declared=None) -> "Sig":
        """A signature whose columns convert by Spark type: ``columns`` is (name, spark_type)
        pairs in raw order."""
        names, conv, void = [], [], []
        for name, spark_type in columns:
            names.append(name)
            conv.append(canonical_sql(zero_date_null("{0}", spark_type), spark_type, binary))
            void.append(ZERO_DATE if (spark_type or "").lower() in ("date", "timestamp") else None)
        return Sig(sig_id, tuple(names), tuple(conv), None if declared is None else tuple(declared), tuple(void))


def _lit(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return sql_str(str(v))


_COLUMN_FIELDS = (("name", "string"), ("source_type", "string"), ("spark_type", "string"),
                  ("precision", "int"), ("scale", "int"), ("nullable", "boolean"))


def columns_literal(declared: Iterable[dict] | None) -> str:
    """SQL literal of an event's ``columns`` (array of COLUMN_SCHEMA structs), or a typed NULL."""
    struct_type = "struct<" + ",".join(f"{n}:{t}" for n, t in _COLUMN_FIELDS) + ">"
    if declared is None:
        return f"cast(null as array<{struct_type}>)"
    items = [
        "named_struct(" + ", ".join(f"'{n}', cast({_lit(c.get(n))} as {t})" for n, t in _COLUMN_FIELDS) + ")"
        for c in declared
    ]
    return f"cast(array({', '.join(items)}) as array<{struct_type}>)"


#: SQL condition, always true, that keeps the projection holding it out of whole-stage code
#: generation: a ``reflect`` call is a ``CodegenFallback`` expression, and Spark's
#: ``CollapseCodegenStages`` leaves an operator with one out of its fused stage. Such a
#: projection is still compiled (``GenerateUnsafeProjection``), and a compiled projection is
#: split into methods of bounded size, whereas whole-stage code generation inlines every
#: projection of a stage into one ``processNext`` method: a CASE over many signatures of wide
#: tables (real Debezium output: a 109-column table, or 6 tables of 76 columns in all) outgrows
#: the JVM's 64 KB method limit, and Spark then logs the compiler's stack trace and evaluates
#: the stage interpreted. The call itself costs one reflective call per row.
_UNFUSED = "reflect('java.lang.String', 'valueOf', true) is not null"


def named(items: Iterable[str]) -> str:
    """SQL: ``array<string>`` of the values of ``items`` (SQL string expressions, each NULL or
    a name) that are not NULL, in order, distinct: ``array_compact`` without its lambda (a
    lambda keeps a projection out of whole-stage code generation and is interpreted)."""
    return f"array_except(array({', '.join(items)}), array(cast(null as string)))"


def unfused(sql: str) -> str:
    """SQL: ``sql`` (an expression of any type), evaluated in a compiled projection of its own
    instead of a whole-stage generated method (see :data:`_UNFUSED`): for the per-signature
    projections, whose size grows with the batch's signatures and columns."""
    return f"(case when {_UNFUSED} then {sql} end)"


def sig_case(sig_col: str, sigs: Iterable[Sig], value: Callable[[Sig], str], default: str = "null") -> str:
    """SQL: ``CASE <sig_col> WHEN <id> THEN value(sig) ... ELSE default END``."""
    whens = " ".join(f"when {s.id} then {value(s)}" for s in sigs)
    if not whens:
        return default
    return f"(case {sig_col} {whens} else {default} end)"


@dataclass(frozen=True)
class TypedImage:
    """One canonical image for :func:`add_typed_images` to add.

    out: the image's column (``map<string,string>``, NULL when ``present`` is false), beside
        ``<out>_bad`` (``array<string>``: the columns whose value could not be read).
    sig_col: the column naming the record's signature (one of ``sigs``' ids).
    sigs: the signatures of the batch.
    raw_value: ``raw_value(sig, i)``, the SQL of the raw text of column ``sig.names[i]``
        (e.g. ``vals[i]`` over the raw image's value array); written out wherever a conversion
        template reads ``{0}`` and again in the bad check, so it should be cheap (Debezium's,
        with its unquoting and zero dates, is the largest: its expressions grow with it).
    present: the SQL condition that the image exists.
    """

    out: str
    sig_col: str
    sigs: list[Sig]
    raw_value: Callable[[Sig, int], str]
    present: str


def add_typed_images(df: DataFrame, images: list[TypedImage], also: Iterable[str] = ()) -> DataFrame:
    """``df`` with each of ``images`` (:class:`TypedImage`) added, and the ``also`` columns
    (SQL ``<expression> as <name>`` over ``df``'s columns).

    Two projections whatever the number of images: the canonical values of every image (one
    ``CASE`` over the signatures, one conversion per value, :func:`canonical_sql`), then
    every image's map and bad columns (with ``also``). Each is compiled on its own, outside
    whole-stage code generation (:func:`unfused`), so its generated code is split into
    methods of bounded size; few projections, as each passes every column of a record on
    (canal-json's 1M-record decode spent a third of its final stage copying rows between the
    nine projections it had before, Java Flight Recorder, session 50).
    """
    none = "cast(null as array<string>)"  # the type of every CASE below when a batch has no signature
    empty = "cast(array() as array<string>)"

    def canon(im: TypedImage) -> str:
        def values(s: Sig) -> str:
            if not s.names:
                return empty
            return "array(" + ", ".join(c.format(im.raw_value(s, i)) for i, c in enumerate(s.convert)) + ")"
        return unfused(f"case when {im.present} then {sig_case(im.sig_col, im.sigs, values, none)} end")

    def bad(im: TypedImage, canon_col: str) -> str:
        def names(s: Sig) -> str:
            if not s.names:
                return empty
            return named(
                f"case when {s.is_bad(i, im.raw_value(s, i), f'{canon_col}[{i}]')} then {sql_str(n)} end"
                for i, n in enumerate(s.names)
            )
        return unfused(f"case when {canon_col} is not null then {sig_case(im.sig_col, im.sigs, names, empty)} else {empty} end")

    def names_of(im: TypedImage) -> str:
        return sig_case(im.sig_col, im.sigs, lambda s: "array(" + ", ".join(sql_str(n) for n in s.names) + ")" if s.names else empty, none)

    canons = {im.out: f"{im.out}__canon" for im in images}
    df = df.selectExpr("*", *[f"{canon(im)} as {canons[im.out]}" for im in images])
    kept = [f"`{c}`" for c in df.columns if c not in canons.values()]
    out = []
    for im in images:
        c = canons[im.out]
        out += [f"case when {c} is not null then map_from_arrays({names_of(im)}, {c}) end as {im.out}", f"{bad(im, c)} as {im.out}_bad"]
    return df.selectExpr(*kept, *out, *also)


def image_struct_sql(sig_col: str, sigs: list[Sig], raw_value: Callable[[Sig, int], str]) -> str:
    """SQL: ``struct<img: map<string,string>, bad: array<string>>`` of one image in a single
    expression (each conversion written twice), for images inside a lambda over a message's
    rows (Canal's multi-row messages), where :func:`add_typed_images`'s projections cannot
    reach. ``raw_value`` as for :func:`add_typed_images`, over the lambda's variable."""

    def one(s: Sig) -> str:
        if not s.names:
            return "named_struct('img', cast(map() as map<string,string>), 'bad', cast(array() as array<string>))"
        conv = [c.format(raw_value(s, i)) for i, c in enumerate(s.convert)]
        img = "map_from_arrays(array(" + ", ".join(sql_str(n) for n in s.names) + "), array(" + ", ".join(conv) + "))"
        bad = named(f"case when {s.is_bad(i, raw_value(s, i), c)} then {sql_str(n)} end" for i, (n, c) in enumerate(zip(s.names, conv)))
        return f"named_struct('img', {img}, 'bad', {bad})"

    return sig_case(sig_col, sigs, one, "cast(null as struct<img: map<string,string>, bad: array<string>>)")


def collect_signatures(df: DataFrame, sig_col: str, parts: list[str], extra: dict[str, F.Column] | None = None) -> list:
    """The distinct signatures of ``df`` (rows with ``sig_col`` not null): one row per
    signature with ``sig`` and ``lo``, the struct of the ``parts`` (column names or SQL
    expressions, fields ``p0``, ``p1`` ...) it was hashed from, and one field per entry of
    ``extra`` (name -> an aggregate over the signature's rows). One small aggregate (``first``
    per signature; a second, independent hash of the parts detects collisions).

    Raises:
        RuntimeError: two different parts share a hash (a 64-bit collision; never seen).
    """
    exprs = [F.expr(p).alias(f"p{i}") for i, p in enumerate(parts)]
    check = F.hash(*[F.expr(p) for p in parts])
    rows = (
        df.where(F.col(sig_col).isNotNull())
        .groupBy(F.col(sig_col).alias("sig"))
        .agg(F.first(F.struct(*exprs)).alias("lo"), F.min(check).alias("h0"), F.max(check).alias("h1"),
             *[agg.alias(name) for name, agg in (extra or {}).items()])
        .collect()
    )
    for r in rows:
        if r["h0"] != r["h1"]:
            raise RuntimeError(f"signature hash collision on {r['sig']}")
    return rows
