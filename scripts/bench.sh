#!/usr/bin/env bash
# Regenerate BENCHMARKS.md, the load client's own performance (issue 8):
# timing error against a known schedule, throughput beside a raw hyper client
# and AIPerf, CPU per streamed chunk, peak memory, and aggregation + compare
# time for 1M request records.
#
# Usage: scripts/bench.sh [--quick]
#
# Builds everything in release first (nothing compiles while measuring),
# installs AIPerf with pip into a venv under
# ${INFERGATE_CACHE:-$HOME/.cache/infergate}/bench/ (a failure to install or
# run is recorded in the table), then runs the bench binaries directly.
# Everything talks to 127.0.0.1 only. About 3 minutes on 2 cores, plus the build.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE="${INFERGATE_CACHE:-$HOME/.cache/infergate}/bench"
OUT="$ROOT/BENCHMARKS.md"
QUICK=()
if [[ "${1:-}" == "--quick" ]]; then
    QUICK=(--quick)
fi
mkdir -p "$CACHE"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
log() { printf 'bench: %s\n' "$*" >&2; }

# The machine as it is when the run starts.
START_S=$(date +%s)
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
NPROC=$(nproc)
CPU_MODEL=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MEM=$(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
KERNEL=$(uname -r)
RUSTC=$(rustc --version)
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- src benches Cargo.toml 2>/dev/null; then
    REV="$REV + uncommitted changes"
fi

log "building (release)"
cargo build --release --quiet
cargo bench --no-run --quiet --message-format=json >"$WORK/build.json"
bench_bin() {
    python3 - "$1" "$WORK/build.json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
exe = ""
for line in open(path):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and t.get("name") == name and "bench" in t.get("kind", []) and m.get("executable"):
        exe = m["executable"]
print(exe)
PY
}
TIMING=$(bench_bin timing)
THROUGHPUT=$(bench_bin throughput)
COMPARE=$(bench_bin compare)
for b in "$TIMING" "$THROUGHPUT" "$COMPARE"; do
    [[ -x "$b" ]] || { log "bench binary missing: $b"; exit 1; }
done

# AIPerf, in its own venv. Its `builtin` tokenizer downloads an encoding from
# the internet, so a small local word-level tokenizer is written into a
# Hugging Face cache of our own and AIPerf runs offline.
VENV="$CACHE/aiperf-venv"
HF_CACHE="$CACHE/hf-hub"
AIPERF_NOTE=""
AIPERF_ARGS=()
if [[ ! -x "$VENV/bin/aiperf" ]]; then
    log "installing AIPerf into $VENV"
    if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install --quiet aiperf; } >"$WORK/pip.log" 2>&1; then
        AIPERF_NOTE="\`pip install aiperf\` failed: $(tail -n 1 "$WORK/pip.log")"
    fi
fi
if [[ -z "$AIPERF_NOTE" ]]; then
    if ! "$VENV/bin/python" - "$HF_CACHE" >"$WORK/tok.log" 2>&1 <<'PY'
import json, os, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
repo = os.path.join(sys.argv[1], "models--local--infergate-bench-tokenizer")
snap = os.path.join(repo, "snapshots", "0" * 40)
os.makedirs(snap, exist_ok=True)
os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
vocab = {"[UNK]": 0, "tok": 1, **{f"w{i}": i for i in range(2, 4096)}}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
tok.save(os.path.join(snap, "tokenizer.json"))
with open(os.path.join(snap, "tokenizer_config.json"), "w") as f:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
               "model_max_length": 1000000}, f)
with open(os.path.join(repo, "refs", "main"), "w") as f:
    f.write("0" * 40)
PY
    then
        AIPERF_NOTE="AIPerf installed, but writing its local tokenizer failed: $(tail -n 1 "$WORK/tok.log")"
    else
        AIPERF_ARGS=(--aiperf "$VENV/bin/aiperf" --aiperf-hf-cache "$HF_CACHE")
    fi
fi

# Each run's stdout is a markdown section; a failure is written into it.
run() {
    local name=$1 rc=0
    shift
    log "running $name: ${*##*/}"
    "$@" >"$WORK/$name.md" 2>"$WORK/$name.err" || rc=$?
    if ((rc != 0)); then
        printf '\n**%s failed** (exit status %s): %s\n' "$name" "$rc" \
            "$(tail -n 3 "$WORK/$name.err" | tr '\n' ' ')" >>"$WORK/$name.md"
    fi
}
run timing "$TIMING"
run timing-pinned "$TIMING" --pin
# Real-time priority shows the client's error without other tenants'
# preemption; the timing runs are short and mostly asleep.
RT_NOTE=""
if chrt -f 10 true 2>/dev/null; then
    run timing-rt chrt -f 10 "$TIMING"
    run timing-rt-pinned chrt -f 10 "$TIMING" --pin
else
    RT_NOTE="Real-time priority (\`chrt -f 10\`) was not permitted here, so the timing runs without other tenants' preemption are missing."
fi
run throughput "$THROUGHPUT" "${QUICK[@]}" "${AIPERF_ARGS[@]}"
run throughput-pinned "$THROUGHPUT" --pin "${QUICK[@]}" "${AIPERF_ARGS[@]}"
run compare "$COMPARE"
END_S=$(date +%s)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

section() { grep -v '^SUMMARY|' "$WORK/$1.md" || true; }
{
    echo "# Benchmarks: the load client's own performance"
    echo
    echo "Generated by \`scripts/bench.sh${QUICK:+ --quick}\` on $START (infergate $REV, $RUSTC), in $((END_S - START_S)) s."
    echo "Regenerate with:"
    echo
    echo '```sh'
    echo "scripts/bench.sh"
    echo '```'
    echo
    echo "## Machine"
    echo
    echo "- $NPROC CPUs: $CPU_MODEL; $MEM memory; Linux $KERNEL"
    echo "- load average at start: $LOAD (at end: $LOAD_END)"
    echo "- A shared VM: other tenants' work (here, tests against a real llama.cpp engine) runs on the same $NPROC cores."
    echo "  The fast source, the client under test and AIPerf share those cores too, except where a table says they were pinned."
    echo
    echo "## Targets (issue 8)"
    echo
    echo "| measurement | result | target | status |"
    echo "|---|---|---|---|"
    for s in timing timing-pinned timing-rt timing-rt-pinned throughput throughput-pinned compare; do
        [[ -f "$WORK/$s.md" ]] || continue
        grep '^SUMMARY|' "$WORK/$s.md" | awk -F'|' '{ printf "| %s | %s | %s | %s |\n", $2, $3, $4, $5 }' || true
    done
    if [[ -n "$AIPERF_NOTE" ]]; then
        echo "| AIPerf | $AIPERF_NOTE | — | not measured |"
    fi
    echo
    [[ -n "$RT_NOTE" ]] && { echo "$RT_NOTE"; echo; }
    echo "## Timing accuracy"
    echo
    for s in timing timing-pinned timing-rt timing-rt-pinned; do
        [[ -f "$WORK/$s.md" ]] && { section "$s"; echo; }
    done
    echo "## Throughput, CPU and memory"
    echo
    section throughput
    echo
    section throughput-pinned
    echo
    echo "## Aggregation + compare"
    echo
    section compare
    echo
    cat "$ROOT/scripts/bench-notes.md"
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "wrote $OUT"
