// LG AI Research's EXAONE 4 (Exaone4ForCausalLM), as transformers 5.24's
// modeling_exaone4.py computes it: the Llama layout and tensor names with
//   - post-norms only, as OLMo2: no input_layernorm; the attention output
//     goes through post_attention_layernorm and the MLP output through
//     post_feedforward_layernorm before their residual adds;
//   - an RMSNorm of each q and k head (self_attn.{q,k}_norm.weight
//     [head_dim]) before RoPE;
//   - hybrid attention: `layer_types`, else every `sliding_window_pattern`-th
//     layer (default 4: three sliding layers, then a global one) is global;
//     the sliding layers see `sliding_window` keys (default 4096);
//   - NoPE: when `sliding_window` is set, the global layers apply no RoPE at
//     all (q and k reach attention unrotated); with `sliding_window` null
//     every layer is global and rotated;
//   - tie_word_embeddings defaults to false, rms_norm_eps to 1e-5.
// ExaoneForCausalLM (EXAONE 3.x) is another class: models/exaone.h.
#pragma once

#include "models/architecture.h"

namespace llmc {

const Architecture &exaone4ForCausalLM();

} // namespace llmc
