"""One policy's runs in one cell of a `tierkit compare --seeds` directory, seed by seed:
its slowdown, its runtime over first-touch's in the same seed, its tiering CPU and
the policy statistics named (`summary.json`'s `policy_stats`), to see what moves a
policy's result with the seed:

    python3 docs/scripts/seed-stats.py OUT WORKLOAD MACHINE RATIO POLICY [STAT ...]

e.g. `seed-stats.py OUT xgboost cxl 1:32 freqtier samples intensity_lowered`.
"""
import csv, json, os, re, sys

if len(sys.argv) < 6:
    sys.exit("usage: seed-stats.py OUT WORKLOAD MACHINE RATIO POLICY [STAT ...]")
out, workload, machine, ratio, policy = sys.argv[1:6]
stats = sys.argv[6:]
seed_dirs = sorted(
    (d for d in os.listdir(out) if re.fullmatch(r"seed-\d+", d)), key=lambda d: int(d[5:])
)
head = ["seed", "slowdown", "over first-touch", "tiering CPU s"] + stats
print("| " + " | ".join(head) + " |")
print("|" + "---:|" * len(head))
for d in seed_dirs:
    rows = {
        r["policy"]: r
        for r in csv.DictReader(open(os.path.join(out, d, "results.csv")))
        if (r["workload"], r["machine"], r["ratio"]) == (workload, machine, ratio)
    }
    if policy not in rows:
        continue
    mine = rows[policy]
    summary = json.load(open(os.path.join(out, d, "runs", mine["id"], "summary.json")))
    by_name = dict(summary.get("policy_stats", []))
    first_touch = rows.get("first-touch")
    over = (
        f"{float(mine['sim_seconds']) / float(first_touch['sim_seconds']):.3f}"
        if first_touch
        else "—"
    )
    cells = [d[5:], f"{float(mine['slowdown']):.3f}", over, f"{summary['tiering_cpu_seconds']:.1f}"]
    cells += [f"{by_name[s]:.0f}" if s in by_name else "—" for s in stats]
    print("| " + " | ".join(cells) + " |")
