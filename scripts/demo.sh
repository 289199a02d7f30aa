#!/usr/bin/env bash
# The main job, end to end on this machine: a real qualification of the
# bundled reference engine's two profiles (plans/reference.toml, through the
# `process` driver). Sets up the engine (cached after the first run), builds
# infergate, runs
#
#   infergate qualify plans/reference.toml
#
# (preflight; both profiles started, each cell's requests interleaved
# between them in blocks, A B B A; compare; report; decision left pending;
# baseline restored and readmitted), and ends with the rendered report. Every step is in the ledger: `infergate status <id>`.
#
# By default the demo then retires the baseline it left serving, so nothing
# keeps running. With --keep-serving it stays up, and you can decide:
#   target/release/infergate decide out/qualify/<id>/report.json --retain-baseline --note "why"
#   target/release/infergate stop <id>
#
# Environment: INFERGATE_LEDGER (default $XDG_DATA_HOME/infergate/ledger.sqlite),
# INFERGATE_CACHE (engine cache, default ~/.cache/infergate).
set -euo pipefail
cd "$(dirname "$0")/.."

keep=0
for arg in "$@"; do
    case "$arg" in
        --keep-serving) keep=1 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "demo: unknown argument $arg (try --help)" >&2
            exit 2
            ;;
    esac
done

say() { printf '\n== %s\n' "$*" >&2; }

say "reference engine (scripts/setup-engine.sh)"
scripts/setup-engine.sh >&2

say "building infergate (release)"
cargo build --release --quiet

id="reference-$(date -u +%Y%m%dT%H%M%SZ)"
args=(qualify plans/reference.toml --id "$id")
((keep)) || args+=(--then-stop)
say "infergate ${args[*]}"
# 0 qualified, 1 not qualified, 3 inconclusive (the evidence could not decide):
# all are a finished demo. 2 is a failure.
started=$(date +%s)
set +e
target/release/infergate "${args[@]}"
rc=$?
set -e
if ((rc == 2 || rc > 3)); then
    echo "demo: the qualification did not finish (exit $rc); see: target/release/infergate status $id" >&2
    exit "$rc"
fi
# The verdict and what it cost, from the report itself.
report="out/qualify/$id/report.json"
if [[ -f "$report" ]]; then
    python3 - "$report" "$(($(date +%s) - started))" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
g = (r.get("gates") or {}).get("performance_evidence") or {}
cells = r.get("cells", {})
measured = sum(c.get("baseline_requests", 0) + c.get("candidate_requests", 0) for c in cells.values())
turn = sum(t.get("requests", 0) for k, t in r.items() if k.endswith("_turnover") or "_turnover_repeat" in k)
print()
print(f"== verdict: performance evidence {g.get('outcome', '?')}; qualification: {r.get('qualification')}")
need = g.get("requests_to_resolve")
if need:
    print(f"   about {need} requests per side per cell would decide it")
used, oracle = g.get("requests_per_side"), g.get("oracle_requests_per_side")
block, effect = g.get("block_oracle_requests_per_side"), g.get("design_effect")
learning = g.get("learning_oracle_requests_per_side")
def times(x):
    # As the report's cost line: a small ratio never rounds to a "0.0x" that reads as free.
    if x >= 10: return f"{x:.0f}x"
    if x >= 1: return f"{x:.1f}x"
    if x >= 0.001: return f"{x:.{1 - math.floor(math.log10(x))}f}x"
    return "under 0.001x"
if used and (block or oracle):
    # The report's own cost line (render::view::evidence::cost_lines): while
    # undecided, what would decide the metric closest to deciding and what
    # would decide all, never a ratio of what was spent to either.
    key = "block_oracle_requests_per_side" if block else "oracle_requests_per_side"
    need, on = (block, "on the blocks") if block else (oracle, "on independent requests")
    if g.get("outcome") == "inconclusive":
        closest = min((p[key] for p in g.get("parts", []) if p.get("outcome") == "inconclusive" and p.get(key)), default=None)
        if closest is not None and closest < need:
            line = f"needs {closest} to decide the metric closest to deciding, {need} to decide all"
        else:
            line = f"needs {need} to decide it"
        print(f"   evidence cost: {used} requests per side so far; a known-variance oracle {on} {line}")
    else:
        print(f"   evidence cost: {used} requests per side decided it, {times(used / need)} the {need} a known-variance oracle {on} needs")
    if block and oracle:
        print(f"   on independent requests the oracle needs {oracle}" + (f" (design effect {times(effect)})" if effect else "") + (f"; one that learns the spread, {learning}" if learning else ""))
print(f"   cost: {measured} measured requests (both sides, warmups and probes not counted), {turn} turnover requests, {int(sys.argv[2]) / 60:.1f} minutes")
PY
    # The report made again from the journals the qualification wrote.
    say "infergate verify out/qualify/$id"
    target/release/infergate verify "out/qualify/$id" || {
        echo "demo: the report does not verify against its own runs" >&2
        exit 1
    }
fi
exit 0
