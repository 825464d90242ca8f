"""One policy's cells of a `tierkit compare` run, as a Markdown table: machine time,
slowdown against all-fast, fast memory saved against first-touch (time-weighted mean
use), fast-access ratio, promoted and demoted pages.

    python3 docs/scripts/policy-cells.py DIR/results.csv POLICY

The policy pages' "Measured" tables that quote a suite are printed by this script
from that suite's results (the command is given next to each table).
"""
import csv
import sys

if len(sys.argv) != 3:
    sys.exit("usage: policy-cells.py RESULTS.csv POLICY")
path, policy = sys.argv[1], sys.argv[2]
rows = [r for r in csv.DictReader(open(path)) if r["policy"] == policy]
if not rows:
    sys.exit(f"no run of policy {policy!r} in {path}")


def pct(x):
    return "n/a" if x in ("", "NA") else f"{float(x) * 100:.1f}%"


print("| workload | machine | ratio | machine time | slowdown vs all-fast | fast memory saved vs first-touch | fast-access ratio | promoted / demoted pages |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for r in rows:
    print(
        f"| {r['workload']} | {r['machine']} | {r['ratio']} | {float(r['sim_seconds']):.1f} s"
        f" | {float(r['slowdown']):.3f} | {pct(r['fast_saving_vs_first_touch'])}"
        f" | {float(r['fast_access_ratio']):.3f} | {int(r['promoted_pages']):,} / {int(r['demoted_pages']):,} |".replace(",", " ")
    )
