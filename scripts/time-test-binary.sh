#!/usr/bin/env bash
# Cargo's target runner for scripts/test-timings.sh: runs one test binary and
# appends to $INFERGATE_TEST_TIMINGS one line per binary:
#
#   NAME <tab> wall s <tab> user s <tab> sys s <tab> max RSS KiB <tab> busy s
#
# user/sys are the binary's own and its reaped children's (GNU time); busy is
# the whole machine's non-idle CPU over the binary's run, from /proc/stat, so
# the servers it talks to count too; it is that binary's alone only when
# binaries run one at a time (scripts/run-test-binaries.py --jobs 1).
# libtest's --report-time prints each test's time; it is unstable, so it needs
# RUSTC_BOOTSTRAP in the test binary's environment (nothing is compiled here).
set -uo pipefail
out=${INFERGATE_TEST_TIMINGS:?set INFERGATE_TEST_TIMINGS to the timings file}
name=$(basename "$1")
name=${name%-????????????????} # cargo's hash suffix
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
tck=$(getconf CLK_TCK)
tmp=$(mktemp)
b0=$(busy)
RUSTC_BOOTSTRAP=1 /usr/bin/time -o "$tmp" -f "%e	%U	%S	%M" "$@" -Z unstable-options --report-time
rc=$?
b1=$(busy)
printf '%s\t%s\t%s\n' "$name" "$(tail -n1 "$tmp")" "$(awk -v d=$((b1 - b0)) -v t="$tck" 'BEGIN{printf "%.1f", d/t}')" >>"$out"
rm -f "$tmp"
exit "$rc"
