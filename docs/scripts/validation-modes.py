"""Two or more `tierkit compare --validate-sampling` runs of one matrix side by side
(e.g. `sim.sampled_compute` "kept" and "carried"), as Markdown tables.

Per cell: the signed error in slowdown of each sampled results.csv against the exact
one, for the cells of WORKLOAD (all workloads if omitted):

    python3 docs/scripts/validation-modes.py cells OUT/rate-1/results.csv \
        "1/8 kept=KEPT-1-8.csv" "1/8 carried=CARRIED-1-8.csv" [--workload zipf-kv]

Per policy: the median / largest |error| of each sampling.csv (the command's own
summary), rate by rate:

    python3 docs/scripts/validation-modes.py summary "kept=KEPT/sampling.csv" "carried=CARRIED/sampling.csv"

The second run of a matrix into the same --out rewrites its rate directories'
results.csv and sampling.csv, so copy the first run's aside before it.
"""
import csv
from fractions import Fraction
import sys


def load(path, key):
    return {key(r): r for r in csv.DictReader(open(path))}


def labelled(args):
    out = []
    for a in args:
        label, _, path = a.partition("=")
        if not path:
            sys.exit(f"expected LABEL=PATH, got {a!r}")
        out.append((label, path))
    return out


def cells(argv):
    workload = None
    if "--workload" in argv:
        i = argv.index("--workload")
        workload = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    cell = lambda r: (r["workload"], r["policy"])
    exact = load(argv[0], cell)
    runs = [(label, load(path, cell)) for label, path in labelled(argv[1:])]
    print("| workload | policy | slowdown exact | " + " | ".join(l for l, _ in runs) + " |")
    print("|---|---|---:|" + "---:|" * len(runs))
    for key in sorted(exact):
        if workload and key[0] != workload:
            continue
        e = float(exact[key]["slowdown"])
        row = []
        for _, rows in runs:
            s = rows.get(key)
            row.append("—" if s is None else f"{(float(s['slowdown']) - e) / e:+.2%}")
        print(f"| {key[0]} | {key[1]} | {e:.3f} | " + " | ".join(row) + " |")


def summary(argv):
    key = lambda r: (r["rate"], r["policy"])
    runs = [(label, load(path, key)) for label, path in labelled(argv)]
    keys = sorted(runs[0][1], key=lambda k: (-Fraction(k[0]), k[1]))
    print("| policy | rate | " + " | ".join(f"{l} median / max" for l, _ in runs) + " |")
    print("|---|---|" + "---:|" * len(runs))
    for k in keys:
        row = []
        for _, rows in runs:
            r = rows.get(k)
            row.append(
                "—"
                if r is None
                else f"{float(r['median_slowdown_error']):.2%} / {float(r['max_slowdown_error']):.2%}"
            )
        print(f"| {k[1]} | {k[0]} | " + " | ".join(row) + " |")


if len(sys.argv) < 3 or sys.argv[1] not in ("cells", "summary"):
    sys.exit(__doc__)
{"cells": cells, "summary": summary}[sys.argv[1]](sys.argv[2:])
