"""The streaming ingest: a Spark Structured Streaming query over Kafka topics or over a folder
whose files land over time, whose every micro-batch goes through the same decode and apply as a
file ingest (:func:`cdclake.pipeline.ingest_batch`).

Exactly once: the query's checkpoint (``--checkpoint DIR``) records which source offsets (Kafka)
or files (a folder) each micro-batch covers; each batch is applied with the batch identity
``Txn("cdclake-stream-<query id>", <batch id>)`` (Delta's ``txnAppId``/``txnVersion`` on every
table and audit table it writes). A crash between Delta's commits and the checkpoint's commit
replays the batch over the same offsets on restart, and every table that already holds that
identity skips it: no change is applied twice, none is lost. The query id lives in the
checkpoint, so a new checkpoint is a new writer (batch ids restart at 0 under a new id).

Stopping: SIGTERM or Ctrl-C stops the query (a batch cut short is replayed at the next start)
and :func:`run_stream` returns normally.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from cdclake import formats, targets
from cdclake.apply import audit
from cdclake.apply.transactions import DEFAULT_TIMEOUT_MS
from cdclake.errors import CdclakeError
from cdclake.formats.base import Limits
from cdclake.pipeline import IngestSummary, check_target, decode_options, ingest_batch
from cdclake.routing import Routing
from cdclake.sources.kafka import KafkaInput, kafka_raw, read_kafka

#: how long the first micro-batch waits for the query to report its id (s)
_QUERY_ID_WAIT_S = 120


@dataclass
class StreamConfig:
    """One ``cdclake ingest`` as a stream.

    format: a format name or alias (not ``auto``: a stream's first records may not be there yet).
    target: the folder holding the Delta tables (created when missing).
    checkpoint: the query's checkpoint folder (offsets and commits of every micro-batch).
    kafka: the topics to read; or
    input_dir: a folder whose files (those there now and those that land later) are read once
        each, in micro-batches of at most ``max_files_per_trigger`` files.
    available_now: process what the topics hold now, in as many micro-batches as
        ``max_offsets_per_trigger`` needs, then stop; else run until stopped.
    trigger_interval: e.g. ``10 seconds``: start a micro-batch at most this often (None: the
        next batch starts when the last one ends).
    primary_keys, canal_dts_inverted, extra, limits, scd_type, tx_timeout_ms, snapshot_ends, routing:
        as :class:`cdclake.pipeline.IngestConfig`.
    """

    format: str
    target: str
    checkpoint: str
    kafka: KafkaInput | None = None
    input_dir: str | None = None
    max_files_per_trigger: int | None = None
    available_now: bool = False
    trigger_interval: str | None = None
    primary_keys: dict[str, list[str]] = field(default_factory=dict)
    canal_dts_inverted: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    scd_type: int | None = None
    tx_timeout_ms: int = DEFAULT_TIMEOUT_MS
    snapshot_ends: bool = False
    routing: Routing = field(default_factory=Routing)


@dataclass
class StreamSummary:
    """What a run of the stream did: the micro-batches it applied, the query's id, and the sums
    of their :class:`cdclake.pipeline.IngestSummary` (tables: the last batch's results)."""

    query_id: str | None = None
    batches: int = 0
    totals: IngestSummary | None = None
    stopped_by_signal: bool = False


def duration_text(ms: float | None) -> str:
    """A duration (ms) for a person: ``42.0 s``, ``3.5 min``, ``2.0 h``, ``3.0 d`` ('' when None)."""
    if ms is None:
        return ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if ms >= 2 * size:
            return f"{ms / size:.1f} {unit}"
    return f"{ms / 1000:.1f} s"


def held_age(since_ms: int | None, now_ms: int | None = None) -> str:
    """``held <duration>`` since ``since_ms`` (ms since epoch; ``held`` alone when not known)."""
    if since_ms is None:
        return "held"
    return "held " + duration_text(max(0, (time.time() * 1000 if now_ms is None else now_ms) - since_ms))


def run_stream(spark: SparkSession, config: StreamConfig, out=None) -> StreamSummary:
    """Run the streaming ingest of ``config`` until the topics are drained (``available_now``)
    or the process is told to stop (SIGTERM, SIGINT); one line per applied micro-batch to the
    file ``out`` (None: stdout; False: no lines).

    Raises:
        CdclakeError: UNKNOWN_FORMAT, BAD_OPTION, TARGET_NOT_WRITABLE, TARGET_LAYOUT, TARGET_LOCKED;
        the query's own failure (a Kafka or Delta error) as ``STREAM_FAILED`` with its reason.
    """
    if config.format == "auto":
        raise CdclakeError("BAD_OPTION", "a stream needs --format (auto reads the first records of files)")
    decoder = formats.get(config.format)
    target = check_target(config.target, spark)
    audit.check_layout(target, spark, naming=config.routing.naming)
    options = decode_options(config, decoder)
    write = (lambda line: None) if out is False else (lambda line: print(line, file=out or sys.stdout, flush=True))

    summary = StreamSummary(totals=IngestSummary(decoder.name))
    lines = _BatchLines(write)
    query_id: dict[str, str] = {}
    started = threading.Event()

    def apply(batch: DataFrame, batch_id: int) -> None:
        if not started.wait(_QUERY_ID_WAIT_S):
            raise RuntimeError("the streaming query did not report its id")
        t0 = time.time()
        txn = audit.Txn(f"cdclake-stream-{query_id['id']}", int(batch_id))
        session = batch.sparkSession
        if config.kafka is not None:
            raw = kafka_raw(batch)
        else:  # the batch's new files, read by the format's own file reader
            files = sorted(r[0] for r in batch.select("path").collect())
            raw = decoder.read_files(session, [_local_path(f) for f in files])
        s = ingest_batch(session, raw, decoder, options, target, txn, scd_type=config.scd_type,
                         tx_timeout_ms=config.tx_timeout_ms, routing=config.routing)
        seconds = time.time() - t0
        tables = s.tables
        s.tables = []
        summary.totals.merge(s)
        summary.totals.tables = tables
        summary.batches += 1
        rate = s.events / seconds if seconds > 0 else 0.0
        rejects = "" if not s.reject_codes else "  rejects: " + ", ".join(f"{k}={v}" for k, v in sorted(s.reject_codes.items()))
        held = "" if not s.held_transactions else (
            f"  held back: {s.held_transactions} open transaction(s), {s.held_events} event(s), oldest "
            f"{held_age(s.held_since_ms)} (cdclake status lists them)")
        lines.hold(int(batch_id), f"batch {batch_id}: {s.records_in} records, {s.events} events, {len(tables)} tables, "
                                  f"{seconds:.1f} s, {rate:.0f} events/s{rejects}{held}")

    if (config.kafka is None) == (config.input_dir is None):
        raise CdclakeError("BAD_OPTION", "a stream reads Kafka topics or a folder: give one of them")
    stream = read_kafka(spark, config.kafka) if config.kafka is not None else _read_folder(spark, config)
    writer = stream.writeStream.foreachBatch(apply).option("checkpointLocation", config.checkpoint).queryName(
        f"cdclake-{decoder.name}"
    )
    if config.available_now:
        writer = writer.trigger(availableNow=True)
    elif config.trigger_interval:
        writer = writer.trigger(processingTime=config.trigger_interval)

    lock = targets.WriterLock(target, spark)
    lock.__enter__()  # one writer per target for the whole run (TARGET_LOCKED otherwise)
    stop = threading.Event()
    previous = {}

    def on_signal(signum, frame):  # noqa: ARG001
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
    listener = _listener(query_id, lines)
    spark.streams.addListener(listener)
    try:
        query = writer.start()
        query_id["id"] = str(query.id)
        summary.query_id = query_id["id"]
        started.set()
        try:
            while query.isActive and not stop.is_set():
                query.awaitTermination(0.5)
        except StreamingQueryException:
            pass  # reported below from query.exception()
        finally:
            if stop.is_set() and query.isActive:
                summary.stopped_by_signal = True
                write("stopping: the query stops (a batch cut short is applied again at the next start)")
                query.stop()
            lines.flush(wait_s=2.0)
        error = query.exception()
        if error is not None and not summary.stopped_by_signal:
            raise CdclakeError("STREAM_FAILED", f"the streaming query failed: {_first_line(str(error))}")
    finally:
        # the query's last event reaches the listener before it is removed: the JVM's listener
        # bus delivers events on a thread of its own, and one delivered to a Python listener
        # after its removal (or after this process let go of it) is logged as an ERROR
        if query_id.get("id"):
            listener.terminated.wait(5.0)
        spark.streams.removeListener(listener)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        lock.__exit__(None, None, None)
    return summary


def _read_folder(spark: SparkSession, config: StreamConfig) -> DataFrame:
    """The folder as a stream of new files (Spark's file source, ``binaryFile`` format: only
    each file's ``path`` is used, its content is read by the format's file reader). Hidden
    files and files starting with ``_`` are skipped, as for file input.

    Raises:
        CdclakeError(INPUT_NOT_FOUND): the folder does not exist.
    """
    from pathlib import Path

    folder = Path(config.input_dir)
    if not folder.is_dir():
        raise CdclakeError("INPUT_NOT_FOUND", f"input folder {config.input_dir} does not exist")
    reader = (
        spark.readStream.format("binaryFile")
        .schema("path string, modificationTime timestamp, length bigint, content binary")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "[!._]*")
    )
    if config.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(config.max_files_per_trigger))
    return reader.load(str(folder.resolve())).select("path")


def _local_path(uri: str) -> str:
    """A ``file:`` URI of Spark's file source as a local path (other schemes are kept)."""
    from urllib.parse import unquote, urlparse

    u = urlparse(uri)
    return unquote(u.path) if u.scheme == "file" else uri


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), text)


class _BatchLines:
    """One line per applied micro-batch: the batch's own figures (records, events, events/s,
    rejects), held until the query's progress event adds each partition's end offset and lag
    (Spark reports it just after the batch); :meth:`flush` prints what never got one."""

    def __init__(self, write):
        self.write = write
        self.pending: dict[int, str] = {}
        self.lock = threading.Lock()

    def hold(self, batch_id: int, text: str) -> None:
        with self.lock:
            self.pending[batch_id] = text

    def progress(self, batch_id: int, offsets: list[str]) -> None:
        with self.lock:
            text = self.pending.pop(batch_id, None)
        if text is not None:
            self.write(text + ("  offsets: " + ", ".join(offsets) if offsets else ""))

    def flush(self, wait_s: float = 0.0) -> None:
        deadline = time.time() + wait_s
        while self.pending and time.time() < deadline:
            time.sleep(0.1)
        with self.lock:
            rest, self.pending = sorted(self.pending.items()), {}
        for _, text in rest:
            self.write(text)


def _listener(query_id: dict, lines: _BatchLines):
    """A Structured Streaming listener that completes the line of each batch of the query whose
    id is ``query_id["id"]`` with its source partitions' end offsets and lags (idle progress events are
    ignored); its ``terminated`` (a ``threading.Event``) is set when the query's termination
    event reached it."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            p = event.progress
            if str(p.id) != query_id.get("id") or not p.numInputRows:
                return
            offsets = []
            for src in p.sources:
                offsets.extend(_offsets(src.endOffset, src.latestOffset))
            lines.progress(int(p.batchId), offsets)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            if str(event.id) == query_id.get("id"):
                terminated.set()

    terminated = threading.Event()
    listener = Listener()
    listener.terminated = terminated
    return listener


def _offsets(end: str | None, latest: str | None) -> list[str]:
    """``topic/partition@offset lag N`` for each partition of a Kafka source's JSON offsets
    (``{"topic": {"0": 42}}``)."""
    import json

    try:
        e = json.loads(end) if end else {}
        lt = json.loads(latest) if latest else {}
    except (TypeError, ValueError):
        return []
    out = []
    for topic, parts in sorted(e.items()) if isinstance(e, dict) else []:
        for part, off in sorted(parts.items(), key=lambda kv: int(kv[0])):
            newest = (lt.get(topic) or {}).get(part)
            lag = f" lag {max(0, newest - off)}" if isinstance(newest, int) else ""
            out.append(f"{topic}/{part}@{off}{lag}")
    return out
