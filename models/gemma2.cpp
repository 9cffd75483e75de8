#include "models/gemma2.h"

#include "models/config_fields.h"
#include "models/gemma.h"
#include "models/llama.h"

#include <cmath>

namespace llmc {
namespace {

// Gemma2Config's defaults, for fields a hand-written config may omit.
constexpr double kDefaultQueryPreAttnScalar = 256.0;
constexpr int64_t kDefaultSlidingWindow = 4096;
constexpr double kDefaultAttnSoftcap = 50.0;
constexpr double kDefaultFinalSoftcap = 30.0;

// A soft-cap that HF defaults to `fallback` when absent and turns off when null.
Expected<double> readGemma2Softcap(const Json &hf, const char *key, double fallback,
                                   const std::string &source) {
  if (findField(hf, key) == nullptr)
    return fallback;
  return readSoftcap(hf, key, source);
}

Status readGemma2Attention(const Json &hf, const std::string &source, ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(double scalar, optionalNumber(hf, "query_pre_attn_scalar",
                                                      kDefaultQueryPreAttnScalar, source));
  if (!std::isfinite(scalar) || scalar <= 0)
    return Status::error(source + ": field 'query_pre_attn_scalar': expected a finite number " +
                         "> 0, got " + std::to_string(scalar));
  config.attentionScale = 1.0 / std::sqrt(scalar);
  LLMC_ASSIGN_OR_RETURN(config.attentionSoftcap,
                        readGemma2Softcap(hf, "attn_logit_softcapping", kDefaultAttnSoftcap,
                                          source));
  LLMC_ASSIGN_OR_RETURN(config.finalLogitSoftcap,
                        readGemma2Softcap(hf, "final_logit_softcapping", kDefaultFinalSoftcap,
                                          source));
  // Layers alternate sliding (even indices) and global unless layer_types says.
  LLMC_ASSIGN_OR_RETURN(int64_t window, readSlidingWindow(hf, kDefaultSlidingWindow, source));
  LLMC_ASSIGN_OR_RETURN(config.layerWindows,
                        readLayerWindows(hf, source, config, window,
                                         [](int64_t layer) { return layer % 2 == 0; }));
  return Status::ok();
}

class Gemma2 final : public LlamaLayout {
public:
  std::string_view name() const override { return "Gemma2ForCausalLM"; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_RETURN_IF_ERROR(applyGemmaGegluSandwich(hf, source, "Gemma2", config));
    return readGemma2Attention(hf, source, config);
  }
};

} // namespace

const Architecture &gemma2ForCausalLM() {
  static const Gemma2 arch;
  return arch;
}

} // namespace llmc
