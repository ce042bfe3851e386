"""The target tables as readers other than Spark see them: delta-rs (``deltalake`` on PyPI, the
reader behind Polars' and pandas users' scripts), pinned in cdclake/versions.py
(``TEST_PINS``). Issue 10: a target table must open in delta-rs unless its data needed a table
feature delta-rs lacks (type widening, turned on only when a column widens in place)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path


def _plain(v):
    """A value in one spelling for both readers: aware datetimes as naive UTC, maps as dicts,
    lists and structs recursively."""
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # pyarrow map
            return {k: _plain(x) for k, x in v}
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if hasattr(v, "asDict"):  # a Spark Row
        return {k: _plain(x) for k, x in v.asDict().items()}
    return v


def _key(row: dict) -> str:
    """A canonical text of a row (dict keys sorted at every level) to sort rows by."""
    import json

    return json.dumps(row, sort_keys=True, default=repr)


def has_column_mapping(path) -> bool:
    from deltalake import DeltaTable

    return "columnMapping" in (DeltaTable(str(path)).protocol().writer_features or [])


def type_widened(path) -> bool:
    """Whether the Delta table at ``path`` has type widening (a column widened in place), the
    table feature delta-rs 1.6.6 refuses to read."""
    from deltalake import DeltaTable

    protocol = DeltaTable(str(path)).protocol()
    return any(f.startswith("typeWidening") for f in (protocol.reader_features or []) + (protocol.writer_features or []))


def lake_rows(spark, path) -> list[dict]:
    """Every row (every column, ``_cdc_`` ones too) of the Delta table at ``path``: read by
    delta-rs (:func:`delta_rs_rows`, no Spark job: a Spark read of a table version costs a
    snapshot and a file-listing job besides its own), or by Spark for a table with type widening,
    which delta-rs cannot open. Values as :func:`_plain` spells them; top-level timestamps naive
    UTC from either reader (Spark's read as ``timestamp_ntz`` in the session's UTC, so that the
    Python process's time zone plays no part)."""
    if not type_widened(path):
        return delta_rs_rows(path)
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    df = spark.read.format("delta").load(str(path))
    cols = [F.col(f"`{f.name}`").cast("timestamp_ntz").alias(f.name) if isinstance(f.dataType, TimestampType) else F.col(f"`{f.name}`")
            for f in df.schema.fields]
    return [_plain(r) for r in df.select(*cols).collect()]


def delta_rs_rows(path) -> list[dict]:
    """Every row of the Delta table at ``path`` as delta-rs reads it (column names as the
    table's logical names): through ``to_pyarrow_table`` (the path of ``to_pandas`` and of most
    scripts), or through its SQL ``QueryBuilder`` for a column-mapped table, which the pyarrow
    path of delta-rs 1.6.6 reads as all NULLs without an error."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    dt_ = DeltaTable(str(path))
    if has_column_mapping(path):
        table = pa.table(QueryBuilder().register("t", dt_).execute("select * from t").read_all())
    else:
        table = dt_.to_pyarrow_table()
    return [{k: _plain(v) for k, v in r.items()} for r in table.to_pylist()]


def assert_delta_rs_reads_like_spark(spark, path) -> int:
    """delta-rs opens the Delta table at ``path`` and reads the same rows and columns as
    Spark; returns the row count."""
    ours = sorted((_plain(r) for r in spark.read.format("delta").load(str(path)).collect()), key=_key)
    theirs = sorted(delta_rs_rows(path), key=_key)
    assert [sorted(r) for r in theirs[:1]] == [sorted(r) for r in ours[:1]], f"{path}: columns differ"
    assert theirs == ours, f"{path}: delta-rs reads other rows than Spark"
    return len(ours)


def assert_target_opens_in_delta_rs(spark, target, widened: tuple[str, ...] = ()) -> None:
    """Every target table and ``_cdclake`` table under ``target`` reads alike in delta-rs and
    Spark, except the tables named in ``widened`` (a column widened in place: type widening on),
    which delta-rs refuses by naming that feature."""
    import pytest

    root = Path(target)
    tables = [p for p in root.iterdir() if (p / "_delta_log").is_dir() and p.name != "_cdclake"]
    tables += [p for p in (root / "_cdclake").iterdir() if (p / "_delta_log").is_dir()]
    assert tables
    for p in sorted(tables):
        if p.name in widened:
            with pytest.raises(Exception, match="(?i)typeWidening"):
                delta_rs_rows(p)
        else:
            assert_delta_rs_reads_like_spark(spark, p)
