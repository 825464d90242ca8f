#!/usr/bin/env bash
# Which spec §7 oracles of each paper have a test named after them (`fn oracle_NN_…`,
# several numbers allowed: `oracle_06_08_…`). Usage: docs/scripts/oracle-coverage.sh
# Prints, per paper, the oracle numbers with a test and those without one, and the
# oracles whose test is `#[ignore]`d because the simulator does not reproduce them
# (run those with `cargo test -- --ignored`); the policy page says why for each.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The number of oracles in each spec's §7 (../shared/specs/<paper>.md).
declare -A oracles=([chrono]=18 [memtis]=28 [freqtier]=22 [multiclock]=25 [pet]=29)
declare -A dirs=(
    [chrono]="crates/policies/src/chrono"
    [memtis]="crates/policies/src/memtis"
    [freqtier]="crates/policies/src/freqtier"
    [multiclock]="crates/policies/src/multiclock crates/policies/src/nimble.rs"
    [pet]="crates/policies/src/pet"
)
for paper in chrono memtis freqtier multiclock pet; do
    total=${oracles[$paper]}
    # shellcheck disable=SC2086
    have=$({ grep -rhoE "fn oracle(_[0-9]{2})+" ${dirs[$paper]} 2>/dev/null || true; } \
        | { grep -oE "_[0-9]{2}" || true; } | tr -d _ | sed 's/^0//' | sort -n | uniq)
    # An ignored test: `#[ignore…]` on one of the two lines before its `fn`.
    # shellcheck disable=SC2086
    ignored=$({ grep -rh -B2 -E "fn oracle(_[0-9]{2})+" ${dirs[$paper]} 2>/dev/null || true; } \
        | awk '/#\[ignore/ {ig = 1; next} /fn oracle_/ {if (ig) print; ig = 0; next} /^--$/ {ig = 0}' \
        | { grep -oE "fn oracle(_[0-9]{2})+" || true; } | { grep -oE "_[0-9]{2}" || true; } \
        | tr -d _ | sed 's/^0//' | sort -n | uniq | tr '\n' ' ')
    missing=""
    for i in $(seq 1 "$total"); do
        grep -qx "$i" <<<"$have" || missing="$missing $i"
    done
    echo "$paper: $(wc -w <<<"$have") of $total oracles tested: $(tr '\n' ' ' <<<"$have")| without a test:${missing:- none} | ignored, not reproduced: ${ignored:-none}"
done
