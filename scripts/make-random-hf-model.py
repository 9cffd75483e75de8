#!/usr/bin/env python3
"""Writes a Llama model with random weights in Hugging Face layout (config.json,
sharded safetensors with model.safetensors.index.json, a tokenizer copied in),
so that llmc and another runtime can be fed the very same weights.

Weights are normal with std 0.02 (norm weights are 1), f32, from a fixed seed:
the same command writes the same bytes. Shapes:
  110m  hidden 768, 12 layers, 12 heads (12 kv), intermediate 2048, vocab 32000,
        untied (scripts/bench-models/llama-110m.json, llama2.c's stories110M)
  1b    hidden 2048, 16 layers, 32 heads (8 kv), intermediate 8192, vocab 32000,
        tied, rope theta 500000 with llama3 scaling (Llama-3.2-1B's shape, with
        Llama 2's vocabulary size)

Usage: make-random-hf-model.py {110m,1b} OUT_DIR --tokenizer DIR
DIR holds tokenizer.json (and optionally tokenizer_config.json) with vocab_size
entries, e.g. ../shared/tokenizers/llama2. Needs numpy and safetensors."""
import argparse
import json
import os
import shutil
import sys

import numpy as np
from safetensors.numpy import save_file

SHAPES = {
    "110m": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                 num_attention_heads=12, num_key_value_heads=12, tie_word_embeddings=False,
                 rope_theta=10000.0, rope_scaling=None),
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True,
               rope_theta=500000.0,
               rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192}),
}
VOCAB = 32000
STD = 0.02
SEED = 20261201


def config_for(shape):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
         "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "hidden_act": "silu",
         "attention_bias": False, "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2,
         "torch_dtype": "float32"}
    c.update(SHAPES[shape])
    c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    if c["rope_scaling"] is None:
        del c["rope_scaling"]
    return c


def layer_tensors(c, i):
    """(name, shape) of layer i, HF names; linear weights are [out, in]."""
    h, f, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    kv = c["num_key_value_heads"] * d
    p = "model.layers.%d." % i
    return [(p + "input_layernorm.weight", (h,)),
            (p + "self_attn.q_proj.weight", (h, h)),
            (p + "self_attn.k_proj.weight", (kv, h)),
            (p + "self_attn.v_proj.weight", (kv, h)),
            (p + "self_attn.o_proj.weight", (h, h)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "mlp.gate_proj.weight", (f, h)),
            (p + "mlp.up_proj.weight", (f, h)),
            (p + "mlp.down_proj.weight", (h, f))]


def shards(c):
    """Lists of (name, shape): the embeddings, one shard per layer, the head."""
    h = c["hidden_size"]
    yield [("model.embed_tokens.weight", (VOCAB, h))]
    for i in range(c["num_hidden_layers"]):
        yield layer_tensors(c, i)
    last = [("model.norm.weight", (h,))]
    if not c["tie_word_embeddings"]:
        last.append(("lm_head.weight", (VOCAB, h)))
    yield last


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    ap.add_argument("--tokenizer", required=True, help="directory holding tokenizer.json")
    a = ap.parse_args()
    tok = os.path.join(a.tokenizer, "tokenizer.json")
    if not os.path.isfile(tok):
        sys.exit("error: %s not found: --tokenizer must name a directory with tokenizer.json" % tok)
    with open(tok, encoding="utf-8") as f:
        entries = len(json.load(f)["model"]["vocab"])
    if entries != VOCAB:
        sys.exit("error: %s has %d tokens; these shapes need %d (a Llama 2 tokenizer)"
                 % (tok, entries, VOCAB))
    os.makedirs(a.out, exist_ok=True)
    c = config_for(a.shape)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"):
        src = os.path.join(a.tokenizer, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(a.out, name))
    rng = np.random.default_rng(SEED)
    all_shards = list(shards(c))
    weight_map, total = {}, 0
    for n, tensors in enumerate(all_shards):
        file = "model-%05d-of-%05d.safetensors" % (n + 1, len(all_shards))
        data = {}
        for name, shape in tensors:
            if len(shape) == 1:
                data[name] = np.ones(shape, np.float32)
            else:
                data[name] = rng.standard_normal(shape, dtype=np.float32) * np.float32(STD)
            weight_map[name] = file
            total += data[name].nbytes
        save_file(data, os.path.join(a.out, file), metadata={"format": "pt"})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    print("%s: %s, %.1f M parameters, %d shards" % (a.out, a.shape, total / 4e6, len(all_shards)))


if __name__ == "__main__":
    main()
