#!/usr/bin/env bash
# The contributor's loop: in a few minutes, what a change most often breaks.
# Formatting, lints, every unit test but the report crate's seeded gate
# simulations (stats::evidence::tests, most of the full suite's CPU), the
# integration tests that need no server, and one real-engine smoke test.
# It installs only the reference engine. The full suite, which CI runs, is
# scripts/test.sh; docs/testing.md lists what each covers and costs.
set -euo pipefail
cd "$(dirname "$0")/.."
export INFERGATE_ENGINE_THREADS="${INFERGATE_ENGINE_THREADS:-1}"
scripts/setup-engine.sh >/dev/null
cargo fmt --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test --workspace --all-features --lib --bins -- --skip stats::evidence::tests::
cargo test -p infergate-report --all-features --test compare --test views --test seed
cargo test --all-features --test layout --test trust --test report_compare \
    --test client_fastsource --test capture --test verify_runs --test spent --test alloc_bound
cargo test --all-features --test engine streamed_usage_counts_tokens_and_finish_reasons_are_right
