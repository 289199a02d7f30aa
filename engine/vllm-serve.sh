#!/usr/bin/env bash
# Start vLLM's CPU build serving the reference model (SmolLM2-135M-Instruct,
# the dequantized Q4_1 weights of the llama.cpp reference engine) on loopback:
#
#   engine/vllm-serve.sh --port PORT [more `vllm serve` flags]
#
# Installs (or, cached, only checks) vLLM and the model via
# scripts/setup-vllm.sh, then execs `vllm serve`, so the process driver's
# signals reach vLLM itself (its engine core is a child in the same group).
# Settings measured on a 2-core AVX2 machine:
#   --dtype float32         bfloat16 takes a slow path without AVX512 (prefill 6x slower)
#   --enforce-eager         no graph capture: start-up in about a minute
#   --max-model-len 4096    the reference engine's per-slot context
#   VLLM_CPU_KVCACHE_SPACE  GiB of KV cache (default here 2)
#   --enable-prompt-tokens-details  usage names the prompt tokens served from
#                           the prefix cache, so cache hits are counted, never hidden
# The served model id is SmolLM2-135M-Instruct-Q4_1, as the reference engine's
# profiles serve it: the same weights, so identity checks compare equal.
# No traffic leaves the machine: the hub is off and usage statistics too.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

port=""
declare -a rest=()
while (($#)); do
    case "$1" in
    --port)
        port="${2:?--port needs a value}"
        shift 2
        ;;
    --port=*)
        port="${1#--port=}"
        shift
        ;;
    *)
        rest+=("$1")
        shift
        ;;
    esac
done
[[ "$port" =~ ^[0-9]+$ ]] || {
    echo "vllm-serve: give --port PORT (the loopback port to serve on)" >&2
    exit 2
}

setup="$("$HERE/../scripts/setup-vllm.sh")" || {
    echo "vllm-serve: scripts/setup-vllm.sh failed" >&2
    exit 1
}
python="$(sed -n 's/^INFERGATE_VLLM_PYTHON=//p' <<<"$setup")"
model="$(sed -n 's/^INFERGATE_VLLM_MODEL=//p' <<<"$setup")"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# vLLM finds its platform from its version string; say it outright too.
export VLLM_TARGET_DEVICE=cpu
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"
exec "$(dirname "$python")/vllm" serve "$model" \
    --host 127.0.0.1 --port "$port" \
    --served-model-name SmolLM2-135M-Instruct-Q4_1 \
    --dtype float32 --max-model-len 4096 --enforce-eager \
    --enable-prompt-tokens-details \
    "${rest[@]}"
