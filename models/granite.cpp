#include "models/granite.h"

#include "models/llama.h"

#include <cmath>

namespace llmc {
namespace {

// A GraniteConfig multiplier: 1.0 when absent (HF's default), else a finite
// number > 0.
Expected<double> readMultiplier(const Json &hf, const char *key, const std::string &source) {
  LLMC_ASSIGN_OR_RETURN(double value, optionalNumber(hf, key, 1.0, source));
  if (!std::isfinite(value) || value <= 0)
    return Status::error(source + ": field '" + key + "': expected a finite number > 0, got " +
                         std::to_string(value) + "; omit it for 1.0 (no scaling)");
  return value;
}

class Granite final : public LlamaLayout {
public:
  std::string_view name() const override { return "GraniteForCausalLM"; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    // Llama's rules: tie_word_embeddings, attention_bias, mlp_bias, hidden_act.
    LLMC_RETURN_IF_ERROR(llamaForCausalLM().applyConfig(hf, source, config));
    LLMC_ASSIGN_OR_RETURN(config.embeddingScale,
                          readMultiplier(hf, "embedding_multiplier", source));
    LLMC_ASSIGN_OR_RETURN(config.attentionScale,
                          readMultiplier(hf, "attention_multiplier", source));
    LLMC_ASSIGN_OR_RETURN(config.residualScale,
                          readMultiplier(hf, "residual_multiplier", source));
    LLMC_ASSIGN_OR_RETURN(double logitsScaling, readMultiplier(hf, "logits_scaling", source));
    config.logitScale = 1.0 / logitsScaling;
    return Status::ok();
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    return llamaForCausalLM().explainUnusedTensor(config, tensorName);
  }
};

} // namespace

const Architecture &graniteForCausalLM() {
  static const Granite arch;
  return arch;
}

} // namespace llmc
