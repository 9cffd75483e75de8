// IBM's Granite 3 (GraniteForCausalLM): Llama's layout, tensor names and
// config rules (attention_bias, mlp_bias, tied embeddings by
// tie_word_embeddings) plus four multipliers, each 1.0 when absent:
//   - embedding_multiplier scales the token embeddings;
//   - attention_multiplier is the attention's score scale (instead of
//     head_dim^-0.5);
//   - residual_multiplier scales the attention and MLP outputs before each
//     residual add;
//   - logits_scaling divides the logits.
// The MoE variants (GraniteMoe*) are other classes, refused by name.
#pragma once

#include "models/architecture.h"

namespace llmc {

const Architecture &graniteForCausalLM();

} // namespace llmc
