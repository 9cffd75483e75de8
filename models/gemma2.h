// Google's Gemma 2 (Gemma2ForCausalLM): Gemma (models/gemma.h: GeGLU,
// (1 + w) RMSNorm, sqrt(hidden)-scaled embeddings, tied head) plus
//   - sandwich norms: post_attention_layernorm normalizes the attention
//     output and post_feedforward_layernorm the MLP output before their
//     residual adds; pre_feedforward_layernorm is the MLP's input norm;
//   - attention scores scaled by query_pre_attn_scalar^-0.5 and soft-capped
//     by attn_logit_softcapping, the logits by final_logit_softcapping
//     (null: off; absent: HF's defaults 50 and 30);
//   - sliding-window attention (`sliding_window`) on the layers `layer_types`
//     names, or when it is absent on the even layers (0, 2, ...), as HF.
// The MLP activation is `hidden_activation` (default gelu_pytorch_tanh);
// unlike Gemma 1, "gelu" there is exact GELU.
#pragma once

#include "models/architecture.h"

namespace llmc {

const Architecture &gemma2ForCausalLM();

} // namespace llmc
