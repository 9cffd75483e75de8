// GPTNeoXForCausalLM (Pythia, GPT-NeoX-20B, RedPajama-INCITE, StableLM-alpha):
// tensors under gpt_neox.*, the head in embed_out; one packed
// attention.query_key_value [3 * H, H] whose rows hold, per head h, q_h, k_h
// and v_h (head_dim rows each), split into q, k and v at import; LayerNorm
// with bias; the plain MLP act(dense_h_to_4h x) -> dense_4h_to_h with biases.
// use_parallel_residual (default true): x + attn(ln1(x)) + mlp(ln2(x)); false:
// the sequential pre-norm block. GPTNeoXConfig's other defaults:
// attention_bias true (query_key_value and dense), layer_norm_eps 1e-5,
// tie_word_embeddings false, hidden_act gelu (exact); multi-head attention
// only (no num_key_value_heads).
#include "models/layer_norm_family.h"

#include <cmath>

namespace llmc {
namespace {

// GPT-NeoX's older configs (Pythia) name the RoPE base `rotary_emb_base`;
// transformers reads it when neither rope_theta nor rope_parameters gives one.
Status readRotaryEmbBase(const Json &hf, const std::string &source, ModelConfig &config) {
  const Json *params = findField(hf, "rope_parameters");
  const bool themed = findField(hf, "rope_theta") != nullptr ||
                      (params != nullptr && params->is_object() &&
                       findField(*params, "rope_theta") != nullptr);
  if (themed || findField(hf, "rotary_emb_base") == nullptr)
    return Status::ok();
  LLMC_ASSIGN_OR_RETURN(double base, optionalNumber(hf, "rotary_emb_base", 10000.0, source));
  if (!std::isfinite(base) || base <= 0)
    return Status::error(source + ": field 'rotary_emb_base': expected a finite number > 0, got " +
                         std::to_string(base));
  config.ropeTheta = base;
  return Status::ok();
}

class GptNeoX final : public LayerNormFamily {
public:
  std::string_view name() const override { return "GPTNeoXForCausalLM"; }

  LayerNormNames names() const override {
    LayerNormNames n;
    n.embed = "gpt_neox.embed_in";
    n.layers = "gpt_neox.layers.";
    n.qkv = "attention.query_key_value";
    n.o = "attention.dense";
    n.up = "mlp.dense_h_to_4h";
    n.down = "mlp.dense_4h_to_h";
    n.finalNorm = "gpt_neox.final_layer_norm";
    n.lmHead = "embed_out";
    return n;
  }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LayerNormBlock &block = config.layerNorm;
    if (config.numKvHeads != config.numHeads)
      return Status::error(source + ": field 'num_key_value_heads': " +
                           std::to_string(config.numKvHeads) + " differs from " +
                           "num_attention_heads " + std::to_string(config.numHeads) +
                           "; GPT-NeoX's packed query_key_value has one k and v per query head: " +
                           "remove the field");
    LLMC_RETURN_IF_ERROR(readRotaryEmbBase(hf, source, config));
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    LLMC_ASSIGN_OR_RETURN(bool bias, optionalBool(hf, "attention_bias", true, source));
    config.attentionBias = config.attentionOutputBias = bias;
    LLMC_ASSIGN_OR_RETURN(block.parallel, optionalBool(hf, "use_parallel_residual", true, source));
    block.sharedNorm = false;
    block.normBias = true;
    block.gatedMlp = false;
    block.mlpBias = true;
    LLMC_RETURN_IF_ERROR(readLayerNormEps(hf, "layer_norm_eps", source, config));
    return readLayerNormActivation(hf, source, "gelu", config);
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    auto endsWith = [&](std::string_view suffix) {
      return tensorName.size() >= suffix.size() &&
             tensorName.compare(tensorName.size() - suffix.size(), suffix.size(), suffix.data(),
                                suffix.size()) == 0;
    };
    if (endsWith(".attention.bias") || endsWith(".attention.masked_bias"))
      return "a causal-mask buffer of older checkpoints; llmc builds the mask itself";
    return LayerNormFamily::explainUnusedTensor(config, tensorName);
  }
};

} // namespace

const LayerNormFamily &gptNeoXForCausalLM() {
  static const GptNeoX arch;
  return arch;
}

} // namespace llmc
