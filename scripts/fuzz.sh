#!/usr/bin/env bash
# Fuzz the parsers that read untrusted input (the SSE parser, the report
# reader, the plan/suite/policy parser) with cargo-fuzz, each for a bounded
# time, one target at a time. See docs/fuzzing.md.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 60; targets default to: sse report plan compare dataset names
#
# Installs cargo-fuzz if missing (cargo install cargo-fuzz --locked). cargo
# fuzz needs nightly compiler flags (-Zsanitizer, sanitizer coverage); on the
# stable toolchain RUSTC_BOOTSTRAP=1 lets rustc accept them. Builds with
# AddressSanitizer and with debug assertions and overflow checks (-a).
#
# Each target starts from the committed seeds (fuzz/corpus/<target>/), the
# committed findings (fuzz/regressions/<target>/) and a working corpus that
# the fuzzer grows in fuzz/work/<target>/ (gitignored, kept between runs so
# coverage accumulates). Crashes, timeouts and
# out-of-memory inputs land in fuzz/artifacts/<target>/ (gitignored): copy a
# fixed one to fuzz/regressions/<target>/ so `cargo test --lib fuzzing`
# replays it.
#
# Prints executions, exec/s and any finding per target; exits 1 if a target
# found one, 2 on a setup or build error.
#
# Environment:
#   FUZZ_SANITIZER   address (default) or none
#   FUZZ_TIMEOUT     seconds one input may take before it counts as a hang (default 10)
#   FUZZ_RSS_MB      memory limit in MB (default 2048)
#   FUZZ_WORK_DIR    working corpora and logs (default fuzz/work)
#   CARGO_BUILD_JOBS parallel compile jobs (default 1: this is a 2-core machine)
set -uo pipefail

SECS="${1:-60}"
shift || true
if ! [[ "$SECS" =~ ^[0-9]+$ ]] || [ "$SECS" -lt 1 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]" >&2
    exit 2
fi
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(sse report plan compare dataset names)

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ="$ROOT/fuzz"
SANITIZER="${FUZZ_SANITIZER:-address}"
TIMEOUT="${FUZZ_TIMEOUT:-10}"
RSS_MB="${FUZZ_RSS_MB:-2048}"
WORK="${FUZZ_WORK_DIR:-$FUZZ/work}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked || { echo "cannot install cargo-fuzz" >&2; exit 2; }
fi

cd "$FUZZ"
FLAGS=(-a -s "$SANITIZER")
echo "== building fuzz targets ($(cargo fuzz --version), sanitizer $SANITIZER, $(rustc --version))"
if ! cargo fuzz build "${FLAGS[@]}"; then
    echo "build failed" >&2
    exit 2
fi

mkdir -p "$WORK/logs"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
SUMMARY=()
FOUND=0
for t in "${TARGETS[@]}"; do
    if [ ! -f "fuzz_targets/$t.rs" ]; then
        echo "no such target: $t" >&2
        exit 2
    fi
    mkdir -p "$WORK/$t" "artifacts/$t"
    log="$WORK/logs/$t-$STAMP.log"
    dict=()
    [ -f "dict/$t.dict" ] && dict=(-dict="dict/$t.dict")
    echo "== $t: up to ${SECS}s (log: $log)"
    start=$(date +%s)
    # New inputs go to the first corpus directory (the working one); the seeds
    # and past findings are only read.
    seeds=("corpus/$t")
    [ -d "regressions/$t" ] && seeds+=("regressions/$t")
    cargo fuzz run "${FLAGS[@]}" "$t" "$WORK/$t" "${seeds[@]}" -- \
        -max_total_time="$SECS" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
        -print_final_stats=1 "${dict[@]}" >"$log" 2>&1
    rc=$?
    elapsed=$(($(date +%s) - start))
    stat() { grep -m1 "^stat::$1:" "$log" | awk '{print $2}'; }
    execs="$(stat number_of_executed_units)"
    rate="$(stat average_exec_per_sec)"
    added="$(stat new_units_added)"
    rss="$(stat peak_rss_mb)"
    cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
    corpus="$(find "$WORK/$t" -type f | wc -l)"
    artifact="$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -1 | awk '{print $5}')"
    if [ "$rc" -eq 0 ]; then
        result="ok"
    else
        FOUND=1
        kind="$(grep -m1 -oE 'ERROR: libFuzzer: [a-z -]+|panicked at [^ ]+' "$log" || true)"
        result="FINDING (exit $rc${kind:+: $kind})${artifact:+ $artifact}"
        grep -m1 -A3 "panicked at" "$log" || true
    fi
    # Fuzzing time as libFuzzer counts it; after a finding, executions / rate.
    secs="$(grep -oE '^Done [0-9]+ runs in [0-9]+ second' "$log" | awk '{print $5}')"
    if [ -z "$secs" ] && [ -n "$execs" ] && [ "${rate:-0}" -gt 0 ]; then
        secs="~$((execs / rate))"
    fi
    line="$t: ${execs:-?} executions in ${secs:-?}s of fuzzing (${elapsed}s wall, build check included), ${rate:-?} exec/s, cov ${cov:-?}, ${added:-?} new units (working corpus $corpus), peak RSS ${rss:-?} MB: $result"
    echo "$line"
    SUMMARY+=("$line")
done

echo
echo "== summary ($STAMP)"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$WORK/logs/summary.txt"
if [ "$FOUND" -ne 0 ]; then
    echo "reproduce: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run ${FLAGS[*]} <target> <artifact>"
    echo "then copy the input to fuzz/regressions/<target>/ so cargo test replays it"
fi
exit "$FOUND"
