"""The documentation: the MkDocs site builds with ``--strict`` (broken links and anchors are
errors), its command reference lists every subcommand and option of
:func:`cdclake.cli.build_parser` (the hook ``docs/hooks/cli_reference.py`` generates it, so a
generator that drops one fails here), every format has its row and its facts, and README.md stays
short, with working relative links and a formats table that says what each ``facts.json`` says.
No Spark: ``build_parser()`` only builds argparse and the format registry imports its modules."""

from __future__ import annotations

import argparse
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 150


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built by ``python -m mkdocs build --strict`` into a temporary folder."""
    assert importlib.util.find_spec("mkdocs") is not None, "mkdocs is not installed: run bin/setup --test"
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's banner about its successor
    print(run.stderr)
    assert run.returncode == 0, f"mkdocs build --strict failed (exit {run.returncode}):\n{run.stderr}\n{run.stdout}"
    return out


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.update(action.choices)
    return out


def _sections(page: str, names: list[str]) -> dict[str, str]:
    """Each subcommand's part of the built reference page: from its heading to the next one."""
    starts = {}
    for name in names:
        i = page.find(f'id="cdclake-{name}"')
        assert i >= 0, f"the command reference has no section for `cdclake {name}`"
        starts[name] = i
    order = sorted(names, key=starts.get)
    return {n: page[starts[n]: starts[order[k + 1]] if k + 1 < len(order) else len(page)] for k, n in enumerate(order)}


def test_the_site_builds_strict_and_its_cli_reference_has_every_subcommand_and_option(site):
    from cdclake.cli import build_parser

    parser = build_parser()
    subs = _subcommands(parser)
    assert subs, "build_parser() has no subcommands"
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    sections = _sections(page, list(subs))
    missing = []
    for name, sub in subs.items():
        if f"usage: cdclake {name}" not in sections[name]:
            missing.append(f"{name}: usage line")
        for action in sub._actions:
            for opt in action.option_strings:
                if f"<code>{html.escape(opt)}</code>" not in sections[name]:
                    missing.append(f"{name}: {opt}")
            if action.option_strings and action.help and "%" not in action.help:
                if html.escape(" ".join(action.help.split()), quote=False) not in sections[name]:
                    missing.append(f"{name}: help of {action.option_strings[0]}")
    assert not missing, f"the command reference lacks: {missing}"


def test_every_format_has_its_row_and_its_facts(site):
    from cdclake import formats

    index = (site / "formats" / "index.html").read_text(encoding="utf-8")
    for d in formats.all_decoders():
        assert f"<code>{d.name}</code>" in index, f"formats/index.md has no row for {d.name}"
        page = site / "formats" / d.name / "index.html"
        assert page.exists(), f"no page for format {d.name}"
        text = page.read_text(encoding="utf-8")
        for source in d.capabilities.sources:
            assert html.escape(source, quote=False) in text, f"{d.name}: source {source!r} not shown"


def _readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_short():
    n = len(_readme().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}; the rest belongs in docs/)"


_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)


def test_every_relative_link_in_the_readme_points_to_a_file():
    text = _readme()
    targets = _LINK.findall(text) + _REF.findall(text)
    relative = [t for t in targets if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t) and not t.startswith("#")]
    assert relative, "README.md links to no docs page"
    broken = [t for t in relative if not (REPO / t.split("#", 1)[0]).exists()]
    assert not broken, f"README.md links to missing files: {broken}"


def test_the_readme_formats_table_says_what_each_formats_facts_say():
    from cdclake import formats

    rows = {}
    for line in _readme().replace("`", "").splitlines():
        m = re.match(r"^\| \[([a-z-]+)\]\(docs/formats/", line)
        if m:
            rows[m.group(1)] = line
    for d in formats.all_decoders():
        c = d.capabilities
        assert d.name in rows, f"README.md's formats table has no row for {d.name}"
        cells = [x.strip() for x in rows[d.name].strip().strip("|").split(" | ")]
        assert cells[1:] == [c.key, c.column_types, c.position, c.transactions, "yes" if c.ddl else "no"], \
            f"README.md's row for {d.name} differs from its facts.json: {cells[1:]}"
