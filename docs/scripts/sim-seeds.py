"""`tierkit sim` runs of one cell over seeds, side by side: per seed and per labelled
set of runs (a build, a rate), the run's machine time, its error against an exact
run's time, and a policy statistic, as a Markdown table, with each set's median and
range and how many of its runs are within a bound:

    python3 docs/scripts/sim-seeds.py EXACT_S SEEDS "LABEL=DIR_WITH_{seed}" ... \
        [--stat NAME] [--bound PCT]

EXACT_S is the exact run's machine time in seconds, SEEDS a range (42-51) or a comma
list, each DIR_WITH_{seed} a `tierkit sim --out` directory with `{seed}` where the
seed goes. E.g. `sim-seeds.py 71.69 42-51 "1/64=OUT/s{seed}-1-64" --stat
scan_passes_pid0`.
"""
import json, statistics, sys


def seeds_of(spec):
    if "-" in spec:
        lo, hi = spec.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in spec.split(",")]


args = sys.argv[1:]
stat, bound = None, 3.0
if "--stat" in args:
    i = args.index("--stat")
    stat = args[i + 1]
    del args[i : i + 2]
if "--bound" in args:
    i = args.index("--bound")
    bound = float(args[i + 1])
    del args[i : i + 2]
if len(args) < 3:
    sys.exit(__doc__)
exact, seeds = float(args[0]), seeds_of(args[1])
sets = [a.split("=", 1) for a in args[2:]]

cells = {}
for label, pattern in sets:
    for seed in seeds:
        s = json.load(open(pattern.format(seed=seed) + "/summary.json"))
        extra = dict(s["policy_stats"]).get(stat) if stat else None
        cells[label, seed] = (s["sim_seconds"], extra)

print("| seed | " + " | ".join(label for label, _ in sets) + " |")
print("|---:|" + "---:|" * len(sets))
for seed in seeds:
    row = []
    for label, _ in sets:
        t, extra = cells[label, seed]
        text = f"{t:.2f} s ({100 * (t / exact - 1):+.1f}%)"
        if extra is not None:
            text += f", {extra:g}"
        row.append(text)
    print(f"| {seed} | " + " | ".join(row) + " |")
summary = []
for label, _ in sets:
    errs = [100 * (cells[label, s][0] / exact - 1) for s in seeds]
    within = sum(abs(e) <= bound for e in errs)
    summary.append(
        f"median {statistics.median(errs):+.1f}%, {min(errs):+.1f}% to {max(errs):+.1f}%, "
        f"{within} of {len(errs)} within {bound:g}%"
    )
print("| all | " + " | ".join(summary) + " |")
if stat:
    print(f"\n(after each time: `{stat}`; exact run {exact} s)")
