// Cross-checks a checkpoint (WeightSet) against the tensors its config needs
// (the architecture's expectedTensors in models/), before anything is built.
#pragma once

#include "frontend/model_spec.h"
#include "frontend/safetensors.h"
#include "models/model_config.h"
#include "support/status.h"

#include <string>
#include <vector>

namespace llmc {

// Problems listed by name in the error; the count always covers all of them.
constexpr size_t kMaxListedWeightProblems = 40;
// Unused tensors warned one per line; beyond this many, one summary line.
constexpr size_t kMaxListedUnusedTensors = 8;

// Checks that `weights` holds every tensor `config` needs with the expected
// shape and a float dtype (F32, F16 or BF16), and reports every problem at
// once in one error, e.g.
//   "model.safetensors: 2 tensors do not match config.json: missing
//    model.layers.4.mlp.up_proj.weight; model.norm.weight has shape [32] but
//    config.json needs [64]"
// Tensors the config does not use are not errors: each becomes a line in
// `warnings` (when non-null), summarized past kMaxListedUnusedTensors.
// `configSource` names the config in messages (ModelSpec::configSource).
Status checkWeights(const ModelConfig &config, const WeightSet &weights,
                    std::vector<std::string> *warnings,
                    const std::string &configSource = "the config");

// The NaN and infinite values of one float tensor (F32, F16 or BF16; other
// dtypes count 0).
uint64_t countNonFinite(const TensorView &tensor);

// The tensors `config` uses that hold NaN or infinite values, one message per
// tensor naming its file, name and count, e.g.
//   "model.safetensors: tensor 'model.norm.weight' holds 3 NaN/Inf values (of 64)"
// A plan built from them generates garbage (every logit NaN) with no error,
// so `llmc build` refuses them unless told otherwise (docs/compiler.md).
std::vector<std::string> findNonFiniteWeights(const ModelConfig &config, const WeightSet &weights);

// Opens the checkpoint `spec` names: its index when it has one, else its files.
Expected<WeightSet> openModelWeights(const ModelSpec &spec);

} // namespace llmc
