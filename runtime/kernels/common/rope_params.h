// Host-only half of kernels/common/rope.h: the values transformers derives
// once, in Python doubles, from a config's rope_scaling, which a plan then
// stores (rope.h's RopeScaling holds them rounded to f32 where transformers
// rounds them). Not for NVRTC: it uses <cmath> in double.
#pragma once

#include "kernels/common/rope.h"

#include <algorithm>
#include <cmath>

namespace llmc::hd {

// int(head_dim * partial_rotary_factor), as every HF rotary module computes
// its dim (a Python float product, truncated).
inline int ropeRotaryDim(int headDim, double partialRotaryFactor) {
  return static_cast<int>(static_cast<double>(headDim) * partialRotaryFactor);
}

// yarn's default attention factor (get_mscale): 0.1 * mscale * ln(factor) + 1
// for factor > 1, else 1; with both mscale and mscale_all_dim given (> 0),
// the ratio of the two (DeepSeek's spelling).
inline double ropeYarnAttentionFactor(double factor, double mscale, double mscaleAllDim) {
  auto getMscale = [](double scale, double m) {
    return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
  };
  if (mscale != 0.0 && mscaleAllDim != 0.0)
    return getMscale(factor, mscale) / getMscale(factor, mscaleAllDim);
  return getMscale(factor, 1.0);
}

// longrope's default attention factor: sqrt(1 + ln(factor) / ln(original))
// for factor > 1, else 1 (factor defaults to max_position_embeddings /
// original_max_position_embeddings).
inline double ropeLongRopeAttentionFactor(double factor, double originalMaxPositions) {
  if (factor <= 1.0)
    return 1.0;
  return std::sqrt(1.0 + std::log(factor) / std::log(originalMaxPositions));
}

// yarn's ramp bounds (find_correction_range, in double): the pair indices
// where a pair turns fewer than betaFast (low) / betaSlow (high) times over
// the original context; floor/ceil when `truncate` (HF's default), clamped
// to [0, rotaryDim - 1]; equal bounds are 0.001 apart. Returns them as
// linear_ramp_factor uses them: low and (high - low), each rounded to f32.
inline void ropeYarnRamp(double betaFast, double betaSlow, int rotaryDim, double theta,
                         double originalMaxPositions, bool truncate, float &rampLow,
                         float &rampWidth) {
  const double kPi = 3.14159265358979323846;
  auto correctionDim = [&](double rotations) {
    return (rotaryDim * std::log(originalMaxPositions / (rotations * 2.0 * kPi))) /
           (2.0 * std::log(theta));
  };
  double low = correctionDim(betaFast), high = correctionDim(betaSlow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotaryDim - 1));
  if (low == high)
    high += 0.001;
  rampLow = static_cast<float>(low);
  rampWidth = static_cast<float>(high - low);
}

} // namespace llmc::hd
