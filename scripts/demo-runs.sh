#!/usr/bin/env bash
# Does the main job decide on this machine, every time, and at what cost?
# Runs the demo qualification (plans/reference.toml) N times and its A/A twin
# (plans/reference-aa.toml, the baseline profile on both sides) M times, one
# after another, each with --then-stop, and prints one row per run: the
# verdict, the adaptive rounds, the requests per side of each cell, the
# minutes the qualify command took, and the cost in rounds against the
# block-level known-variance oracle (scripts/block-oracle.py, which reads
# the runs' pooled samples and shares no code with infergate's gate).
#
#   scripts/demo-runs.sh [--demo N] [--aa M] [--out FILE]   (default 6, 3)
#
# Each run is a few minutes of both cores: run it on a quiet machine, as
# the numbers in docs/reference-engine.md were. Rows are appended to FILE
# (default out/demo-runs/runs.jsonl) as runs finish.
set -euo pipefail
cd "$(dirname "$0")/.."

demo=6 aa=3 out=out/demo-runs/runs.jsonl
while (($#)); do
    case "$1" in
        --demo) demo=$2; shift 2 ;;
        --aa) aa=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) echo "demo-runs: unknown argument $1 (try --help)" >&2; exit 2 ;;
    esac
done

scripts/setup-engine.sh >&2
cargo build --release --quiet
mkdir -p "$(dirname "$out")"

run() { # PLAN KIND N
    local id
    id="runs-$2$3-$(date -u +%Y%m%dT%H%M%SZ)"
    local t0 rc
    t0=$(date +%s)
    set +e
    target/release/infergate qualify "$1" --id "$id" --then-stop --quiet >"out/demo-runs/$id.log" 2>&1
    rc=$?
    set -e
    python3 scripts/block-oracle.py "out/qualify/$id" --kind "$2" --exit "$rc" \
        --seconds "$(($(date +%s) - t0))" | tee -a "$out"
}

for i in $(seq 1 "$demo"); do run plans/reference.toml demo "$i"; done
for i in $(seq 1 "$aa"); do run plans/reference-aa.toml aa "$i"; done
python3 scripts/block-oracle.py --table "$out"
