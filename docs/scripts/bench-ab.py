"""Interleaved `tierkit bench` rounds of two or more builds as one Markdown table of
medians: per case, each build's median rate and median fraction of the limit.

LOG holds the rounds, each build's output after a line `== LABEL`, e.g. from

    for i in 1 2 3 4 5; do for b in before after; do echo "== $b"; \
        ./tierkit-$b bench --reps 1 --accesses 30000000; done; done > LOG 2>&1

    python3 docs/scripts/bench-ab.py LOG

Columns follow the labels' first appearance; a case a build did not print shows "—".
"""
import re
import statistics
import sys

ROW = re.compile(r"^(\S.*?)\s+([\d.]+) M\s+([\d.]+)$")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench-ab.py LOG")
    label, labels, cases = None, [], {}
    for line in open(sys.argv[1]):
        line = line.rstrip()
        if line.startswith("== "):
            label = line[3:].strip()
            if label not in labels:
                labels.append(label)
            continue
        m = ROW.match(line)
        if m and label is not None:
            runs = cases.setdefault(m.group(1), {}).setdefault(label, [])
            runs.append((float(m.group(2)), float(m.group(3))))
    if not cases:
        sys.exit(f"no bench rows after a '== LABEL' line in {sys.argv[1]}")
    print("| case | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for case, by_label in cases.items():
        cells = []
        for lab in labels:
            runs = by_label.get(lab)
            if not runs:
                cells.append("—")
                continue
            rate = statistics.median(r for r, _ in runs)
            frac = statistics.median(f for _, f in runs)
            cells.append(f"{rate:.1f} M/s ({frac:.2f}, n={len(runs)})")
        print(f"| {case} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
