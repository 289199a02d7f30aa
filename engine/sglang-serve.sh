#!/usr/bin/env bash
# Start SGLang on the CPU serving the reference model (SmolLM2-135M-Instruct,
# the dequantized Q4_1 weights of the llama.cpp reference engine) on loopback:
#
#   engine/sglang-serve.sh --port PORT [more `sglang.launch_server` flags]
#
# Installs (or, cached, only checks) SGLang and the model via
# scripts/setup-sglang.sh, then execs `python -m sglang.launch_server`, so the process
# driver's signals reach SGLang itself (its scheduler and detokenizer are
# children in the same group). Settings measured on a 2-core AVX2 machine
# without AMX and without a GPU:
#   SGLANG_USE_CPU_ENGINE=1   selects SGLang's CPU platform (sglang/srt/utils/common.py is_cpu)
#   --device cpu
#   --attention-backend torch_native   the CPU backends "intel_amx" needs
#                           sglang-kernel's native ops, absent here (a stand-in)
#   --sampling-backend pytorch         flashinfer sampling is CUDA-only
#   --disable-overlap-schedule         the overlap scheduler is for GPU streams
#   --dtype float32         as the converted weights; "auto" would pick float16
#   --context-length 4096   the reference engine's per-slot context
#   --max-total-tokens N    KV cache size in tokens (default here 32768, about
#                           1.4 GB in float32); without it SGLang takes ~70% of
#                           free RAM (14 GB on a 24 GB machine)
#   --enable-cache-report   usage.prompt_tokens_details.cached_tokens names the
#                           prompt tokens served from the prefix (radix) cache
#   --enable-metrics        Prometheus /metrics (sglang: prefix)
#   --sleep-on-idle         an idle scheduler waits on its sockets (up to 1 s,
#                           woken by a request) instead of spinning: without it
#                           idle SGLang took 65% of a core here, CPU a
#                           baseline served beside it would lose
# CUDA graphs are disabled by SGLang itself with torch_native attention.
# The served model id is SmolLM2-135M-Instruct-Q4_1, as the reference engine's
# profiles serve it: the same weights, so identity checks compare equal.
# No traffic leaves the machine: the hub is off.
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
    echo "sglang-serve: give --port PORT (the loopback port to serve on)" >&2
    exit 2
}

setup="$("$HERE/../scripts/setup-sglang.sh")" || {
    echo "sglang-serve: scripts/setup-sglang.sh failed" >&2
    exit 1
}
python="$(sed -n 's/^INFERGATE_SGLANG_PYTHON=//p' <<<"$setup")"
model="$(sed -n 's/^INFERGATE_SGLANG_MODEL=//p' <<<"$setup")"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=1
export SGLANG_USE_CPU_ENGINE=1
exec "$python" -m sglang.launch_server --model-path "$model" \
    --host 127.0.0.1 --port "$port" \
    --served-model-name SmolLM2-135M-Instruct-Q4_1 \
    --device cpu --dtype float32 --context-length 4096 \
    --max-total-tokens "${INFERGATE_SGLANG_KV_TOKENS:-32768}" \
    --attention-backend torch_native --sampling-backend pytorch \
    --disable-overlap-schedule \
    --enable-metrics --enable-cache-report --sleep-on-idle \
    "${rest[@]}"
