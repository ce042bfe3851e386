"""The main job: raw records -> decode -> changelog, rejects -> apply per table -> progress.

``ingest(spark, config)`` runs one batch over files; :func:`ingest_batch` is the same work on
any DataFrame of raw records (the Kafka source calls it once per micro-batch).

Counting: every input record is either decoded (zero or more canonical events) or rejected, so
``records_in == decoded + rejected`` always holds; :class:`IngestSummary` carries the three.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake import catalog, frames, formats, targets
from cdclake.apply import audit, transactions
from cdclake.apply.batch import apply_batch, planned_events
from cdclake.apply.delta_table import ApplyResult, source_columns
from cdclake.apply.plan import QUALIFIED_NAME_SQL, BatchPlan, TablePlan, plan_batch
from cdclake.apply.renames import keys_through_renames
from cdclake.apply.tasks import table_path
from cdclake.errors import CdclakeError, RejectCode
from cdclake.formats.base import Decoder, DecodeOptions, Limits, TargetTable
from cdclake.formats.skeleton import batch_scope
from cdclake.routing import Routing, check_names
from cdclake.sources.files import resolve_inputs
from cdclake.sqltext import sql_in


@dataclass
class IngestConfig:
    """One ``cdclake ingest`` over files.

    format: a format name or alias (``canal-json`` ...), or ``auto``.
    inputs: files or folders of exported messages.
    target: the folder holding the Delta tables (created when missing).
    primary_keys: ``{table name: [key columns]}`` from ``--primary-key`` (qualified or bare name).
    canal_dts_inverted: see :class:`cdclake.formats.base.DecodeOptions`.
    extra: format-specific settings (``--option NAME=VALUE``), e.g. ``table`` for datahub-tuple.
    limits: record size and column count bounds (:class:`cdclake.formats.base.Limits`).
    scd_type: 2: new tables keep their rows' history (SCD type 2); 1: current rows only; None:
        each table as it was created (new ones: 1).
    tx_timeout_ms: how far (event time, ms) the source may move past an open transaction before
        its held changes are applied as they are (:mod:`cdclake.apply.transactions`).
    snapshot_ends: ``--snapshot-removes-missing`` (:attr:`DecodeOptions.snapshot_ends`; only for
        a format with :attr:`cdclake.formats.base.Capabilities.snapshot_ends`).
    routing: which tables are written, under which names, laid out how, and the catalog they
        are registered in (:class:`cdclake.routing.Routing`; default: every table, by its
        qualified name, no partitioning, no catalog).
    """

    format: str
    inputs: list[str]
    target: str
    primary_keys: dict[str, list[str]] = field(default_factory=dict)
    canal_dts_inverted: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    scd_type: int | None = None
    tx_timeout_ms: int = transactions.DEFAULT_TIMEOUT_MS
    snapshot_ends: bool = False
    routing: Routing = field(default_factory=Routing)


@dataclass
class IngestSummary:
    """What a batch did: record counts, reject counts by code, and per-table results."""

    format: str
    records_in: int = 0
    decoded: int = 0
    rejected: int = 0
    events: int = 0
    reject_codes: dict[str, int] = field(default_factory=dict)
    tables: list[ApplyResult] = field(default_factory=list)
    #: open transactions held back after the batch, and their events (:mod:`cdclake.apply.transactions`)
    held_transactions: int = 0
    held_events: int = 0
    #: when the oldest event still held was first held (ms since epoch; None: nothing held)
    held_since_ms: int | None = None
    #: open transactions given up by the timeout in this run (their events applied as they were)
    timed_out_transactions: int = 0
    #: re-delivered pieces of transactions applied before, applied again at once in this run
    redelivered_transactions: int = 0
    #: events of tables left out by ``--include-tables``/``--exclude-tables`` (decoded, counted
    #: in ``events``, never written), and those tables' names
    excluded_events: int = 0
    excluded_tables: list[str] = field(default_factory=list)

    def merge(self, other: "IngestSummary") -> None:
        self.records_in += other.records_in
        self.decoded += other.decoded
        self.rejected += other.rejected
        self.events += other.events
        for k, v in other.reject_codes.items():
            self.reject_codes[k] = self.reject_codes.get(k, 0) + v
        self.tables.extend(other.tables)
        # the latest batch's
        self.held_transactions, self.held_events, self.held_since_ms = other.held_transactions, other.held_events, other.held_since_ms
        self.timed_out_transactions += other.timed_out_transactions
        self.redelivered_transactions += other.redelivered_transactions
        self.excluded_events += other.excluded_events
        self.excluded_tables = sorted(set(self.excluded_tables) | set(other.excluded_tables))


@dataclass(frozen=True)
class Step:
    """Where an ingest is, for a progress display (``on_step`` of :func:`ingest` and
    :func:`ingest_batch`): ``text`` (what it does now), ``files`` (the files of a file ingest),
    ``records``/``events``/``rejected`` (known once the batch is planned; None before),
    ``tables`` (the tables to apply; None before), ``tables_applied`` (of them, written) and
    ``tables_failed`` (of them, not applied: their events go to the rejects table)."""

    text: str
    files: int | None = None
    records: int | None = None
    events: int | None = None
    rejected: int | None = None
    tables: int | None = None
    tables_applied: int = 0
    tables_failed: int = 0


def tables_counter(on_step, counts: dict):
    """A callable ``(table name, failed) -> None`` that counts the tables applied and failed,
    each name once (a batch split at a table rename writes the old name in two parts; a failure
    sticks), from any thread, and calls ``on_step`` with a :class:`Step` of ``counts`` and
    those counts."""
    lock = threading.Lock()
    seen: dict[str, bool] = {}

    def on_table(name: str, failed: bool) -> None:
        with lock:  # (the display's count never goes back)
            seen[name] = seen.get(name, False) or failed
            failures = sum(seen.values())
            on_step(Step(f"{'could not apply' if failed else 'applied'} {name}", tables_applied=len(seen) - failures,
                         tables_failed=failures, **counts))

    return on_table


def tables_done(on_step, counts: dict, results: list) -> None:
    """Tell ``on_step`` the batch's tables are done: ``results`` (its
    :class:`~cdclake.apply.delta_table.ApplyResult` list) give how many failed, the others of
    ``counts["tables"]`` were applied (the bar completes whatever the batch's renames did to the count)."""
    total = counts["tables"]
    failed = min(len({r.table for r in results if r.failed}), total)
    on_step(Step(f"applied {total - failed} table(s)" + (f", {failed} failed" if failed else ""),
                 tables_applied=total - failed, tables_failed=failed, **counts))


def decode_options(config, decoder: Decoder) -> DecodeOptions:
    """The :class:`DecodeOptions` of an :class:`IngestConfig` or a
    :class:`cdclake.stream.StreamConfig` for ``decoder``.

    Raises:
        CdclakeError(BAD_OPTION): ``snapshot_ends`` for a format that marks no snapshot end.
    """
    if config.snapshot_ends:
        check_snapshot_ends(decoder)
    return DecodeOptions(
        primary_keys=config.primary_keys, canal_dts_inverted=config.canal_dts_inverted, extra=config.extra,
        limits=config.limits, snapshot_ends=config.snapshot_ends,
    )


def check_snapshot_ends(decoder: Decoder) -> None:
    """``--snapshot-removes-missing`` is possible for ``decoder``'s format.

    Raises:
        CdclakeError(BAD_OPTION): the format marks no end of a snapshot
            (:attr:`cdclake.formats.base.Capabilities.snapshot_ends`).
    """
    if not decoder.capabilities.snapshot_ends:
        ok = ", ".join(d.name for d in formats.all_decoders() if d.capabilities.snapshot_ends)
        raise CdclakeError("BAD_OPTION", f"--snapshot-removes-missing: {decoder.name} marks no end of a snapshot (only {ok} does)")


def check_target(target: str, spark: SparkSession | None = None) -> str:
    """Create ``target`` if needed and prove it is writable; returns its canonical spelling
    (:func:`cdclake.targets.resolve`: an absolute local path, or the URI). A URI target
    (``s3a://...``) is checked only with ``spark`` (its Hadoop file system lives in the JVM);
    without it the check is left to the call that has the session.

    Raises:
        CdclakeError(TARGET_NOT_WRITABLE): it cannot be created or written.
    """
    if not targets.is_uri(target) or spark is not None:
        targets.TargetFiles(target, spark).check_writable()
    return targets.resolve(target)


def ingest(spark: SparkSession, config: IngestConfig, on_step=None) -> IngestSummary:
    """Ingest files of messages into Delta tables under ``config.target``. ``on_step``: called
    with a :class:`Step` as each step of the batch begins, as each table is applied or fails,
    and when all are done (the CLI shows it on a terminal).

    Raises:
        CdclakeError: UNKNOWN_FORMAT, INPUT_NOT_FOUND, TARGET_NOT_WRITABLE, FORMAT_NOT_DETECTED,
        TARGET_LOCKED (another process is writing the target: :class:`cdclake.targets.WriterLock`).
    """
    files = resolve_inputs(config.inputs)
    decoder = formats.get(config.format) if config.format != "auto" else detect_format(files)
    target = check_target(config.target, spark)
    raw = decoder.read_files(spark, files)
    options = decode_options(config, decoder)
    if on_step:
        step = on_step
        on_step = lambda s: step(replace(s, files=len(files)))  # noqa: E731
        on_step(Step(f"decoding {len(files)} file(s) as {decoder.name}"))
    with targets.WriterLock(target, spark):
        return ingest_batch(spark, raw, decoder, options, target, file_set_txn(files), on_step, config.scd_type,
                            config.tx_timeout_ms, config.routing)


def file_set_txn(files: list[str]) -> audit.Txn:
    """The identity of a file ingest for Delta's idempotent appends: the files (path, size,
    modification time), so ingesting the same unchanged files again appends nothing to the
    changelog, rejects and deletes tables. A changed or different file set is a new batch."""
    h = hashlib.sha1()
    for f in sorted(files):
        st = os.stat(f)
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return audit.Txn(f"cdclake-files-{h.hexdigest()}", 0)


def detect_format(files: list[str], sample_size: int = 20) -> Decoder:
    """Pick the format of JSON-lines ``files`` from their first non-blank lines.

    Raises:
        CdclakeError(FORMAT_NOT_DETECTED): no format or more than one format fits.
    """
    sample: list[bytes] = []
    for f in files:
        with open(f, "rb") as fh:
            head = fh.read(4)
            fh.seek(0)
            if head in (b"Obj\x01", b"PAR1"):  # Avro / Parquet file: its header is the sample
                sample.append(fh.read(4096))
                break
            for line in fh:
                if line.strip():
                    sample.append(line.strip())
                if len(sample) >= sample_size:
                    break
        if len(sample) >= sample_size:
            break
    scores = {d.name: d.detect_score(sample) for d in formats.all_decoders()}
    best = max(scores.values(), default=0.0)
    winners = [n for n, s in scores.items() if s == best and s >= 0.5]
    if len(winners) != 1:
        fits = ", ".join(f"{n}={s:.2f}" for n, s in sorted(scores.items(), key=lambda kv: -kv[1]))
        raise CdclakeError("FORMAT_NOT_DETECTED", f"cannot tell the format of the input (scores: {fits}); pass --format")
    return formats.get(winners[0])


def _target_tables(spark: SparkSession, target: str, progress: audit.Progress):
    """:attr:`DecodeOptions.target_tables` of ``target``: each table read on the driver (its
    Delta log and the progress the batch read) the first time a decoder asks for it."""
    seen: dict[str, TargetTable | None] = {}

    def lookup(name: str) -> TargetTable | None:
        if name not in seen:
            columns = source_columns(spark, table_path(target, name))
            last = progress.last_order(name)
            seen[name] = None if columns is None else TargetTable(tuple(columns), None if last is None else tuple(last))
        return seen[name]

    return lookup


def ingest_batch(
    spark: SparkSession,
    raw: DataFrame,
    decoder: Decoder,
    options: DecodeOptions,
    target: str,
    txn: audit.Txn | None = None,
    on_step=None,
    scd_type: int | None = None,
    tx_timeout_ms: int = transactions.DEFAULT_TIMEOUT_MS,
    routing: Routing | None = None,
) -> IngestSummary:
    """Decode ``raw`` (RAW_SCHEMA) with ``decoder`` and apply it to the tables under ``target``.
    ``on_step``: called with a :class:`Step` as the apply step begins, as each table is
    applied or fails, and when all are done. ``scd_type``,
    ``tx_timeout_ms``, ``routing``: as :class:`IngestConfig`.

    Tables left out by ``routing`` are found in the batch's plan (no Spark job of their own):
    their events are counted (:attr:`IngestSummary.excluded_events`) and then dropped from
    what is applied and from the changelog. They pass the transaction gate with the others,
    so a transaction is complete with all its events.

    Formats that carry transaction boundaries or write updates as two halves (and a target
    that holds events) go through the transaction gate first (:func:`cdclake.apply.transactions.gate`): the same planning
    aggregate, with a set per transaction, finds the open transactions; only a batch that holds
    something back plans again, over the events to apply.

    Spark work per batch: the decoder's parse stage (cached, with its signature aggregate),
    then the decoded records flattened to one row per event or reject (kept once by
    :func:`cdclake.frames.keep`, a plan of one leaf) and planned by one aggregate that also counts records and events per
    error code, then the writes (see :mod:`cdclake.apply.batch`). ``txn`` makes the appends
    idempotent (see :class:`cdclake.apply.audit.Txn`).
    """
    summary = IngestSummary(decoder.name)
    routing = routing or Routing()
    audit.check_layout(target, spark, naming=routing.naming)
    progress = audit.read_progress(spark, target)
    options = replace(options, target_tables=_target_tables(spark, target, progress))
    kept = None
    if decoder.keeps_context:  # records of earlier batches the decoder consults (Qlik metadata)
        kept = audit.read_context(spark, target, decoder.name)
        options = replace(options, context=kept)
    with batch_scope():  # the parse stage is released once the flat rows are cached
        decoded = decoder.decode(raw, options)
        too_big = F.coalesce(F.length("raw_value") > options.limits.max_record_bytes, F.lit(False))
        decoded = decoded.select(
            "source_record", "raw_key", "raw_value",
            F.when(~too_big, F.col("events")).alias("events"),
            F.when(too_big, F.lit(RejectCode.RECORD_TOO_LARGE.value)).otherwise(F.col("error_code")).alias("error_code"),
            F.when(too_big, F.concat(
                F.lit("record of "), F.length("raw_value").cast("string"),
                F.lit(f" bytes is larger than the limit of {options.limits.max_record_bytes} (--max-record-bytes)"),
            )).otherwise(F.col("error_message")).alias("error_message"),
        )
        # one row per event, per reject, and per record that decodes to nothing (pos null);
        # the raw bytes are kept for rejects only
        flat = frames.keep(decoded.select(
            "source_record",
            F.when(F.col("error_code").isNotNull(), F.col("raw_key")).alias("raw_key"),
            F.when(F.col("error_code").isNotNull(), F.col("raw_value")).alias("raw_value"),
            "error_code",
            "error_message",
            F.posexplode_outer("events").alias("pos", "e"),
        ))
        hold = None
        try:
            held_version = progress.held_version()
            # a key configured for a table goes on with its renames (cdclake.apply.renames)
            keys = keys_through_renames(options.primary_keys, progress.table_states())
            if decoder.capabilities.transaction_bounds or decoder.capabilities.update_halves or held_version is not None:
                # the transaction gate's grouping is a set of the planning aggregate, which
                # counts the records too (cdclake.apply.transactions)
                hold = transactions.gate(
                    spark, flat.where(F.col("e").isNotNull()).select("e.*"), target, held_version, audit.now_ms(),
                    flat=flat, timeout_ms=tx_timeout_ms, primary_keys=keys, applied=progress.changelog_cut(),
                )
                plan = hold.plan
            else:
                # the batch's one planning aggregate, over the flat rows: it also counts records
                # and events per error code (and materialises the kept rows)
                plan = plan_batch(flat.select("error_code", "pos", "e.*"), keys, records=True)
        except BaseException:
            frames.release(flat)
            if hold is not None:
                hold.release()
            raise
    try:
        if decoder.keeps_context:
            audit.keep_context(spark, decoder.context_records(raw), kept, decoder.name, target, txn)
        for code, (n, n_events) in plan.records.items():
            summary.records_in += n
            if code is None:
                summary.decoded += n
                summary.events += n_events
            else:
                summary.rejected += n
                summary.reject_codes[code] = n
        reject_task = [lambda: audit.write_rejects(flat.where(F.col("error_code").isNotNull()), decoder.name, target, txn)]
        if hold is not None:
            summary.held_transactions, summary.held_events = hold.transactions, hold.held_events
            summary.held_since_ms = hold.held_since_ms if hold.transactions else None
            summary.timed_out_transactions = hold.timed_out
            summary.redelivered_transactions = hold.redelivered
        if summary.events == 0 and not (hold is not None and hold.changed):
            if summary.rejected:
                reject_task[0]()
            return summary
        events = flat.where(F.col("e").isNotNull()).select("e.*")
        plan, left_out = leave_out(plan, routing)
        if not routing.naming.is_default or routing.catalog_database is not None:
            # before anything is written: two tables never share a target or catalog table
            check_names(routing, [*progress.table_states(), *(p.name for p in plan.tables), *(r.new_name for r in plan.renames)])
            if routing.catalog_database is not None:
                catalog.connect(spark)
        if left_out:
            summary.excluded_events = sum(planned_events(p) for p in left_out)
            summary.excluded_tables = sorted(p.name for p in left_out)
            kept_only = f"NOT coalesce({sql_in(QUALIFIED_NAME_SQL, summary.excluded_tables)}, false)"
            events = events.where(kept_only)
            if hold is not None:
                hold.events = hold.events.where(kept_only)
        on_table = None
        if on_step:
            counts = dict(records=summary.records_in, events=summary.events, rejected=summary.rejected, tables=len(plan.tables))
            on_step(Step(f"applying {summary.events} events of {summary.records_in} records to {len(plan.tables)} table(s)", **counts))
            on_table = tables_counter(on_step, counts)
        results = apply_batch(
            spark, events, target, keys, txn,
            side_tasks=reject_task if summary.rejected else None, plan=plan, fmt=decoder.name,
            max_columns=options.limits.max_columns, scd_type=scd_type, hold=hold, progress=progress, routing=routing,
            on_table=on_table,
        )
        summary.tables.extend(results)
        if on_step:
            tables_done(on_step, counts, results)
        if routing.catalog_database is not None:
            catalog.register(spark, routing, target, [r.table for r in summary.tables if not r.failed], plan.renames)
    finally:
        frames.release(flat)
        if hold is not None:
            hold.release()
    return summary


def leave_out(plan: BatchPlan, routing: Routing) -> tuple[BatchPlan, list[TablePlan]]:
    """``plan`` without the tables ``routing`` leaves out (their plans and progress rows) and
    without the renames from or to such a table (not followed: docs/limits.md), and the plans
    of those tables; ``plan`` itself when it has none of either."""
    if not routing.filters:
        return plan, []
    out = [p for p in plan.tables if not routing.included(p.name)]
    renames = [r for r in plan.renames if routing.included(r.old_name) and routing.included(r.new_name)]
    if not out and len(renames) == len(plan.renames):
        return plan, []
    names = {p.name for p in out}
    return replace(
        plan,
        tables=[p for p in plan.tables if p.name not in names],
        progress=[sp for sp in plan.progress if sp.table not in names],
        renames=renames,
    ), out


def apply_events(
    spark: SparkSession,
    events: DataFrame,
    target: str,
    primary_keys: dict[str, list[str]] | None = None,
    txn: audit.Txn | None = None,
    scd_type: int | None = None,
    gate: bool = True,
    tx_timeout_ms: int = transactions.DEFAULT_TIMEOUT_MS,
) -> list[ApplyResult]:
    """Apply canonical events (EVENT_SCHEMA rows, any format) to the tables under ``target``
    (see :func:`cdclake.apply.batch.apply_batch`). ``events`` should be persisted by the caller:
    it is read once per table. ``gate``: hold back open transactions
    (:mod:`cdclake.apply.transactions`; canonical events are trusted to carry their bounds), with
    ``tx_timeout_ms`` as :class:`IngestConfig`."""
    return apply_batch(spark, events, target, primary_keys, txn, scd_type=scd_type, gate=gate, tx_timeout_ms=tx_timeout_ms)
