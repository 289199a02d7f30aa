#!/usr/bin/env bash
# Install SGLang from PyPI so it serves on the CPU (no GPU, no NVIDIA driver),
# into the same versioned cache as the other engines:
#
#   $INFERGATE_CACHE (default ~/.cache/infergate)
#     engine/sglang-<version>/venv/       sglang, its CPU-usable dependencies, torch
#     engine/sglang-<version>/installed   stamp: written last, so its presence means "complete"
#
# The model is the Hugging Face folder that scripts/setup-vllm.sh converts
# from the reference GGUF (SmolLM2-135M-Instruct-hf-*); this script asks that
# script for it, so vLLM's CPU build is installed first (cached; the
# conversion runs in its venv). Both engines then serve the same float32
# weights: the dequantized Q4_1 weights of the llama.cpp reference engine.
#
# Why it is done this way (measured on a 2-core AVX2/AVX512 machine without
# AMX, no GPU, Python 3.11; a cold install takes about 4 minutes and 6.9 GB):
# - The sglang wheel pins torch==$TORCH_VERSION; PyPI's CUDA build of torch
#   runs on CPU (it needs its nvidia-* packages to import). So: torch with its
#   dependencies, then the sglang wheel with --no-deps, then the wheel's own
#   Requires-Dist list (markers evaluated here) minus the torch family and the
#   packages that only work on an NVIDIA GPU (SKIP below). pip then reports
#   those as unmet, in a message starting "ERROR: pip's dependency resolver":
#   expected.
# - sglang-kernel (import name sgl_kernel) is on PyPI only as GPU wheels whose
#   .so links libcuda.so.1: `import sgl_kernel` fails without the driver. On
#   its CPU platform (SGLANG_USE_CPU_ENGINE=1) sglang imports a dozen *_cpu
#   ops from it at module level (KV-cache moves, speculative decoding,
#   linear-attention models) and calls none of them for a Llama model without
#   speculative decoding or host-memory KV cache. A stand-in package named
#   sgl_kernel, written into the venv below, provides those names; calling any
#   of them raises NotImplementedError. Ops that sglang reaches through
#   torch.ops.sgl_kernel are simply absent: the models that need them fail to
#   register (logged as "Ignore import error"), Llama does not need them.
#
# Idempotent (a second run only checks the stamp, in seconds) and safe to run
# concurrently (a lock serialises runs). Prints KEY=VALUE lines:
#   INFERGATE_SGLANG_PYTHON   the venv's python
#   INFERGATE_SGLANG_SERVE    engine/sglang-serve.sh (starts sglang.launch_server on the model)
#   INFERGATE_SGLANG_MODEL    the converted model folder
#
# Environment:
#   INFERGATE_CACHE   cache root (default ~/.cache/infergate)
#   INFERGATE_PYTHON  Python 3.11–3.13 used to create the venv (default python3; measured with 3.11)
#   INFERGATE_SGLANG_MODEL_DIR  use this model folder instead of asking setup-vllm.sh
set -euo pipefail

# Pinned: the wheel pins torch to exactly this version. tests/sglang.rs
# expects this version from the server's /get_server_info.
SGLANG_VERSION=0.5.23
TORCH_VERSION=2.14.1

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CACHE="${INFERGATE_CACHE:-${HOME:?HOME is not set; set INFERGATE_CACHE}/.cache/infergate}"
PYTHON="${INFERGATE_PYTHON:-python3}"
ENGINE_DIR="$CACHE/engine/sglang-$SGLANG_VERSION"
VENV="$ENGINE_DIR/venv"
STAMP="$ENGINE_DIR/installed"
SERVE_SH="$ROOT/engine/sglang-serve.sh"
SETUP_VLLM="$HERE/setup-vllm.sh"

say() { printf 'setup-sglang: %s\n' "$*" >&2; }
die() {
    printf 'setup-sglang: error: %s\n' "$*" >&2
    exit 1
}

check_platform() {
    [[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]] ||
        die "this recipe is measured on Linux x86_64 only; this is $(uname -s) $(uname -m)"
    command -v "$PYTHON" >/dev/null || die "'$PYTHON' not found: install Python 3.11–3.13 or set INFERGATE_PYTHON"
    "$PYTHON" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 14)))' ||
        die "$PYTHON is $("$PYTHON" -V 2>&1); sglang $SGLANG_VERSION here needs Python 3.11–3.13 (set INFERGATE_PYTHON)"
}

engine_ok() { [[ -f "$STAMP" && -x "$VENV/bin/python" ]]; }

# The wheel's Requires-Dist lines that apply here (markers evaluated, no
# extras), without the torch family and the GPU-only packages, one per line.
wheel_requirements() { # WHEEL
    "$VENV/bin/python" - "$1" <<'EOF'
import sys, zipfile
from packaging.requirements import Requirement

SKIP = {
    # torch family: torch is installed first, pinned; the rest are not needed.
    "torch", "torchaudio", "torchvision", "torchcodec",
    # GPU-only: CUDA kernels and their toolchains (need an NVIDIA driver).
    "sglang-kernel", "flashinfer-python", "flash-attn-4", "humming-kernels",
    "nvidia-cutlass-dsl", "nvidia-mathdx", "nvshmem4py-cu13", "quack-kernels",
    "sgl-deep-ep", "sgl-deep-gemm", "sgl-flash-mla", "tilelang",
    "torch-memory-saver", "cuda-python", "deepseek-recipe",
}
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(name).decode().splitlines()
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower().replace("_", "-") in SKIP:
        continue
    req.marker = None
    req.extras = set()
    print(req)
EOF
}

# The stand-in for sgl_kernel: the names that sglang imports from it at module
# level on the CPU platform (found by scanning the wheel for `from sgl_kernel
# import` under `if _is_cpu`), each raising NotImplementedError if called.
write_sgl_kernel_stub() {
    local site
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    [[ -d "$site" ]] || die "no site-packages in $VENV"
    mkdir -p "$site/sgl_kernel"
    cat >"$site/sgl_kernel/_stub.py" <<'EOF'
"""Stand-in for sglang-kernel on a machine without an NVIDIA GPU.

Written by infergate's setup-sglang.sh. PyPI has sglang-kernel only as GPU
wheels (their .so needs libcuda.so.1). On its CPU platform sglang imports
these ops at module level; with the settings of sglang-serve.sh (no
speculative decoding, no host-memory KV cache, no linear-attention model) it
does not call them. Any call raises NotImplementedError.
"""


def missing(module, names):
    for name in names:

        def op(*args, _name=name, **kwargs):
            raise NotImplementedError(
                f"sgl_kernel.{_name}: infergate's CPU stand-in for sglang-kernel has no native ops"
            )

        op.__name__ = name
        module[name] = op
EOF
    cat >"$site/sgl_kernel/__init__.py" <<'EOF'
"""infergate's CPU stand-in for sglang-kernel: see _stub.py."""
from sgl_kernel._stub import missing as _missing

__version__ = "0.0.0+infergate.cpu.stub"

_missing(globals(), (
    "assign_req_to_token_pool_cpu",  # srt/mem_cache/allocation.py
    "copy_all_layer_kv_cache_cpu",  # kernels/ops/kvcache/cache_move.py
    "assign_draft_cache_locs_contiguous_cpu",  # kernels/ops/speculative/cache_locs.py
    "assign_extend_cache_locs_cpu",
    "fill_accept_out_cache_loc_cpu",  # kernels/ops/speculative/eagle.py
    "fill_bonus_tokens_cpu",
    "rotate_input_ids_cpu",  # kernels/ops/speculative/multi_layer_eagle.py
    "build_tree_kernel_efficient_cpu",  # kernels/ops/speculative/spec_tree.py
    "verify_tree_greedy_cpu",
))
EOF
    cat >"$site/sgl_kernel/mamba.py" <<'EOF'
"""infergate's CPU stand-in for sgl_kernel.mamba: see _stub.py."""
from sgl_kernel._stub import missing as _missing

_missing(globals(), (
    "causal_conv1d_fn_cpu",  # srt/layers/attention/linear/gdn_backend.py
    "causal_conv1d_update_cpu",  # srt/layers/attention/linear/kda_backend.py
    "chunk_gated_delta_rule_cpu",  # srt/layers/attention/linear/kernels/gdn_triton.py
))
EOF
}

install_engine() {
    rm -rf "$ENGINE_DIR"
    mkdir -p "$ENGINE_DIR"
    if "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
        "$PYTHON" -m venv "$VENV" || die "could not create a venv with $PYTHON"
    else
        "$PYTHON" -m venv --without-pip "$VENV" && "$PYTHON" -m pip --python "$VENV/bin/python" install --quiet pip ||
            die "$PYTHON has no ensurepip and its pip cannot seed a venv (on Debian: apt-get install python3-venv)"
    fi
    local -a pip=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input --quiet)
    "${pip[@]}" install --upgrade pip packaging || die "could not upgrade pip in $VENV (is PyPI reachable?)"
    say "installing torch==$TORCH_VERSION with its dependencies (several GB; minutes)"
    "${pip[@]}" install --only-binary=:all: "torch==$TORCH_VERSION" ||
        die "pip could not install torch==$TORCH_VERSION"
    say "installing sglang==$SGLANG_VERSION (--no-deps) and its CPU-usable requirements"
    "${pip[@]}" download --no-deps --only-binary=:all: -d "$TMP/wheel" "sglang==$SGLANG_VERSION" ||
        die "pip could not download sglang==$SGLANG_VERSION"
    local wheel
    wheel="$(find "$TMP/wheel" -name 'sglang-*.whl' -print -quit)"
    [[ -n "$wheel" ]] || die "pip download of sglang==$SGLANG_VERSION produced no wheel"
    wheel_requirements "$wheel" >"$TMP/requirements.txt" || die "could not read the requirements of $(basename "$wheel")"
    "${pip[@]}" install --no-deps "$wheel" || die "pip could not install $(basename "$wheel")"
    say "pip will name sglang's torch family and GPU-only packages as unmet: expected, see above"
    "${pip[@]}" install -r "$TMP/requirements.txt" "torch==$TORCH_VERSION" ||
        die "pip could not install sglang's requirements (listed in $TMP/requirements.txt)"
    write_sgl_kernel_stub
    SGLANG_USE_CPU_ENGINE=1 "$VENV/bin/python" -c 'import sglang.srt.entrypoints.http_server, torch' >/dev/null ||
        die "sglang's server is not importable from $VENV"
    printf 'sglang %s torch %s\n' "$SGLANG_VERSION" "$TORCH_VERSION" >"$TMP/stamp"
    mv -f "$TMP/stamp" "$STAMP"
}

# The converted model folder, from setup-vllm.sh (it converts the reference GGUF).
model_path() {
    if [[ -n "${INFERGATE_SGLANG_MODEL_DIR:-}" ]]; then
        printf '%s\n' "$INFERGATE_SGLANG_MODEL_DIR"
        return
    fi
    local line
    while IFS= read -r line; do
        [[ "$line" == INFERGATE_VLLM_MODEL=* ]] && { printf '%s\n' "${line#INFERGATE_VLLM_MODEL=}"; return; }
    done < <(INFERGATE_CACHE="$CACHE" "$SETUP_VLLM")
    die "$SETUP_VLLM printed no INFERGATE_VLLM_MODEL"
}

main() {
    mkdir -p "$CACHE"
    local model
    # setup-vllm.sh takes its own lock; call it before this one's.
    model="$(model_path)"

    exec 9>"$CACHE/.setup-sglang.lock"
    flock 9
    rm -rf "$CACHE"/.tmp.sglang.*
    if ! engine_ok; then
        check_platform
        TMP="$(mktemp -d "$CACHE/.tmp.sglang.XXXXXX")"
        trap 'rm -rf "$TMP"' EXIT
        install_engine
    fi

    printf 'INFERGATE_SGLANG_PYTHON=%s\n' "$VENV/bin/python"
    printf 'INFERGATE_SGLANG_SERVE=%s\n' "$SERVE_SH"
    printf 'INFERGATE_SGLANG_MODEL=%s\n' "$model"
}

main "$@"
