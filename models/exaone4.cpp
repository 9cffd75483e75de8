#include "models/exaone4.h"

#include "models/config_fields.h"
#include "models/llama.h"

namespace llmc {
namespace {

// Exaone4Config's defaults, for fields a hand-written config may omit.
constexpr int64_t kDefaultSlidingWindow = 4096;
constexpr int64_t kDefaultSlidingWindowPattern = 4;
constexpr double kDefaultRmsNormEps = 1e-5;

// The integer pattern transformers 5.24 derives layer_types from: layer i is
// global when (i + 1) % pattern == 0. Its docstring also describes strings
// such as "LLLG", but its __post_init__ computes `(i + 1) % pattern` and so
// accepts only integers; a string is read only through layer_types.
Expected<int64_t> readSlidingPattern(const Json &hf, const std::string &source) {
  const Json *field = findField(hf, "sliding_window_pattern");
  if (field != nullptr && field->is_string())
    return Status::error(source + ": field 'sliding_window_pattern': the string " + field->dump() +
                         " is not read by transformers 5.24 without " +
                         "'layer_types'; supported: an integer >= 1, or a layer_types list");
  LLMC_ASSIGN_OR_RETURN(int64_t pattern, optionalInt(hf, "sliding_window_pattern",
                                                     kDefaultSlidingWindowPattern, source));
  if (pattern < 1)
    return Status::error(source + ": field 'sliding_window_pattern': expected an integer >= 1, " +
                         "got " + std::to_string(pattern));
  return pattern;
}

// Windows and RoPE per layer. transformers decides both from the layer's
// type and whether `sliding_window` is set: a sliding layer sees the window
// and is rotated, a global one sees every key and is not (NoPE); with
// `sliding_window` null no layer has a window and every layer is rotated.
Status readHybridAttention(const Json &hf, const std::string &source, ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(int64_t window, readSlidingWindow(hf, 0, source));
  const Json *field = findField(hf, "sliding_window");
  if (field == nullptr)
    window = kDefaultSlidingWindow;
  config.layerRopes.assign(config.numLayers, LayerRope{true, config.ropeTheta, config.ropeScaling});
  if (window == 0) { // sliding_window null: every layer global, rotated
    config.layerWindows.assign(config.numLayers, 0);
    return readLayerWindows(hf, source, config, 0, [](int64_t) { return false; }).status();
  }
  const Json *types = findField(hf, "layer_types");
  int64_t pattern = kDefaultSlidingWindowPattern;
  if (types == nullptr || types->is_null()) {
    LLMC_ASSIGN_OR_RETURN(pattern, readSlidingPattern(hf, source));
  }
  auto isSliding = [&](int64_t layer) { return (layer + 1) % pattern != 0; };
  LLMC_ASSIGN_OR_RETURN(config.layerWindows,
                        readLayerWindows(hf, source, config, window, isSliding));
  for (int64_t i = 0; i < config.numLayers; ++i) {
    const bool sliding =
        types != nullptr && types->is_array() ? (*types)[i] == "sliding_attention" : isSliding(i);
    config.layerRopes[i].rotates = sliding;
  }
  return Status::ok();
}

class Exaone4 final : public LlamaLayout {
public:
  std::string_view name() const override { return "Exaone4ForCausalLM"; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    config.attentionBias = config.attentionOutputBias = false;
    LLMC_ASSIGN_OR_RETURN(config.mlpActivation,
                          readMlpActivation(hf, "hidden_act", "silu", false, source));
    if (findField(hf, "rms_norm_eps") == nullptr)
      config.rmsNormEps = kDefaultRmsNormEps;
    config.postNormsOnly = true;
    config.qkNorm = QkNorm::PerHead;
    return readHybridAttention(hf, source, config);
  }
};

} // namespace

const Architecture &exaone4ForCausalLM() {
  static const Exaone4 arch;
  return arch;
}

} // namespace llmc
