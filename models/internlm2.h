// Shanghai AI Lab's InternLM2 and InternLM2.5 (InternLM2ForCausalLM), as
// InternLM's own remote code computes it (modeling_internlm2.py of the
// internlm2 / internlm2_5 hub repositories; transformers has no class):
// Llama's block (pre-norm RMSNorm, GQA, SwiGLU, rotate-half RoPE) under
// other names, with q, k and v packed in one projection:
//   model.tok_embeddings.weight             [V, H]
//   per layer i, under model.layers.i.:
//     attention_norm.weight                 [H]
//     attention.wqkv.weight                 [(N + 2K) D, H]   (.bias when `bias`)
//     attention.wo.weight                   [H, N D]          (.bias when `bias`)
//     ffn_norm.weight                       [H]
//     feed_forward.w1.weight (gate), feed_forward.w3.weight (up)   [I, H]
//     feed_forward.w2.weight (down)         [H, I]
//   model.norm.weight                       [H]
//   output.weight                           [V, H]   (absent when tied)
// (N heads, K kv heads, D = H / N). wqkv's rows are grouped per kv head:
// for kv head h, the G = N / K query heads h G .. h G + G - 1, then k head h,
// then v head h, D rows each; they are split at import (derivedTensors)
// into Llama's q/k/v_proj, and the other tensors are read under Llama's
// names without a copy, so the graph is the Llama decoder's.
// Config: InternLM2Config's defaults (bias true, rms_norm_eps 1e-6,
// rope_theta 10000, tie_word_embeddings false); rope_scaling null or
// {"type": "linear" | "dynamic", "factor" >= 1}, the two its code knows;
// head_dim is always hidden_size / num_attention_heads.
#pragma once

#include "models/architecture.h"

namespace llmc {

const Architecture &internLm2ForCausalLM();

} // namespace llmc
