"""The layout rules of the code (issue 51), checked by reading the source with ``ast``: no Spark.

* ``cdclake.apply`` imports downward only: its modules' imports form no cycle;
* no import of a cdclake module hides inside a function (the way a cycle used to be dodged),
  outside the CLI (whose commands import what they run);
* the decoders (``cdclake.formats``) never import the appliers, the pipeline or the CLI, and the
  appliers never import the pipeline, the streams or the CLI;
* no module uses another module's private name (``from m import _x``, ``m._x``);
* no function in ``cdclake.apply`` or ``cdclake.formats`` is over 80 lines (:data:`MAX_LINES`,
  docstring included); every decoder is on the decode skeleton, and no module of the decode
  path is over 300 lines (issue 52).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cdclake"

MAX_LINES = 80


def _modules() -> dict[str, ast.Module]:
    """Every module of the package by dotted name (``cdclake.apply.plan``)."""
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = p.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
    return out


def _imports(tree: ast.Module, name: str) -> list[tuple[ast.stmt, str, list[str]]]:
    """``(statement, module imported from, names)`` of every import in ``tree`` (relative ones resolved)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((node, a.name, []))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = name.split(".")[: -node.level]
                mod = ".".join(base + ([mod] if mod else []))
            out.append((node, mod, [a.name for a in node.names]))
    return out


def _targets(mod: str, names: list[str], modules: dict) -> set[str]:
    """The cdclake modules an import statement loads (``from cdclake.apply import audit`` -> ``cdclake.apply.audit``)."""
    if not mod.startswith("cdclake"):
        return set()
    subs = {f"{mod}.{n}" for n in names if f"{mod}.{n}" in modules}
    return subs or {mod}


def _functions(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_the_appliers_import_downward_only():
    modules = _modules()
    apply = {n for n in modules if n.startswith("cdclake.apply.")}
    graph = {n: set() for n in apply}
    inner = []
    for n in apply:
        tree = modules[n]
        for stmt, mod, names in _imports(tree, n):
            graph[n] |= _targets(mod, names, modules) & apply
        for fn in _functions(tree):
            for stmt in ast.walk(fn):
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    for mod in [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]:
                        if mod.startswith("cdclake"):
                            inner.append(f"{n}:{stmt.lineno} imports {mod} inside {fn.name}()")
    assert not inner, "\n".join(inner)
    # no cycle: a depth-first walk never meets a module still on its path
    state: dict[str, int] = {}
    cycles = []

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                cycles.append(" -> ".join(path[path.index(m):] + [m]) if m in path else f"{n} -> {m}")
            elif m not in state:
                visit(m, path + [m])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    assert not cycles, "import cycles in cdclake.apply:\n" + "\n".join(cycles)


def test_no_cdclake_import_hides_in_a_function():
    """Outside the CLI (whose commands import what they run, so that ``cdclake --help`` starts
    fast), every import of a cdclake module is at the top of its module."""
    inner = []
    for n, tree in _modules().items():
        if n == "cdclake.cli":
            continue
        for fn in _functions(tree):
            for stmt in ast.walk(fn):
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    mods = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
                    inner += [f"{n}:{stmt.lineno} imports {m} inside {fn.name}()" for m in mods if m.startswith("cdclake") or getattr(stmt, "level", 0)]
    assert not inner, "\n".join(inner)


def test_packages_import_downward_only():
    modules = _modules()
    above = {"cdclake.pipeline", "cdclake.stream", "cdclake.cli", "cdclake.convert", "cdclake.status"}
    wrong = []
    for n, tree in modules.items():
        forbidden = set()
        if n.startswith("cdclake.formats"):
            forbidden = {"cdclake.apply"} | above
        elif n.startswith("cdclake.apply"):
            forbidden = above
        for stmt, mod, names in _imports(tree, n):
            for t in _targets(mod, names, modules):
                if any(t == f or t.startswith(f + ".") for f in forbidden):
                    wrong.append(f"{n}:{stmt.lineno} imports {t}")
    assert not wrong, "\n".join(wrong)


def test_no_module_uses_another_modules_private_names():
    modules = _modules()
    used = []
    for n, tree in modules.items():
        aliases = {}  # local name -> cdclake module it is bound to
        for stmt, mod, names in _imports(tree, n):
            if not mod.startswith("cdclake"):
                continue
            if isinstance(stmt, ast.ImportFrom):
                for a in stmt.names:
                    if a.name.startswith("_"):
                        used.append(f"{n}:{stmt.lineno} imports {mod}.{a.name}")
                    if f"{mod}.{a.name}" in modules:
                        aliases[a.asname or a.name] = f"{mod}.{a.name}"
            else:
                for a in stmt.names:
                    if a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != n):
                used.append(f"{n}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not used, "\n".join(used)


def test_no_long_functions_in_the_appliers():
    modules = _modules()
    too_long = [f"{n}.{fn.name}: {fn.end_lineno - fn.lineno + 1} lines" for n, tree in modules.items() if n.startswith("cdclake.apply.")
                for fn in _functions(tree) if fn.end_lineno - fn.lineno + 1 > MAX_LINES]
    assert not too_long, f"functions over {MAX_LINES} lines:\n" + "\n".join(too_long)


#: every format package (``cdclake/formats/<fmt>/decoder.py``): all decoders are on the decode
#: skeleton (``cdclake.formats.skeleton.StagedDecoder``, issue 52), a new format included
FORMAT_PACKAGES = tuple(sorted(p.parent.name for p in (PACKAGE / "formats").glob("*/decoder.py")))
#: the most lines a module of the decode path may have (issue 52)
MAX_DECODER_LINES = 300


def test_no_long_functions_in_the_formats_and_every_decoder_on_the_skeleton():
    modules = _modules()
    assert len(FORMAT_PACKAGES) >= 7, FORMAT_PACKAGES
    names = {n for n in modules if n.startswith("cdclake.formats.")}
    too_long = [f"{n}.{fn.name}: {fn.end_lineno - fn.lineno + 1} lines" for n in sorted(names)
                for fn in _functions(modules[n]) if fn.end_lineno - fn.lineno + 1 > MAX_LINES]
    assert not too_long, f"functions over {MAX_LINES} lines:\n" + "\n".join(too_long)
    # and they are on the skeleton: no decode of their own
    for d in FORMAT_PACKAGES:
        tree = modules[f"cdclake.formats.{d}.decoder"]
        assert not [fn for fn in _functions(tree) if fn.name == "decode"], d


def test_no_decoder_module_over_300_lines():
    # every module of the decode path: the shared ones and each format's, its encoder (a
    # test-data writer) aside
    paths = [p for p in (PACKAGE / "formats").rglob("*.py") if p.name != "encoder.py"]
    assert len(paths) > 20, paths
    long = [f"{p.relative_to(PACKAGE)}: {n} lines" for p in sorted(paths) if (n := len(p.read_text().splitlines())) > MAX_DECODER_LINES]
    assert not long, f"decoder modules over {MAX_DECODER_LINES} lines:\n" + "\n".join(long)
