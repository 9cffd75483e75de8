// The Llama family: decoder-only, pre-norm RMSNorm, RoPE (HF rotate_half
// convention: pairs (i, i + headDim/2)), grouped-query attention, SwiGLU MLP.
// Five Hugging Face architectures share this one implementation and differ
// only in flags (models/llama.cpp is the only place that knows them):
//   LlamaForCausalLM    Llama 2 and 3; `attention_bias` true adds q/k/v AND
//                       o_proj biases; `mlp_bias` true adds gate/up/down_proj
//                       biases.
//   MistralForCausalLM  no biases; `sliding_window` (null: full attention)
//                       on every layer.
//   Qwen2ForCausalLM    q/k/v biases always, none on o_proj;
//                       `use_sliding_window` true slides the layers
//                       >= `max_window_layers` (or those `layer_types` names).
//   Qwen3ForCausalLM    Qwen2's window rules; `attention_bias` (default
//                       false) on q, k, v and o; RMSNorm of each q and k
//                       head (self_attn.{q,k}_norm.weight [head_dim]).
//   Olmo2ForCausalLM    post-norms only (post_attention_layernorm and
//                       post_feedforward_layernorm on the block outputs, no
//                       input norm), RMSNorm over the whole q and k
//                       projections, `attention_bias`, rms_norm_eps 1e-5 by
//                       default.
// All default tie_word_embeddings to false, as HF's config classes do.
#pragma once

#include "models/architecture.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

const Architecture &llamaForCausalLM();
const Architecture &mistralForCausalLM();
const Architecture &qwen2ForCausalLM();
const Architecture &qwen3ForCausalLM();
const Architecture &olmo2ForCausalLM();

// "model.layers.<layer>.<suffix>", e.g. llamaLayerTensor(3, "mlp.up_proj.weight").
std::string llamaLayerTensor(int64_t layer, std::string_view suffix);

// Every tensor a Llama-family config needs (H = hiddenSize, I = intermediateSize,
// V = vocabSize, D = headDim, Q = numHeads * D, K = numKvHeads * D):
//   model.embed_tokens.weight                          [V, H]
//   per layer i, under model.layers.i.:
//     input_layernorm.weight                           [H]            unless postNormsOnly
//     self_attn.q_proj.weight                          [Q, H]
//     self_attn.k_proj.weight, self_attn.v_proj.weight [K, H]
//     self_attn.{q,k,v}_proj.bias                      [Q], [K], [K]  when attentionBias
//     self_attn.o_proj.weight                          [H, Q]
//     self_attn.o_proj.bias                            [H]            when attentionOutputBias
//     self_attn.q_norm.weight, self_attn.k_norm.weight [D], [D]       when qkNorm PerHead
//                                                      [Q], [K]       when qkNorm Full
//     post_attention_layernorm.weight                  [H]
//     pre_feedforward_layernorm.weight                 [H]            when sandwichNorms
//     post_feedforward_layernorm.weight                [H]            when sandwichNorms or
//                                                                     postNormsOnly
//     mlp.gate_proj.weight, mlp.up_proj.weight         [I, H]
//     mlp.down_proj.weight                             [H, I]
//     mlp.{gate,up}_proj.bias, mlp.down_proj.bias      [I], [I], [H]  when mlpBias
//   model.norm.weight                                  [H]
//   lm_head.weight                                     [V, H]         unless tieWordEmbeddings
std::vector<TensorSpec> llamaTensors(const ModelConfig &config);

// Base of the families that keep Llama's tensor names (Llama, Mistral, Qwen2,
// Gemma, Gemma2): their tensor list, and why lm_head.weight goes unused when
// the embeddings are tied. A family adds its own explanations on top.
class LlamaLayout : public Architecture {
public:
  std::vector<TensorSpec> expectedTensors(const ModelConfig &config) const override {
    return llamaTensors(config);
  }
  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override;
};

} // namespace llmc
