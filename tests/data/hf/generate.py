#!/usr/bin/env python3
"""Tiny random-weight Hugging Face checkpoints + HF logits: the references of
tests/hf/hf_logits_test.cpp (an independent implementation of each family).

Run BY HAND (never in CI) on a machine with torch and transformers, from the
repository root:

    python3 -m venv /tmp/hfgen && . /tmp/hfgen/bin/activate
    pip install torch --index-url https://download.pytorch.org/whl/cpu  # or plain PyPI
    pip install transformers safetensors numpy
    python3 tests/data/hf/generate.py            # every model
    python3 tests/data/hf/generate.py gemma2 ... # only these
    # InternLM2's reference is InternLM's remote code, kept outside the
    # repository (tests/data/hf/internlm2/README.md):
    python3 tests/data/hf/generate.py --internlm2-code DIR internlm2 internlm2-bias

Last run with: torch 2.15.0 (PyPI wheel, run on the CPU), transformers 5.24.0,
safetensors 0.8.0, Python 3.11.7; transformers 5 writes rope settings as
"rope_parameters" (the exact versions are also written into each
<name>/logits.json).

Each model goes to tests/data/hf/<name>/:
  config.json        written by transformers' save_pretrained
  model.safetensors  float32, as save_pretrained writes it (no lm_head when tied)
  tokenizer.json     a copy of scripts/default-model/tokenizer.json (512 tokens)
  logits.f32         HF logits, float32 little-endian, [rows, vocab] row-major:
                     the prefill of `ids` (one row per id), then `decode_steps`
                     greedy decode steps (row len(ids) + i holds the logits
                     after feeding decode_ids[i])
  logits-bf16.f32    the same for the bf16 reference (below), with its own
                     greedy decode_ids_bf16
  logits.json        the ids, the shape, greedy tokens, margins, the versions;
                     long-context fixtures (long-*: a 2100-token prompt) keep
                     only the last 8 prefill rows, listed as "prefill_rows"

The f32 reference is the model in float32 with eager attention. Decode runs
through HF's own KV cache (generate()'s path: one token per forward after
the prefill) and is checked against one forward over the whole sequence.
decode_ids[0] is the argmax of the last prefill row and decode_ids[i + 1]
the argmax of decode row i, so the sequence is len(ids) + decode_steps long.

The bf16 reference is what an llmc bf16 plan computes: every matrix (2-D
parameter: embeddings, projections, lm_head) rounded to bfloat16, vectors
(norm scales, biases) left in float32, and transformers run in float32 on
that. It is the reference for bf16 plans (tolerance 2e-5, or 5e-5 where
its own f32 rounding is of that size: tests/data/hf/precision.py measures
it against float64, docs/architectures.md "The bf16 tolerance"). Eager
attention with any thread count, oneDNN on or off, gives the same bits.

Weights are drawn with fixed seeds and a std large enough (and norm scales
spread around 1) that the logits of different positions differ by much
more than the 1e-4 tolerance of the test. "min_margin" in logits.json is
the smallest gap between the best and the second-best logit over every
row; a draw whose gap is under ten times the test's tolerance is redrawn
with another seed (see MIN_MARGIN), so that identical greedy ids are a fair
demand.
"""

import importlib
import json
import math
import re
import shutil
import sys
import types
from pathlib import Path

import safetensors
import safetensors.torch
import torch
import transformers
from transformers import (AutoModelForCausalLM, CohereConfig, CohereForCausalLM, ExaoneConfig,
                          Exaone4Config,
                          Exaone4ForCausalLM, Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM,
                          Gemma3TextConfig, GemmaConfig, GemmaForCausalLM, GPTNeoXConfig,
                          GPTNeoXForCausalLM, GraniteConfig, GraniteForCausalLM, LlamaConfig,
                          LlamaForCausalLM, MistralConfig, MistralForCausalLM, Olmo2Config,
                          Olmo2ForCausalLM, Phi3Config, Phi3ForCausalLM, PhiConfig, PhiForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM,
                          StableLmConfig, StableLmForCausalLM, Starcoder2Config,
                          Starcoder2ForCausalLM)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
TOKENIZER = REPO / "scripts" / "default-model" / "tokenizer.json"

VOCAB = 512
# 24 fixed ids (any ids < 512 are valid: the test feeds ids, not text).
IDS = [0, 421, 17, 256, 3, 98, 511, 77, 140, 302, 5, 64, 64, 200, 389, 12, 467, 33, 250, 1, 129,
       318, 45, 402]
DECODE_STEPS = 64

# Shared by every model: 2 layers, GQA, hidden 64, vocab 512.
BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
            rms_norm_eps=1e-5, hidden_act="silu", bos_token_id=0, eos_token_id=1,
            tie_word_embeddings=False)

# The #16 fixtures also say pad_token_id (several config classes default it
# past a 512-token vocabulary).
NEW_BASE = BASE | dict(pad_token_id=None)
# longrope factors, one per rotary pair: head_dim 16 (8 pairs) for BASE.
SHORT = [1.0, 1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0]
LONG = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]
SHORT8, LONG8 = SHORT, LONG


class Spec:
    """One fixture: its model class and config, and how its norms are stored."""

    def __init__(self, cls, config, norm_center=1.0, legacy_rope=None, prompt=None, keep_last=None):
        self.cls = cls
        self.config = config
        # Long-context fixtures: their own prompt (else IDS), and only the
        # last `keep_last` prefill rows are stored (with every decode row).
        self.prompt = prompt if prompt is not None else IDS
        self.keep_last = keep_last
        # Gemma-style norms scale by (1 + w): their stored w is centred on 0.
        self.norm_center = norm_center
        # When set, config.json is rewritten to the pre-transformers-5
        # spelling: top-level rope_theta and rope_scaling {"type": ...}
        # (this dict), and the references come from HF reading that file.
        self.legacy_rope = legacy_rope


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


def models():
    """name -> Spec: one quirk (or one family) each. Seeds follow this order:
    append new models at the end, so that regenerating leaves the committed
    ones byte for byte the same."""
    gemma_base = without(BASE, "hidden_act")
    return {
        # Llama 3 rope scaling. head_dim 16 (8 pairs) with theta 500000 and an
        # original context of 256 puts pairs 0-1 in the unchanged band, pair 2
        # in the smoothed band and pairs 3-7 in the divided band. Tied, as
        # Llama 3.2 1B/3B are (and it keeps the file small).
        "llama3-rope": Spec(LlamaForCausalLM, LlamaConfig(
            **BASE | dict(tie_word_embeddings=True, rope_theta=500000.0,
                          max_position_embeddings=1024,
                          rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                            high_freq_factor=4.0,
                                            original_max_position_embeddings=256)))),
        # Mistral, full attention; head_dim 32 given explicitly so that the
        # q width (4 * 32 = 128) differs from hidden 64, GQA 4:1.
        "mistral": Spec(MistralForCausalLM, MistralConfig(
            **BASE | dict(head_dim=32, num_key_value_heads=1, sliding_window=None,
                          rope_theta=10000.0, rms_norm_eps=1e-6))),
        # Qwen2: biases on q/k/v (none on o), intermediate not a power of two,
        # tied as Qwen2-0.5B is.
        "qwen2": Spec(Qwen2ForCausalLM, Qwen2Config(
            **BASE | dict(tie_word_embeddings=True, intermediate_size=96, rope_theta=1000000.0,
                          rms_norm_eps=1e-6, use_sliding_window=False))),
        # Tied embeddings, and attention_bias, which Llama applies to o_proj too.
        "llama-tied-bias": Spec(LlamaForCausalLM, LlamaConfig(
            **BASE | dict(tie_word_embeddings=True, attention_bias=True, rope_theta=10000.0))),
        # Plain Llama: untied lm_head, default rope, no biases.
        "llama-plain": Spec(LlamaForCausalLM, LlamaConfig(**BASE | dict(rope_theta=10000.0))),
        # Gemma 1: GeGLU (tanh), (1 + w) RMSNorm, embeddings times sqrt(64),
        # tied head, multi-query attention with head_dim 32 (q width 128 !=
        # hidden 64), as gemma-2b has.
        "gemma": Spec(GemmaForCausalLM, GemmaConfig(
            **gemma_base | dict(hidden_act="gelu_pytorch_tanh", head_dim=32,
                                num_key_value_heads=1, intermediate_size=96,
                                tie_word_embeddings=True, rms_norm_eps=1e-6,
                                rope_theta=10000.0)), norm_center=0.0),
        # Gemma 2: 4 layers alternating sliding (window 8, smaller than the
        # 24-token prompt) and global attention, attention and final-logit
        # soft-capping set low enough to bend these logits, sandwich norms,
        # and query_pre_attn_scalar 24 != head_dim 16.
        "gemma2": Spec(Gemma2ForCausalLM, Gemma2Config(
            **gemma_base | dict(num_hidden_layers=4, head_dim=16, intermediate_size=96,
                                hidden_activation="gelu_pytorch_tanh",
                                query_pre_attn_scalar=24, sliding_window=8,
                                attn_logit_softcapping=4.0, final_logit_softcapping=3.0,
                                tie_word_embeddings=True, rms_norm_eps=1e-6,
                                rope_theta=10000.0)), norm_center=0.0),
        # Mistral with sliding_window 16 on every layer, run over 88 tokens.
        "mistral-window": Spec(MistralForCausalLM, MistralConfig(
            **BASE | dict(head_dim=32, num_key_value_heads=1, sliding_window=16,
                          rope_theta=10000.0, rms_norm_eps=1e-6))),
        # Qwen2 with use_sliding_window: layers >= max_window_layers (1, 2)
        # slide over 16 tokens, layer 0 attends globally.
        "qwen2-window": Spec(Qwen2ForCausalLM, Qwen2Config(
            **BASE | dict(num_hidden_layers=3, tie_word_embeddings=True, intermediate_size=96,
                          rope_theta=1000000.0, rms_norm_eps=1e-6, use_sliding_window=True,
                          sliding_window=16, max_window_layers=1))),
        # ---- issue #16's families and RoPE variants ----
        # Qwen3: per-head q/k RMSNorm, head_dim 32 != hidden / heads, tied.
        "qwen3": Spec(Qwen3ForCausalLM, Qwen3Config(
            **NEW_BASE | dict(head_dim=32, tie_word_embeddings=True, rope_theta=1000000.0,
                              rms_norm_eps=1e-6))),
        # Gemma3 text: q/k norms, 6 layers, two sliding (window 8) per global
        # one, local RoPE base 10000 and global 1000000, query_pre_attn_scalar
        # 24. Not Gemma3's own 5:1 pattern: with five sliding layers per
        # global one the greedy decode of every draw settles on one repeated
        # token and neighbouring rows differ by under MIN_ROW_CHANGE.
        "gemma3": Spec(Gemma3ForCausalLM, Gemma3TextConfig(
            **without(NEW_BASE, "hidden_act") | dict(
                num_hidden_layers=6, head_dim=16, intermediate_size=96,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
                hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                sliding_window=8, tie_word_embeddings=True, rms_norm_eps=1e-6,
                rope_parameters={
                    "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
            norm_center=0.0),
        # Phi-3 longrope, short factors only: the 88 tokens stay within
        # original_max_position_embeddings 128. Packed qkv_proj/gate_up_proj.
        "phi3-longrope-short": Spec(Phi3ForCausalLM, Phi3Config(
            **NEW_BASE | dict(max_position_embeddings=512, original_max_position_embeddings=128,
                              rope_theta=10000.0, rope_scaling=dict(
                                  rope_type="longrope", short_factor=SHORT, long_factor=LONG)))),
        # Phi-3 longrope past original_max_position_embeddings (16 < the
        # 24-token prompt): long factors and the attention factor throughout.
        "phi3-longrope-long": Spec(Phi3ForCausalLM, Phi3Config(
            **NEW_BASE | dict(max_position_embeddings=256, original_max_position_embeddings=16,
                              rope_theta=10000.0, rope_scaling=dict(
                                  rope_type="longrope", short_factor=SHORT, long_factor=LONG)))),
        # OLMo 2: post-norms (no pre-norms) and q/k RMSNorm over the whole width.
        "olmo2": Spec(Olmo2ForCausalLM, Olmo2Config(
            **NEW_BASE | dict(rope_theta=500000.0, rms_norm_eps=1e-6))),
        # Granite: embedding, residual, attention and logit multipliers.
        "granite": Spec(GraniteForCausalLM, GraniteConfig(
            **NEW_BASE | dict(rope_theta=10000.0, embedding_multiplier=6.0,
                              residual_multiplier=0.5, attention_multiplier=0.1,
                              logits_scaling=2.0, tie_word_embeddings=True))),
        # StableLM: LayerNorm with bias, partial rotary 0.25, q/k/v biases.
        "stablelm": Spec(StableLmForCausalLM, StableLmConfig(
            **without(NEW_BASE, "rms_norm_eps") | dict(
                partial_rotary_factor=0.25, use_qkv_bias=True, layer_norm_eps=1e-5,
                rope_theta=10000.0))),
        # Starcoder2: LayerNorm with bias, GELU (tanh) MLP c_fc/c_proj with
        # biases, biases everywhere, sliding window 16 over 88 tokens.
        "starcoder2": Spec(Starcoder2ForCausalLM, Starcoder2Config(
            **without(NEW_BASE, "rms_norm_eps") | dict(
                hidden_act="gelu_pytorch_tanh", intermediate_size=128, norm_epsilon=1e-5,
                use_bias=True, sliding_window=16, rope_theta=10000.0,
                tie_word_embeddings=True))),
        # Cohere: parallel attention and MLP off one LayerNorm (no bias),
        # interleaved RoPE, logit_scale, tied.
        "cohere": Spec(CohereForCausalLM, CohereConfig(
            **without(NEW_BASE, "rms_norm_eps") | dict(
                layer_norm_eps=1e-5, logit_scale=0.5, rope_theta=10000.0,
                tie_word_embeddings=True))),
        # EXAONE 4: post-norms, q/k norm, 3 sliding layers (window 16, RoPE)
        # per global one (no RoPE).
        "exaone4": Spec(Exaone4ForCausalLM, Exaone4Config(
            **NEW_BASE | dict(num_hidden_layers=4, sliding_window=16,
                              sliding_window_pattern=4, rope_theta=10000.0,
                              tie_word_embeddings=True))),
        # Phi (phi-2): parallel block off one LayerNorm, partial rotary 0.5,
        # GELU (gelu_new) MLP fc1/fc2, biases everywhere, lm_head bias.
        "phi": Spec(PhiForCausalLM, PhiConfig(
            **without(NEW_BASE, "rms_norm_eps") | dict(
                hidden_act="gelu_new", intermediate_size=128, partial_rotary_factor=0.5,
                layer_norm_eps=1e-5, rope_theta=10000.0))),
        # GPT-NeoX (Pythia): packed query_key_value, parallel residual,
        # rotary_pct 0.25, GELU MLP, untied embed_out.
        "gpt-neox": Spec(GPTNeoXForCausalLM, GPTNeoXConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=256, hidden_act="gelu",
            layer_norm_eps=1e-5, rotary_pct=0.25, use_parallel_residual=True,
            bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
            rope_theta=10000.0)),
        # Llama RoPE variants (rope_parameters as transformers 5 writes them).
        "llama-yarn": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0, max_position_embeddings=512,
                              rope_scaling=dict(rope_type="yarn", factor=4.0,
                                                original_max_position_embeddings=128)))),
        # dynamic NTK: transformers rescales only past max_position_embeddings,
        # so within it (all 88 tokens) it is plain RoPE.
        "llama-dynamic": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0,
                              rope_scaling=dict(rope_type="dynamic", factor=2.0)))),
        "llama-linear": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0,
                              rope_scaling=dict(rope_type="linear", factor=4.0)))),
        "llama-longrope": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0, max_position_embeddings=256,
                              rope_scaling=dict(rope_type="longrope", short_factor=SHORT8,
                                                long_factor=LONG8,
                                                original_max_position_embeddings=16)))),
        # The legacy spellings: config.json as transformers 4 wrote it.
        "llama-linear-legacy": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0,
                              rope_scaling=dict(rope_type="linear", factor=4.0))),
            legacy_rope={"type": "linear", "factor": 4.0}),
        "llama-yarn-legacy": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0, max_position_embeddings=512,
                              rope_scaling=dict(rope_type="yarn", factor=4.0,
                                                original_max_position_embeddings=128))),
            legacy_rope={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}),
        "llama-dynamic-legacy": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0,
                              rope_scaling=dict(rope_type="dynamic", factor=2.0))),
            legacy_rope={"type": "dynamic", "factor": 2.0}),
    } | long_models() | later_models() | published_models()


def long_prompt(length, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (length,), generator=g).tolist()


# Long context, past 2048 positions, for each RoPE scaling: a 2100-token
# prompt (2020 for longrope, so that its decode crosses the original 2048
# and switches to the long factors at position 2048 while the cached keys
# keep their short-factor rotation). Only the last LONG_KEEP prefill rows
# are stored, then the 64 decode rows.
LONG_KEEP = 8


def long_models():
    long_base = NEW_BASE | dict(rope_theta=10000.0)
    prompt = long_prompt(2100, 7)
    return {
        "long-yarn": Spec(LlamaForCausalLM, LlamaConfig(
            **long_base | dict(max_position_embeddings=8192, rope_scaling=dict(
                rope_type="yarn", factor=4.0, original_max_position_embeddings=2048))),
            prompt=prompt, keep_last=LONG_KEEP),
        # max_position_embeddings 2048 < 2100: the prefill and every decode
        # step run with a base grown from its own length.
        "long-dynamic": Spec(LlamaForCausalLM, LlamaConfig(
            **long_base | dict(max_position_embeddings=2048, rope_scaling=dict(
                rope_type="dynamic", factor=2.0))),
            prompt=prompt, keep_last=LONG_KEEP),
        "long-longrope": Spec(LlamaForCausalLM, LlamaConfig(
            **long_base | dict(max_position_embeddings=8192, rope_scaling=dict(
                rope_type="longrope", short_factor=SHORT8, long_factor=LONG8,
                original_max_position_embeddings=2048))),
            prompt=prompt[:2020], keep_last=LONG_KEEP),
        "long-linear": Spec(LlamaForCausalLM, LlamaConfig(
            **long_base | dict(max_position_embeddings=8192, rope_scaling=dict(
                rope_type="linear", factor=4.0))),
            prompt=prompt, keep_last=LONG_KEEP),
        "long-llama3": Spec(LlamaForCausalLM, LlamaConfig(
            **long_base | dict(max_position_embeddings=8192, rope_scaling=dict(
                rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                original_max_position_embeddings=2048))),
            prompt=prompt, keep_last=LONG_KEEP),
    }


def randomize(model, seed, norm_center):
    """Normal(0, 0.2) matrices and biases; norm scales uniform in
    [norm_center - 0.5, norm_center + 0.5]."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layer_norm.weight"):
                p.copy_(norm_center - 0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def round_matrices_to_bf16(model):
    """What a bf16 plan stores: 2-D parameters in bfloat16, vectors in f32."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(p.to(torch.bfloat16).to(torch.float32))


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


def margin(row):
    top = torch.topk(row, 2).values
    return (top[0] - top[1]).item()


def run(model, ids=IDS, keep_last=None, length_dependent=False):
    """Prefill `ids`, then DECODE_STEPS greedy steps through HF's KV cache.
    Returns (logits [kept prefill rows + DECODE_STEPS, vocab], decode ids,
    min margin, drift); `keep_last` keeps only the last prefill rows."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        kept = out.logits[0] if keep_last is None else out.logits[0, -keep_last:]
        rows = [kept]
        cache = out.past_key_values
        decode_ids = []
        margins = [margin(r) for r in kept]
        next_id = int(out.logits[0, -1].argmax())
        for _ in range(DECODE_STEPS):
            decode_ids.append(next_id)
            out = model(torch.tensor([[next_id]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            row = out.logits[0, -1]
            rows.append(row[None])
            margins.append(margin(row))
            next_id = int(row.argmax())
        logits = torch.cat(rows).to(torch.float32).contiguous()
        # The cache path must agree with one forward over the whole sequence
        # (not for dynamic/longrope, whose frequencies follow each pass's length).
        full = model(torch.tensor([ids + decode_ids]), use_cache=False).logits[0]
        drift = (full[-logits.shape[0]:] - logits).abs().max().item()
        assert length_dependent or drift < 1e-4, f"HF cache vs full forward differ by {drift}"
    assert logits.shape == (len(kept) + DECODE_STEPS, VOCAB)
    return logits, decode_ids, min(margins), drift


def write_legacy_rope(path, rope_scaling):
    """config.json with top-level rope_theta and rope_scaling {"type": ...}."""
    config = json.loads(path.read_text())
    params = config.pop("rope_parameters")
    config["rope_theta"] = params["rope_theta"]
    config["rope_scaling"] = rope_scaling
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def load(out):
    return AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32,
                                                attn_implementation="eager").eval()


# Greedy choices must be clear-cut: the best logit leads the second by at
# least ten times the test's tolerance (1e-4 for f32, 2e-5 for bf16), or a
# correct implementation could pick the other token. A model whose random
# weights give a closer call is redrawn with the next seed of its series.
MIN_MARGIN, MIN_MARGIN_BF16 = 1e-3, 2e-4
SEED_STRIDE, MAX_DRAWS = 1000, 10
# Consecutive rows must differ by at least this much somewhere (the test's
# ReferenceLogitsDifferBetweenPositions): a greedy decode stuck repeating one
# token under sliding windows (Gemma3's 5:1 pattern) can make neighbouring
# rows nearly equal, which would hide position bugs. Such a draw is redrawn.
MIN_ROW_CHANGE = 0.1


def min_row_change(logits):
    return (logits[1:] - logits[:-1]).abs().amax(dim=-1).min().item()


def draw(name, spec, seed):
    """Writes the checkpoint of `spec` drawn with `seed` into HERE / name and
    returns the references HF computes from the files as written."""
    torch.manual_seed(seed)
    config = spec.config
    config._attn_implementation = "eager"
    model = spec.cls(config).to(torch.float32).eval()
    randomize(model, seed, spec.norm_center)
    model.tie_weights()
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)
    shutil.copyfile(TOKENIZER, out / "tokenizer.json")
    if spec.legacy_rope is not None:
        write_legacy_rope(out / "config.json", spec.legacy_rope)

    # The references come from the files as written (what llmc reads).
    model = load(out)
    rope = model.config.rope_parameters or {}
    length_dependent = rope.get("rope_type") in ("dynamic", "longrope")
    f32 = run(model, spec.prompt, spec.keep_last, length_dependent)
    # A fresh module: a dynamic one remembers the longest length it has seen
    # (run()'s one-pass check), which would leak into the bf16 reference.
    model = load(out)
    round_matrices_to_bf16(model)
    bf16 = run(model, spec.prompt, spec.keep_last, length_dependent)
    return out, f32, bf16


def generate(name, spec, first_seed):
    draw_one = getattr(spec, "draw", None) or draw
    for attempt in range(MAX_DRAWS):
        seed = first_seed + attempt * SEED_STRIDE
        out, (logits, decode_ids, min_margin, drift), (logits16, decode_ids16, min_margin16, _) = \
            draw_one(name, spec, seed)
        change = min(min_row_change(logits), min_row_change(logits16))
        if min_margin >= MIN_MARGIN and min_margin16 >= MIN_MARGIN_BF16 and \
                change >= MIN_ROW_CHANGE:
            break
        print(f"{name}: seed {seed}: greedy margins {min_margin:.1e} / {min_margin16:.1e}, "
              f"smallest row change {change:.2e}: too close, redrawing")
    else:
        raise RuntimeError(f"no seed of {MAX_DRAWS} gives clear greedy choices")
    config = spec.config
    (out / "logits.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
    (out / "logits-bf16.f32").write_bytes(logits16.numpy().astype("<f4").tobytes())
    spread = (logits[1:] - logits[:-1]).abs().max().item()
    ids = spec.prompt
    kept = len(ids) if spec.keep_last is None else spec.keep_last
    meta = {
        "ids": ids,
        "decode_ids": decode_ids,
        "decode_ids_bf16": decode_ids16,
        "shape": [kept + DECODE_STEPS, VOCAB],
        "logits": "logits.f32",
        "logits_bf16": "logits-bf16.f32",
        "greedy_next": logits.argmax(-1).tolist(),
        "greedy_next_bf16": logits16.argmax(-1).tolist(),
        **({} if spec.keep_last is None else
           {"prefill_rows": list(range(len(ids) - kept, len(ids)))}),
        "min_margin": min_margin,
        "min_margin_bf16": min_margin16,
        "seed": seed,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__,
                     "python": sys.version.split()[0]},
    }
    (out / "logits.json").write_text(json.dumps(meta) + "\n")
    extra = f", llama3 bands {llama3_bands(config)}" if name == "llama3-rope" else ""
    bf16_gap = (logits16 - logits).abs().max().item()
    print(f"{name}: logits std {logits.std().item():.3f}, max |row diff| {spread:.3f}, "
          f"min margin {min_margin:.2e} (bf16 {min_margin16:.2e}), cache drift {drift:.1e}, "
          f"|bf16 - f32| {bf16_gap:.3f}{extra}")


def later_models():
    """Appended after the long-context table, so that its seeds stay put."""
    return {
        # Llama's mlp_bias: biases on gate_proj, up_proj and down_proj.
        "llama-mlp-bias": Spec(LlamaForCausalLM, LlamaConfig(
            **NEW_BASE | dict(rope_theta=10000.0, mlp_bias=True))),
        # Partial rotary past 2048 positions: StableLM rotating half of each
        # 16-wide head (4 of 8 pairs) over the 2100-token prompt.
        "long-partial": Spec(StableLmForCausalLM, StableLmConfig(
            **without(NEW_BASE, "rms_norm_eps") | dict(
                max_position_embeddings=4096, partial_rotary_factor=0.5, use_qkv_bias=True,
                layer_norm_eps=1e-5, rope_theta=10000.0)),
            prompt=long_prompt(2100, 7), keep_last=LONG_KEEP),
    }



# --- Published layouts: checkpoints saved as their makers publish them
# (config names, tensor names), with references from the code that reads
# that form. Their Spec has its own draw().

class PublishedSpec:
    """A checkpoint written under its published config and tensor names.
    build() makes the randomized model's module (canonical names),
    tensors(model) gives its state under the published names, and load(out)
    reads the files back the way the family's reference code does."""

    def __init__(self, config_json, build, tensors, load, length_dependent=False):
        self.config_json = config_json
        self.build = build
        self.tensors = tensors
        self.load = load
        self.length_dependent = length_dependent
        self.prompt = IDS
        self.keep_last = None
        self.norm_center = 1.0
        self.config = None

    def draw(self, name, spec, seed):
        torch.manual_seed(seed)
        model = self.build()
        randomize(model, seed, self.norm_center)
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        (out / "config.json").write_text(json.dumps(self.config_json, indent=2, sort_keys=True)
                                         + "\n")
        safetensors.torch.save_file(self.tensors(model), str(out / "model.safetensors"),
                                    metadata={"format": "pt"})
        (out / "model.safetensors").chmod(0o644)
        shutil.copyfile(TOKENIZER, out / "tokenizer.json")
        # The references come from the files as written (what llmc reads).
        f32 = run(self.load(out), self.prompt, self.keep_last, self.length_dependent)
        model = self.load(out)
        round_matrices_to_bf16(model)
        bf16 = run(model, self.prompt, self.keep_last, self.length_dependent)
        return out, f32, bf16


# EXAONE 3.x as LG publishes it: transformers 5.24 reads model_type "exaone"
# as LlamaForCausalLM and renames these tensors at load (conversion_mapping.py
# "exaone"); this is the inverse, Llama name -> published name, in order.
EXAONE_RENAMES = [
    (r"^model\.embed_tokens\.", "transformer.wte."),
    (r"^model\.layers\.", "transformer.h."),
    (r"^model\.norm\.", "transformer.ln_f."),
    (r"\.self_attn\.o_proj\.", ".attn.attention.out_proj."),
    (r"\.self_attn\.", ".attn.attention."),
    (r"\.input_layernorm\.", ".ln_1."),
    (r"\.post_attention_layernorm\.", ".ln_2."),
    (r"\.mlp\.gate_proj\.", ".mlp.c_fc_0."),
    (r"\.mlp\.up_proj\.", ".mlp.c_fc_1."),
    (r"\.mlp\.down_proj\.", ".mlp.c_proj."),
]


def exaone_config(**fields):
    """config.json in the form of LGAI-EXAONE's (EXAONE-3.0-7.8B-Instruct,
    EXAONE-3.5-2.4B-Instruct): num_layers, layer_norm_epsilon,
    activation_function, top-level rope_theta and rope_scaling, their
    auto_map (whose remote code transformers 5.24 does not need)."""
    return {
        "architectures": ["ExaoneForCausalLM"], "model_type": "exaone",
        "auto_map": {"AutoConfig": "configuration_exaone.ExaoneConfig",
                     "AutoModelForCausalLM": "modeling_exaone.ExaoneForCausalLM",
                     "AutoModelForSequenceClassification":
                         "modeling_exaone.ExaoneForSequenceClassification"},
        "activation_function": "silu", "attention_dropout": 0.0, "embed_dropout": 0.0,
        "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": None,
        "hidden_size": 64, "intermediate_size": 128, "num_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-5,
        "max_position_embeddings": 256, "rope_scaling": None, "rope_theta": 500000.0,
        "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
        "vocab_size": VOCAB,
    } | fields


def exaone_spec(config_json):
    def build():
        # A deep copy: the config class rewrites rope_scaling in place.
        hf = ExaoneConfig.from_dict(json.loads(json.dumps(
            {k: v for k, v in config_json.items() if k not in ("architectures", "auto_map")})))
        hf._attn_implementation = "eager"
        model = AutoModelForCausalLM.from_config(hf).to(torch.float32).eval()
        model.tie_weights()
        return model

    def tensors(model):
        published = {}
        for name, tensor in model.state_dict().items():
            if name == "lm_head.weight" and config_json["tie_word_embeddings"]:
                continue
            for pattern, replacement in EXAONE_RENAMES:
                name = re.sub(pattern, replacement, name)
            published[name] = tensor.contiguous().clone()
        return published

    def load_strict(out):
        # Every published tensor must reach the model through transformers'
        # renaming: a missing one would be left at its random init.
        model, info = AutoModelForCausalLM.from_pretrained(
            out, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
        assert type(model).__name__ == "LlamaForCausalLM", type(model)
        assert not any(info.values()), f"{out}: loading left {info}"
        return model.eval()

    return PublishedSpec(config_json, build, tensors, load_strict)


# InternLM2 has no class in transformers: its reference is InternLM's own
# remote code (modeling_internlm2.py + configuration_internlm2.py of the
# internlm2 / internlm2_5 hub repositories), kept outside this repository
# and passed as --internlm2-code DIR (tests/data/hf/internlm2/README.md says
# which files and what was patched for transformers 5.24).
INTERNLM2_CODE = None


def internlm2_modules():
    """The remote code as a package (modeling imports .configuration_internlm2)."""
    if INTERNLM2_CODE is None:
        raise RuntimeError("the InternLM2 fixtures need --internlm2-code DIR (the folder with "
                           "modeling_internlm2.py and configuration_internlm2.py)")
    if "internlm2_remote" not in sys.modules:
        package = types.ModuleType("internlm2_remote")
        package.__path__ = [str(INTERNLM2_CODE)]
        sys.modules["internlm2_remote"] = package
    return (importlib.import_module("internlm2_remote.configuration_internlm2"),
            importlib.import_module("internlm2_remote.modeling_internlm2"))


def internlm2_config(**fields):
    """config.json in the form of internlm/internlm2_5-7b-chat's: packed wqkv
    (`bias`), legacy rope_scaling {"type", "factor"}, its auto_map."""
    return {
        "architectures": ["InternLM2ForCausalLM"], "model_type": "internlm2",
        "attn_implementation": "eager",
        "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                     "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM",
                     "AutoModel": "modeling_internlm2.InternLM2ForCausalLM"},
        "bias": False, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": None,
        "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
        "intermediate_size": 128, "max_position_embeddings": 256,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "pretraining_tp": 1, "rms_norm_eps": 1e-5, "rope_scaling": None, "rope_theta": 1000000,
        "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
        "vocab_size": VOCAB,
    } | fields


def internlm2_spec(config_json):
    fields = {k: v for k, v in config_json.items()
              if k not in ("architectures", "auto_map", "model_type", "torch_dtype")}
    tied = config_json["tie_word_embeddings"]

    def make(config_fields):
        configuration, modeling = internlm2_modules()
        # A deep copy: transformers 5 rewrites rope_scaling in place.
        config = configuration.InternLM2Config(**json.loads(json.dumps(config_fields)))
        return modeling.InternLM2ForCausalLM(config).to(torch.float32).eval()

    def tensors(model):
        return {name: tensor.contiguous().clone() for name, tensor in model.state_dict().items()
                if not (tied and name == "output.weight")}

    def load(out):
        model = make(json.loads((out / "config.json").read_text()))
        state = safetensors.torch.load_file(str(out / "model.safetensors"))
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected and missing == (["output.weight"] if tied else []), \
            f"{out}: missing {missing}, unexpected {unexpected}"
        assert not tied or model.output.weight.data_ptr() == \
            model.model.tok_embeddings.weight.data_ptr(), "output.weight is not tied"
        return model

    rope = config_json["rope_scaling"] or {}
    return PublishedSpec(config_json, lambda: make(fields), tensors, load,
                         length_dependent=rope.get("type") == "dynamic")


def published_models():
    """Appended last, so that every other seed stays put."""
    return {
        # EXAONE 3.0 (7.8B's form): untied lm_head, no rope scaling, theta 500000.
        "exaone3": exaone_spec(exaone_config()),
        # EXAONE 3.5 (2.4B's form): tied embeddings, llama3 rope scaling
        # (factor 8 over an original 256 of 1024 positions, as llama3-rope).
        "exaone35-tied": exaone_spec(exaone_config(
            tie_word_embeddings=True, max_position_embeddings=1024,
            rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                          "original_max_position_embeddings": 256, "rope_type": "llama3"})),
        # InternLM2.5 (7B's form): GQA 4/2 packed into wqkv per kv head, no
        # biases, dynamic NTK (factor 2) with max_position_embeddings 64, so
        # that the decode past position 64 grows the base every step.
        "internlm2": internlm2_spec(internlm2_config(
            max_position_embeddings=64, rope_scaling={"type": "dynamic", "factor": 2.0})),
        # InternLM2Config's own defaults: biases on wqkv and wo; here with
        # multi-query attention (4 q heads per kv head), linear RoPE scaling
        # (factor 2) and tied embeddings.
        "internlm2-bias": internlm2_spec(internlm2_config(
            bias=True, num_key_value_heads=1, tie_word_embeddings=True,
            rope_scaling={"type": "linear", "factor": 2.0})),
    }


def main():
    global INTERNLM2_CODE
    torch.use_deterministic_algorithms(True)
    args = sys.argv[1:]
    if "--internlm2-code" in args:
        at = args.index("--internlm2-code")
        INTERNLM2_CODE = Path(args[at + 1]).resolve()
        del args[at:at + 2]
    only = set(args)
    table = models()
    unknown = only - table.keys()
    if unknown:
        sys.exit(f"unknown model(s) {sorted(unknown)}; known: {', '.join(table)}")
    failed = []
    for seed, (name, spec) in enumerate(table.items(), start=1):
        if not only or name in only:
            try:
                generate(name, spec, seed)
            except Exception as error:  # report every model, then fail
                failed.append(name)
                print(f"{name}: FAILED: {type(error).__name__}: {error}")
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")
    total = sum(f.stat().st_size for f in HERE.glob("*/*"))
    print(f"total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
