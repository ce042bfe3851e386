"""MkDocs hook (``hooks:`` in ``mkdocs.yml``): pages generated at build time from the code, so
they never drift from it.

* ``<!-- cdclake:cli-reference -->`` (``docs/reference/cli.md``): every subcommand of
  :func:`cdclake.cli.build_parser` with its usage line and every option with its value, whether
  it is required or repeatable, its default and its help text.
* ``<!-- cdclake:formats-table -->`` (``docs/formats/index.md``): the table ``cdclake formats``
  prints, one row per registered decoder.
* ``<!-- cdclake:facts FORMAT -->`` (``docs/formats/FORMAT.md``): the format's ``facts.json``
  (the documents its facts come from, its capabilities and its op table).

The repository's own ``cdclake`` package is imported (its root goes first on ``sys.path``).
``build_parser()`` builds argparse only and the format registry imports its decoders' modules;
neither starts Spark. A marker that cannot be filled fails the build.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
CLI_MARKER = "<!-- cdclake:cli-reference -->"
FORMATS_MARKER = "<!-- cdclake:formats-table -->"
FACTS_MARKER = re.compile(r"<!-- cdclake:facts ([a-z0-9-]+) -->")
#: the page that must hold CLI_MARKER
CLI_PAGE = "reference/cli.md"
USAGE_WIDTH = 80


def _import_cdclake():
    """``cdclake.cli`` and ``cdclake.formats`` of this repository (nothing here starts Spark)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        from cdclake import cli, formats
    except Exception as e:  # noqa: BLE001 - the pages cannot be generated: say why, fail the build
        raise PluginError(f"docs: cannot import cdclake from {ROOT} ({type(e).__name__}: {e})") from e
    return cli, formats


def _text(s: str | None) -> str:
    """Plain help text as Markdown that shows it as written (no emphasis, links, HTML or table
    breaks)."""
    s = " ".join((s or "").split())
    for ch in "\\`*_[]|":
        s = s.replace(ch, "\\" + ch)
    return s.replace("<", "&lt;").replace(">", "&gt;")


def _code(s: str) -> str:
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}".replace("|", "\\|")


def _help(action: argparse.Action, prog: str) -> str:
    """The action's help as argparse prints it (``%(default)s`` and the like expanded)."""
    text = action.help or ""
    if "%" in text:
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        params["prog"] = prog
        if params.get("choices") is not None:
            params["choices"] = ", ".join(str(c) for c in params["choices"])
        text = text % params
    return text


def _subcommands(parser: argparse.ArgumentParser):
    """``(name, help, subparser)`` of every subcommand, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, helps.get(name, ""), sub


def _usage(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=USAGE_WIDTH)
    return parser.format_usage().strip()


def _value(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    return formatter._format_args(action, action.dest.upper())


def _notes(action: argparse.Action) -> str:
    out = []
    if action.required:
        out.append("required")
    if isinstance(action, argparse._AppendAction):
        out.append("repeatable")
    default = action.default
    if action.nargs != 0 and default is not None and default is not argparse.SUPPRESS and default != []:
        out.append(f"default {_code(str(default))}")
    return ", ".join(out)


def _options_list(parser: argparse.ArgumentParser) -> list[str]:
    """One list item per option: its strings, its value, required/repeatable/default, its help."""
    rows = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        opts = ", ".join(_code(o) for o in action.option_strings)
        value = _value(parser, action)
        notes = _notes(action)
        rows.append(f"* {opts}{' ' + _code(value) if value else ''}{f' ({notes})' if notes else ''}: "
                    f"{_text(_help(action, parser.prog))}")
    return rows


def cli_reference() -> str:
    """The command reference, as Markdown, from ``cdclake.cli.build_parser()``."""
    cli, _ = _import_cdclake()
    parser = cli.build_parser()
    out = [
        f"`{parser.prog}`: {_text(parser.description)}",
        "",
        "```text",
        _usage(parser),
        "```",
        "",
    ]
    subs = list(_subcommands(parser))
    if not subs:
        raise PluginError("cdclake.cli.build_parser() has no subcommands")
    out.append("Subcommands: " + ", ".join(f"[`{name}`](#cdclake-{name})" for name, _, _ in subs) + ".")
    out.append("")
    for name, help_text, sub in subs:
        shown = _text(help_text)
        out += [f"## cdclake {name}", "", shown[:1].upper() + shown[1:] + "." if shown else "", ""]
        if sub.description:
            out += [_text(sub.description), ""]
        out += ["```text", _usage(sub), "```", ""]
        out += _options_list(sub)
        out.append("")
    return "\n".join(out)


def _facts(decoder) -> dict:
    """The ``facts.json`` beside the decoder's package (as ``cdclake formats`` reads it)."""
    package = sys.modules[type(decoder).__module__.rsplit(".", 1)[0]]
    path = Path(package.__file__).parent / "facts.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _yes(v) -> str:
    return "yes" if v else "no"


def formats_table() -> str:
    """The table ``cdclake formats`` prints."""
    _, formats = _import_cdclake()
    head = ["format", "aliases", "key", "column types", "position", "transactions", "DDL", "heartbeats", "snapshot"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in formats.all_decoders():
        c = d.capabilities
        cells = [f"[`{d.name}`]({d.name}.md)", ", ".join(f"`{a}`" for a in d.aliases), _text(c.key), _text(c.column_types),
                 _text(c.position), _text(c.transactions), _yes(c.ddl), _yes(c.heartbeats), _text(c.snapshot_marker)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def format_facts(name: str) -> str:
    """One format's ``facts.json`` as Markdown: sources, capabilities (with notes), op table."""
    _, formats = _import_cdclake()
    try:
        decoder = formats.get(name)
    except Exception as e:  # noqa: BLE001 - an unknown name in a page fails the build
        raise PluginError(f"docs: <!-- cdclake:facts {name} --> names no format ({e})") from e
    facts = _facts(decoder)
    out = ["Where the facts come from:", ""]
    out += [f"* {_text(s)}" for s in facts.get("sources", [])]
    out += ["", "| capability | value |", "|---|---|"]
    for field, value in facts["capabilities"].items():
        shown = _yes(value) if isinstance(value, bool) else _text(str(value))
        out.append(f"| `{field}` | {shown} |")
    notes = facts.get("notes", {})
    if notes:
        out += ["", "Notes:", ""]
        out += [f"* `{field}`: {_text(why)}" for field, why in notes.items()]
    if "ops" in facts:
        out += ["", "Op table (wire op -> meaning; `c` `u` `d` `r` `t`: insert, update, delete, snapshot read, truncate):", "",
                "| wire op | meaning |", "|---|---|"]
        out += [f"| {_code(k)} | {_code(v)} |" for k, v in facts["ops"].items()]
        if facts.get("ops_source"):
            out += ["", f"Source of the op table: {_text(facts['ops_source'])}."]
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    src = page.file.src_uri
    if src == CLI_PAGE and CLI_MARKER not in markdown:
        raise PluginError(f"docs: {CLI_PAGE} lacks {CLI_MARKER}: the command reference would be missing")
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if FORMATS_MARKER in markdown:
        markdown = markdown.replace(FORMATS_MARKER, formats_table())
    return FACTS_MARKER.sub(lambda m: format_facts(m.group(1)), markdown)
