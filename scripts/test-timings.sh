#!/usr/bin/env bash
# Time the README's test command (scripts/test.sh): each phase, each test
# binary (wall time, its own CPU time, and the whole machine's busy CPU over
# its run, servers included, and any binary running beside it) and each test
# (libtest's --report-time). Writes
# OUT/phases.tsv, OUT/binaries.tsv and OUT/test.log, and prints the tables of
# docs/testing.md. "Fresh" or "warm" is the state you leave the machine in
# before running it (docs/testing.md says how each was made).
#
#   scripts/test-timings.sh [OUT]      (default target/test-timings)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "${1:-target/test-timings}" && cd "${1:-target/test-timings}" && pwd)
: >"$out/phases.tsv"
: >"$out/binaries.tsv"
command -v /usr/bin/time >/dev/null || {
    echo "test-timings: GNU time is missing (apt-get install time)" >&2
    exit 1
}
export INFERGATE_TEST_PHASES="$out/phases.tsv"
export INFERGATE_TEST_TIMINGS="$out/binaries.tsv"
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$PWD/scripts/time-test-binary.sh"
t0=$(date +%s)
rc=0
scripts/test.sh 2>&1 | tee "$out/test.log" || rc=$?
printf 'total\t%d\n' $(($(date +%s) - t0)) >>"$out/phases.tsv"
python3 scripts/test-timings-table.py "$out"
exit "$rc"
