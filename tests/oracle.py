"""The correctness oracle shared by the simulator and round-trip tests: an independent,
pure-Python replay of canonical events into in-memory tables, and a reader that turns Delta
target tables back into typed Python rows to compare with it."""

from __future__ import annotations

import base64
import re
from datetime import date, datetime
from decimal import Decimal

from cdclake.simulate import SimResult, encode_value


def untyped(source_type: str | None) -> str:
    """The type of a new column no value typed, by its source type name (DTS codes): DECIMAL ->
    decimal(38,10), BLOB / GEOMETRY -> binary, else string."""
    name = (source_type or "").upper()
    return "decimal(38,10)" if "DECIMAL" in name else "binary" if ("BLOB" in name or "GEOMETRY" in name) else "string"


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


def replay(
    events: list[dict], strict: bool = True, history: dict | None = None, subset: bool = False
) -> tuple[dict[str, list[dict]], dict[str, dict[str, str]]]:
    """Apply ``events`` in list order to in-memory tables: keyed tables by key, keyless ones by
    whole-row match, as multisets (identical rows are copies; a delete or update of one takes
    the copy whose current version began first: for the rows it does not matter which, for
    the ``history`` it is the applier's first in, first out). Asserts what a source database
    guarantees: the before image of an update or delete is the row as it is, an insert never
    collides with a row of its key.

    ``history``: a dict filled with every table's versions (SCD type 2), name -> list of
    ``[row, start, end]``: the row's values from the change at position ``start`` (a tuple of
    ints) to the one at ``end`` (None: current). A delete or truncate ends a version; an update
    ends it and begins the next.

    ``subset``: ``events`` are part of a source's stream (some changes not delivered yet), so
    the source's guarantees are not asserted: a full update or delete of a row that is not
    there (its insert not delivered) inserts the after image or does nothing, an update's
    before image need not be the row, an insert of a key that is there replaces its row: the
    greatest position wins per key, as the applier gives it. Full images only (not with
    ``history``)."""
    assert not (subset and history is not None)
    rows: dict[str, list[dict]] = {}
    live: dict[str, list[list]] = {}  # the versions of ``rows``' rows, in the same places
    # a table without a key: the images a snapshot ranked below the stream read since the
    # table's last truncate (below)
    capped: dict[str, list[dict]] = {}
    from cdclake.formats import snapshot_position_formats

    by_position = set(snapshot_position_formats())
    versions: dict[str, list[list]] = history if history is not None else {}
    schemas: dict[str, dict[str, str]] = {}
    for e in events:
        if e["kind"] == "heartbeat":
            continue
        name = ".".join(p for p in (e["database"], e["schema"], e["table"]) if p)
        old_schema = schemas.get(name, {})
        # a column whose type the event does not state (spark_type null: its value decides and
        # is NULL, e.g. DTS DECIMAL) keeps the table's type, else takes its source type name's
        new_schema = (
            {c["name"]: c["spark_type"] or old_schema.get(c["name"]) or untyped(c["source_type"]) for c in e["columns"]}
            if e["columns"] is not None else dict(old_schema)
        )
        if e["columns"] is None:  # a format without column types: columns seen in images are strings
            for img in (e.get("before"), e.get("after")):
                for n in img or {}:
                    new_schema.setdefault(n, "string")
        if new_schema != old_schema:
            assert not strict or e["kind"] == "ddl" or name not in schemas, f"schema changed without DDL at {e['position']}"
            renames = dict(re.findall(r"RENAME COLUMN `([^`]+)` TO `([^`]+)`", e["ddl"] or ""))
            def evolve(r: dict) -> dict:
                return {n: r.get(next((o for o, nn in renames.items() if nn == n), n)) for n in new_schema}

            rows[name] = [evolve(r) for r in rows.get(name, [])]
            capped[name] = [evolve(r) for r in capped.get(name, [])]
            for v in versions.get(name, []):
                v[0] = evolve(v[0])
            schemas[name] = new_schema
        at = tuple(int(x) for x in e["position"]["order"]) if e.get("position") else None
        hist = versions.setdefault(name, [])
        cur = live.setdefault(name, [])

        def end(i: int) -> None:
            cur[i][2] = at

        def begin(row: dict, i: int | None = None) -> None:
            v = [row, at, None, op]
            hist.append(v)
            if i is None:
                cur.append(v)
            else:
                cur[i] = v

        if e["kind"] == "ddl":
            moved = re.fullmatch(r"\s*RENAME\s+TABLE\s+(\S+)\s+TO\s+(\S+)\s*", e["ddl"] or "", re.I)
            if moved:  # the simulator's RENAME TABLE `a` TO `b` (names in the event's database): a's rows and columns go on as b's
                old, new = (".".join(p for p in (e["database"], e["schema"], m.strip("`")) if p) for m in moved.groups())
                assert old == name and new not in rows, f"RENAME TABLE {old} TO {new} at {e['position']}"
                rows[new], rows[name] = rows.get(name, []), []
                # histories (as cdclake.apply.renames moves them; step 1 of the statement, point
                # P + (1,)): a's current versions end at the point, and each goes on in b as a
                # version that begins at the point followed by its own start (a snapshot read
                # ranked below the stream: -1, before every streamed change)
                point = at + (1,)
                moved_versions = []
                for v in cur:
                    v[2] = point
                    start = (-1,) if v[3] == "r" and e.get("format") not in by_position else tuple(v[1])
                    moved_versions.append([dict(v[0]), point + start, None, "c"])
                versions.setdefault(new, []).extend(moved_versions)
                live[new], live[name] = moved_versions, []
                capped[new], capped[name] = capped.get(name, []), []
                schemas[new] = dict(schemas[name])
                continue
            if re.match(r"\s*DROP\s+TABLE\b", e["ddl"] or "", re.I):  # the table's rows are gone
                rows[name] = []
                capped[name] = []
                for i in range(len(cur)):
                    end(i)
                cur.clear()
            continue
        typed = lambda img: {n: decode_value(img.get(n), t) for n, t in new_schema.items()}  # noqa: E731
        key = e["primary_key"] or list(new_schema)
        table = rows[name]

        partial = e.get("present") is not None  # a partial image: only these columns changed

        def find(img: dict) -> int:
            want = typed(img)
            match = [k for k in key if not partial or k in img]
            hits = [i for i, r in enumerate(table) if all(r[k] == want[k] for k in match)]
            if subset and not partial and not hits:
                return None
            # a table without a key may hold copies of a row: any one of them is the row (for
            # the rows it does not matter which); a history ends the version of the copy that
            # began first (first in, first out, as cdclake.apply.history does)
            copies = not e["primary_key"] and hits and all(table[i] == table[hits[0]] for i in hits)
            assert len(hits) == 1 or copies, f"{len(hits)} rows match {e['op']} at {e['position']}"
            if e["op"] in ("u", "d") and not partial and not subset:
                assert table[hits[0]] == want, f"before image is not the current row at {e['position']}"
            if copies and not subset:
                return min(hits, key=lambda i: (cur[i][1] is not None, cur[i][1] or ()))
            return hits[0]

        op = e["op"]
        # A table without a key, as cdclake.apply.keyless and history._copy_ends read copies
        # (full images of a stream a database wrote): a snapshot read of an image says how many
        # copies there are at its point, so it ends the copies begun before that point, and the
        # same read again (same point) counts once; after a snapshot that ranks below every
        # streamed change (a format without Capabilities.snapshot_positions: Canal/DTS INIT,
        # Qlik REFRESH, the simulator's own rows), whose place among them is unknown, the image
        # keeps one row or none until the table's next truncate or a snapshot read ranked by
        # position: an insert of it replaces its row, and a delete or update of it that finds
        # no row takes nothing (as a change whose copy is not there ends nothing)
        if not e["primary_key"] and not subset and not partial and op in ("r", "c", "u", "d"):
            cap = capped.setdefault(name, [])

            def copies(img: dict) -> list[int]:
                return [i for i, r in enumerate(table) if r == img]

            def take(i: int) -> None:
                end(i)
                table.pop(i)
                cur.pop(i)

            if op == "r":
                img = typed(e["after"])
                same = copies(img)
                if any(cur[i][1] == at and cur[i][3] == "r" for i in same):
                    continue
                for i in reversed(same):
                    take(i)
                if e.get("format") in by_position:
                    cap[:] = [c for c in cap if c != img]
                elif img not in cap:
                    cap.append(img)
            elif op in ("u", "d"):
                before = typed(e["before"])
                if before not in cap or copies(before):
                    take(find(e["before"]))
            if op in ("r", "c", "u"):
                img = typed(e["after"])
                if op != "r" and img in cap and copies(img):
                    take(find(e["after"]))  # the copy that began first, as find takes any
                table.append(img)
                begin(dict(img))
            continue
        if op == "t":
            capped[name] = []
            table.clear()
            for i in range(len(cur)):
                end(i)
            cur.clear()
        elif op in ("c", "r") and subset:
            table[:] = [r for r in table if not all(r[k] == typed(e["after"])[k] for k in key)]
            table.append(typed(e["after"]))
        elif op in ("c", "r"):
            assert not e["primary_key"] or not any(all(r[k] == typed(e["after"])[k] for k in key) for r in table), "insert collides"
            table.append(typed(e["after"]))
            begin(dict(table[-1]))
        elif op == "u" and partial:
            i = find(e["before"] or e["after"])
            table[i] = {**table[i], **{n: v for n, v in typed(e["after"]).items() if n in e["present"]}}
            end(i)
            begin(dict(table[i]), i)
        elif op == "u" and subset:
            i = find(e["before"])
            if i is None:  # the row's insert not delivered: the update inserts it
                table[:] = [r for r in table if not all(r[k] == typed(e["after"])[k] for k in key)]
                table.append(typed(e["after"]))
            else:
                table[i] = typed(e["after"])
        elif op == "d" and subset:
            i = find(e["before"])
            if i is not None:
                table.pop(i)
        elif op == "u":
            i = find(e["before"])
            table[i] = typed(e["after"])
            end(i)
            begin(dict(table[i]), i)
        elif op == "d":
            i = find(e["before"])
            table.pop(i)
            end(i)
            cur.pop(i)
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


#: Delta's names of primitive types that Spark spells otherwise (``simpleString``)
_SPARK_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


def _rows_by_delta_rs(path: str) -> tuple[dict[str, str], list[dict]] | None:
    """Source columns (name -> Spark type name) and rows (every column, ``_cdc_`` ones too) of
    the Delta table at ``path`` as delta-rs reads them (tests/readers.py), or None when delta-rs
    cannot: a table with type widening (a column widened in place) or a column of a nested type.
    No Spark job: reading every table of a property example back through Spark cost ~0.2 s a
    table (session 26)."""
    from deltalake import DeltaTable

    from tests.readers import delta_rs_rows, type_widened

    if type_widened(path):
        return None
    table = DeltaTable(path)
    schema = {}
    for f in table.schema().fields:
        if f.name.startswith("_cdc_"):
            continue
        t = f.type.type  # nested types too spell a name here: "array", "struct", "map"
        if t in ("array", "struct", "map"):
            return None
        schema[f.name] = _SPARK_NAMES.get(t, t)
    return schema, delta_rs_rows(path)


def read_lake_table(spark, path: str, history: bool = False) -> tuple[dict[str, str], list[dict]]:
    """Source columns (name -> Spark type) and typed rows of a target table, ``_cdc_``
    columns left out; with ``history``, each row also holds ``_cdc_position``,
    ``_cdc_end_position`` (``_cdc_end.position``, None for a current version) and
    ``_cdc_is_current``. Read with delta-rs (:func:`_rows_by_delta_rs`), so every table the
    oracle checks opens in delta-rs too, else with Spark (type widening). Timestamps are naive
    UTC so that the Python process's time zone plays no part."""
    by_rs = _rows_by_delta_rs(path)
    if by_rs is not None:
        schema, full = by_rs
        rows = []
        for r in full:
            d = {n: r[n] for n in schema}
            if history:
                end = r["_cdc_end"]
                d.update(_cdc_position=r["_cdc_position"], _cdc_end_position=end and end["position"], _cdc_is_current=r["_cdc_is_current"])
            rows.append(d)
        return schema, rows
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
    extra = (F.col("_cdc_position"), F.col("_cdc_end.position").alias("_cdc_end_position"), F.col("_cdc_is_current")) if history else ()
    rows = []
    for r in df.select(*cols, *extra).collect():
        d = r.asDict()
        for n, t in schema.items():
            if t == "timestamp" and d[n] is not None:
                d[n] = datetime.strptime(d[n], "%Y-%m-%d %H:%M:%S.%f")
            if t == "binary" and d[n] is not None:
                d[n] = bytes(d[n])
        rows.append(d)
    return schema, rows


def read_lake_history(spark, path: str) -> tuple[dict[str, str], list[tuple]]:
    """Source columns and ``(row, start, end)`` of every version in the history table (SCD
    type 2) at ``path``: ``start`` is ``_cdc_position``, ``end`` is ``_cdc_end.position`` (None
    for a current version), both tuples of ints."""
    meta = ("_cdc_position", "_cdc_end_position", "_cdc_is_current")
    schema, rows = read_lake_table(spark, path, history=True)
    out = []
    for r in rows:
        m = {n: r.pop(n) for n in meta}
        m["end"] = m["_cdc_end_position"]
        assert m["_cdc_is_current"] == (m["end"] is None), f"_cdc_is_current {m['_cdc_is_current']} with end {m['end']}"
        out.append((r, tuple(int(x) for x in m["_cdc_position"]), tuple(int(x) for x in m["end"]) if m["end"] is not None else None))
    return schema, out


def same_history(got: list[tuple], expected: list, schema: dict[str, str]) -> None:
    """Versions ``(row, start, end)`` equal as multisets (rows by their canonical texts)."""
    g = sorted((v[1], v[2] or (), canon(v[0], schema)) for v in got)
    x = sorted((tuple(v[1]), tuple(v[2] or ()), canon(v[0], schema)) for v in expected)
    missing = [v for v in x if v not in g]
    extra = [v for v in g if v not in x]
    assert not missing and not extra, f"missing versions: {missing[:5]}\nunexpected versions: {extra[:5]}"
    assert g == x


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
