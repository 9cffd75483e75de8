#!/usr/bin/env python3
"""Writes rope_reference.json: RoPE inverse frequencies, attention factors
and cos/sin rows as Hugging Face transformers computes them
(modeling_rope_utils.py, LlamaRotaryEmbedding with dynamic_rope_update),
for every rope_type llmc supports, in the spellings configs use.

Run by hand with a venv that has torch + transformers (never in CI):
  /work/venv-hf/bin/python tests/data/rope/generate.py
tests/cpu/rope_test.cpp compares kernels/common/rope.h against the file.

Each case: the config fields, then "passes": the forward passes of one
sequence, in order, on one rotary module, as generation runs them (a
prefill then single-token decode steps): for each pass the positions it
covers, and cos/sin at a few of them (the module's state carries over, so a
dynamic/longrope module's frequencies follow the longest pass so far).
"""
import json
import math
import os

import torch
import transformers
from transformers import LlamaConfig, StableLmConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.stablelm.modeling_stablelm import StableLmRotaryEmbedding

HERE = os.path.dirname(os.path.abspath(__file__))


def longrope_factors(n, lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    return [round(lo + (hi - lo) * float(x), 4) for x in torch.rand(n, generator=g)]


def cases():
    d = 64
    yield "default", dict(head_dim=d, rope_theta=10000.0), None
    yield "linear", dict(head_dim=d, rope_theta=10000.0), {"rope_type": "linear", "factor": 4.0}
    yield "linear-legacy", dict(head_dim=d, rope_theta=10000.0), {"type": "linear", "factor": 2.5}
    yield "llama3", dict(head_dim=d, rope_theta=500000.0, max_position_embeddings=131072), {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}
    yield "yarn", dict(head_dim=d, rope_theta=10000.0, max_position_embeddings=8192), {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    yield "yarn-legacy", dict(head_dim=d, rope_theta=1000000.0, max_position_embeddings=32768), {
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192,
        "beta_fast": 16, "beta_slow": 2}
    yield "yarn-untruncated-attention-factor", dict(head_dim=d, rope_theta=10000.0,
                                                    max_position_embeddings=4096), {
        "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2048,
        "truncate": False, "attention_factor": 1.25}
    yield "yarn-mscale", dict(head_dim=d, rope_theta=10000.0, max_position_embeddings=16384), {
        "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048,
        "mscale": 0.707, "mscale_all_dim": 1.0}
    yield "dynamic", dict(head_dim=d, rope_theta=10000.0, max_position_embeddings=2048), {
        "rope_type": "dynamic", "factor": 2.0}
    yield "dynamic-legacy", dict(head_dim=d, rope_theta=10000.0, max_position_embeddings=2048), {
        "type": "dynamic", "factor": 3.0}
    yield "longrope", dict(head_dim=d, rope_theta=10000.0, max_position_embeddings=8192,
                           original_max_position_embeddings=2048), {
        "rope_type": "longrope", "short_factor": longrope_factors(d // 2, 1.0, 1.5, 1),
        "long_factor": longrope_factors(d // 2, 1.0, 8.0, 2)}
    yield "longrope-factor", dict(head_dim=d, rope_theta=10000.0, max_position_embeddings=4096), {
        "rope_type": "longrope", "factor": 3.0, "original_max_position_embeddings": 2048,
        "short_factor": longrope_factors(d // 2, 1.0, 1.2, 3),
        "long_factor": longrope_factors(d // 2, 1.0, 4.0, 4)}
    yield "partial-default", dict(head_dim=d, rope_theta=10000.0, partial_rotary_factor=0.25), None
    yield "partial-yarn", dict(head_dim=d, rope_theta=10000.0, max_position_embeddings=8192,
                               partial_rotary_factor=0.5), {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}


def rotary(fields, scaling):
    kw = dict(hidden_size=fields["head_dim"] * 4, num_attention_heads=4, num_key_value_heads=4,
              intermediate_size=64, num_hidden_layers=1, vocab_size=32)
    kw.update(fields)
    if scaling is not None:
        kw["rope_scaling"] = dict(scaling)
    # Llama's default RoPE rotates the whole head; StableLM's honours
    # partial_rotary_factor (the other scaling kinds do everywhere).
    if scaling is None and "partial_rotary_factor" in fields:
        config = StableLmConfig(**kw)
        return config, StableLmRotaryEmbedding(config)
    config = LlamaConfig(**kw)
    return config, LlamaRotaryEmbedding(config)


def main():
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": []}
    probe = [0, 7, 2047, 2099, 2100, 2101, 2200, 3000]
    for name, fields, scaling in cases():
        config, rope = rotary(fields, scaling)
        case = {"name": name, "config": fields, "rope_scaling": scaling,
                "inv_freq": rope.inv_freq.tolist(),
                "attention_factor": float(rope.attention_scaling), "passes": []}
        # One sequence: prefill of 2100 tokens, then single-token steps.
        for lo, hi in [(0, 2100), (2100, 2101), (2101, 2102), (2102, 2201), (2201, 3001)]:
            pos = torch.arange(lo, hi)[None, :]
            x = torch.zeros(1, hi - lo, fields["head_dim"])
            cos, sin = rope(x, pos)
            rows = [p for p in probe if lo <= p < hi] or [hi - 1]
            half = cos.shape[-1] // 2
            # rotate_half: both halves of a cos/sin row repeat the pair values.
            assert torch.equal(cos[..., :half], cos[..., half:])
            assert torch.equal(sin[..., :half], sin[..., half:])
            case["passes"].append({
                "positions": [lo, hi],
                "inv_freq": rope.inv_freq.tolist(),
                "rows": {str(p): {"cos": cos[0, p - lo, :half].tolist(),
                                  "sin": sin[0, p - lo, :half].tolist()}
                         for p in rows}})
        out["cases"].append(case)
    with open(os.path.join(HERE, "rope_reference.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
