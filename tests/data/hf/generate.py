#!/usr/bin/env python3
"""Tiny random-weight Hugging Face checkpoints + HF logits: the references of
tests/hf/hf_logits_test.cpp (an independent implementation of each family).

Run BY HAND (never in CI) on a machine with torch and transformers, from the
repository root:

    python3 -m venv /tmp/hfgen && . /tmp/hfgen/bin/activate
    pip install torch --index-url https://download.pytorch.org/whl/cpu  # or plain PyPI
    pip install transformers safetensors
    python3 tests/data/hf/generate.py

Last run with: torch 2.15.0 (CPU), transformers 5.24.0, safetensors 0.8.0,
Python 3.11.7; transformers 5 writes rope settings as "rope_parameters".
(the exact versions are also written into each <name>/logits.json).

Each model goes to tests/data/hf/<name>/:
  config.json        written by transformers' save_pretrained
  model.safetensors  float32, as save_pretrained writes it (no lm_head when tied)
  tokenizer.json     a copy of scripts/default-model/tokenizer.json (512 tokens)
  logits.f32         HF logits, float32 little-endian, [len(ids), vocab] row-major
  logits.json        the ids, the shape, greedy next tokens and the versions

Logits come from one forward pass over the whole id sequence in float32 with
eager attention. Weights are drawn with fixed seeds and a std large enough
(and RMSNorm scales spread around 1) that the logits of different positions
differ by much more than the 1e-4 tolerance of the test.
"""

import json
import math
import shutil
import sys
from pathlib import Path

import safetensors
import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
TOKENIZER = REPO / "scripts" / "default-model" / "tokenizer.json"

VOCAB = 512
# 24 fixed ids (any ids < 512 are valid: the test feeds ids, not text).
IDS = [0, 421, 17, 256, 3, 98, 511, 77, 140, 302, 5, 64, 64, 200, 389, 12, 467, 33, 250, 1, 129,
       318, 45, 402]

# Shared by every model: 2 layers, GQA, hidden 64, vocab 512.
BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
            rms_norm_eps=1e-5, hidden_act="silu", bos_token_id=0, eos_token_id=1,
            tie_word_embeddings=False)


def models():
    """name -> (model class, config): the five checkpoints, one quirk each."""
    return {
        # Llama 3 rope scaling. head_dim 16 (8 pairs) with theta 500000 and an
        # original context of 256 puts pairs 0-1 in the unchanged band, pair 2
        # in the smoothed band and pairs 3-7 in the divided band. Tied, as
        # Llama 3.2 1B/3B are (and it keeps the file small).
        "llama3-rope": (LlamaForCausalLM, LlamaConfig(
            **BASE | dict(tie_word_embeddings=True, rope_theta=500000.0,
                          max_position_embeddings=1024,
                          rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                            high_freq_factor=4.0,
                                            original_max_position_embeddings=256)))),
        # Mistral, full attention; head_dim 32 given explicitly so that the
        # q width (4 * 32 = 128) differs from hidden 64, GQA 4:1.
        "mistral": (MistralForCausalLM, MistralConfig(
            **BASE | dict(head_dim=32, num_key_value_heads=1, sliding_window=None,
                          rope_theta=10000.0, rms_norm_eps=1e-6))),
        # Qwen2: biases on q/k/v (none on o), intermediate not a power of two,
        # tied as Qwen2-0.5B is.
        "qwen2": (Qwen2ForCausalLM, Qwen2Config(
            **BASE | dict(tie_word_embeddings=True, intermediate_size=96, rope_theta=1000000.0,
                          rms_norm_eps=1e-6, use_sliding_window=False))),
        # Tied embeddings, and attention_bias, which Llama applies to o_proj too.
        "llama-tied-bias": (LlamaForCausalLM, LlamaConfig(
            **BASE | dict(tie_word_embeddings=True, attention_bias=True, rope_theta=10000.0))),
        # Plain Llama: untied lm_head, default rope, no biases.
        "llama-plain": (LlamaForCausalLM, LlamaConfig(**BASE | dict(rope_theta=10000.0))),
    }


def randomize(model, seed):
    """Normal(0, 0.2) matrices and biases; RMSNorm scales uniform in [0.5, 1.5]."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def llama3_bands(config):
    """How many rope pairs fall in the unchanged, smoothed and divided bands."""
    s = config.rope_scaling if getattr(config, "rope_scaling", None) else config.rope_parameters
    head_dim = config.head_dim
    theta = getattr(config, "rope_theta", None) or s["rope_theta"]
    old = s["original_max_position_embeddings"]
    bands = [0, 0, 0]
    for i in range(head_dim // 2):
        wavelen = 2 * math.pi * theta ** (2 * i / head_dim)
        bands[0 if wavelen < old / s["high_freq_factor"] else
              2 if wavelen > old / s["low_freq_factor"] else 1] += 1
    return bands


def generate(name, cls, config, seed):
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = cls(config).to(torch.float32).eval()
    randomize(model, seed)
    model.tie_weights()
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)
    shutil.copyfile(TOKENIZER, out / "tokenizer.json")

    with torch.no_grad():
        logits = model(torch.tensor([IDS])).logits[0].to(torch.float32).contiguous()
    assert logits.shape == (len(IDS), VOCAB)
    (out / "logits.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
    spread = (logits[1:] - logits[:-1]).abs().max().item()
    meta = {
        "ids": IDS,
        "shape": [len(IDS), VOCAB],
        "logits": "logits.f32",
        "greedy_next": logits.argmax(-1).tolist(),
        "seed": seed,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__,
                     "python": sys.version.split()[0]},
    }
    (out / "logits.json").write_text(json.dumps(meta) + "\n")
    extra = f", llama3 bands {llama3_bands(config)}" if name == "llama3-rope" else ""
    print(f"{name}: logits std {logits.std().item():.3f}, max |row diff| {spread:.3f}{extra}")


def main():
    torch.use_deterministic_algorithms(True)
    # Seeds follow the order of models(): append new models at the end, so
    # that regenerating leaves the committed ones byte for byte the same.
    for seed, (name, (cls, config)) in enumerate(models().items(), start=1):
        generate(name, cls, config, seed)
    total = sum(f.stat().st_size for f in HERE.glob("*/*"))
    print(f"total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
