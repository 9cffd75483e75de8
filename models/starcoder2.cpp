// Starcoder2ForCausalLM (StarCoder2 3B/7B/15B): LayerNorm with bias (always,
// whatever use_bias says), and with use_bias (default true) biases on q, k, v,
// o_proj and on the plain MLP act(c_fc x) -> c_proj; hidden_act default
// gelu_pytorch_tanh. `sliding_window` (default null: full attention) applies
// to every layer. Starcoder2Config's other defaults: norm_epsilon 1e-5,
// tie_word_embeddings true.
#include "models/config_fields.h"
#include "models/layer_norm_family.h"

namespace llmc {
namespace {

class Starcoder2 final : public LayerNormFamily {
public:
  std::string_view name() const override { return "Starcoder2ForCausalLM"; }

  LayerNormNames names() const override {
    LayerNormNames n;
    n.up = "mlp.c_fc";
    n.down = "mlp.c_proj";
    return n;
  }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LayerNormBlock &block = config.layerNorm;
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", true, source));
    LLMC_ASSIGN_OR_RETURN(bool bias, optionalBool(hf, "use_bias", true, source));
    config.attentionBias = config.attentionOutputBias = block.mlpBias = bias;
    block.normBias = true;
    block.gatedMlp = false;
    LLMC_RETURN_IF_ERROR(readLayerNormEps(hf, "norm_epsilon", source, config));
    LLMC_RETURN_IF_ERROR(readLayerNormActivation(hf, source, "gelu_pytorch_tanh", config));
    LLMC_ASSIGN_OR_RETURN(int64_t window, readSlidingWindow(hf, 0, source));
    if (window == 0)
      return Status::ok();
    LLMC_ASSIGN_OR_RETURN(config.layerWindows,
                          readLayerWindows(hf, source, config, window, [](int64_t) { return true; }));
    return Status::ok();
  }
};

} // namespace

const LayerNormFamily &starcoder2ForCausalLM() {
  static const Starcoder2 arch;
  return arch;
}

} // namespace llmc
