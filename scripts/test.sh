#!/usr/bin/env bash
# All tests, from a fresh machine: sets up the reference engine (cached after
# the first run), then formatting, lints, and every test against the real engine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-engine.sh
cargo fmt --check
cargo clippy --all-targets -- -D warnings
cargo test --workspace
