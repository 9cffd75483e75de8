// Config.json fields that several families read the same way: the MLP
// activation, soft-capping values and per-layer sliding windows. Each
// returns an error naming the file, the field, the value and what is
// accepted.
#pragma once

#include "models/model_config.h"
#include "support/json.h"
#include "support/status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmc {

// The activation named by `key` (absent or null: `fallback`). `geluIsTanh`:
// the family maps plain "gelu" to the tanh approximation (Gemma 1 does, for
// its published configs); otherwise "gelu" is exact GELU, as in ACT2FN.
Expected<MlpActivation> readMlpActivation(const Json &hf, const char *key,
                                          const std::string &fallback, bool geluIsTanh,
                                          const std::string &source);

// A soft-capping value: absent or null is 0 (off); else a finite number > 0.
Expected<double> readSoftcap(const Json &hf, const char *key, const std::string &source);

// Which layers slide. `layer_types` (transformers >= 4.53 writes it), when
// present, is authoritative: numLayers entries, each "sliding_attention" or
// "full_attention"; otherwise `isSliding(layer)` decides (the family's rule,
// e.g. Gemma2's alternation). Sliding layers get `window`, the others 0.
// A window >= max_position_embeddings cannot exclude any key and becomes 0.
Expected<std::vector<int64_t>> readLayerWindows(const Json &hf, const std::string &source,
                                                const ModelConfig &config, int64_t window,
                                                const std::function<bool(int64_t)> &isSliding);

// `sliding_window`: absent or null gives `fallback` (0: none); else an
// integer >= 1.
Expected<int64_t> readSlidingWindow(const Json &hf, int64_t fallback, const std::string &source);

} // namespace llmc
