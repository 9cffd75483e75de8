#include "models/config_fields.h"

#include <cmath>

namespace llmc {

Expected<MlpActivation> readMlpActivation(const Json &hf, const char *key,
                                          const std::string &fallback, bool geluIsTanh,
                                          const std::string &source) {
  LLMC_ASSIGN_OR_RETURN(std::string name, optionalString(hf, key, fallback, source));
  if (name == "silu" || name == "swish")
    return MlpActivation::Silu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new")
    return MlpActivation::GeluTanh;
  if (name == "gelu")
    return geluIsTanh ? MlpActivation::GeluTanh : MlpActivation::GeluErf;
  return Status::error(source + ": field '" + key + "': '" + name +
                       "' is not supported; supported: silu, swish, gelu, gelu_pytorch_tanh, "
                       "gelu_new");
}

Expected<double> readSoftcap(const Json &hf, const char *key, const std::string &source) {
  LLMC_ASSIGN_OR_RETURN(double cap, optionalNumber(hf, key, 0.0, source));
  const Json *field = findField(hf, key);
  if (field != nullptr && !field->is_null() && (!std::isfinite(cap) || cap <= 0))
    return Status::error(source + ": field '" + key + "': expected a finite number > 0 or " +
                         "null (no soft-capping), got " + field->dump());
  return cap;
}

Expected<int64_t> readSlidingWindow(const Json &hf, int64_t fallback, const std::string &source) {
  const Json *field = findField(hf, "sliding_window");
  if (field == nullptr || field->is_null())
    return fallback;
  LLMC_ASSIGN_OR_RETURN(int64_t window, requireInt(hf, "sliding_window", source));
  if (window < 1)
    return Status::error(source + ": field 'sliding_window': expected an integer >= 1 or null " +
                         "(full attention), got " + std::to_string(window));
  return window;
}

Expected<std::vector<int64_t>> readLayerWindows(const Json &hf, const std::string &source,
                                                const ModelConfig &config, int64_t window,
                                                const std::function<bool(int64_t)> &isSliding) {
  std::vector<bool> sliding(config.numLayers);
  const Json *types = findField(hf, "layer_types");
  if (types != nullptr && !types->is_null()) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != config.numLayers)
      return Status::error(source + ": field 'layer_types': expected a list of " +
                           std::to_string(config.numLayers) +
                           " entries (num_hidden_layers), got " +
                           (types->is_array() ? std::to_string(types->size()) + " entries"
                                              : std::string(jsonTypeName(*types))));
    for (int64_t i = 0; i < config.numLayers; ++i) {
      const Json &type = (*types)[i];
      if (!type.is_string() || (type != "sliding_attention" && type != "full_attention"))
        return Status::error(source + ": field 'layer_types[" + std::to_string(i) + "]': " +
                             type.dump() + " is not supported; supported: " +
                             "\"sliding_attention\", \"full_attention\"");
      sliding[i] = type == "sliding_attention";
    }
  } else {
    for (int64_t i = 0; i < config.numLayers; ++i)
      sliding[i] = isSliding(i);
  }
  // A window as long as the context excludes nothing: plain causal attention.
  const int64_t effective = window >= config.maxPositionEmbeddings ? 0 : window;
  std::vector<int64_t> windows(config.numLayers, 0);
  for (int64_t i = 0; i < config.numLayers; ++i)
    windows[i] = sliding[i] ? effective : 0;
  return windows;
}

} // namespace llmc
