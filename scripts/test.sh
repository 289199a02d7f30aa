#!/usr/bin/env bash
# All tests, from a fresh machine: sets up the reference engine and vLLM's
# CPU build (both cached after the first run), SGLang when
# INFERGATE_TEST_SGLANG=1 (the third engine family's lane, tests/sglang.rs), a Docker daemon (for the container-driver test), a
# headless Chromium (for the HTML report in a real browser) and a PostgreSQL
# server of its own (for the shared ledger), then
# formatting, lints, and every test against the real engine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-engine.sh
# The reference model with one layer perturbed (tests/quality.rs): the gguf
# package in a venv of its own, about 15 seconds the first time.
scripts/setup-perturbed-model.sh >/dev/null
# vLLM's CPU build, the second engine family (tests/vllm.rs): about 3 minutes
# and 6 GB the first time, a second later. Without it those tests fail and say so.
scripts/setup-vllm.sh >/dev/null || echo "test: vLLM could not be installed; tests/vllm.rs will fail and say so" >&2
# Without a daemon the container test fails and says why; it never passes silently.
scripts/setup-docker.sh || echo "test: no Docker daemon could be started; tests/container.rs will fail and say so" >&2
# The HTML report is checked in a real headless browser (tests/browser.rs).
if line=$(scripts/setup-chromium.sh | grep '^INFERGATE_CHROMIUM='); then
    export "${line?}"
else
    echo "test: no chromium could be installed; tests/browser.rs will fail and say so" >&2
fi
# The shared ledger's tests (tests/ledger.rs) run against a PostgreSQL server
# on loopback that this run starts, and stops when it ends.
if pg=$(scripts/setup-postgres.sh); then
    eval "$(printf '%s\n' "$pg" | sed 's/^/export /')"
    trap 'scripts/setup-postgres.sh --stop "$INFERGATE_TEST_POSTGRES_DIR"' EXIT
else
    echo "test: no PostgreSQL server could be started; tests/ledger.rs will fail and say so" >&2
fi
cargo fmt --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test --workspace --all-features
# SGLang on the CPU, the third engine family (tests/sglang.rs, docs/sglang.md):
# opt-in, since its install is ~4.5 minutes and 6.9 GB and it decodes slowly.
# Its tests are #[ignore]d in the command above; here they run with
# --ignored, and fail (never skip) if SGLang cannot be installed or started.
if [[ "${INFERGATE_TEST_SGLANG:-0}" == 1 ]]; then
    scripts/setup-sglang.sh >/dev/null
    # --all-features: the build the command above made, not another.
    cargo test --all-features --test sglang -- --ignored
fi
