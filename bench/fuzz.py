"""The long fuzz run on demand (issue 11): damaged records through every decoder; prints the
inputs tried, the rejects by code per format, and the runs that crashed. Never run by the tests
(``tests/test_fuzz.py`` runs one bounded round in CI)::

    .venv/bin/python bench/fuzz.py --rounds 10 --per-format 500 --seed 1

Each round: ``--per-format`` mutations per decoder (:mod:`cdclake.testing.mutate`) of valid
records (each encoder's output for a simulated workload), plus the fixed hostile values (one
``--big-mb`` MB value among them), all decoded in one Spark job. A round that raises is a
crash: it is counted and its error printed, and the run goes on.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-format", type=int, default=500)
    ap.add_argument("--big-mb", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from cdclake.spark import get_spark
    from cdclake.testing.fuzz import decode_mutated, fuzz_inputs

    spark = get_spark(conf={"spark.ui.enabled": "false"})
    rnd = random.Random(args.seed)
    totals: dict[str, Counter] = {}
    tried = crashes = 0
    t0 = time.monotonic()
    for i in range(args.rounds):
        inputs = fuzz_inputs(rnd, args.per_format, big_bytes=args.big_mb * 1024 * 1024)
        n = sum(len(v) for v in inputs.values())
        try:
            counts, _ = decode_mutated(spark, inputs)
        except Exception as e:  # a crash is what this run looks for: count it, show it, go on
            crashes += 1
            print(f"round {i}: CRASH {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        tried += n
        for fmt, by_code in counts.items():
            out = sum(by_code.values())
            if out != len(inputs[fmt]):
                print(f"round {i}: {fmt}: {len(inputs[fmt])} records in, {out} out")
            totals.setdefault(fmt, Counter()).update({c or "decoded": k for c, k in by_code.items()})
        print(f"round {i}: {n} inputs, {time.monotonic() - t0:.0f} s")
    print(f"\ninputs tried: {tried} in {args.rounds} rounds ({args.per_format} mutations per format per round), crashes: {crashes}")
    codes = sorted({c for t in totals.values() for c in t})
    print("format".ljust(16) + "".join(c[:16].rjust(18) for c in codes))
    for fmt in sorted(totals):
        print(fmt.ljust(16) + "".join(str(totals[fmt].get(c, 0)).rjust(18) for c in codes))
    all_codes = Counter()
    for t in totals.values():
        all_codes.update(t)
    print("all".ljust(16) + "".join(str(all_codes.get(c, 0)).rjust(18) for c in codes))
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
