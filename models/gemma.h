// Google's Gemma (GemmaForCausalLM): the Llama layout (pre-norm, rotate-half
// RoPE, grouped-query attention, gate/up/down MLP, the same tensor names)
// with four differences, all flags of ModelConfig that the decoder graph
// (models/llama_graph.cpp) reads:
//   - GeGLU: `hidden_act` (or `hidden_activation`) gelu_pytorch_tanh; the
//     published configs say "gelu", which transformers maps to the tanh
//     approximation too;
//   - RMSNorm scales by (1 + w): the checkpoint stores w - 1;
//   - embeddings are multiplied by sqrt(hidden_size);
//   - tie_word_embeddings defaults to true (the published checkpoints have
//     no lm_head.weight).
// `attention_bias` adds q/k/v/o biases as in Llama.
#pragma once

#include "models/architecture.h"

#include <string>

namespace llmc {

const Architecture &gemmaForCausalLM();

// What every Gemma generation shares, read into `config`: tie_word_embeddings
// (default true), attention_bias on q/k/v/o, the (1 + w) RMSNorm and the
// sqrt(hidden_size) embedding scale. The MLP activation is each family's.
Status applyGemmaCommon(const Json &hf, const std::string &source, ModelConfig &config);

// Gemma2's and Gemma3's shared rules on top of applyGemmaCommon: the GeGLU
// MLP from `hidden_activation` only ("gelu" there is exact GELU; silu is
// refused, naming `family`) and the sandwich norms around attention and MLP.
Status applyGemmaGegluSandwich(const Json &hf, const std::string &source, const char *family,
                               ModelConfig &config);

} // namespace llmc
