#!/usr/bin/env bash
# Make the reference model's perturbed copy (engine/profiles.toml
# [perturbed]): layer 10's FFN norm weights multiplied per channel by
# 1 + 1.5 N(0, 1), seed 1. The model still answers, about a third as often
# right on suites/data/tasks-basic.jsonl: the quality gate's accuracy part
# must fail it (plans/perturbed-layer.toml, tests/quality.rs).
#
#   $INFERGATE_CACHE/tools/gguf-<version>/venv   the PyPI gguf package (and numpy)
#   $INFERGATE_CACHE/models/<model>.blk10-ffn-norm-sd1.5-seed1.gguf
#
# Idempotent and cached; prints INFERGATE_PERTURBED_MODEL=<path>.
set -euo pipefail
cd "$(dirname "$0")/.."

GGUF_VERSION=0.19.0
TENSOR=blk.10.ffn_norm.weight
SD=1.5
SEED=1

eval "$(scripts/setup-engine.sh | sed -n 's/^\(INFERGATE_[A-Z_]*\)=\(.*\)$/\1="\2"/p')"
: "${INFERGATE_ENGINE_MODEL:?setup-engine.sh printed no model}"
PYTHON="${INFERGATE_PYTHON:-python3}"
OUT="${INFERGATE_ENGINE_MODEL%.gguf}.blk10-ffn-norm-sd${SD}-seed${SEED}.gguf"
VENV="$INFERGATE_CACHE/tools/gguf-$GGUF_VERSION/venv"

say() { printf 'setup-perturbed-model: %s\n' "$*" >&2; }

exec 9>"$INFERGATE_CACHE/.perturbed.lock"
flock 9
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import gguf' 2>/dev/null; then
    say "installing gguf==$GGUF_VERSION into $VENV"
    rm -rf "$VENV"
    if "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "gguf==$GGUF_VERSION"
    else
        "$PYTHON" -m venv --without-pip "$VENV"
        "$PYTHON" -m pip --python "$VENV/bin/python" install --quiet --disable-pip-version-check --no-input "gguf==$GGUF_VERSION"
    fi
fi
if [[ ! -f "$OUT" ]]; then
    say "writing $(basename "$OUT")"
    "$VENV/bin/python" scripts/perturb-gguf.py "$INFERGATE_ENGINE_MODEL" "$OUT" "$TENSOR" "$SD" "$SEED"
fi
printf 'INFERGATE_PERTURBED_MODEL=%s\n' "$OUT"
