"""The ``cdclake`` command: arguments -> configuration -> pipeline. Nothing else lives here.

    cdclake ingest --format FORMAT --input PATH [PATH ...] --target DIR [--primary-key T=C[,C]]...
    cdclake convert --from F --to G --input PATH [PATH ...] --output PATH
    cdclake simulate --format F --events N --tables K --seed S --output PATH
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


def _primary_keys(values: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for v in values or []:
        table, sep, cols = v.partition("=")
        keys = [c.strip() for c in cols.split(",") if c.strip()]
        if not sep or not table.strip() or not keys:
            raise CdclakeError("BAD_OPTION", f"--primary-key {v!r} is not TABLE=COL[,COL...]")
        out[table.strip()] = keys
    return out


def build_parser() -> argparse.ArgumentParser:
    from cdclake import formats

    p = _Parser(prog="cdclake", description="CDC messages into live Delta Lake tables, on Spark.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ing = sub.add_parser("ingest", help="decode messages and apply them to Delta tables")
    ing.add_argument("--format", required=True, help=f"one of: {', '.join(formats.names())}")
    ing.add_argument("--input", nargs="+", metavar="PATH", help="files or folders of messages (one per line)")
    ing.add_argument("--target", required=True, metavar="DIR", help="folder of the Delta tables")
    ing.add_argument("--primary-key", action="append", default=[], metavar="TABLE=COL[,COL...]",
                     help="key columns for a table whose messages carry none (repeatable)")
    ing.add_argument("--canal-dts-inverted", action="store_true",
                     help="canal-json from a DTS instance created before 2022-03-20 (old/data swapped)")
    ing.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                     help="format-specific setting, e.g. table=db.t for datahub-tuple records without _source_table_")
    ing.add_argument("--kafka-bootstrap", metavar="HOST:PORT", help="read from Kafka instead of files")
    ing.add_argument("--topic", action="append", default=[], help="Kafka topic (repeatable)")
    ing.add_argument("--checkpoint", metavar="DIR", help="Kafka checkpoint folder")
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
        return _ingest(args)
    except CdclakeError as e:
        print(f"cdclake: error: {e}", file=sys.stderr)
        return 2


def _formats() -> int:
    from rich.table import Table

    from cdclake import formats

    t = Table(title="cdclake formats")
    for col in ("format", "aliases", "key", "column types", "position", "transactions", "DDL", "heartbeats", "snapshot"):
        t.add_column(col)
    for d in formats.all_decoders():
        c = d.capabilities
        t.add_row(d.name, ", ".join(d.aliases), c.key, c.column_types, c.position, c.transactions,
                  "yes" if c.ddl else "no", "yes" if c.heartbeats else "no", c.snapshot_marker)
    _console().print(t)
    return 0


def _ingest(args) -> int:
    from cdclake import formats
    from cdclake.pipeline import IngestConfig, check_target, ingest
    from cdclake.sources.files import resolve_inputs

    if args.format != "auto":
        formats.get(args.format)  # fail fast on an unknown name, before Spark starts
    pks = _primary_keys(args.primary_key)
    if args.kafka_bootstrap:
        raise CdclakeError("NOT_IMPLEMENTED", "Kafka input is not implemented yet; use --input files")
    if not args.input:
        raise CdclakeError("BAD_OPTION", "give --input PATH [PATH ...] (or --kafka-bootstrap and --topic)")
    resolve_inputs(args.input)
    check_target(args.target)

    from cdclake.spark import get_spark

    extra = _options(args.option)
    spark = get_spark(master=args.master)
    config = IngestConfig(args.format, args.input, args.target, pks, args.canal_dts_inverted, extra)
    summary = ingest(spark, config)
    _print_summary(summary, args.quiet)
    return 0


def _options(values: list[str]) -> dict[str, str]:
    extra = {}
    for o in values or []:
        name, sep, value = o.partition("=")
        if not sep or not name.strip():
            raise CdclakeError("BAD_OPTION", f"--option {o!r} is not NAME=VALUE")
        extra[name.strip()] = value
    return extra


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


def _print_summary(s, quiet: bool) -> None:
    from rich.table import Table

    console = _console()
    if not quiet:
        t = Table(title=f"cdclake ingest ({s.format})")
        t.add_column("table", overflow="fold")
        for col in ("inserts", "updates", "deletes", "truncated", "rows now"):
            t.add_column(col, justify="right")
        t.add_column("key", overflow="fold")
        t.add_column("schema", overflow="fold")
        for r in s.tables:
            # the full text of each change is in _cdclake/schema_history
            schema = ", ".join(c.split(" (")[0] for c in r.schema_changes)
            # a table without a key matches rows on their whole before image: say so (a file of
            # Debezium values carries no Kafka key; --primary-key gives one)
            key = ", ".join(r.key) if r.key else "none: whole-row match (--primary-key sets one)"
            t.add_row(r.table, str(r.inserted), str(r.updated), str(r.deleted), str(r.truncated), str(r.rows_now), key, schema)
        console.print(t)
        if s.reject_codes:
            console.print("rejects by code: " + ", ".join(f"{k}={v}" for k, v in sorted(s.reject_codes.items())))
    print(f"records in: {s.records_in}  decoded: {s.decoded}  rejected: {s.rejected}  events: {s.events}")


if __name__ == "__main__":
    sys.exit(main())
