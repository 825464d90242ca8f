"""A policy's gain over a baseline per cell and seed, from a `tierkit compare --seeds`
directory (the seeds paired: one seed's two runs share a stream and a sample draw):

    python3 docs/scripts/seed-gains.py OUT POLICY BASELINE [WORKLOAD]

The gain is the baseline's slowdown over the policy's (above 1: the policy is faster),
as `tierkit claims` computes it for runtime.
"""
import csv, glob, os, re, sys

out, policy, baseline = sys.argv[1:4]
only = sys.argv[4] if len(sys.argv) > 4 else None
runs = {}
for d in sorted(glob.glob(os.path.join(out, "seed-*")), key=lambda p: int(re.sub(r"\D", "", os.path.basename(p)))):
    seed = os.path.basename(d)[len("seed-"):]
    for r in csv.DictReader(open(os.path.join(d, "results.csv"))):
        if only and r["workload"] != only:
            continue
        runs.setdefault((r["workload"], r["machine"], r["ratio"]), {}).setdefault(seed, {})[r["policy"]] = float(r["slowdown"])
seeds = sorted({s for c in runs.values() for s in c}, key=int)
print(f"{policy} over {baseline} (baseline slowdown / policy slowdown):\n")
print("| workload | machine | ratio | " + " | ".join(f"seed {s}" for s in seeds) + " | min | max |")
print("|---|---|---|" + "---:|" * (len(seeds) + 2))
for (w, m, r), by_seed in runs.items():
    gains = [by_seed[s][baseline] / by_seed[s][policy] if s in by_seed and policy in by_seed[s] and baseline in by_seed[s] else None for s in seeds]
    if all(g is None for g in gains):
        continue
    got = [g for g in gains if g is not None]
    print(f"| {w} | {m} | {r} | " + " | ".join("—" if g is None else f"{g:.3f}" for g in gains) + f" | {min(got):.3f} | {max(got):.3f} |")
