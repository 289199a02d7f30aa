"""Convert the reference model's GGUF into a Hugging Face folder vLLM can serve.

vLLM's CPU backend cannot run llama.cpp's Q4_1 tensors, so every tensor is
dequantized (the PyPI `gguf` package, llama.cpp's own) and written as float32
safetensors, with the config, tokenizer and chat template taken from the GGUF
itself. The served weights are therefore the Q4_1 values exactly: the same
model llama.cpp serves, in another format, up to float rounding in the kernels.

Run by scripts/setup-vllm.sh inside the vLLM venv:

    python gguf_to_hf.py --gguf MODEL.gguf --tokenizer tokenizer.json --out DIR [--check]

--check loads DIR with transformers and requires a greedy answer naming Paris
to "What is the capital of France?"; the folder is marked complete (DIR/converted)
only after that.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

ARCH = "llama"

# GGUF tensor name (after "blk.N.") -> Hugging Face name (after "model.layers.N.").
LAYER_TENSORS = {
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}
GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def fail(msg):
    sys.exit(f"gguf_to_hf: {msg}")


def metadata(reader):
    meta = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        meta[name] = field.contents()
    return meta


def need(meta, key):
    if key not in meta:
        fail(f"the GGUF has no {key}")
    return meta[key]


def unpermute(w, n_head):
    """Undo llama.cpp's convert_hf_to_gguf permute() of the q/k projections.

    llama.cpp reorders each head's rows from the interleaved rotary layout
    Hugging Face uses ((n_head, 2, d/2) -> (n_head, d/2, 2)); reversing it
    restores the original rows.
    """
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensors(reader, n_head, n_head_kv):
    from gguf.quants import dequantize

    out = {}
    for t in reader.tensors:
        # GGUF lists dimensions fastest-first; numpy (and torch) slowest-first.
        shape = tuple(int(d) for d in reversed(t.shape))
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        if t.name in GLOBAL_TENSORS:
            out[GLOBAL_TENSORS[t.name]] = w
            continue
        parts = t.name.split(".", 2)
        if len(parts) != 3 or parts[0] != "blk" or parts[2] not in LAYER_TENSORS:
            fail(f"tensor {t.name} has no known Hugging Face name")
        if parts[2] == "attn_q.weight":
            w = unpermute(w, n_head)
        elif parts[2] == "attn_k.weight":
            w = unpermute(w, n_head_kv)
        out[f"model.layers.{parts[1]}.{LAYER_TENSORS[parts[2]]}"] = np.ascontiguousarray(w)
    return out


def config(meta, vocab, tied):
    p = f"{ARCH}."
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(need(meta, p + "embedding_length")),
        "intermediate_size": int(need(meta, p + "feed_forward_length")),
        "num_hidden_layers": int(need(meta, p + "block_count")),
        "num_attention_heads": int(need(meta, p + "attention.head_count")),
        "num_key_value_heads": int(need(meta, p + "attention.head_count_kv")),
        "max_position_embeddings": int(need(meta, p + "context_length")),
        "rms_norm_eps": float(need(meta, p + "attention.layer_norm_rms_epsilon")),
        "rope_theta": float(meta.get(p + "rope.freq_base", 10000.0)),
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": int(need(meta, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(need(meta, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": int(meta.get("tokenizer.ggml.padding_token_id", need(meta, "tokenizer.ggml.eos_token_id"))),
        "torch_dtype": "float32",
    }


def tokenizer_config(meta, tokens):
    bos = tokens[int(need(meta, "tokenizer.ggml.bos_token_id"))]
    eos = tokens[int(need(meta, "tokenizer.ggml.eos_token_id"))]
    pad_id = meta.get("tokenizer.ggml.padding_token_id")
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": tokens[int(pad_id)] if pad_id is not None else eos,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(need(meta, f"{ARCH}.context_length")),
        "chat_template": need(meta, "tokenizer.chat_template"),
    }


def check(out):
    """Greedy generation with transformers: the folder must answer like the model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        gen = model.generate(**ids, max_new_tokens=12, do_sample=False)
    text = tok.decode(gen[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    print(f"gguf_to_hf: check: greedy answer {text!r}", file=sys.stderr)
    if "Paris" not in text:
        fail(f"the converted model answers {text!r} to 'What is the capital of France?'; expected Paris")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", required=True, type=Path)
    ap.add_argument("--tokenizer", required=True, type=Path, help="tokenizer.json from scripts/setup-tokenizer.sh")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    from gguf import GGUFReader
    from safetensors.numpy import save_file

    reader = GGUFReader(args.gguf)
    meta = metadata(reader)
    if need(meta, "general.architecture") != ARCH:
        fail(f"architecture {meta['general.architecture']!r}; only {ARCH!r} is converted")
    tokens = need(meta, "tokenizer.ggml.tokens")
    n_head = int(need(meta, f"{ARCH}.attention.head_count"))
    n_head_kv = int(need(meta, f"{ARCH}.attention.head_count_kv"))
    weights = tensors(reader, n_head, n_head_kv)
    tied = "lm_head.weight" not in weights
    if weights["model.embed_tokens.weight"].shape[0] != len(tokens):
        fail("the embedding has a row count other than the vocabulary size")

    args.out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    cfg = config(meta, len(tokens), tied)
    (args.out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    gen = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"], "do_sample": False}
    (args.out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    (args.out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(meta, tokens), indent=2) + "\n")
    shutil.copyfile(args.tokenizer, args.out / "tokenizer.json")
    if args.check:
        check(args.out)
    (args.out / "converted").write_text(f"from {args.gguf.name}\n")


if __name__ == "__main__":
    main()
