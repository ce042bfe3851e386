"""A decoder change measured in one JVM: old and new code alternated, the format's floor beside them.

    .venv/bin/python bench/ab_decode.py FORMAT FILE --toggle TOGGLE.py [--runs 3]

This machine moves a cold figure by 5-25 % from one process to the next, more than most changes
to a decoder gain, so a change is measured here: one session, the decode run with the old code
(``base``) and with the new (``new``) in turn, and the format's floor (Spark's own parse of the
same file, as ``bench/compare.py`` runs it: ``from_json`` + ``explode`` for canal-json, else the
``floor:<fmt>`` row) in the same rounds. The order within a round alternates, and the first round
only warms the JVM and is not counted. Prints each side's median and runs (seconds), and each
decode's ratio to the floor.

``TOGGLE.py`` is Python run once in this process (the session and ``dec``, the format's decoder,
in scope). It defines ``TOGGLE(on: bool)``, which puts the new code in place (``on``) or the old
back, e.g. by swapping a module attribute::

    import cdclake.formats.typed as T
    _old = T.unfused
    def TOGGLE(on):
        T.unfused = (lambda sql: sql) if on else _old

FILE: a generated input (``bench/out/inputs``, made by a ``compare.py`` run); a smaller head of
one (``head -200000``) keeps a round short. Run nothing else on the machine meanwhile.

``--processes K``: each side in JVMs of its own instead, K processes a side, alternated (base,
new, base, new ...), each a warm-up run and then ``--runs`` counted runs; prints each side's
best and median over all its counted runs. Use it for code Spark evaluates interpreted (inside
``transform`` and other lambdas): in one JVM both sides share the JIT's profile of each
expression's ``eval``, which blurs the difference (dts-avro, session 54: 0.91-0.98 in one JVM
for changes that separate JVMs put near 0.85-0.9).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import compare  # noqa: E402  (bench/compare.py: the decode and floor rows)

from cdclake import formats  # noqa: E402
from cdclake.spark import get_spark  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("format", choices=formats.names())
    ap.add_argument("file")
    ap.add_argument("--toggle", required=True, help="Python file defining TOGGLE(on: bool)")
    ap.add_argument("--runs", type=int, default=3, help="counted rounds (default 3), after one warm-up round")
    ap.add_argument("--processes", type=int, default=0, help="K JVMs a side, alternated, instead of one JVM (see above)")
    ap.add_argument("--side", choices=("base", "new"), help=argparse.SUPPRESS)  # one process of --processes
    args = ap.parse_args(argv)
    if not Path(args.file).is_file() or not Path(args.toggle).is_file():
        ap.error(f"no such file: {args.file if not Path(args.file).is_file() else args.toggle}")
    if args.processes > 0 and not args.side:
        return in_processes(args)

    spark = get_spark()
    scope = {"spark": spark, "dec": formats.get(args.format)}
    exec(compile(Path(args.toggle).read_text(), args.toggle, "exec"), scope)
    toggle = scope.get("TOGGLE")
    if not callable(toggle):
        ap.error(f"{args.toggle} defines no TOGGLE(on)")

    if args.side:  # one process of --processes: a warm-up, then the counted runs, one line
        toggle(args.side == "new")
        runs = []
        for r in range(args.runs + 1):
            t = time.perf_counter()
            compare.parse_row(spark, "decode", args.format, args.file)
            if r > 0:
                runs.append(time.perf_counter() - t)
        print("RUNS " + " ".join(f"{x:.3f}" for x in runs), flush=True)
        return 0

    floor_kind = "from_json" if args.format == "canal-json" else "floor"
    sides = {
        "base": lambda: (toggle(False), compare.parse_row(spark, "decode", args.format, args.file)),
        "new": lambda: (toggle(True), compare.parse_row(spark, "decode", args.format, args.file)),
        "floor": lambda: compare.parse_row(spark, floor_kind, args.format, args.file),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.runs + 1):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for name in order:
            t = time.perf_counter()
            sides[name]()
            if r > 0:
                times[name].append(time.perf_counter() - t)
    toggle(False)
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    for name, v in times.items():
        ratio = f"  {med[name] / med['floor']:.2f}x the floor" if name != "floor" else ""
        print(f"{args.format} {name:5s} median {med[name]:7.2f} s  runs {' '.join(f'{x:.2f}' for x in v)}{ratio}")
    print(f"new / base: {med['new'] / med['base']:.3f}")
    return 0


def in_processes(args) -> int:
    """``--processes``: each side's runs in JVMs of their own, the sides alternated."""
    times: dict[str, list[float]] = {"base": [], "new": []}
    for k in range(args.processes):
        for side in ("base", "new") if k % 2 == 0 else ("new", "base"):
            cmd = [sys.executable, __file__, args.format, args.file, "--toggle", args.toggle,
                   "--runs", str(args.runs), "--side", side]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RUNS ")), None)
            if proc.returncode != 0 or line is None:
                print(f"{side} process failed (exit {proc.returncode}): {proc.stderr[-1500:]}", file=sys.stderr)
                return 1
            times[side] += [float(x) for x in line.split()[1:]]
            print(f"  {side} {line[5:]}", flush=True)
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    for side, v in times.items():
        print(f"{args.format} {side:4s} best {min(v):7.2f} s  median {statistics.median(v):7.2f} s  ({len(v)} runs)")
    print(f"new / base: best {min(times['new']) / min(times['base']):.3f}, "
          f"median {statistics.median(times['new']) / statistics.median(times['base']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
