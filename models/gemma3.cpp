#include "models/gemma3.h"

#include "models/config_fields.h"
#include "models/gemma.h"
#include "models/llama.h"

#include <cmath>

namespace llmc {
namespace {

// Gemma3TextConfig's defaults, for fields a hand-written config may omit.
constexpr double kDefaultQueryPreAttnScalar = 256.0;
constexpr int64_t kDefaultSlidingWindow = 4096;
constexpr int64_t kDefaultSlidingWindowPattern = 6;
constexpr double kDefaultGlobalTheta = 1000000.0;
constexpr double kDefaultLocalTheta = 10000.0;

Status readQueryScale(const Json &hf, const std::string &source, ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(double scalar, optionalNumber(hf, "query_pre_attn_scalar",
                                                      kDefaultQueryPreAttnScalar, source));
  if (!std::isfinite(scalar) || scalar <= 0)
    return Status::error(source + ": field 'query_pre_attn_scalar': expected a finite number " +
                         "> 0, got " + std::to_string(scalar));
  config.attentionScale = 1.0 / std::sqrt(scalar);
  return Status::ok();
}

// transformers reads the pattern from `sliding_window_pattern` (a saved
// config keeps it as `_sliding_window_pattern`); layer i is global when
// (i + 1) % pattern == 0.
Expected<int64_t> readSlidingPattern(const Json &hf, const std::string &source) {
  const char *key = findField(hf, "sliding_window_pattern") ? "sliding_window_pattern"
                                                            : "_sliding_window_pattern";
  LLMC_ASSIGN_OR_RETURN(int64_t pattern,
                        optionalInt(hf, key, kDefaultSlidingWindowPattern, source));
  if (pattern < 1)
    return Status::error(source + ": field '" + key + "': expected an integer >= 1, got " +
                         std::to_string(pattern));
  return pattern;
}

Status readWindows(const Json &hf, const std::string &source, ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(bool bidirectional,
                        optionalBool(hf, "use_bidirectional_attention", false, source));
  if (bidirectional)
    return Status::error(source + ": field 'use_bidirectional_attention': true (every token " +
                         "sees the whole sequence, as an encoder) is not supported; supported: " +
                         "false (causal decoding)");
  LLMC_ASSIGN_OR_RETURN(int64_t window, readSlidingWindow(hf, kDefaultSlidingWindow, source));
  LLMC_ASSIGN_OR_RETURN(int64_t pattern, readSlidingPattern(hf, source));
  LLMC_ASSIGN_OR_RETURN(config.layerWindows,
                        readLayerWindows(hf, source, config, window, [&](int64_t layer) {
                          return (layer + 1) % pattern != 0;
                        }));
  return Status::ok();
}

// Which layers slide, by type rather than by window: a window as long as the
// context is dropped (0) by readLayerWindows but the layer keeps its local base.
std::vector<bool> slidingLayers(const Json &hf, const ModelConfig &config, int64_t pattern) {
  std::vector<bool> sliding(config.numLayers);
  const Json *types = findField(hf, "layer_types");
  for (int64_t i = 0; i < config.numLayers; ++i)
    sliding[i] = types != nullptr && types->is_array() ? (*types)[i] == "sliding_attention"
                                                       : (i + 1) % pattern != 0;
  return sliding;
}

// The global layers' RoPE (ropeTheta / ropeScaling: rope_parameters.full_attention,
// or rope_theta and rope_scaling) and the sliding layers' (rope_parameters.
// sliding_attention, or rope_local_base_freq with no scaling), per layer.
Status readLayerRopes(const Json &hf, const std::string &source, ModelConfig &config) {
  LayerRope global{true, config.ropeTheta, config.ropeScaling};
  LayerRope local;
  if (config.slidingAttentionRope) {
    local = *config.slidingAttentionRope;
  } else {
    if (const Json *params = findField(hf, "rope_parameters"); params && !params->is_null())
      return Status::error(source + ": field 'rope_parameters': Gemma3 keys it by layer type " +
                           "({\"sliding_attention\": {...}, \"full_attention\": {...}}); got " +
                           "one object for all layers");
    if (findField(hf, "rope_theta") == nullptr)
      global.theta = kDefaultGlobalTheta;
    local.theta = 0.0;
  }
  if (global.theta == 0.0)
    global.theta = kDefaultGlobalTheta;
  if (local.theta == 0.0) {
    LLMC_ASSIGN_OR_RETURN(local.theta,
                          optionalNumber(hf, "rope_local_base_freq", kDefaultLocalTheta, source));
    if (!std::isfinite(local.theta) || local.theta <= 0)
      return Status::error(source + ": field 'rope_local_base_freq': expected a finite number " +
                           "> 0, got " + std::to_string(local.theta));
  }
  config.ropeTheta = global.theta;
  LLMC_ASSIGN_OR_RETURN(int64_t pattern, readSlidingPattern(hf, source));
  std::vector<bool> sliding = slidingLayers(hf, config, pattern);
  config.layerRopes.clear();
  for (int64_t i = 0; i < config.numLayers; ++i)
    config.layerRopes.push_back(sliding[i] ? local : global);
  return Status::ok();
}

class Gemma3 final : public LlamaLayout {
public:
  std::string_view name() const override { return "Gemma3ForCausalLM"; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_RETURN_IF_ERROR(applyGemmaGegluSandwich(hf, source, "Gemma3", config));
    config.qkNorm = QkNorm::PerHead;
    LLMC_RETURN_IF_ERROR(readQueryScale(hf, source, config));
    LLMC_ASSIGN_OR_RETURN(config.attentionSoftcap,
                          readSoftcap(hf, "attn_logit_softcapping", source));
    LLMC_ASSIGN_OR_RETURN(config.finalLogitSoftcap,
                          readSoftcap(hf, "final_logit_softcapping", source));
    LLMC_RETURN_IF_ERROR(readWindows(hf, source, config));
    return readLayerRopes(hf, source, config);
  }
};

} // namespace

const Architecture &gemma3ForCausalLM() {
  static const Gemma3 arch;
  return arch;
}

} // namespace llmc
