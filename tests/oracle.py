"""The correctness oracle shared by the simulator and round-trip tests: an independent,
pure-Python replay of canonical events into in-memory tables, and a reader that turns Delta
target tables back into typed Python rows to compare with it."""

from __future__ import annotations

import base64
import re
from datetime import date, datetime
from decimal import Decimal

from cdclake.simulate import SimResult, encode_value


def decode_value(text: str | None, spark_type: str):
    """Canonical text -> typed Python value (the inverse of encode_value, written apart)."""
    if text is None:
        return None
    if spark_type in ("int", "bigint", "smallint", "tinyint"):
        return int(text)
    if spark_type in ("double", "float"):
        return float(text)
    if spark_type.startswith("decimal("):
        return Decimal(text)
    if spark_type == "binary":
        return base64.b64decode(text, validate=True)
    if spark_type == "date":
        return date.fromisoformat(text)
    if spark_type == "timestamp":
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")
    if spark_type == "boolean":
        assert text in ("true", "false")
        return text == "true"
    assert spark_type == "string"
    return text


def replay(events: list[dict], strict: bool = True) -> tuple[dict[str, list[dict]], dict[str, dict[str, str]]]:
    """Apply ``events`` in list order to in-memory tables: keyed tables by key, keyless ones by
    whole-row match. Asserts what a source database guarantees: the before image of an update or
    delete is the row as it is, an insert never collides with a row."""
    rows: dict[str, list[dict]] = {}
    schemas: dict[str, dict[str, str]] = {}
    for e in events:
        if e["kind"] == "heartbeat":
            continue
        name = ".".join(p for p in (e["database"], e["schema"], e["table"]) if p)
        old_schema = schemas.get(name, {})
        new_schema = {c["name"]: c["spark_type"] for c in e["columns"]} if e["columns"] is not None else dict(old_schema)
        if e["columns"] is None:  # a format without column types: columns seen in images are strings
            for img in (e.get("before"), e.get("after")):
                for n in img or {}:
                    new_schema.setdefault(n, "string")
        if new_schema != old_schema:
            assert not strict or e["kind"] == "ddl" or name not in schemas, f"schema changed without DDL at {e['position']}"
            renames = dict(re.findall(r"RENAME COLUMN `([^`]+)` TO `([^`]+)`", e["ddl"] or ""))
            rows[name] = [
                {n: r.get(next((o for o, nn in renames.items() if nn == n), n)) for n in new_schema}
                for r in rows.get(name, [])
            ]
            schemas[name] = new_schema
        if e["kind"] == "ddl":
            if re.match(r"\s*DROP\s+TABLE\b", e["ddl"] or "", re.I):  # the table's rows are gone
                rows[name] = []
            continue
        typed = lambda img: {n: decode_value(img.get(n), t) for n, t in new_schema.items()}  # noqa: E731
        key = e["primary_key"] or list(new_schema)
        table = rows[name]

        partial = e.get("present") is not None  # a partial image: only these columns changed

        def find(img: dict) -> int:
            want = typed(img)
            match = [k for k in key if not partial or k in img]
            hits = [i for i, r in enumerate(table) if all(r[k] == want[k] for k in match)]
            assert len(hits) == 1, f"{len(hits)} rows match {e['op']} at {e['position']}"
            if e["op"] in ("u", "d") and not partial:
                assert table[hits[0]] == want, f"before image is not the current row at {e['position']}"
            return hits[0]

        op = e["op"]
        if op == "t":
            table.clear()
        elif op in ("c", "r"):
            assert not any(all(r[k] == typed(e["after"])[k] for k in key) for r in table), "insert collides"
            table.append(typed(e["after"]))
        elif op == "u" and partial:
            i = find(e["before"] or e["after"])
            table[i] = {**table[i], **{n: v for n, v in typed(e["after"]).items() if n in e["present"]}}
        elif op == "u":
            table[find(e["before"])] = typed(e["after"])
        elif op == "d":
            table.pop(find(e["before"]))
    return rows, schemas


def canon(row: dict, schema: dict[str, str]) -> tuple:
    """A row as a sortable, comparable tuple of canonical texts (NULL sorts first)."""
    return tuple((row[c] is not None, encode_value(row[c], t) or "") for c, t in schema.items())


def same_rows(got: list[dict], expected: list[dict], schema: dict[str, str]) -> None:
    g = sorted(canon(r, schema) for r in got)
    x = sorted(canon(r, schema) for r in expected)
    missing = [r for r in x if r not in g]
    extra = [r for r in g if r not in x]
    assert not missing and not extra, f"missing rows: {missing[:5]}\nunexpected rows: {extra[:5]}"
    assert g == x  # also the multiplicity
    by_text = {canon(r, schema): r for r in expected}
    for r in got:  # typed equality too, not only the same text
        assert r == by_text[canon(r, schema)]
        assert all(type(r[c]) is type(by_text[canon(r, schema)][c]) for c in schema)


def read_lake_table(spark, path: str) -> tuple[dict[str, str], list[dict]]:
    """Source columns (name -> Spark type) and typed rows of a target table, ``_cdc_``
    columns left out. Timestamps are read as UTC text so that the Python process's time zone
    plays no part."""
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(path)
    fields = [f for f in df.schema.fields if not f.name.startswith("_cdc_")]
    schema = {f.name: f.dataType.simpleString() for f in fields}
    cols = [
        F.date_format(F.col(f"`{f.name}`"), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(f.name)
        if schema[f.name] == "timestamp"
        else F.col(f"`{f.name}`")
        for f in fields
    ]
    rows = []
    for r in df.select(*cols).collect():
        d = r.asDict()
        for n, t in schema.items():
            if t == "timestamp" and d[n] is not None:
                d[n] = datetime.strptime(d[n], "%Y-%m-%d %H:%M:%S.%f")
            if t == "binary" and d[n] is not None:
                d[n] = bytes(d[n])
        rows.append(d)
    return schema, rows


def assert_lake_equals_final(spark, target, res: SimResult) -> None:
    from delta.tables import DeltaTable

    for name, expected in res.final.items():
        path = f"{target}/{name}"
        if not DeltaTable.isDeltaTable(spark, path):
            assert expected == [], f"{name}: no Delta table but {len(expected)} rows expected"
            continue
        schema, rows = read_lake_table(spark, path)
        assert schema == res.schemas[name], name
        same_rows(rows, expected, schema)
