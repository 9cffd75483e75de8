#include "models/gemma.h"

#include "models/config_fields.h"
#include "models/llama.h"

#include <cmath>

namespace llmc {
namespace {

// Gemma's MLP activation. transformers 5 reads `hidden_act` (mapping the
// published "gelu" to the tanh approximation); 4.x read `hidden_activation`
// first. Both must name a GELU when present, and they must agree.
Expected<MlpActivation> readGemmaActivation(const Json &hf, const std::string &source) {
  LLMC_ASSIGN_OR_RETURN(MlpActivation act, readMlpActivation(hf, "hidden_act", "gelu_pytorch_tanh",
                                                             /*geluIsTanh=*/true, source));
  LLMC_ASSIGN_OR_RETURN(MlpActivation activation,
                        readMlpActivation(hf, "hidden_activation", "gelu_pytorch_tanh",
                                          /*geluIsTanh=*/true, source));
  if (act != MlpActivation::GeluTanh || activation != MlpActivation::GeluTanh)
    return Status::error(source + ": fields 'hidden_act' and 'hidden_activation': Gemma's MLP " +
                         "is GeGLU; supported: gelu, gelu_pytorch_tanh, gelu_new (or absent)");
  return act;
}

} // namespace

Status applyGemmaCommon(const Json &hf, const std::string &source, ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                        optionalBool(hf, "tie_word_embeddings", true, source));
  LLMC_ASSIGN_OR_RETURN(bool bias, optionalBool(hf, "attention_bias", false, source));
  config.attentionBias = config.attentionOutputBias = bias;
  config.normOffset = 1.0;
  config.embeddingScale = std::sqrt(static_cast<double>(config.hiddenSize));
  return Status::ok();
}

Status applyGemmaGegluSandwich(const Json &hf, const std::string &source, const char *family,
                               ModelConfig &config) {
  LLMC_RETURN_IF_ERROR(applyGemmaCommon(hf, source, config));
  LLMC_ASSIGN_OR_RETURN(config.mlpActivation,
                        readMlpActivation(hf, "hidden_activation", "gelu_pytorch_tanh",
                                          /*geluIsTanh=*/false, source));
  if (config.mlpActivation == MlpActivation::Silu)
    return Status::error(source + ": field 'hidden_activation': " + family +
                         "'s MLP is GeGLU; supported: gelu, gelu_pytorch_tanh, gelu_new");
  config.sandwichNorms = true;
  return Status::ok();
}

namespace {

class Gemma final : public LlamaLayout {
public:
  std::string_view name() const override { return "GemmaForCausalLM"; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_RETURN_IF_ERROR(applyGemmaCommon(hf, source, config));
    LLMC_ASSIGN_OR_RETURN(config.mlpActivation, readGemmaActivation(hf, source));
    return Status::ok();
  }
};

} // namespace

const Architecture &gemmaForCausalLM() {
  static const Gemma arch;
  return arch;
}

} // namespace llmc
