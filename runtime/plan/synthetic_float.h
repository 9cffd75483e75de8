// The value a float tensor's SyntheticInit (runtime/schema/engine.fbs) gives
// its element `index`. One rule for the two places that generate synthetic
// float weights: the runtime's loader (fillSynthetic) and the compiler's
// calibration of a --synthetic-weights build (quantize_stage), so a quantized
// synthetic plan is calibrated on exactly the weights the runtime would make.
#pragma once

#include "kernels/common/synthetic.h"
#include "schema/engine_generated.h"

#include <cstdint>

namespace llmc {

inline float syntheticFloat(fb::SyntheticKind kind, float stddev, uint64_t seed, uint64_t index) {
  switch (kind) {
  case fb::SyntheticKind::Normal:
    return stddev * hd::syntheticNormal(seed, index);
  case fb::SyntheticKind::Ones:
    return 1.0f;
  default: // Zeros; the Q4 kinds are not float tensors (fillSyntheticQ4)
    return 0.0f;
  }
}

} // namespace llmc
