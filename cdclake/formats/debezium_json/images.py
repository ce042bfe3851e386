"""The typed images of ``debezium-json`` data records: what each signature fixes (a
:class:`Plan`, worked out on the driver once per signature) and the projections that turn a
record's raw images into canonical text (:func:`typed_images`).

Column types and conversions: :mod:`cdclake.formats.debezium_json.connect` (the table) and
:mod:`cdclake.formats.debezium_json.values` (the SQL).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from cdclake.formats.debezium_json import connect, values
from cdclake.formats.debezium_json.wire import KIND_BARE, KIND_ENV, NULL_STRINGS
from cdclake.formats.typed import Sig, TypedImage, add_typed_images, columns_literal, sig_case, unfused
from cdclake.sqltext import sql_str


def layout(keys: list[str] | None) -> tuple[list[str], list[int]]:
    """An image's columns (first-occurrence order) and, per column, the index of its value in
    the image's values (the last one when a key is repeated, as JSON readers keep it)."""
    keys = list(keys or [])
    last = {k: i for i, k in enumerate(keys)}
    names = list(dict.fromkeys(keys))
    return names, [last[n] for n in names]


@dataclass
class Plan:
    """What one signature fixes: per image (``a`` = after, ``b`` = before) the columns and the
    SQL of each stage-2 projection, for the signature's ``CASE`` branch."""

    id: int  # the signature
    declared: list[dict] | None  # Connect schema columns; None: inferred from the value kinds
    names: dict  # image -> column names
    pos: dict  # image -> index of each column's value in the image's values
    ids: dict  # image (``a``, ``b``) or ``s`` (schema) -> its signature (None: no such image)

    @property
    def inferred(self) -> bool:
        return self.declared is None

    def union(self) -> list[str]:
        """Inferred columns: the after image's, then the before image's others."""
        return self.names["a"] + [n for n in self.names["b"] if n not in self.names["a"]]

    def col(self, name: str) -> dict | None:
        return next((c for c in self.declared if c["name"] == name), None)

    # -- per-column pieces ----------------------------------------------------------------------
    def value(self, img: str, i: int) -> str:
        """SQL: the text of the value (non-finite numbers as the strings they were read as):
        ``uq_a``/``uq_b``, the image's values unquoted once (:func:`unquoted`)."""
        return f"uq_{img}[{self.pos[img][i]}]"

    def text(self, img: str, i: int) -> str:
        """SQL: the value's text as ``from_json`` gives it."""
        return f"vals_{img}[{self.pos[img][i]}]"

    def kind(self, img: str, i: int) -> str:
        """SQL: the JSON kind of the value (second parse)."""
        return f"schema_of_variant(kv_{img}[{self.pos[img][i]}])"

    def need_kinds(self) -> str:
        """SQL: the record needs the second parse (its images' JSON kinds)."""
        if self.inferred:
            return "true"
        conds = [
            values.decimal_ambiguous_sql(self.value(img, i))
            for img in "ab"
            for i, n in enumerate(self.names[img])
            if (self.col(n) or {}).get("kind") == "decimal"
        ]
        return "(" + " or ".join(conds) + ")" if conds else "false"

    def hex_array(self, img: str) -> str | None:
        """SQL: first pre-projection (base64 bytes of Decimal columns as hex)."""
        if self.inferred:
            return None
        out, any_hex = [], False
        for i, n in enumerate(self.names[img]):
            kind = (self.col(n) or {}).get("kind")
            v = self.value(img, i)
            if kind == "decimal":
                out.append(values.decimal_hex_sql(v, values.decimal_is_string_sql(v, self.kind(img, i))))
            elif kind == "vsdecimal":
                out.append(values.vsdecimal_hex_sql(v))
            else:
                out.append("cast(null as string)")
                continue
            any_hex = True
        return "array(" + ", ".join(out) + ")" if any_hex else None

    def unscaled_array(self, img: str) -> str | None:
        """SQL: second pre-projection (the unscaled digits of those bytes)."""
        if self.hex_array(img) is None:
            return None
        out = []
        for i, n in enumerate(self.names[img]):
            kind = (self.col(n) or {}).get("kind")
            out.append(values.unscaled_digits_sql(f"hex_{img}[{i}]", kind) if kind in values.HEX_KINDS else "cast(null as string)")
        return "array(" + ", ".join(out) + ")"

    def kinds_array(self, img: str) -> str | None:
        """SQL (inferred): the JSON kind of each value of the image."""
        if not self.inferred or not self.names[img]:
            return None
        return "array(" + ", ".join(self.kind(img, i) for i in range(len(self.names[img]))) + ")"

    def class_array(self) -> str | None:
        """SQL (inferred): the class letter of each column of :meth:`union`: the after value's
        kind unless that is null (JSON null or no such key), else the before value's."""
        if not self.inferred:
            return None
        out = []
        for n in self.union():
            ka = kb = ta = tb = "cast(null as string)"
            if n in self.names["a"]:
                j = self.names["a"].index(n)
                ka, ta = f"kk_a[{j}]", self.text("a", j)
            if n in self.names["b"]:
                j = self.names["b"].index(n)
                kb, tb = f"kk_b[{j}]", self.text("b", j)
            use_a = f"coalesce({ka} != 'VOID', false)"
            out.append(values.kind_class_sql(f"(case when {use_a} then {ka} else {kb} end)", f"(case when {use_a} then {ta} else {tb} end)"))
        return "array(" + ", ".join(out) + ")" if out else "cast(array() as array<string>)"

    def image_sig(self, img: str) -> Sig:
        """The typed image's :class:`Sig` (id: the image's signature): one conversion template
        per column."""
        conv = []
        for i, n in enumerate(self.names[img]):
            if self.inferred:
                conv.append(values.inferred_sql(f"icls[{self.union().index(n)}]"))
            else:
                col = self.col(n)
                pre = f"uns_{img}[{i}]" if col is not None and col["kind"] in values.HEX_KINDS else None
                conv.append(values.wire_sql(col, pre))
        return Sig(self.ids[img], tuple(self.names[img]), tuple(conv))

    def raw(self, img: str, i: int) -> str:
        """SQL: the raw text of a column; a MySQL zero date in a date/timestamp column reads as
        NULL (no value, not a bad one)."""
        v = self.value(img, i)
        col = None if self.inferred else self.col(self.names[img][i])
        if col is not None and col["kind"] in values.DATE_KINDS:
            return f"(case when {v} like '0000-00-00%' then null else {v} end)"
        return v

    def carried_array(self, forms: str) -> str | None:
        """SQL: the after image's columns whose value is none of the placeholder ``forms`` (an
        SQL list ``(v1, v2 ...)``, :func:`placeholder_forms`), in image order."""
        if not self.names["a"]:
            return None
        return "array_compact(array(" + ", ".join(
            f"case when {self.text('a', i)} in {forms} then null else {sql_str(n)} end" for i, n in enumerate(self.names["a"])
        ) + "))"

    def columns(self) -> str:
        if self.inferred:
            return "array(" + ", ".join(values.inferred_column_sql(n, f"icls[{u}]") for u, n in enumerate(self.union())) + ")"
        return columns_literal([{k: v for k, v in c.items() if k != "kind"} for c in self.declared])


def plan_of(row) -> Plan:
    """The :class:`Plan` of one signature row of :func:`cdclake.formats.typed.collect_signatures`
    over :data:`cdclake.formats.debezium_json.wire.SIG_PARTS` (``lo.p0`` the Connect schema
    text, ``p1``/``p2`` the after/before keys, ``p3``-``p5`` the image and schema signatures)."""
    p = row["lo"]
    names, pos = {}, {}
    names["a"], pos["a"] = layout(p["p1"])
    names["b"], pos["b"] = layout(p["p2"])
    return Plan(row["sig"], connect.connect_columns(p["p0"]), names, pos, {"a": p["p3"], "b": p["p4"], "s": p["p5"]})


class By:
    """Plans keyed by one of their signatures (``sig``: the record's; ``a``/``b``/``s``: an
    image's or the schema's), one plan per distinct value: the plans sharing it agree on what
    that signature fixes."""

    def __init__(self, plans: list[Plan], which: str) -> None:
        self.which = which
        self.column = "sig" if which == "sig" else f"sig_{which}"
        self.plans: dict[int, Plan] = {}
        for p in plans:
            k = p.id if which == "sig" else p.ids[which]
            if k is not None:
                self.plans.setdefault(k, p)

    def case(self, fn, default: str) -> str:
        """SQL: CASE over this signature of ``fn(plan)`` (plans where it is None left out)."""
        have = [(k, p) for k, p in self.plans.items() if fn(p) is not None]
        if not have:
            return default
        return "(case " + self.column + " " + " ".join(f"when {k} then {fn(p)}" for k, p in have) + f" else {default} end)"


def arrays(df: DataFrame, cols: dict[str, tuple[By, callable]]) -> DataFrame:
    """Add one ``array<string>`` column per entry of ``cols`` (name -> (plans by a signature,
    per-plan SQL or None)): a CASE over that signature; NULL for signatures without one."""
    return df.selectExpr("*", *[f"{unfused(by.case(fn, NULL_STRINGS))} as {name}" for name, (by, fn) in cols.items()])


def unquoted(plans: list[Plan], img: str) -> str:
    """SQL (``array<string>``): image ``img``'s values (``vals_a``/``vals_b``) with JSON's
    non-finite numbers unquoted (:func:`values.unquote_non_finite_sql`), as many as the widest
    image of ``plans`` has (a shorter image's extra items are NULL: ``get``, under ANSI mode
    too). Written once, so that every conversion reads ``uq_a[i]`` instead of repeating the
    unquoting wherever it reads the value (debezium-json decode of 100k records 6.6 s against
    7.0 s, session 52)."""
    n = max([max(p.pos[img]) + 1 for p in plans if p.pos[img]] or [0])
    if not n:
        return NULL_STRINGS
    return "array(" + ", ".join(values.unquote_non_finite_sql(f"get(vals_{img}, {k})") for k in range(n)) + ")"


def typed_images(df: DataFrame, plans: list[Plan], forms_sql: str) -> DataFrame:
    """The parse stage's records (``df``) with their typed images and what depends on their
    signatures' ``plans``: ``after_img``/``before_img`` (``map<string,string>`` canonical
    text), ``bad_cols``, ``kv_bad``, ``cols`` (the events' ``columns``), ``carried`` (the after
    image's columns that carry a value, NULL for all; ``forms_sql`` lists the placeholder
    texts), ``src``. Records of other signatures get NULL images."""
    inferred = [p for p in plans if p.inferred]
    df = df.selectExpr("*", "map_values(after_m) as vals_a", "map_values(before_m) as vals_b")
    df = df.selectExpr("*", *[f"{unfused(unquoted(plans, w))} as uq_{w}" for w in "ab"])
    # The images' JSON kinds, from a second parse of the records that need them: those whose
    # types are inferred, and digits-only Decimal values (a JSON string or a JSON number?)
    need = sig_case("sig", [p for p in plans if p.need_kinds() != "false"], Plan.need_kinds, "false")
    kind_parse = f"""(case when fb then named_struct('before', from_json(fb_before, 'map<string,variant>'),
                                                    'after', from_json(fb_after, 'map<string,variant>'))
                           when env then from_json(cast(value as string), '{KIND_ENV}').payload
                           else from_json(cast(value as string), '{KIND_BARE}') end)"""
    df = df.selectExpr("*", f"case when {need} then {kind_parse} end as kv")
    df = df.selectExpr("*", "map_values(kv.after) as kv_a", "map_values(kv.before) as kv_b")
    by = {w: By(plans, w) for w in ("sig", "a", "b", "s")}
    df = arrays(df, {
        "hex_a": (by["a"], lambda p: p.hex_array("a")), "hex_b": (by["b"], lambda p: p.hex_array("b")),
        "kk_a": (by["sig"], lambda p: p.kinds_array("a")), "kk_b": (by["sig"], lambda p: p.kinds_array("b")),
    })
    df = arrays(df, {
        "uns_a": (by["a"], lambda p: p.unscaled_array("a")), "uns_b": (by["b"], lambda p: p.unscaled_array("b")),
        "icls": (by["sig"], lambda p: p.class_array()),
    })
    images = []
    for img, out in (("a", "after_img"), ("b", "before_img")):
        one = by[img].plans
        images.append(TypedImage(
            out, f"sig_{img}", [p.image_sig(img) for p in one.values()],
            lambda s, i, img=img, one=one: one[s.id].raw(img, i), f"{'after' if img == 'a' else 'before'}_m is not null",
        ))
    df = add_typed_images(df, images)
    # an image the kinds parse could not read (nested duplicate keys): as unreadable as before
    kv_bad = sig_case("sig", inferred, lambda p: "((after_m is not null and kv.after is null) or (before_m is not null and kv.before is null))", "false")
    # Columns carried: all, unless the after image holds the placeholder of a value the
    # connector does not have (then those columns are left as they are: a partial image)
    carried = by["a"].case(lambda p: p.carried_array(forms_sql), NULL_STRINGS)
    df = df.selectExpr(
        "*",
        f"{unfused(f'case when arrays_overlap(vals_a, array{forms_sql}) then {carried} end')} as carried",
    )
    df = df.selectExpr(
        "*",
        "array_distinct(concat(before_img_bad, after_img_bad)) as bad_cols",
        f"{kv_bad} as kv_bad",
        f"{unfused(by['s'].case(Plan.columns, columns_literal(None)))} as cols",
        "b.source as src",
    )
    return df
