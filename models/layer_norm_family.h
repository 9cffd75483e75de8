// The LayerNorm families: decoders whose blocks normalize with LayerNorm
// (mean and variance, usually with a bias) instead of RMSNorm, and that differ
// from the Llama layout in the shape of the block:
//   StableLmForCausalLM   Llama's block with LayerNorm; q/k/v biases with
//                         use_qkv_bias; use_parallel_residual; qk_layernorm
//                         (a [head_dim] norm per head)
//   Starcoder2ForCausalLM biases on every projection, plain GELU MLP
//                         (c_fc / c_proj), sliding window, tied embeddings
//   CohereForCausalLM     parallel attention and MLP from one LayerNorm
//                         without bias, logit_scale, use_qk_norm
//   PhiForCausalLM        parallel block, plain GELU MLP (fc1 / fc2), biases
//                         everywhere including lm_head
//   GPTNeoXForCausalLM    packed query_key_value (q, k, v interleaved per
//                         head), parallel residual with two norms
// Each family's file (models/<family>.cpp) reads its config fields into
// ModelConfig::layerNorm and names its tensors (LayerNormNames); this file
// turns the names into the tensor list, and models/layer_norm_graph.cpp into
// the graph.
#pragma once

#include "models/architecture.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

// A family's tensor names, without ".weight" / ".bias". Layer tensors are
// `layers + "<i>." + name`. The defaults are Llama's layout; a family sets
// only what differs. Which names are read follows the config (LayerNormBlock):
// mlpNorm not with a shared norm, gate only for a gated MLP, q/k/v not when
// qkv is set.
struct LayerNormNames {
  std::string embed = "model.embed_tokens";
  std::string layers = "model.layers.";
  std::string inputNorm = "input_layernorm";
  std::string mlpNorm = "post_attention_layernorm";
  // q, k and v projections, or one packed `qkv` [3 * H, H] whose rows are,
  // per head h, q_h, k_h, v_h (GPT-NeoX); then q, k, v are unused.
  std::string q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj";
  std::string qkv;
  std::string o = "self_attn.o_proj";
  std::string qNorm, kNorm; // e.g. "self_attn.q_norm" (read with a QkNorm)
  // PerHead q/k norms stored one tensor per head, `qNorm + ".<h>.weight"`
  // (StableLM's q_layernorm.norms), not one [heads, head_dim] tensor (Cohere).
  bool normPerHeadTensors = false;
  // Gated MLP: act(gate) * up -> down. Plain: act(up) -> down.
  std::string gate = "mlp.gate_proj", up = "mlp.up_proj", down = "mlp.down_proj";
  std::string finalNorm = "model.norm";
  std::string lmHead = "lm_head";
};

// The base of the LayerNorm families: tensors from the names and
// config.layerNorm, the packed and per-head tensors split or stacked at import
// (the graph reads "<qkv>.weight:q" ... and "<qNorm>.weight:heads").
class LayerNormFamily : public Architecture {
public:
  virtual LayerNormNames names() const = 0;

  std::vector<TensorSpec> expectedTensors(const ModelConfig &config) const override;
  std::vector<DerivedTensor> derivedTensors(const ModelConfig &config) const override;
  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override;
};

const LayerNormFamily &stableLmForCausalLM();
const LayerNormFamily &starcoder2ForCausalLM();
const LayerNormFamily &cohereForCausalLM();
const LayerNormFamily &phiForCausalLM();
const LayerNormFamily &gptNeoXForCausalLM();

// The family of `config.architecture` when it is a LayerNorm family, else null.
const LayerNormFamily *findLayerNormFamily(std::string_view architecture);

// The names the graph reads for layer `layer`'s q, k and v weights and biases:
// the projections' own, or the parts of the packed qkv (derivedTensors).
struct QkvNames {
  std::string qWeight, kWeight, vWeight, qBias, kBias, vBias;
};
QkvNames qkvNames(const LayerNormNames &names, int64_t layer);

// "<layers><layer>.<suffix>".
std::string layerTensor(const LayerNormNames &names, int64_t layer, std::string_view suffix);

// Family rules several LayerNorm families share; each names `source` in errors.
// `hidden_act` as an MLP activation (default `fallback`).
Status readLayerNormActivation(const Json &hf, const std::string &source,
                               const std::string &fallback, ModelConfig &config);
// A LayerNorm epsilon `key` (default 1e-5): a finite number > 0.
Status readLayerNormEps(const Json &hf, const char *key, const std::string &source,
                        ModelConfig &config);

} // namespace llmc
