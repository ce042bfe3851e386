"""The ``_cdclake`` tables beside the targets: changelog (which carries the progress), rejects,
schema history, deletes. One Delta commit per table per batch at most, each an append; a batch
reads the progress (from the changelog's newest commit file), and the deletes only for late
events.

All are Delta tables under ``<target>/_cdclake/``:

* ``changelog``: every decoded canonical event (EVENT_SCHEMA) plus ``_ingested_at_ms``
  (bigint, ms). Appended once per batch, last, its commit carrying the progress (below) as
  ``userMetadata``; with a batch identity (:class:`Txn`: Delta's ``txnAppId``/``txnVersion``)
  the append is idempotent, so a batch ingested again (the same files, or a Kafka micro-batch
  replayed after a crash) adds nothing.
* ``rejects``: one row per record that could not be decoded: ``format``, ``error_code``,
  ``error_message``, ``raw_key``/``raw_value`` (binary, the record's bytes), ``source_record``,
  ``_ingested_at_ms``. Appended like the changelog.
* ``schema_history``: one row per schema change of a target table: ``table``, ``delta_version``
  (the table version after the change), ``schema`` (Spark DDL of the source columns),
  ``change`` (what changed), ``ddl`` (the source DDL text of the batch, if any), ``position``
  (position.text of that DDL), ``recorded_at_ms``.
* ``deletes``: the position of the winning delete of each deleted key (``table``, ``key`` = the
  key's values as JSON, ``position``, ``position_text``, ``record``: the delete's file/line or
  partition/offset, the tie-breaker of equal positions; ``sub``: 0 for a delete ordered before
  its own position's changes, the old key's row of a key change or a lone update before half,
  else 1, read as 1 in a table written before the column), appended per batch. Read only for a
  table whose batch holds a change not newer than the table's latest delete (an out-of-order
  delivery, or a tie); grows with deletes, nothing prunes it yet. A table without a key (SCD
  type 1, :mod:`cdclake.apply.keyless`) also keeps there, with ``op``, every delete (``d``; null
  in rows written before the column) and every copy a delete took (the change's op: ``c``,
  ``r``, ``u``), each once; readers of deletes skip the rows whose ``op`` is not ``d``. A
  keyed table with per-column positions, and a keyed history table, also keep every partial
  update that moved a row to a new key (``op`` ``m``, ``key`` the old key, ``to`` the new one,
  ``present`` the columns the move carried, at the move's position with ``sub`` 0;
  :func:`cdclake.apply.delta_table.follow_moves` and
  :func:`cdclake.apply.history.history_source` read them).
* the progress (layout 3: the ``userMetadata`` of the changelog's newest commit that has it, JSON
  ``{"cdclake.progress": 3, "rows": [...]}``; layout 2: a table ``_cdclake/progress`` of
  these rows, read until the next batch moves it into the changelog): per source (``source`` = file path or ``topic:partition``) and table;
  ``table`` null: the source as a whole (with ``last_heartbeat_ms``); ``source`` null: the
  table as a whole, with the state later batches need (``delete_position``,
  ``truncate_position``/``truncate_position_text``, ``rows``) and ``delta_version``, the
  table's Delta version after the last batch that wrote it (reading every table as of its
  ``delta_version`` gives all of them as one batch left them: whole transactions only). Columns: ``last_position`` /
  ``last_position_text`` (greatest applied), ``last_event_time_ms``, ``last_heartbeat_ms``,
  ``lag_ms`` (``updated_at_ms`` minus ``last_event_time_ms``), ``updated_at_ms``; ``source``
  and ``table`` both null: the target as a whole, with what the transaction gate holds back
  (``held_transactions``, ``held_events``, ``held_since_ms``), the version of
  ``_cdclake/held`` that holds it (``held_version``; :mod:`cdclake.apply.transactions`)
  (``changelog_version``: null; the changelog's version after the last batch is the commit
  that carries the progress, :meth:`Progress.changelog_version`).

* ``decoder_context``: records a format's decoder needs in later batches (``format``,
  ``value`` binary, ``recorded_at_ms``): Qlik's metadata messages. Appended with the batch's
  identity, each distinct value once per format; read by every batch of that format.

``_cdclake/layout.json`` names the layout of these tables (:data:`LAYOUT`); a target of layout 2
is moved forward, one written in another layout is refused (:func:`check_layout`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.apply.delta_table import ApplyResult, TableState, latest_version
from cdclake.apply.plan import RECORD_FIELDS, BatchPlan, column_ddl, order_key, record_tuple, truncate_key
from cdclake import targets
from cdclake.errors import CdclakeError
from cdclake.model import EVENT_COLUMNS, EVENT_SCHEMA, SOURCE_RECORD_SCHEMA, qualified_name
from cdclake.routing import Naming, register_naming
from cdclake.targets import TargetFiles, hadoop_fs

CHANGELOG = "_cdclake/changelog"
REJECTS = "_cdclake/rejects"
SCHEMA_HISTORY = "_cdclake/schema_history"
#: the progress table of layout 2 targets, read once by a batch of a target written before
#: layout 3 and removed after that batch's progress commit (:func:`read_progress`)
LEGACY_PROGRESS = "_cdclake/progress"
#: the key of the progress in a changelog commit's ``userMetadata`` (JSON: ``{PROGRESS_TAG:
#: <layout>, "rows": [...]}``)
PROGRESS_TAG = "cdclake.progress"
#: positions of deleted keys, all target tables (see apply/delta_table.py)
DELETES = "_cdclake/deletes"
DECODER_CONTEXT = "_cdclake/decoder_context"
LAYOUT_FILE = "_cdclake/layout.json"
#: version of the ``_cdclake`` layout this code writes (1: per-table tombstones, merged changelog;
#: 2: the progress in a table of its own; 3: the progress carried by the changelog's commits)
LAYOUT = 3
#: older layouts this code reads and moves forward (:func:`check_layout`, :func:`read_progress`)
READABLE_LAYOUTS = (2, LAYOUT)

PROGRESS_SCHEMA = (
    "source string, table string, last_position array<decimal(38,0)>, last_position_text string, "
    "last_event_time_ms bigint, last_heartbeat_ms bigint, updated_at_ms bigint, lag_ms bigint, "
    "delete_position array<decimal(38,0)>, truncate_position array<decimal(38,0)>, "
    "truncate_position_text string, rows bigint, delta_version bigint, held_transactions bigint, held_events bigint, held_version bigint, "
    "held_since_ms bigint, timed_out_transactions bigint, "
    "truncate_record struct<file:string,line:bigint,partition:int,offset:bigint>, "
    "renamed array<struct<point:array<decimal(38,0)>,record:struct<file:string,line:bigint,partition:int,offset:bigint>,"
    "to:array<string>,text:string,event_time_ms:bigint>>, "
    "column_ddl array<struct<order:array<decimal(38,0)>,text:string,ddl:string>>, "
    "move_position array<decimal(38,0)>, changelog_version bigint"
)
#: ``renamed`` (a table's row): the table renames applied to the table (:mod:`cdclake.apply.renames`):
#: each step's point, its DDL's record, the new name's ``[database, schema, table]`` and the
#: DDL's position text and event time (null in rows written before they were kept); an event of
#: the table older than a point, arriving later, belongs to the new name
#: ``column_ddl`` (a table's row): the DDL statements that dropped or renamed a column of the
#: table, by position (``order``, ``text``, ``ddl``): an event written before one of them that
#: arrives in a later batch is read with the columns in force at its position
#: (:func:`cdclake.apply.plan.follow_past_column_ddl`)
#: the progress columns of the target's own row (``source`` and ``table`` null): what the
#: transaction gate holds back (:mod:`cdclake.apply.transactions`) and how many open
#: transactions it has given up by the timeout so far (applied as they were); absent in a
#: table written before them (read as nothing held, none given up)
HELD_FIELDS = ("held_transactions", "held_events", "held_version", "held_since_ms", "timed_out_transactions")
#: ``changelog_version`` (the target's row): the changelog's Delta version after the last batch
#: that appended to it, so that a batch (or the same batch applied again after a crash) reads
#: the changelog without its own events (:class:`ChangelogCut`); null in a table written before it
SCHEMA_HISTORY_SCHEMA = (
    "table string, delta_version bigint, schema string, change string, ddl string, position string, recorded_at_ms bigint"
)


@dataclass(frozen=True)
class Txn:
    """A batch's identity for Delta's idempotent writes: ``app_id`` names the writer (a file
    set, a streaming query), ``version`` grows by one per batch of that writer."""

    app_id: str
    version: int


#: the session settings that give Delta's DML commands (MERGE, DELETE, UPDATE) and writes
#: without writer options a transaction identity (Delta 2.3+, delta-io/delta#1555)
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
_txn_lock = threading.Lock()


@contextlib.contextmanager
def txn_session(spark: SparkSession, txn: Txn | None):
    """Inside it, every Delta commit of the session that has no writer options of its own
    carries ``txn`` (nothing when ``txn`` is None), and Delta skips a commit to a table that
    already holds ``txn`` (or a later version of its app id). One batch at a time per
    session: a second ``txn_session`` waits for the first to end.

    Only the batch's own writes may run inside it: a table that commits twice under one
    identity skips the second commit."""
    if txn is None:
        yield
        return
    with _txn_lock:
        spark.conf.set(TXN_APP_ID_CONF, txn.app_id)
        spark.conf.set(TXN_VERSION_CONF, str(txn.version))
        try:
            yield
        finally:
            spark.conf.unset(TXN_APP_ID_CONF)
            spark.conf.unset(TXN_VERSION_CONF)


#: Delta's setting that skips a commit adding no files (on by default)
SKIP_EMPTY_COMMITS_CONF = "spark.databricks.delta.skipRecordingEmptyCommits"
_empty_lock = threading.Lock()


@contextlib.contextmanager
def _empty_commits_recorded(spark: SparkSession):
    """Inside it, Delta records a commit that adds no files (its metadata and batch identity);
    the session's setting is restored after. One at a time per session."""
    with _empty_lock:
        before = spark.conf.get(SKIP_EMPTY_COMMITS_CONF, None)
        spark.conf.set(SKIP_EMPTY_COMMITS_CONF, "false")
        try:
            yield
        finally:
            if before is None:
                spark.conf.unset(SKIP_EMPTY_COMMITS_CONF)
            else:
                spark.conf.set(SKIP_EMPTY_COMMITS_CONF, before)


def now_ms() -> int:
    """The wall clock in milliseconds since the epoch (the audit tables' ``_ms`` times)."""
    return int(time.time() * 1000)


def check_layout(target: str, spark: SparkSession | None = None, writer: bool = True, naming: Naming | None = None) -> None:
    """Refuse a target whose ``_cdclake`` tables were written in another layout; mark a new
    target, and one of layout 2 (whose progress table :func:`read_progress` still reads), with
    this one; ``writer`` False (a reader: ``cdclake status``): mark nothing. ``spark``: needed
    for a URI target (see :mod:`cdclake.targets`). ``naming``: how this run names the tables
    (:class:`cdclake.routing.Naming`), kept in the layout file of a new target; None: as the
    target names them. The target's naming is registered for this process
    (:func:`cdclake.routing.register_naming`), so every table folder is found under it.

    Raises:
        CdclakeError(TARGET_LAYOUT): the target holds ``_cdclake`` tables of another layout.
        CdclakeError(BAD_OPTION): ``naming`` is not the one the target was made with.
    """
    files = TargetFiles(target, spark)
    if files.exists(LAYOUT_FILE):
        try:
            doc = json.loads(files.read_text(LAYOUT_FILE))
            found = doc.get("layout")
        except (ValueError, AttributeError):
            doc, found = {}, None
        if found not in READABLE_LAYOUTS:
            raise CdclakeError(
                "TARGET_LAYOUT",
                f"target {target} was written by a cdclake with _cdclake layout {found!r}; this one writes layout {LAYOUT}: use another target",
            )
        kept = Naming.from_json(doc)
        if naming is not None and naming != kept:
            raise CdclakeError(
                "BAD_OPTION",
                f"target {target} names its tables with {kept.describe()}; this run asks for {naming.describe()}:"
                " a target keeps the naming it was made with (use another target)",
            )
        register_naming(targets.resolve(target), kept)
        if found != LAYOUT and writer:  # layout 2: its progress table is read until the next batch's progress commit
            files.write_text(LAYOUT_FILE, json.dumps({**doc, "layout": LAYOUT}) + "\n")
        return
    if files.has_entries("_cdclake", ignore=frozenset({"writer.lock"})):  # the lock is not a table
        raise CdclakeError(
            "TARGET_LAYOUT",
            f"target {target} holds _cdclake tables of an older cdclake (layout 1); this one writes layout {LAYOUT}: use another target",
        )
    naming = naming or Naming()
    register_naming(targets.resolve(target), naming)
    files.write_text(LAYOUT_FILE, json.dumps({"layout": LAYOUT, **naming.as_json()}) + "\n")


def append(df: DataFrame, path: str, txn: Txn | None = None, evolve: bool = False, metadata: str | None = None) -> None:
    """Append ``df`` to the Delta table at ``path`` (created from ``df``'s schema when missing),
    idempotently when ``txn`` is given (Delta skips a (app id, version) it has committed).
    ``evolve``: add the columns and struct fields ``df`` has and the table lacks (Delta's
    ``mergeSchema``; e.g. ``source_record.headers`` on a changelog written before it existed).
    ``metadata``: the commit's ``userMetadata`` (Delta's commitInfo)."""
    writer = df.write.format("delta").mode("append")
    if evolve:
        writer = writer.option("mergeSchema", "true")
    if metadata is not None:
        writer = writer.option("userMetadata", metadata)
    if txn is not None:
        writer = writer.option("txnAppId", txn.app_id).option("txnVersion", txn.version)
    writer.save(path)


def write_changelog(events: DataFrame, target: str, txn: Txn | None = None, metadata: str | None = None) -> None:
    """Append the batch's events (EVENT_SCHEMA) to the changelog; ``metadata``: the commit's
    ``userMetadata`` (the progress, :func:`update_progress`)."""
    append(events.select(*EVENT_COLUMNS).withColumn("_ingested_at_ms", F.lit(now_ms())), f"{target}/{CHANGELOG}", txn,
           evolve=True, metadata=metadata)


def write_rejects(rejects: DataFrame, fmt: str, target: str, txn: Txn | None = None) -> None:
    """Append rejected records (DECODED_SCHEMA rows with ``error_code``) to the rejects table."""
    df = rejects.select(
        F.lit(fmt).alias("format"),
        "error_code",
        "error_message",
        "raw_key",
        "raw_value",
        "source_record",
        F.lit(now_ms()).alias("_ingested_at_ms"),
    )
    append(df, f"{target}/{REJECTS}", txn, evolve=True)


def read_context(spark: SparkSession, target: str, fmt: str) -> DataFrame | None:
    """The records earlier batches kept for ``fmt``'s decoder (RAW_SCHEMA with ``key`` and
    ``source_record`` null), or None when none were kept."""
    path = f"{target}/{DECODER_CONTEXT}"
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return spark.read.format("delta").load(path).where(F.col("format") == fmt).select(
        F.lit(None).cast("binary").alias("key"), "value", F.lit(None).cast(SOURCE_RECORD_SCHEMA).alias("source_record")
    )


def keep_context(spark: SparkSession, records: DataFrame, kept: DataFrame | None, fmt: str, target: str, txn: Txn | None = None) -> int:
    """Append the values of ``records`` (a decoder's :meth:`context_records`, few rows)
    that ``kept`` (:func:`read_context`) does not hold yet; returns how many were added. One
    Spark job (the rows are collected), one Delta commit when there is anything new."""
    new = records if kept is None else records.join(kept.select("value"), "value", "left_anti")
    values = [bytes(r["value"]) for r in new.collect()]
    if values:
        now = now_ms()
        df = spark.createDataFrame([(fmt, v, now) for v in values], "format string, value binary, recorded_at_ms bigint")
        append(df, f"{target}/{DECODER_CONTEXT}", txn)
    return len(values)


def write_deletes(frames: list[DataFrame], target: str, txn: Txn | None = None) -> None:
    """Append the batch's winning deletes of every table (see :class:`TableApply`) at once."""
    if not frames:
        return
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f, allowMissingColumns=True)  # (a table's remembered moves add ``op`` and ``to``)
    append(df, f"{target}/{DELETES}", txn, evolve=True)  # evolve: ``record`` on a table from before it


class DeletesAppend:
    """The batch's one append to ``_cdclake/deletes`` (:func:`write_deletes`), begun as soon as
    every table of ``tables`` (names) has said what it remembers (:meth:`add`: its frame of
    ``_cdclake/deletes`` rows, known before its MERGE), so that it runs beside the MERGEs; one
    commit with the batch identity ``txn``, none when no table remembers anything.

    Why it may commit before the tables: a remembered delete only keeps out changes older than
    it, and the batch's own older changes of that key lose to it in the batch anyway; a batch
    applied again after a crash skips the append (``txn``) and applies the same MERGEs.
    """

    def __init__(self, target: str, txn: Txn | None, tables: set[str]) -> None:
        self._target, self._txn, self._waiting = target, txn, set(tables)
        self._frames: list[DataFrame] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cdclake-deletes")
        self._future = None
        if not self._waiting:
            self._start()

    def add(self, table: str, frame: DataFrame | None) -> None:
        """``table``'s remembered rows (None: nothing); a table's first word counts, later ones
        (the batch's own ``None`` after a table's strategy spoke) change nothing."""
        with self._lock:
            if table not in self._waiting:
                return
            self._waiting.discard(table)
            if frame is not None:
                self._frames.append(frame)
            if not self._waiting:
                self._start()

    def _start(self) -> None:
        frames = list(self._frames)
        self._future = self._pool.submit(write_deletes, frames, self._target, self._txn) if frames else None

    def wait(self) -> None:
        """Wait for the append (when begun) and end the thread; raises the append's error.

        Raises:
            RuntimeError: a table of ``tables`` never said what it remembers.
        """
        try:
            with self._lock:
                waiting, future = sorted(self._waiting), self._future
            if waiting:
                raise RuntimeError(f"no word on remembered deletes from {waiting}")
            if future is not None:
                future.result()
        finally:
            self._pool.shutdown(wait=True)

    def close(self) -> None:
        """End the thread (after the append, when begun), raising nothing: for a batch that
        fails, whose error is the one to tell."""
        self._pool.shutdown(wait=True)


def record_schema_changes(spark: SparkSession, target: str, rows: list[tuple]) -> None:
    """Append schema_history rows ``(table, delta_version, schema, change, ddl, position)``
    (after the changes were made); nothing when ``rows`` is empty."""
    if not rows:
        return
    now = now_ms()
    df = spark.createDataFrame([(*r, now) for r in rows], SCHEMA_HISTORY_SCHEMA)
    append(df, f"{target}/{SCHEMA_HISTORY}")


def schema_history_rows(plan_ddl: list[tuple], result: ApplyResult | None, table: str) -> list[tuple]:
    """The schema_history rows of one table for one batch: one per schema change (or one
    ``ddl recorded`` row when the batch holds DDL that changed nothing the applier follows)."""
    changes = result.schema_changes if result is not None else []
    if not changes and not plan_ddl:
        return []
    ddl_text = "; ".join(d[2] for d in plan_ddl if d[2]) or None
    ddl_pos = plan_ddl[-1][1] if plan_ddl else None
    version = result.schema_version if result is not None else None
    schema = result.schema if result is not None else None
    return [(table, version, schema, c, ddl_text, ddl_pos) for c in (changes or ["ddl recorded"])]


@dataclass
class Progress:
    """The progress as a batch reads it (:func:`read_progress`): every row (dicts with
    :data:`PROGRESS_SCHEMA`'s fields), the changelog's latest version when it was read
    (``version``; None: no changelog yet) and the version of the changelog commit that carries
    the rows (``changelog_at``; None: no progress commit yet, or rows read from a layout 2
    progress table)."""

    version: int | None
    rows: list[dict]
    changelog_at: int | None = None

    def table_states(self) -> dict[str, TableState]:
        """The table rows (``source`` null): what earlier batches left for each table (with
        ``moved_in``, the points of the renames into each, from the others' ``renamed``)."""
        states = {
            r["table"]: TableState(
                _list(r["delete_position"]), _list(r["truncate_position"]), r["truncate_position_text"], r["rows"],
                record_tuple(r.get("truncate_record")), renamed_of(r.get("renamed")), column_ddl_of(r.get("column_ddl")),
                _list(r.get("move_position")), version=r.get("delta_version"),
            )
            for r in self.rows
            if r["source"] is None and r["table"] is not None
        }
        for st in list(states.values()):
            for point, _rec, to, *_ in st.renamed:
                if qualified_name(*to) in states:
                    states[qualified_name(*to)].moved_in.append(list(point))
        return states

    def held(self) -> dict:
        """The target's row's held fields (:data:`HELD_FIELDS`; zeros and None when nothing
        was ever held)."""
        row = next((r for r in self.rows if r["source"] is None and r["table"] is None), {})
        out = {f: row.get(f) for f in HELD_FIELDS}
        out["held_transactions"] = out["held_transactions"] or 0
        out["held_events"] = out["held_events"] or 0
        out["timed_out_transactions"] = out["timed_out_transactions"] or 0
        return out

    def held_version(self) -> int | None:
        """The version of ``_cdclake/held`` to read, None when it holds nothing."""
        h = self.held()
        return h["held_version"] if h["held_events"] else None

    def changelog_version(self) -> int | None:
        """The changelog's version after the last batch: the commit that carries the progress
        (in a layout 2 target, the target's row's ``changelog_version``; None: not kept yet)."""
        if self.changelog_at is not None:
            return self.changelog_at
        row = next((r for r in self.rows if r["source"] is None and r["table"] is None), {})
        v = row.get("changelog_version")
        return None if v is None else int(v)

    def last_order(self, table: str) -> list | None:
        """The greatest position order (``position.order``) applied to ``table`` (its data and
        DDL events, over all sources); None when none is known."""
        return next((list(r["last_position"]) for r in self.rows if r["source"] is None and r["table"] == table
                     and r["last_position"] is not None), None)

    def changelog_cut(self) -> "ChangelogCut | None":
        """What earlier batches applied, as the transaction gate reads it to tell a re-delivered
        piece of an applied transaction (:func:`cdclake.apply.transactions.gate`): the changelog's
        version after the last batch and the greatest position any table applied; None when the
        target's row has no ``changelog_version`` (a target written before it) or no table has
        a position yet."""
        version = self.changelog_version()
        orders = [r["last_position"] for r in self.rows
                  if r["source"] is None and r["table"] is not None and r["last_position"] is not None]
        if version is None or not orders:
            return None
        return ChangelogCut(int(version), list(max(orders, key=order_key)))


@dataclass(frozen=True)
class ChangelogCut:
    """The changelog as the last batch left it: ``version`` (its Delta version) and ``last_order``
    (the greatest position order, ``position.order``, that any target table applied)."""

    version: int
    last_order: list


#: the progress this process last read or wrote, per changelog path:
#: ``(version, (length, modification time) of that version's commit file, rows, changelog_at)``
_progress_cache: dict[str, tuple[int, tuple[int, int], list[dict], int | None]] = {}
_progress_lock = threading.Lock()


def _commit_file(spark: SparkSession, path: str, version: int):
    """The Hadoop ``FileStatus`` of commit ``version`` of the Delta table at ``path``
    (``_delta_log/<version, 20 digits>.json``, the Delta protocol's commit file), or None."""
    fs, f = hadoop_fs(spark, f"{path}/_delta_log/{version:020d}.json")
    return fs.getFileStatus(f) if fs.exists(f) else None


def _stamp(status) -> tuple[int, int]:
    return (int(status.getLen()), int(status.getModificationTime()))


def _cached_progress(spark: SparkSession, path: str) -> Progress | None:
    """The cached progress of the changelog at ``path`` when the changelog is still at the
    cached version: its commit file is the one cached and no later commit exists (two
    file-system look-ups)."""
    with _progress_lock:
        hit = _progress_cache.get(path)
    if hit is None:
        return None
    version, stamp, rows, at = hit
    status = _commit_file(spark, path, version)
    if status is None or _stamp(status) != stamp or _commit_file(spark, path, version + 1) is not None:
        return None
    return Progress(version, [dict(r) for r in rows], at)


def _remember_progress(spark: SparkSession, path: str, version: int | None, rows: list[dict], at: int | None) -> None:
    status = _commit_file(spark, path, version) if version is not None else None
    with _progress_lock:
        if status is None or _commit_file(spark, path, version + 1) is not None:
            _progress_cache.pop(path, None)
        else:
            _progress_cache[path] = (version, _stamp(status), [dict(r) for r in rows], at)


def progress_metadata(rows: list[dict]) -> str:
    """Progress rows (:data:`PROGRESS_FIELDS`) as the ``userMetadata`` of a changelog commit:
    JSON ``{PROGRESS_TAG: LAYOUT, "rows": [...]}``, positions as decimal strings, record
    coordinates as objects (:func:`progress_rows_of` reads it back)."""
    def plain(name, v):
        if v is None:
            return None
        if name == "truncate_record":
            return dict(zip(RECORD_FIELDS, record_tuple(v)))
        if hasattr(v, "asDict"):
            v = v.asDict()
        if isinstance(v, dict):
            return {k: plain(k, x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(name, x) for x in v]
        return str(v) if isinstance(v, Decimal) else v

    return json.dumps({PROGRESS_TAG: LAYOUT, "rows": [{f: plain(f, r.get(f)) for f in PROGRESS_FIELDS} for r in rows]},
                      separators=(",", ":"))


def progress_rows_of(metadata: str | None) -> list[dict] | None:
    """The progress rows a changelog commit's ``userMetadata`` carries (as a progress table
    read gives them: positions as lists of Decimal, ``truncate_record`` a tuple), None when it
    carries none (another writer's commit, a commit of layout 2).

    Raises:
        CdclakeError(TARGET_LAYOUT): the progress is of a later layout than this code's.
    """
    try:
        value = json.loads(metadata) if metadata else None
    except ValueError:
        return None
    if not isinstance(value, dict) or PROGRESS_TAG not in value or not isinstance(value.get("rows"), list):
        return None
    if value[PROGRESS_TAG] != LAYOUT:
        raise CdclakeError("TARGET_LAYOUT", f"the changelog carries progress of _cdclake layout {value[PROGRESS_TAG]!r};"
                                            f" this cdclake reads layout {LAYOUT}: use another target")
    rows = []
    for r in value["rows"]:
        row = {f: _decimals(f, r.get(f)) for f in PROGRESS_FIELDS}
        rec = row["truncate_record"]
        row["truncate_record"] = None if rec is None else tuple(rec.get(f) for f in RECORD_FIELDS)
        rows.append(row)
    return rows


def _progress_commit(files: TargetFiles, version: int | None, layout_2: bool) -> tuple[int, list[dict]] | None:
    """``(version, rows)`` of the newest changelog commit at or before ``version`` that carries
    the progress (read from its commit file: Delta's commitInfo ``userMetadata``); None when none
    does. Commits without it (a user's OPTIMIZE of the changelog) are passed over; ``layout_2``
    (the target still has its layout 2 progress table): the newest append without it ends the
    search (the appends of layout 2 carry none).

    Raises:
        CdclakeError(TARGET_LAYOUT): a commit file on the way is gone (the Delta log was cleaned
            past the newest progress commit): the target's state cannot be read.
    """
    v = version
    while v is not None and v >= 0:
        rel = f"{CHANGELOG}/_delta_log/{v:020d}.json"
        if not files.exists(rel):
            raise CdclakeError("TARGET_LAYOUT", f"target {files.target}: the changelog's commit {v} is gone before its"
                                                " progress was found (its Delta log cleaned past it)")
        for line in files.read_text(rel).splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info is not None:
                rows = progress_rows_of(info.get("userMetadata"))
                if rows is not None:
                    return v, rows
                if layout_2 and info.get("operation") == "WRITE":
                    return None
        v -= 1
    return None


def read_progress(spark: SparkSession, target: str) -> Progress:
    """The progress of ``target``: the rows carried by the changelog's newest progress commit
    (:func:`update_progress`). A process that wrote or read it last and finds the changelog
    unchanged since (no later commit) reuses what it holds; otherwise the driver reads the
    changelog's newest commit file(s) (no Spark job). A target of layout 2 whose progress has
    not moved forward yet: its progress table (one small read)."""
    path = f"{target}/{CHANGELOG}"
    cached = _cached_progress(spark, path)
    if cached is not None:
        return cached
    files = TargetFiles(target, spark)
    version = latest_version(spark, path) if files.exists(f"{CHANGELOG}/_delta_log") else None
    legacy = files.exists(f"{LEGACY_PROGRESS}/_delta_log")
    found = _progress_commit(files, version, layout_2=legacy)
    if found is not None:
        at, rows = found
    elif legacy:  # a layout 2 target not moved forward yet
        legacy_path = f"{target}/{LEGACY_PROGRESS}"
        at, rows = None, [r.asDict(recursive=False) for r in spark.read.format("delta").load(legacy_path).collect()]
    else:
        at, rows = None, []
    _remember_progress(spark, path, version, rows, at)
    return Progress(version, rows, at)


def _list(v):
    return None if v is None else list(v)


def renamed_of(value) -> list[tuple]:
    """A progress row's ``renamed`` as ``(point, record, to, text, event_time_ms)`` tuples
    (point: list of Decimal; record: :func:`record_tuple`; to: ``(database, schema, table)``;
    the DDL's position text and event time, None when not kept), by point."""
    def rec(r):
        return tuple(r[f] for f in RECORD_FIELDS) if isinstance(r, dict) else record_tuple(r)

    def fields(x) -> dict:
        return x.asDict() if hasattr(x, "asDict") else x

    out = [(_list(d["point"]), rec(d["record"]), tuple(d["to"]), d.get("text"), d.get("event_time_ms"))
           for d in map(fields, value or [])]
    return sorted(out, key=lambda x: order_key(x[0]))


def _renamed_value(items) -> list[dict] | None:
    """``(point, record, to[, text, event_time_ms])`` tuples as the progress column's value
    (None for none)."""
    return [{"point": list(x[0]), "record": None if x[1] is None else dict(zip(RECORD_FIELDS, x[1])), "to": list(x[2]),
             "text": x[3] if len(x) > 3 else None, "event_time_ms": x[4] if len(x) > 4 else None}
            for x in items] or None


def column_ddl_of(value) -> list[tuple]:
    """A progress row's ``column_ddl`` as ``(order, text, ddl)`` tuples (order: list of
    Decimal), by order."""
    out = [(_list(x["order"]), x["text"], x["ddl"]) for x in value or []]
    return sorted(out, key=lambda x: order_key(x[0]))


def _union_column_ddl(a, b) -> list[dict] | None:
    """Two ``column_ddl`` values (or lists of ``(order, text, ddl)``) as one, each statement once."""
    seen, out = set(), []
    for order, text, ddl in column_ddl_of(a) + column_ddl_of(b):
        k = (tuple(order_key(order)), ddl)
        if k not in seen:
            seen.add(k)
            out.append({"order": [None if v is None else Decimal(v) for v in order], "text": text, "ddl": ddl})
    return out or None


def _union_renamed(a, b) -> list[dict] | None:
    """Two ``renamed`` values as one, each step once."""
    seen, out = set(), []
    for x in renamed_of(a) + renamed_of(b):
        k = (tuple(order_key(x[0])), x[2])
        if k not in seen:
            seen.add(k)
            out.append(x)
    return _renamed_value(sorted(out, key=lambda x: order_key(x[0])))


def _newest(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a if order_key(a) >= order_key(b) else b


def _greatest(a, b):
    """Spark's ``greatest`` of two numbers (nulls skipped)."""
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def merge_progress(old: list[dict], new: list[dict]) -> list[dict]:
    """The progress rows after a batch: ``old`` (the table as read) moved forward by ``new``
    (the batch's rows, same fields), matched on (``source``, ``table``). Pure Python.

    A matched row keeps the greater ``last_position`` (its text with it), the greater event
    time, heartbeat and ``delete_position``, the newer ``truncate_position``, the batch's
    ``updated_at_ms`` and ``rows`` (when it has one); ``lag_ms`` is ``updated_at_ms`` minus the
    event time; the target's row (``source`` and ``table`` null) takes the batch's held fields.
    Unmatched rows of either side are kept as they are.
    """
    merged = {(r["source"], r["table"]): dict(r) for r in old}
    for s in new:
        k = (s["source"], s["table"])
        t = merged.get(k)
        if t is None:
            merged[k] = dict(s)
            continue
        if k == (None, None):  # the target's row: what is held now, the changelog's version
            if s.get("held_transactions") is not None:
                t.update({f: s.get(f) for f in HELD_FIELDS})
            t["changelog_version"] = _greatest(s.get("changelog_version"), t.get("changelog_version"))
            continue
        if t["last_position"] is None or (
            s["last_position"] is not None and order_key(s["last_position"]) > order_key(t["last_position"])
        ):
            t["last_position"], t["last_position_text"] = s["last_position"], s["last_position_text"]
        t["last_event_time_ms"] = _greatest(s["last_event_time_ms"], t["last_event_time_ms"])
        t["last_heartbeat_ms"] = _greatest(s["last_heartbeat_ms"], t["last_heartbeat_ms"])
        t["updated_at_ms"] = s["updated_at_ms"]
        t["lag_ms"] = None if s["updated_at_ms"] is None or t["last_event_time_ms"] is None else s["updated_at_ms"] - t["last_event_time_ms"]
        t["delete_position"] = _newest(s["delete_position"], t["delete_position"])
        t["move_position"] = _newest(s.get("move_position"), t.get("move_position"))
        if s["truncate_position"] is not None and (
            t["truncate_position"] is None
            or truncate_key(s["truncate_position"], record_tuple(s.get("truncate_record")))
            > truncate_key(t["truncate_position"], record_tuple(t.get("truncate_record")))
        ):
            t["truncate_position"], t["truncate_position_text"] = s["truncate_position"], s["truncate_position_text"]
            t["truncate_record"] = s.get("truncate_record")
        if s["rows"] is not None:
            t["rows"] = s["rows"]
        if s.get("delta_version") is not None:
            t["delta_version"] = s["delta_version"]
        if s.get("renamed"):
            t["renamed"] = _union_renamed(t.get("renamed"), s["renamed"])
        if s.get("column_ddl"):
            t["column_ddl"] = _union_column_ddl(t.get("column_ddl"), s["column_ddl"])
    return list(merged.values())


PROGRESS_FIELDS = tuple(c.strip().split(" ")[0] for c in PROGRESS_SCHEMA.split(", "))


def progress_row(**fields) -> dict:
    """A progress row: the named fields of :data:`PROGRESS_FIELDS`, every other one None.

    Raises:
        TypeError: a name that is not a progress field.
    """
    unknown = set(fields) - set(PROGRESS_FIELDS)
    if unknown:
        raise TypeError(f"not progress fields: {sorted(unknown)}")
    return {f: fields.get(f) for f in PROGRESS_FIELDS}


def _batch_rows(plan: BatchPlan, progress: Progress, results: dict[str, ApplyResult], held: dict | None) -> list[dict]:
    """The batch's progress rows (:func:`progress_row`) before the merge: per source and table
    and per source from the plan, the target's row when ``held``, per table its new state
    (:func:`update_progress`)."""
    states = progress.table_states()
    now = now_ms()
    rows = [
        progress_row(source=sp.source, table=sp.table, last_position=sp.last_position, last_position_text=sp.last_position_text,
                     last_event_time_ms=sp.last_event_time_ms, last_heartbeat_ms=sp.last_heartbeat_ms, updated_at_ms=now,
                     lag_ms=now - sp.last_event_time_ms if sp.last_event_time_ms is not None else None)
        for sp in plan.progress
    ]
    if held is not None:
        rows.append(progress_row(updated_at_ms=now, **{f: held[f] for f in HELD_FIELDS}))
    by_table: dict[str, list] = {}
    for sp in plan.progress:
        if sp.table is not None:
            by_table.setdefault(sp.table, []).append(sp)
    for p in plan.tables:
        old = states.get(p.name, TableState())
        sps = by_table.get(p.name, [])
        best = max(sps, key=lambda s: (order_key(s.last_position), s.last_position_text or ""), default=None)
        times = [s.last_event_time_ms for s in sps if s.last_event_time_ms is not None]
        t_time = max(times) if times else None
        truncate, truncate_text, truncate_record = old.truncate_position, old.truncate_position_text, old.truncate_record
        if p.truncate is not None and (
            truncate is None or truncate_key(p.truncate[0], p.truncate_record) > truncate_key(truncate, truncate_record)
        ):
            (truncate, truncate_text), truncate_record = p.truncate, p.truncate_record
        res = results.get(p.name)
        ddl = [{"order": o, "text": t, "ddl": d} for o, t, d in [*p.carried_column_ddl, *column_ddl(p)]]
        rows.append(progress_row(
            table=p.name, last_position=best.last_position if best else None,
            last_position_text=best.last_position_text if best else None, last_event_time_ms=t_time, updated_at_ms=now,
            lag_ms=now - t_time if t_time is not None else None, delete_position=_newest(old.delete_position, p.max_delete),
            truncate_position=truncate, truncate_position_text=truncate_text, truncate_record=truncate_record,
            rows=res.rows_now if res is not None else old.rows, delta_version=res.delta_version if res is not None else None,
            renamed=_renamed_value(p.renamed), column_ddl=_union_column_ddl(None, ddl),
            move_position=_newest(old.move_position, p.max_move),
        ))
    return rows


def update_progress(
    spark: SparkSession,
    target: str,
    plan: BatchPlan,
    progress: Progress,
    results: dict[str, ApplyResult],
    held: dict | None = None,
    events: DataFrame | None = None,
    txn: Txn | None = None,
) -> None:
    """Move the progress forward: its rows as read (``progress``) merged on the driver with
    rows built from the batch's plan (per source and table, per source, per table), the tables'
    new states and ``held`` (the target's row: :data:`HELD_FIELDS`, when the transaction gate
    changed what is held) (:func:`merge_progress`), carried whole by the changelog commit that
    appends ``events`` (EVENT_SCHEMA: the batch's own; None: an empty append), as its
    ``userMetadata`` (:func:`progress_metadata`): one commit for the changelog and the state,
    with the batch identity ``txn`` (a batch applied again after it committed adds nothing).
    Written last in an apply (a batch's rename waves each write their own after it): an apply is
    complete when its changelog commit is in. A target of layout 2 loses its progress table
    after it (:data:`LEGACY_PROGRESS`); when the append is skipped because a cdclake of layout 2
    committed it (under ``txn``) before it crashed, the progress goes in an empty commit of its
    own (identity ``<appId>.progress``)."""
    rows = _batch_rows(plan, progress, results, held)
    if not rows and events is None:
        return
    path = f"{target}/{CHANGELOG}"
    base = progress
    if _commit_file(spark, path, 0 if progress.version is None else progress.version + 1) is not None:
        # another writer moved the changelog since this batch read it: merge into its progress,
        # not over it (the merge only moves values forward, so the order of writers does not
        # matter). The check and the append below are not one atomic step: two writers
        # committing within that moment can still lose the first one's rows (NOTES.md)
        with _progress_lock:
            _progress_cache.pop(path, None)
        base = read_progress(spark, target)
    merged = merge_progress(base.rows, rows)
    merged = [{k: _decimals(k, v) for k, v in r.items()} for r in merged]
    # (rows of a table from before a column; the changelog version is the commit's own)
    merged = [{**{f: r.get(f) for f in PROGRESS_FIELDS}, "changelog_version": None} for r in merged]
    if events is None:
        events = spark.createDataFrame([], EVENT_SCHEMA)
    before = base.version
    with _empty_commits_recorded(spark):  # (a batch whose changelog append adds no rows still commits its progress)
        write_changelog(events, target, txn, metadata=progress_metadata(merged))
    version = latest_version(spark, path)
    if version == before and txn is not None and base.changelog_at is None and rows:
        # skipped, as a batch applied again whose changelog append a cdclake of layout 2 made
        # (before its crash, before its progress): the progress goes in a commit of its own
        with _empty_commits_recorded(spark):
            write_changelog(spark.createDataFrame([], EVENT_SCHEMA), target, Txn(f"{txn.app_id}.progress", txn.version),
                            metadata=progress_metadata(merged))
        version = latest_version(spark, path)
    if version != before:  # (not skipped as a batch applied again)
        _remember_progress(spark, path, version, merged, version)
        if base.changelog_at is None:  # (a target of layout 2 moved forward: its progress is here now)
            TargetFiles(target, spark).delete_tree(LEGACY_PROGRESS)


def _decimals(name: str, v):
    """Position arrays as Decimals (what Spark reads them back as)."""
    if v is not None and name in ("last_position", "delete_position", "truncate_position", "move_position"):
        return [None if x is None else Decimal(x) for x in v]
    field = {"renamed": "point", "column_ddl": "order"}.get(name)  # lists of structs with a position
    if v is not None and field is not None:
        # (a renamed step read from a table written before text and event_time_ms: None)
        extra = {"text": None, "event_time_ms": None} if name == "renamed" else {}
        return [{**extra, **(x.asDict() if hasattr(x, "asDict") else x), field: [None if p is None else Decimal(p) for p in x[field]]}
                for x in v]
    return v
