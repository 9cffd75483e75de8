// Rotary position embedding, computed exactly as Hugging Face transformers
// does (modeling_rope_utils.py), in f32 where it computes in f32.
//
// Convention "rotate half": over the first `rotaryDim` features of a head,
// pair i (0 <= i < rotaryDim/2) is the features (i, i + rotaryDim/2):
//   x0' = x0 * cos(a) - x1 * sin(a),  x1' = x1 * cos(a) + x0 * sin(a),
//   a = position * invFreq[i].
// Features past rotaryDim (partial rotary) are left as they are.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

// Numeric values are stored in engine plans: append only.
enum class RopeScalingKind : int {
  None = 0,   // rope_scaling absent ("default")
  Linear = 1, // rope_type "linear": every frequency divided by factor
  Llama3 = 2, // rope_type "llama3": low frequencies / factor, smooth band between
};

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::None;
  float factor = 1.0f;
  float lowFreqFactor = 1.0f;           // llama3 only
  float highFreqFactor = 4.0f;          // llama3 only
  float originalMaxPositions = 8192.0f; // llama3: original_max_position_embeddings
};

// HF _compute_default_rope_parameters:
//   inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim))   (f32)
LLMC_HD inline float ropeDefaultInvFreq(int pair, int rotaryDim, float theta) {
  float exponent = static_cast<float>(2 * pair) / static_cast<float>(rotaryDim);
  return 1.0f / powF(theta, exponent);
}

// HF _compute_llama3_parameters for one frequency. Python scalars meet f32
// tensors there, so each scalar is rounded to f32 before use, as here.
LLMC_HD inline float ropeLlama3InvFreq(float invFreq, const RopeScaling &s) {
  float lowFreqWavelen = static_cast<float>(static_cast<double>(s.originalMaxPositions) /
                                            static_cast<double>(s.lowFreqFactor));
  float highFreqWavelen = static_cast<float>(static_cast<double>(s.originalMaxPositions) /
                                             static_cast<double>(s.highFreqFactor));
  float wavelen = 6.2831853071795864769f / invFreq; // 2 * math.pi / inv_freq
  if (wavelen < highFreqWavelen)                    // high frequency: unchanged
    return invFreq;
  if (wavelen > lowFreqWavelen) // low frequency: interpolated by factor
    return invFreq / s.factor;
  float band = static_cast<float>(static_cast<double>(s.highFreqFactor) -
                                  static_cast<double>(s.lowFreqFactor));
  float smooth = (s.originalMaxPositions / wavelen - s.lowFreqFactor) / band;
  return (1.0f - smooth) * invFreq / s.factor + smooth * invFreq;
}

// The inverse frequency of pair `pair` for a head rotating `rotaryDim` features.
LLMC_HD inline float ropeInvFreq(int pair, int rotaryDim, float theta, const RopeScaling &s) {
  float invFreq = ropeDefaultInvFreq(pair, rotaryDim, theta);
  switch (s.kind) {
  case RopeScalingKind::None:
    return invFreq;
  case RopeScalingKind::Linear:
    return invFreq / s.factor;
  case RopeScalingKind::Llama3:
    return ropeLlama3InvFreq(invFreq, s);
  }
  return invFreq;
}

// HF: freqs = position (as f32) * inv_freq in f32; cos/sin taken in f32.
LLMC_HD inline float ropeAngle(int position, float invFreq) {
  return static_cast<float>(position) * invFreq;
}

// Rotates the pair (x0, x1) = (x[i], x[i + rotaryDim/2]) in place.
LLMC_HD inline void ropeRotate(float &x0, float &x1, float cosA, float sinA) {
  float r0 = x0 * cosA - x1 * sinA;
  float r1 = x1 * cosA + x0 * sinA;
  x0 = r0;
  x1 = r1;
}

} // namespace llmc::hd
