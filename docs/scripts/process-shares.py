"""Each policy's fast-tier share of every process's resident pages at the end of a
multi-process run (`summary.json`: `processes`), averaged over groups of processes, as
a Markdown table: for `pmbench-ladder`'s 50 processes, groups of five delay classes
(class 0 = no delay, hottest), Chrono's Fig. 9 at the end of the run.

    python3 docs/scripts/process-shares.py DIR WORKLOAD [GROUP]

DIR is a `tierkit compare` output (its results.csv and runs/); GROUP is how many
consecutive processes share a column (default 5).
"""
import csv
import json
import os
import sys

if len(sys.argv) not in (3, 4):
    sys.exit("usage: process-shares.py DIR WORKLOAD [GROUP]")
out, workload = sys.argv[1], sys.argv[2]
group = int(sys.argv[3]) if len(sys.argv) == 4 else 5
rows = [r for r in csv.DictReader(open(os.path.join(out, "results.csv"))) if r["workload"] == workload]
if not rows:
    sys.exit(f"no run of workload {workload!r} in {out}")
table = []
for r in rows:
    s = json.load(open(os.path.join(out, "runs", r["id"], "summary.json")))
    procs = s.get("processes")
    if not procs:
        sys.exit(f"run {r['id']} lists no processes (one process, or written before 2026-11-28)")
    share = [p["fast_pages"] / max(1, p["resident_pages"]) for p in procs]
    groups = [share[i : i + group] for i in range(0, len(share), group)]
    table.append((float(r["sim_seconds"]), r["policy"], [sum(g) / len(g) for g in groups], float(r["fast_access_ratio"])))
n = len(table[0][2])
heads = [f"{i * group}–{min((i + 1) * group, len(procs)) - 1}" for i in range(n)]
print(f"{workload}, {rows[0]['machine']} {rows[0]['ratio']}, sample rate {rows[0]['sample_rate']}: "
      f"fast share of each group's resident pages at the end")
print()
print("| policy | " + " | ".join(heads) + " | fast-access ratio | machine time |")
print("|---|" + "---:|" * (n + 2))
for secs, policy, g, fmar in sorted(table, key=lambda t: -t[2][0]):
    print(f"| {policy} | " + " | ".join(f"{x:.2f}" for x in g) + f" | {fmar:.3f} | {secs:.1f} s |")
