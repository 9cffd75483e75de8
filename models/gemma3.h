// Google's Gemma 3, text only (Gemma3ForCausalLM, config model_type
// "gemma3_text"): Gemma 2 (models/gemma2.h: GeGLU, (1 + w) RMSNorm,
// sqrt(hidden)-scaled embeddings, tied head, sandwich norms,
// query_pre_attn_scalar) plus
//   - a (1 + w) RMSNorm of each q and k head (self_attn.{q,k}_norm.weight
//     [head_dim]) before RoPE;
//   - two RoPE bases: the sliding layers rotate by rope_local_base_freq
//     (default 10000), the global ones by rope_theta (default 1e6) and
//     rope_scaling; transformers 5 writes both as rope_parameters keyed by
//     layer type ({"sliding_attention": {...}, "full_attention": {...}});
//   - the sliding pattern: `layer_types`, else every `sliding_window_pattern`-th
//     layer (default 6: five sliding layers, then a global one) is global;
//   - soft-capping off unless attn_logit_softcapping / final_logit_softcapping
//     are given (HF's defaults are null).
// Refused: use_bidirectional_attention true (an encoder-style mask).
// Gemma3ForConditionalGeneration (the vision-language checkpoints) is refused
// by models/unsupported_features.cpp, naming its vision tower.
#pragma once

#include "models/architecture.h"

namespace llmc {

const Architecture &gemma3ForCausalLM();

} // namespace llmc
