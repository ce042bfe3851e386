"""The ``cdclake`` command: arguments -> configuration -> pipeline. Nothing else lives here.

    cdclake ingest --format FORMAT --input PATH [PATH ...] --target DIR [--primary-key T=C[,C]]...
    cdclake ingest --format FORMAT --kafka-bootstrap HOST:PORT (--topic T ... | --topic-pattern RE)
                   --target DIR --checkpoint DIR [--available-now | --trigger-interval 10s] ...
    cdclake ingest --format FORMAT --input DIR --target DIR --checkpoint DIR [--max-files-per-trigger N] ...
    cdclake ingest ... [--include-tables RE] [--exclude-tables RE] [--table-name TEMPLATE]
                   [--partition-by TABLE=EXPR] [--table-property TABLE=NAME=VALUE] [--catalog-database NAME]
    cdclake convert --from F --to G --input PATH [PATH ...] --output PATH
    cdclake simulate --format F --events N --tables K --seed S --output PATH
    cdclake status --target DIR [--json]
    cdclake formats

Exit codes: 0 success (rejected records do not change it); 2 usage or environment error, with
a one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import sys

from cdclake.errors import CdclakeError


def _console():
    """A rich console; when stdout is not a terminal (logs, pipes, CI) lines are not cut at 80
    columns, so table names stay whole and greppable."""
    from rich.console import Console

    c = Console()
    return c if c.is_terminal else Console(width=200)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (``cdclake: error: ...``) and exit code 2."""

    def error(self, message: str):  # noqa: D401
        self.exit(2, f"cdclake: error: {message} (see cdclake {self.prog.split()[-1]} --help)\n")


def assignments(values: list[str] | None, option: str, shape: str = "NAME=VALUE") -> dict[str, str]:
    """Repeated ``NAME=VALUE`` option values as a dict (names stripped, the value as given, the
    first ``=`` splits; a later NAME wins).

    Raises:
        CdclakeError(BAD_OPTION): a value without ``=`` or with an empty name, naming ``option``
        and ``shape`` in the message.
    """
    out: dict[str, str] = {}
    for v in values or []:
        name, sep, value = v.partition("=")
        if not sep or not name.strip():
            raise CdclakeError("BAD_OPTION", f"{option} {v!r} is not {shape}")
        out[name.strip()] = value
    return out


def _primary_keys(values: list[str]) -> dict[str, list[str]]:
    shape = "TABLE=COL[,COL...]"
    out: dict[str, list[str]] = {}
    for table, cols in assignments(values, "--primary-key", shape).items():
        keys = [c.strip() for c in cols.split(",") if c.strip()]
        if not keys:
            raise CdclakeError("BAD_OPTION", f"--primary-key {table}={cols!r} is not {shape}")
        out[table] = keys
    return out


def _routing(args):
    """The :class:`cdclake.routing.Routing` of the table options of ``cdclake ingest``.

    Raises:
        CdclakeError(BAD_OPTION): a malformed option value (see :meth:`cdclake.routing.Routing.of`).
    """
    from cdclake.routing import Naming, Routing

    partition_by: dict[str, list[str]] = {}
    for table, exprs in assignments(args.partition_by, "--partition-by", "TABLE=EXPR[,EXPR]").items():
        parts = [e.strip() for e in exprs.split(",") if e.strip()]
        if not parts:
            raise CdclakeError("BAD_OPTION", f"--partition-by {table}={exprs!r} is not TABLE=EXPR[,EXPR]")
        partition_by[table] = parts
    properties = []
    for v in args.table_property:
        table, _, prop = v.partition("=")
        name, eq, value = prop.partition("=")
        if not table.strip() or not eq or not name.strip():
            raise CdclakeError("BAD_OPTION", f"--table-property {v!r} is not TABLE=NAME=VALUE")
        properties.append((table.strip(), name.strip(), value))
    if args.metastore and not args.catalog_database:
        raise CdclakeError("BAD_OPTION", "--metastore needs --catalog-database NAME")
    naming = Naming(args.table_name or "{name}", args.table_prefix, args.table_suffix)
    return Routing.of(args.include_tables, args.exclude_tables, naming, partition_by, properties, args.catalog_database)


def _session_conf(args) -> dict[str, str]:
    """Spark settings the ingest options need: an embedded Hive metastore for
    ``--catalog-database`` unless the Spark configuration names a catalog
    (``spark.sql.catalogImplementation`` or ``spark.sql.catalog.spark_catalog`` in
    ``$CDCLAKE_SPARK_CONF``)."""
    from cdclake import targets
    from cdclake.catalog import DEFAULT_METASTORE, metastore_conf
    from cdclake.spark import DRIVER_JAVA_OPTIONS, env_conf

    if not args.catalog_database or {"spark.sql.catalogImplementation", "spark.sql.catalog.spark_catalog"} & set(env_conf()):
        return {}
    return metastore_conf(args.metastore or targets.join(targets.resolve(args.target), DEFAULT_METASTORE), DRIVER_JAVA_OPTIONS)


def build_parser() -> argparse.ArgumentParser:
    from cdclake import formats

    p = _Parser(prog="cdclake", description="CDC messages into live Delta Lake tables, on Spark.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ing = sub.add_parser("ingest", help="decode messages and apply them to Delta tables")
    ing.add_argument("--format", required=True, help=f"one of: {', '.join(formats.names())}")
    ing.add_argument("--input", nargs="+", metavar="PATH", help="files or folders of messages (one per line)")
    ing.add_argument("--target", required=True, metavar="DIR", help="folder of the Delta tables")
    ing.add_argument("--primary-key", action="append", default=[], metavar="TABLE=COL[,COL...]",
                     help="key columns for a table whose messages carry none; TABLE a name or a glob such as shop.* (repeatable)")
    ing.add_argument("--canal-dts-inverted", action="store_true",
                     help="canal-json from a DTS instance created before 2022-03-20 (old/data swapped)")
    ing.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                     help="format-specific setting, e.g. table=db.t for datahub-tuple records without _source_table_")
    ing.add_argument("--kafka-bootstrap", metavar="HOST:PORT", help="read Kafka topics (a stream) instead of files")
    ing.add_argument("--topic", action="append", default=[], help="Kafka topic (repeatable)")
    ing.add_argument("--topic-pattern", metavar="RE", help="Kafka topics whose names match this Java regular expression")
    ing.add_argument("--checkpoint", metavar="DIR", help="the stream's checkpoint folder (offsets of applied batches)")
    ing.add_argument("--available-now", action="store_true", help="apply what the topics hold now, then stop")
    ing.add_argument("--trigger-interval", metavar="DURATION", help="start a micro-batch at most this often, e.g. 10s, 500ms, 1m")
    ing.add_argument("--starting-offsets", default="earliest", choices=["earliest", "latest"],
                     help="where a new checkpoint starts reading (default earliest)")
    ing.add_argument("--max-offsets-per-trigger", type=int, metavar="N", help="at most N records per micro-batch")
    ing.add_argument("--max-files-per-trigger", type=int, metavar="N",
                     help="with --input DIR --checkpoint DIR: at most N new files per micro-batch")
    ing.add_argument("--kafka-option", action="append", default=[], metavar="NAME=VALUE",
                     help="Kafka consumer setting passed through, e.g. security.protocol=SASL_SSL (repeatable)")
    ing.add_argument("--max-record-bytes", type=int, metavar="N",
                     help="reject records larger than N bytes as RECORD_TOO_LARGE (default 16 MiB)")
    ing.add_argument("--max-columns", type=int, metavar="N",
                     help="reject a table's events when it has more than N columns, as TOO_MANY_COLUMNS (default 4096)")
    ing.add_argument("--scd-type", type=int, choices=[1, 2], metavar="{1,2}",
                     help="2: new tables keep every row's history (_cdc_valid_from/_cdc_valid_to/_cdc_is_current);"
                          " 1: current rows only (default: as each table was created, new ones 1)")
    ing.add_argument("--transaction-timeout-ms", type=int, metavar="MS",
                     help="apply an open transaction's held changes once the source's event time is MS past it"
                          " (default 600000: 10 minutes)")
    ing.add_argument("--snapshot-removes-missing", action="store_true",
                     help="debezium-json: when a table's full snapshot completes (source.snapshot last_in_data_collection/last),"
                          " remove its rows older than the snapshot (rows the source no longer has)")
    tables = ing.add_argument_group("which tables, under which names, laid out how")
    tables.add_argument("--include-tables", action="append", default=[], metavar="RE",
                        help="write only tables whose qualified name (db.table, db.schema.table) matches this Python regular"
                             " expression, whole (repeatable: any may match; default every table)")
    tables.add_argument("--exclude-tables", action="append", default=[], metavar="RE",
                        help="never write tables whose qualified name matches (repeatable); their events are counted, not rejected")
    tables.add_argument("--table-name", metavar="TEMPLATE",
                        help="target table name from {name} (qualified), {database}, {schema}, {table}, e.g. {database}_{table}"
                             " (default {name}; fixed when the target is made)")
    tables.add_argument("--table-prefix", default="", metavar="TEXT", help="put TEXT before each target table's {table} part")
    tables.add_argument("--table-suffix", default="", metavar="TEXT", help="put TEXT after each target table's {table} part")
    tables.add_argument("--partition-by", action="append", default=[], metavar="TABLE=EXPR[,EXPR]",
                        help="partition new tables matching TABLE (a name or glob, e.g. shop.*) by columns or by"
                             " years(c), months(c), days(c), hours(c) of a timestamp column (repeatable)")
    tables.add_argument("--table-property", action="append", default=[], metavar="TABLE=NAME=VALUE",
                        help="Delta table property of new tables matching TABLE (a name or glob), e.g."
                             " 'shop.*=delta.enableChangeDataFeed=true' (repeatable)")
    tables.add_argument("--catalog-database", metavar="NAME",
                        help="register each table in the Spark catalog as NAME.<table> (an external Delta table); NAME may be"
                             " {database} (the source database)")
    tables.add_argument("--metastore", metavar="DIR",
                        help="with --catalog-database: the embedded Hive metastore's folder (default TARGET/_cdclake/metastore;"
                             " not used when the Spark configuration names a catalog)")
    ing.add_argument("--master", help="Spark master URL (default local[*])")
    ing.add_argument("--quiet", action="store_true", help="print only the one-line totals")
    conv = sub.add_parser("convert", help="turn messages of one format into another")
    conv.add_argument("--from", dest="source", required=True, help=f"input format: one of {', '.join(formats.names())}")
    conv.add_argument("--to", dest="dest", required=True, help="output format (any name above but auto)")
    conv.add_argument("--input", nargs="+", required=True, metavar="PATH", help="files or folders of messages")
    conv.add_argument("--output", required=True, metavar="PATH", help="output file (or existing folder)")
    conv.add_argument("--primary-key", action="append", default=[], metavar="TABLE=COL[,COL...]",
                      help="key columns for a table whose messages carry none (repeatable)")
    conv.add_argument("--option", action="append", default=[], metavar="NAME=VALUE", help="format-specific setting of the input format")
    conv.add_argument("--master", help="Spark master URL (default local[*])")
    sim = sub.add_parser("simulate", help="write a seeded simulated workload in any format")
    sim.add_argument("--format", required=True, help="output format")
    sim.add_argument("--events", type=int, default=1000, help="streamed events after the snapshot (default 1000)")
    sim.add_argument("--tables", type=int, default=3, help="number of tables (default 3)")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sim.add_argument("--output", required=True, metavar="PATH", help="output file (or existing folder)")
    st = sub.add_parser("status", help="what a target holds: rows, last position, lag, rejects")
    st.add_argument("--target", required=True, metavar="DIR", help="folder of the Delta tables")
    st.add_argument("--json", action="store_true", help="print JSON instead of a table")
    st.add_argument("--master", help="Spark master URL (default local[*])")
    sub.add_parser("formats", help="list the formats and what each carries")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "formats":
            return _formats()
        if args.command == "convert":
            return _convert(args)
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "status":
            return _status(args)
        return _ingest(args)
    except CdclakeError as e:
        print(f"cdclake: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        from cdclake.apply.tasks import concurrent_conflict

        if not concurrent_conflict(e):
            raise
        # another writer committed to the same Delta table first: nothing of this batch that
        # conflicted was applied, and the next run applies it (batch identities keep it once)
        print(f"cdclake: error: CONCURRENT_WRITE: another writer committed to the target first; run the ingest again "
              f"({str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__})", file=sys.stderr)
        return 2


def _formats() -> int:
    from rich.table import Table

    from cdclake import formats
    from cdclake.formats.facts import format_facts

    t = Table(title="cdclake formats")
    for col in ("format", "aliases", "key", "column types", "position", "transactions", "DDL", "heartbeats", "snapshot"):
        t.add_column(col)
    for d in formats.all_decoders():
        c = d.capabilities
        t.add_row(d.name, ", ".join(d.aliases), c.key, c.column_types, c.position, c.transactions,
                  "yes" if c.ddl else "no", "yes" if c.heartbeats else "no", c.snapshot_marker)
    console = _console()
    console.print(t)
    console.print("Where the facts come from (each format's facts.json):")
    for d in formats.all_decoders():
        console.print(f"  {d.name}: {'; '.join(d.capabilities.sources)}", highlight=False)
    console.print("Op tables (wire op -> meaning; c u d r t: insert, update, delete, snapshot read, truncate):")
    for d in formats.all_decoders():
        facts = format_facts(type(d).__module__.rsplit(".", 1)[0])
        if "ops" in facts:
            ops = ", ".join(f"{k} {v}" for k, v in facts["ops"].items())
            console.print(f"  {d.name}: {ops} ({facts['ops_source']})", highlight=False)
    return 0


def _limits(args):
    """The :class:`cdclake.formats.base.Limits` of ``--max-record-bytes``/``--max-columns``.

    Raises:
        CdclakeError(BAD_OPTION): a limit below 1.
    """
    from cdclake.formats.base import Limits

    given = {"max_record_bytes": args.max_record_bytes, "max_columns": args.max_columns}
    for name, v in given.items():
        if v is not None and v < 1:
            raise CdclakeError("BAD_OPTION", f"--{name.replace('_', '-')} must be at least 1")
    return Limits(**{k: v for k, v in given.items() if v is not None})


def _ingest(args) -> int:
    from cdclake import formats
    from cdclake.pipeline import IngestConfig, check_snapshot_ends, check_target, ingest
    from cdclake.sources.files import resolve_inputs

    if args.format != "auto":
        decoder = formats.get(args.format)  # fail fast on an unknown name, before Spark starts
        if args.snapshot_removes_missing:
            check_snapshot_ends(decoder)
    pks = _primary_keys(args.primary_key)
    limits = _limits(args)  # fail fast on a bad limit, before Spark starts
    tx_timeout = _tx_timeout(args)
    routing = _routing(args)
    if args.kafka_bootstrap:
        return _ingest_kafka(args, pks, routing)
    if args.checkpoint:
        return _ingest_folder_stream(args, pks, routing)
    if args.topic or args.topic_pattern:
        raise CdclakeError("BAD_OPTION", "--topic needs --kafka-bootstrap HOST:PORT")
    if not args.input:
        raise CdclakeError("BAD_OPTION", "give --input PATH [PATH ...] (or --kafka-bootstrap and --topic)")
    resolve_inputs(args.input)
    check_target(args.target)

    from cdclake.spark import get_spark

    extra = _options(args.option)
    spark = get_spark(master=args.master, conf=_session_conf(args))
    config = IngestConfig(args.format, args.input, args.target, pks, args.canal_dts_inverted, extra, limits, args.scd_type, tx_timeout,
                          args.snapshot_removes_missing, routing)
    console = _console()
    if console.is_terminal and not args.quiet:  # a live display: files, records, tables applied, elapsed
        with ingest_progress(console) as on_step:
            summary = ingest(spark, config, on_step=on_step)
    else:
        summary = ingest(spark, config)
    _print_summary(summary, args.quiet)
    return 0


def step_line(step) -> str:
    """The counters of a :class:`cdclake.pipeline.Step` as a display shows them: ``files 3 ·
    records 8 (0 rejected) · events 11 · 1 table(s) failed · what it does now`` (the failed
    tables only when there are any)."""
    parts = []
    if step.files is not None:
        parts.append(f"files {step.files}")
    if step.records is not None:
        parts.append(f"records {step.records} ({step.rejected or 0} rejected)")
    if step.events is not None:
        parts.append(f"events {step.events}")
    if step.tables_failed:
        parts.append(f"{step.tables_failed} table(s) failed")
    parts.append(step.text)
    return " · ".join(parts)


class ingest_progress:  # noqa: N801 (a context manager used as a function)
    """A rich progress display of a file ingest on ``console``: a line of counters
    (:func:`step_line`), a bar of the tables done (applied or failed) once their number is known, the time
    elapsed. ``with ingest_progress(console) as on_step:`` gives the ``on_step`` callable for
    :func:`cdclake.pipeline.ingest`."""

    def __init__(self, console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("tables"), TimeElapsedColumn(), console=console, transient=True)
        self.task = self.progress.add_task("starting", total=None)

    def __enter__(self):
        self.progress.start()
        return self.update

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def update(self, step) -> None:
        """Show ``step`` (a :class:`cdclake.pipeline.Step`)."""
        self.progress.update(self.task, description=_shown(step_line(step)).plain, total=step.tables,
                             completed=step.tables_applied + step.tables_failed)


def _ingest_kafka(args, pks: dict[str, list[str]], routing) -> int:
    from cdclake.sources.kafka import KafkaInput, kafka_options
    from cdclake.stream import StreamConfig

    if args.input:
        raise CdclakeError("BAD_OPTION", "give --input or --kafka-bootstrap, not both")
    if not args.checkpoint:
        raise CdclakeError("BAD_OPTION", "a Kafka ingest needs --checkpoint DIR (where applied offsets are kept)")
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
        raise CdclakeError("BAD_OPTION", "--max-offsets-per-trigger must be at least 1")
    source = KafkaInput(
        args.kafka_bootstrap, args.topic, args.topic_pattern, args.starting_offsets, args.max_offsets_per_trigger,
        kafka_options(assignments(args.kafka_option, "--kafka-option")),
    )
    source.source_options()  # fail fast on a bad topic choice, before Spark starts
    config = StreamConfig(args.format, args.target, args.checkpoint, kafka=source, routing=routing)
    return _run_stream(args, pks, config)


def _ingest_folder_stream(args, pks: dict[str, list[str]], routing) -> int:
    from pathlib import Path

    from cdclake.stream import StreamConfig

    if len(args.input) != 1 or not Path(args.input[0]).is_dir():
        raise CdclakeError("BAD_OPTION", "with --checkpoint, --input names one folder (its files are read as they land)")
    if args.max_files_per_trigger is not None and args.max_files_per_trigger < 1:
        raise CdclakeError("BAD_OPTION", "--max-files-per-trigger must be at least 1")
    config = StreamConfig(args.format, args.target, args.checkpoint, input_dir=args.input[0], max_files_per_trigger=args.max_files_per_trigger,
                          routing=routing)
    return _run_stream(args, pks, config)


def _run_stream(args, pks: dict[str, list[str]], config) -> int:
    """Complete ``config`` (a :class:`cdclake.stream.StreamConfig`) from the common options and
    run it; prints the totals."""
    from cdclake.pipeline import check_target
    from cdclake.stream import run_stream

    if args.available_now and args.trigger_interval:
        raise CdclakeError("BAD_OPTION", "give --available-now or --trigger-interval, not both")
    config.available_now = args.available_now
    config.trigger_interval = trigger_interval(args.trigger_interval) if args.trigger_interval else None
    config.primary_keys, config.canal_dts_inverted, config.extra = pks, args.canal_dts_inverted, _options(args.option)
    config.limits = _limits(args)
    config.scd_type = args.scd_type
    config.tx_timeout_ms = _tx_timeout(args)
    config.snapshot_ends = args.snapshot_removes_missing
    check_target(args.target)

    from cdclake.spark import get_spark

    summary = run_stream(get_spark(master=args.master, conf=_session_conf(args)), config)
    t = summary.totals
    why = " (stopped by signal)" if summary.stopped_by_signal else ""
    print(f"query {summary.query_id}: {summary.batches} batches{why}")
    print(f"records in: {t.records_in}  decoded: {t.decoded}  rejected: {t.rejected}  events: {t.events}")
    _print_excluded(t)
    for r in t.tables:
        if r.failed:
            print(f"table failed: {_shown(r.table)}: {r.failed_events} events sent to the rejects table ({_shown(r.failed)})")
    return 0


_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}


def trigger_interval(text: str) -> str:
    """``10s``, ``500ms``, ``1m``, ``2h`` (or Spark's own ``10 seconds``) as Spark's trigger
    interval text.

    Raises:
        CdclakeError(BAD_OPTION): anything else.
    """
    import re

    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h)\s*", text)
    if m:
        return f"{m.group(1)} {_UNITS[m.group(2)]}"
    m = re.fullmatch(r"\s*(\d+)\s+(milliseconds?|seconds?|minutes?|hours?)\s*", text)
    if m:
        return f"{m.group(1)} {m.group(2)}"
    raise CdclakeError("BAD_OPTION", f"--trigger-interval {text!r} is not a duration like 10s, 500ms, 1m")


def _options(values: list[str]) -> dict[str, str]:
    return assignments(values, "--option")


def _dropped(dropped) -> str:
    return ", ".join(f"{reason}: {n}" for reason, n in sorted(dropped.items())) or "nothing"


def _convert(args) -> int:
    from cdclake import formats
    from cdclake.convert import convert
    from cdclake.formats.base import DecodeOptions
    from cdclake.sources.files import resolve_inputs

    if args.source != "auto":
        formats.get(args.source)
    if args.dest == "auto":
        raise CdclakeError("BAD_OPTION", "--to needs a format name, not auto")
    formats.get_encoder(args.dest)
    options = DecodeOptions(primary_keys=_primary_keys(args.primary_key), extra=_options(args.option))
    resolve_inputs(args.input)

    from cdclake.spark import get_spark

    s = convert(get_spark(master=args.master), args.source, args.input, args.dest, args.output, options)
    print(f"{s.source_format} -> {s.target_format}: {s.output}")
    print(f"records in: {s.records_in}  decoded: {s.decoded}  rejected: {s.rejected}  events: {s.events}  records out: {s.records_out}")
    print(f"not carried by {s.target_format}: {_dropped(s.dropped)}")
    if s.rejects_file:
        print(f"rejected records: {s.rejects_file} ({', '.join(f'{k}={v}' for k, v in sorted(s.reject_codes.items()))})")
    return 0


def _simulate(args) -> int:
    from cdclake.convert import simulate

    for flag in ("events", "tables"):
        if getattr(args, flag) < (1 if flag == "tables" else 0):
            raise CdclakeError("BAD_OPTION", f"--{flag} must be {'at least 1' if flag == 'tables' else 'zero or more'}")
    s = simulate(args.format, args.output, events=args.events, tables=args.tables, seed=args.seed)
    print(f"{s.format}: {s.output}")
    print(f"events: {s.events}  records out: {s.records_out}")
    print(f"not carried by {s.format}: {_dropped(s.dropped)}")
    return 0


def _status(args) -> int:
    import json
    from pathlib import Path

    from cdclake import targets
    from cdclake.apply.audit import LAYOUT_FILE

    if not targets.is_uri(args.target) and not (Path(args.target) / LAYOUT_FILE).exists():  # before Spark starts
        raise CdclakeError("INPUT_NOT_FOUND", f"{args.target} is not a cdclake target (no {LAYOUT_FILE})")
    from cdclake.spark import get_spark
    from cdclake.status import target_status
    from cdclake.stream import held_age

    st = target_status(get_spark(master=args.master), args.target)
    if args.json:
        print(json.dumps(st, indent=2, default=str))
        return 0
    from rich.table import Table

    t = Table(title=f"cdclake status: {st['target']}")
    for col in ("table", "rows", "version", "last position", "event time (UTC)", "lag", "applied at (UTC)"):
        t.add_column(col, justify="right" if col in ("rows", "version", "lag") else "left", overflow="fold")
    for r in st["tables"]:
        t.add_row(_shown(r["table"]), _n(r["rows"]), _n(r["delta_version"]), r["last_position"] or "", _utc(r["last_event_time_ms"]),
                  _lag(r["lag_ms"]), _utc(r["updated_at_ms"]))
    console = _console()
    console.print(t)
    for h in st["heartbeats"]:
        console.print(_shown(f"heartbeat {h['source']}: {_utc(h['last_heartbeat_ms'])}"))
    held = f" ({st['held_events']} events, oldest held since {_utc(st['held_since_ms'])})" if st["held_transactions"] else ""
    console.print(f"transactions held back: {st['held_transactions']}{held}")
    if st["held"]:
        h = Table(title="held back: each open transaction, and what it waits for")
        for col in ("transaction", "tables", "changes", "waits for", "held since (UTC)", "age"):
            h.add_column(col, justify="right" if col == "changes" else "left", overflow="fold")
        for x in st["held"]:
            h.add_row(_shown(str(x["tx_id"])), _shown(", ".join(x["tables"])) or "(none)", str(x["changes"]), _waits_for(x),
                      _utc(x["held_since_ms"]), held_age(x["held_since_ms"]).removeprefix("held "))
        console.print(h)
    if st["timed_out_transactions"]:
        console.print(f"transactions given up by the timeout (applied as they were): {st['timed_out_transactions']}")
    rejects = ", ".join(f"{k}={v}" for k, v in st["rejects"].items()) or "none"
    print(f"rejects: {rejects}")
    return 0


def _waits_for(x: dict) -> str:
    """What a held transaction (:func:`cdclake.apply.transactions.held_transactions`) waits for."""
    if x["changes"] == 0:
        return "its changes (a marker that matched no change)"
    if x["size"] is not None:
        return f"{x['size'] - x['changes']} more of {x['size']} changes"
    return "its END / COMMIT" if x["begun"] or not x["ended"] else "the rest"


def _shown(name: str):
    """A name from a message as a rich cell: never read as markup (``[/x]`` would raise), with
    control characters (ANSI escapes, newlines) shown as ``\\xNN`` rather than sent to the
    terminal."""
    from rich.text import Text

    return Text("".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name))


def _n(v) -> str:
    return "" if v is None else str(v)


def _utc(ms) -> str:
    from datetime import datetime, timezone

    return "" if ms is None else datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _lag(ms) -> str:
    from cdclake.stream import duration_text

    return duration_text(ms)


def _tx_timeout(args) -> int:
    """``--transaction-timeout-ms``, checked (a negative value is a usage error)."""
    from cdclake.apply.transactions import DEFAULT_TIMEOUT_MS

    if args.transaction_timeout_ms is None:
        return DEFAULT_TIMEOUT_MS
    if args.transaction_timeout_ms < 0:
        raise CdclakeError("BAD_OPTION", f"--transaction-timeout-ms must be 0 or more, not {args.transaction_timeout_ms}")
    return args.transaction_timeout_ms


def _print_excluded(s) -> None:
    """The line of the events ``--include-tables``/``--exclude-tables`` left out (none: no line)."""
    if s.excluded_events:
        names = ", ".join(s.excluded_tables[:10]) + (" ..." if len(s.excluded_tables) > 10 else "")
        print(f"excluded: {s.excluded_events} event(s) of {len(s.excluded_tables)} table(s) not written ({_shown(names)})")


def _print_summary(s, quiet: bool) -> None:
    from rich.table import Table

    from cdclake.stream import held_age

    console = _console()
    if not quiet:
        t = Table(title=f"cdclake ingest ({s.format})")
        t.add_column("table", overflow="fold")
        for col in ("inserts", "updates", "deletes", "truncated", "rows now"):
            t.add_column(col, justify="right")
        t.add_column("key", overflow="fold")
        t.add_column("schema", overflow="fold")
        for r in s.tables:
            if r.failed:
                t.add_row(_shown(r.table), "", "", "", "", "", "", _shown(f"FAILED: {r.failed_events} events to rejects"))
                continue
            # the full text of each change is in _cdclake/schema_history
            schema = _shown(", ".join(c.split(" (")[0] for c in r.schema_changes))
            # a table without a key matches rows on their whole before image: say so (a file of
            # Debezium values carries no Kafka key; --primary-key gives one)
            key = _shown(", ".join(r.key)) if r.key else "none: whole-row match (--primary-key sets one)"
            t.add_row(_shown(r.table), str(r.inserted), str(r.updated), str(r.deleted), str(r.truncated), str(r.rows_now), key, schema)
        console.print(t)
        if s.reject_codes:
            console.print("rejects by code: " + ", ".join(f"{k}={v}" for k, v in sorted(s.reject_codes.items())))
    for r in s.tables:
        if r.failed:  # shown even with --quiet: the run goes on (exit 0), the table did not
            print(f"table failed: {_shown(r.table)}: {r.failed_events} events sent to the rejects table ({_shown(r.failed)})")
    print(f"records in: {s.records_in}  decoded: {s.decoded}  rejected: {s.rejected}  events: {s.events}")
    _print_excluded(s)
    if s.held_transactions:
        print(f"held back: {s.held_transactions} open transaction(s), {s.held_events} event(s), oldest {held_age(s.held_since_ms)}; "
              "applied when the rest arrives (cdclake status lists them)")
    if s.timed_out_transactions:
        print(f"given up by the timeout: {s.timed_out_transactions} open transaction(s) applied as they were (--transaction-timeout-ms)")
    if s.redelivered_transactions:
        print(f"re-delivered: {s.redelivered_transactions} piece(s) of transactions applied before, applied again (no change)")


if __name__ == "__main__":
    sys.exit(main())
