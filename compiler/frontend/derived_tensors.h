// Import-time tensors that a checkpoint stores inside others (models/
// architecture.h DerivedTensor): GPT-NeoX's q, k and v rows of its packed
// query_key_value, StableLM's per-head q/k norms stacked. They are copied
// once, in the checkpoint's dtype, into the WeightSet, so that everything
// after import (quantization, lowering, the plan writer) reads them by name
// like any checkpoint tensor.
#pragma once

#include "frontend/safetensors.h"
#include "models/model_config.h"
#include "support/status.h"

namespace llmc {

// Adds every derived tensor of `config`'s architecture to `weights`. Runs
// after checkWeights, so the sources exist with the shapes expectedTensors
// gives; an error names the derived tensor and the piece when they do not.
Status addDerivedTensors(const ModelConfig &config, WeightSet &weights);

} // namespace llmc
