"""Every policy's run in one cell of a `tierkit compare` run, as a Markdown table:
machine time, slowdown against all-fast, fast-access ratio, placement F1, promoted
and demoted pages, hinting faults and tiering CPU (how much of that CPU stalled the
application's threads is in each run's summary.json, not in results.csv).

    python3 docs/scripts/cell-table.py [--fast-use] DIR/results.csv WORKLOAD [MACHINE RATIO]

Without MACHINE and RATIO the workload must have one cell. all-fast runs once per
workload and machine and is printed with every ratio of it. `--fast-use` adds the
run's mean fast-tier use in millions of pages (`fast_mean_used_pages`), what PET's
fast-memory claims read.
"""
import csv
import sys

fast_use = "--fast-use" in sys.argv[1:]
if fast_use:
    sys.argv.remove("--fast-use")
if len(sys.argv) not in (3, 5):
    sys.exit("usage: cell-table.py [--fast-use] RESULTS.csv WORKLOAD [MACHINE RATIO]")
path, workload = sys.argv[1], sys.argv[2]
rows = [r for r in csv.DictReader(open(path)) if r["workload"] == workload]
if not rows:
    sys.exit(f"no run of workload {workload!r} in {path}")
cells = sorted({(r["machine"], r["ratio"]) for r in rows if r["policy"] != "all-fast"})
if len(sys.argv) == 5:
    cell = (sys.argv[3], sys.argv[4])
    if cell not in cells:
        sys.exit(f"no cell {cell} of {workload!r}; cells: {cells}")
elif len(cells) == 1:
    cell = cells[0]
else:
    sys.exit(f"{workload!r} has several cells, give MACHINE RATIO: {cells}")
machine, ratio = cell
rows = [
    r
    for r in rows
    if r["machine"] == machine and (r["ratio"] == ratio or r["policy"] == "all-fast")
]

print(f"{workload}, {machine} {ratio}, sample rate {rows[0]['sample_rate']}:")
print()
extra_head, extra_rule = (" mean fast use |", "---:|") if fast_use else ("", "")
print("| policy | machine time | slowdown vs all-fast | fast-access ratio | F1 | promoted / demoted pages | hinting faults | tiering CPU |" + extra_head)
print("|---|---:|---:|---:|---:|---:|---:|---:|" + extra_rule)
for r in sorted(rows, key=lambda r: float(r["sim_seconds"])):
    extra = f" {float(r['fast_mean_used_pages']) / 1e6:.2f} M |" if fast_use else ""
    print(
        (
            f"| {r['policy']} | {float(r['sim_seconds']):.1f} s | {float(r['slowdown']):.3f}"
            f" | {float(r['fast_access_ratio']) * 100:.1f}% | {float(r['f1']):.2f}"
            f" | {int(r['promoted_pages']):,} / {int(r['demoted_pages']):,}"
            f" | {int(r['hint_faults']):,} | {float(r['tiering_cpu_seconds']):.1f} s |"
        ).replace(",", " ")
        + extra
    )
