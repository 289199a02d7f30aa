#!/usr/bin/env bash
# All tests, from a fresh machine: sets up the reference engine and vLLM's
# CPU build (both cached after the first run), SGLang when
# INFERGATE_TEST_SGLANG=1 (the third engine family's lane, tests/sglang.rs),
# the long-context lane when INFERGATE_TEST_LONG=1 (tests/long_context.rs),
# the heavy lane when INFERGATE_TEST_HEAVY=1 (real-engine checks of minutes),
# the install lane when INFERGATE_TEST_DIST=1 (tests/dist.rs: the wheel, the
# static binary and the image of scripts/build-dist.sh),
# a Docker daemon (for the container-driver test), a headless Chromium (for
# the HTML report in a real browser), a PostgreSQL server of its own (for
# the shared ledger) and an OCI registry of its own (tags to digests), then
# formatting, lints, and every test against the real engine. The installs run in the background while the tests build; each
# phase's wall time is printed (and appended to $INFERGATE_TEST_PHASES when
# set: scripts/test-timings.sh reads it). docs/testing.md has the costs.
set -euo pipefail
cd "$(dirname "$0")/.."

last=$(date +%s)
phase() { # NAME: wall seconds since the previous mark
    local now
    now=$(date +%s)
    printf 'test: %s: %d s\n' "$1" $((now - last)) >&2
    [[ -z "${INFERGATE_TEST_PHASES:-}" ]] || printf '%s\t%d\n' "$1" $((now - last)) >>"$INFERGATE_TEST_PHASES"
    last=$now
}

scratch=$(mktemp -d -t infergate-test.XXXXXX)
cleanup() {
    # shellcheck disable=SC2046 # job ids, one word each
    kill $(jobs -p) 2>/dev/null || true
    if [[ -s "$scratch/registry.env" ]]; then
        scripts/setup-registry.sh --stop "$(sed -n 's/^INFERGATE_TEST_REGISTRY_DIR=//p' "$scratch/registry.env")"
    fi
    if [[ -s "$scratch/postgres.env" ]]; then
        scripts/setup-postgres.sh --stop "$(sed -n 's/^INFERGATE_TEST_POSTGRES_DIR=//p' "$scratch/postgres.env")"
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT

# Every reference-engine server of the run gets one CPU thread: llama.cpp's
# threads spin at a barrier per op, and two-thread servers beside each other
# or a busy client stall on these two cores (src/driver/engine.rs,
# THREADS_CAP_ENV; measured in docs/testing.md).
export INFERGATE_ENGINE_THREADS="${INFERGATE_ENGINE_THREADS:-1}"

scripts/setup-engine.sh
# The reference model with one layer perturbed (tests/quality.rs): the gguf
# package in a venv of its own, about 15 seconds the first time.
scripts/setup-perturbed-model.sh >/dev/null
phase "reference engine setup"

# In the background while the tests build: the Debian packages one after
# another (one dpkg lock), vLLM's pip install beside them. A failed install
# is said here; its tests then fail and say why, they never pass silently.
background() { # NAME COMMAND...: run, timing itself into $scratch/NAME.secs
    local name=$1 t0
    shift
    t0=$(date +%s)
    "$@" || true
    echo $(($(date +%s) - t0)) >"$scratch/$name.secs"
}
debian_packages() {
    # Without a daemon the container test fails and says why.
    scripts/setup-docker.sh ||
        echo "test: no Docker daemon could be started; tests/container.rs will fail and say so" >&2
    # The HTML report is checked in a real headless browser (tests/browser.rs).
    scripts/setup-chromium.sh >"$scratch/chromium.env" ||
        echo "test: no chromium could be installed; tests/browser.rs will fail and say so" >&2
    # The shared ledger's tests (tests/ledger.rs) run against a PostgreSQL
    # server on loopback that this run starts, and stops when it ends.
    scripts/setup-postgres.sh >"$scratch/postgres.env" ||
        echo "test: no PostgreSQL server could be started; tests/ledger.rs will fail and say so" >&2
    # Tags resolved to digests (tests/registry.rs) against an OCI
    # distribution registry on loopback that this run starts and stops.
    scripts/setup-registry.sh >"$scratch/registry.env" ||
        echo "test: no registry could be started; tests/registry.rs will fail and say so" >&2
}
vllm() {
    # vLLM's CPU build, the second engine family (tests/vllm.rs): about 3
    # minutes and 6 GB the first time, a second later.
    scripts/setup-vllm.sh >/dev/null ||
        echo "test: vLLM could not be installed; tests/vllm.rs will fail and say so" >&2
}
background debian-packages debian_packages &
background vllm vllm &

cargo fmt --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
phase "fmt and clippy"
cargo test --workspace --all-features --no-run
phase "build the tests"

wait
for name in debian-packages vllm; do
    printf 'test: %s installed in %s s (in the background)\n' "$name" "$(cat "$scratch/$name.secs" 2>/dev/null || echo '?')" >&2
done
phase "wait for the installs"
for env in chromium postgres registry; do
    while IFS= read -r line; do
        [[ "$line" == *=* ]] && export "${line?}"
    done <"$scratch/$env.env"
done

# What `cargo test --workspace --all-features` runs, two binaries at a time.
scripts/run-test-binaries.py
phase "tests"

# SGLang on the CPU, the third engine family (tests/sglang.rs, docs/sglang.md):
# opt-in, since its install is ~4.5 minutes and 6.9 GB and it decodes slowly.
# Its tests are #[ignore]d in the command above; here they run with
# --ignored, and fail (never skip) if SGLang cannot be installed or started.
# Long context (tests/long_context.rs): 7.5k-token prompts on the `long`
# engine profile, and 120k-token prompts against the counting fast source,
# recounted by that engine; opt-in, since it takes about 10 minutes on one
# engine thread.
if [[ "${INFERGATE_TEST_LONG:-0}" == 1 ]]; then
    cargo test --all-features --test long_context -- --ignored
    phase "long-context lane"
fi

# The heavy lane: real-engine checks of minutes each, #[ignore]d above:
# the quality gate's A/A pair (tests/quality.rs, 100 task items twice),
# the reference engine's two profiles compared by capacity
# (tests/capacity.rs) and qualified on a capture of the engine's own traffic
# (tests/capture_engine.rs). About 10 minutes on one engine thread.
if [[ "${INFERGATE_TEST_HEAVY:-0}" == 1 ]]; then
    cargo test --all-features --test quality --test capacity --test capture_engine -- --ignored
    phase "heavy lane"
fi

if [[ "${INFERGATE_TEST_SGLANG:-0}" == 1 ]]; then
    scripts/setup-sglang.sh >/dev/null
    # --all-features: the build the command above made, not another.
    cargo test --all-features --test sglang -- --ignored
    phase "SGLang lane"
fi

# What a user installs without Rust (tests/dist.rs): the wheel, the static
# binary and the OCI image that scripts/build-dist.sh builds; opt-in, since
# that is a second, release build (about 5 minutes on 2 cores, fresh).
if [[ "${INFERGATE_TEST_DIST:-0}" == 1 ]]; then
    scripts/build-dist.sh
    cargo test --all-features --test dist -- --ignored
    phase "dist lane"
fi
