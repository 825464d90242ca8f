"""Per-cell errors of a `tierkit compare --validate-sampling` run, as a Markdown table:
for each workload and policy, the slowdown against all-fast exactly and sampled, its
error, the fast-access ratios and the machine time of both runs. The command's own
table (sampling.md in its --out) folds the cells of a policy together; this one keeps
them apart, so a workload that fails can be told from one that passes.

    python3 docs/scripts/validation-cells.py OUT/rate-1/results.csv OUT/rate-1-16/results.csv
"""
import csv
import sys

if len(sys.argv) != 3:
    sys.exit("usage: validation-cells.py EXACT/results.csv SAMPLED/results.csv")


def load(path):
    return {(r["workload"], r["machine"], r["ratio"], r["policy"]): r for r in csv.DictReader(open(path))}


exact, sampled = load(sys.argv[1]), load(sys.argv[2])
rate = next(iter(sampled.values()))["sample_rate"]
print(f"| workload | policy | slowdown exact | at {rate} | \\|Δ slowdown\\| | fast-access exact | at {rate} | machine s exact | at {rate} |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for key in sorted(exact):
    if key not in sampled:
        continue
    e, s = exact[key], sampled[key]
    se, ss = float(e["slowdown"]), float(s["slowdown"])
    print(
        f"| {key[0]} | {key[3]} | {se:.3f} | {ss:.3f} | {abs(ss - se) / se:.2%} "
        f"| {float(e['fast_access_ratio']):.3f} | {float(s['fast_access_ratio']):.3f} "
        f"| {float(e['sim_seconds']):.2f} | {float(s['sim_seconds']):.2f} |"
    )
