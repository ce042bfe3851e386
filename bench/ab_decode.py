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
"""

from __future__ import annotations

import argparse
import statistics
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
    args = ap.parse_args(argv)
    if not Path(args.file).is_file() or not Path(args.toggle).is_file():
        ap.error(f"no such file: {args.file if not Path(args.file).is_file() else args.toggle}")

    spark = get_spark()
    scope = {"spark": spark, "dec": formats.get(args.format)}
    exec(compile(Path(args.toggle).read_text(), args.toggle, "exec"), scope)
    toggle = scope.get("TOGGLE")
    if not callable(toggle):
        ap.error(f"{args.toggle} defines no TOGGLE(on)")

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


if __name__ == "__main__":
    sys.exit(main())
