#!/usr/bin/env bash
# The "Measured" table of docs/policies/autotiering.md: AutoTiering's four modes on
# GUPS 256 MiB (90% of updates on a hot tenth), cxl preset, fast 1:8, LLC off, 60 M
# updates, seed 7, with fast scanner passes (as fast as Linux's scan-rate cap allows
# for 256 MiB: 128 MB every 10 ms) and with the default one-second passes.
# Usage: docs/scripts/autotiering-gups.sh [path/to/tierkit]   (prints markdown rows)
set -euo pipefail
tierkit=${1:-target/release/tierkit}
common=(--workload gups --machine cxl --ratio 1:8 --seed 7
    --set machine.llc_enabled=false --set workload.footprint_mib=256
    --set workload.nr_updates=60000000)
fast=(--set policy.scan.scan_delay_ms=10 --set policy.scan.scan_period_min_ms=10
    --set policy.scan.scan_period_max_ms=10 --set policy.scan.scan_size_mb=128
    --set policy.scan.adaptive_period=false)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
row() { # label, then tierkit sim arguments
    local label=$1
    shift
    "$tierkit" sim "$@" "${common[@]}" --out "$out/run" --force >/dev/null
    python3 - "$label" "$out/run" <<'PY'
import csv, json, sys
label, run = sys.argv[1], sys.argv[2]
s = json.load(open(f"{run}/summary.json"))
last = list(csv.DictReader(open(f"{run}/timeseries.csv")))[-1]
print(f"| {label} | {s['sim_seconds']:.2f} | {s['fast_access_ratio']:.3f} / "
      f"{float(last['fast_access_ratio']):.3f} | {s['promoted_pages']} / {s['demoted_pages']} |")
PY
}
echo "| run | simulated s | fast access ratio (run / last 100 ms) | promoted / demoted pages |"
echo "|---|---|---|---|"
row "first-touch" --policy first-touch
for mode in opm-bd opm opmx cpm; do
    row "$mode, fast passes" --policy autotiering --set "policy.mode=\"$mode\"" "${fast[@]}"
done
for mode in opm-bd opm opmx cpm; do
    row "$mode, default passes" --policy autotiering --set "policy.mode=\"$mode\""
done
