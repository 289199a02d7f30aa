#!/usr/bin/env bash
# All tests, from a fresh machine: sets up the reference engine (cached after
# the first run) and a Docker daemon (for the container-driver test), then
# formatting, lints, and every test against the real engine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-engine.sh
# Without a daemon the container test fails and says why; it never passes silently.
scripts/setup-docker.sh || echo "test: no Docker daemon could be started; tests/container.rs will fail and say so" >&2
cargo fmt --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test --workspace --all-features
