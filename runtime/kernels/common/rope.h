// Rotary position embedding, computed exactly as Hugging Face transformers
// 5.x does (modeling_rope_utils.py and each model's RotaryEmbedding), in f32
// where it computes in f32. rope_params.h (host only) turns a config's
// rope_scaling into the RopeScaling below; everything here also compiles
// under nvcc and NVRTC.
//
// Pairs. A head rotates its first `rotaryDim` features (partial rotary:
// rotaryDim < headDim, the rest pass through) as rotaryDim/2 pairs; pair i
// turns by the angle position * invFreq[i]:
//   x0' = x0 * cos(a) - x1 * sin(a),  x1' = x1 * cos(a) + x0 * sin(a).
// Which features form pair i (ropePairFeatures):
//   rotate_half (Llama, NeoX, most models): (i, i + rotaryDim/2);
//   interleaved (GPT-J, Cohere):            (2i, 2i + 1).
//
// Frequencies that depend on the sequence length. transformers' dynamic
// and longrope modules pick their frequencies once per forward pass, from
// seqLen = (largest position in the pass) + 1, and use them for every token
// of that pass; keys already in the KV cache keep the rotation of the pass
// that wrote them (they are cached rotated and never rotated again). So
// ropeInvFreqAt takes the pass's seqLen: a prefill of positions [0, n)
// uses n for all n tokens, a decode step at position p uses p + 1.
//   dynamic:  seqLen <= max_position_embeddings (its originalMaxPositions):
//             the plain frequencies; beyond, the base grows with seqLen
//             (recomputed in f32, as transformers does when its cached
//             length grows);
//   longrope: seqLen > originalMaxPositions: the long factors, else short.
// (transformers takes the max over the whole batch and remembers the longest
// dynamic length across calls; llmc takes each sequence's own length, which
// is what transformers computes for one sequence on a fresh module.)
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

// The same values as the plan's RopeScalingKind (engine.fbs): append only.
enum class RopeScalingKind : int {
  None = 0,     // rope_scaling absent ("default")
  Linear = 1,   // "linear": every frequency divided by factor
  Llama3 = 2,   // "llama3": low frequencies / factor, smooth band between
  Dynamic = 3,  // "dynamic": NTK base grown with the sequence past originalMaxPositions
  Yarn = 4,     // "yarn": per-pair blend of f and f / factor; cos, sin * attentionFactor
  LongRope = 5, // "longrope" (Phi-3's "su"): f / shortFactor[i] or f / longFactor[i];
                // cos, sin * attentionFactor
};
constexpr int kNumRopeScalingKinds = 6;

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::None;
  float factor = 1.0f;                  // linear, llama3, yarn, dynamic
  float lowFreqFactor = 1.0f;           // llama3 only
  float highFreqFactor = 4.0f;          // llama3 only
  // llama3, yarn, longrope: original_max_position_embeddings; dynamic:
  // max_position_embeddings (the length past which its base grows).
  float originalMaxPositions = 8192.0f;
  // yarn: the ramp over pair indices, ramp(i) = clamp((i - rampLow) / rampWidth, 0, 1),
  // both already rounded to f32 as transformers does (rope_params.h ropeYarnRamp).
  float rampLow = 0.0f;
  float rampWidth = 1.0f;
  // yarn, longrope: cos and sin are multiplied by it (1 for the others).
  float attentionFactor = 1.0f;
  // longrope: rotaryDim/2 divisors each, in memory the caller owns (host
  // memory on the CPU, device memory in a kernel).
  const float *shortFactor = nullptr;
  const float *longFactor = nullptr;
};

// 2 * pair / rotaryDim in f32, as torch.arange(0, dim, 2).float() / dim.
LLMC_HD inline float ropeExponent(int pair, int rotaryDim) {
  return static_cast<float>(2 * pair) / static_cast<float>(rotaryDim);
}

// HF _compute_default_rope_parameters:
//   inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim))   (f32)
LLMC_HD inline float ropeDefaultInvFreq(int pair, int rotaryDim, float theta) {
  return 1.0f / powF(theta, ropeExponent(pair, rotaryDim));
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

// HF _compute_yarn_parameters for pair `pair` (f32 throughout):
//   pos = base ** (2i / dim);  extrap = 1 / pos;  interp = 1 / (factor * pos)
//   keep = 1 - clamp((i - low) / (high - low), 0, 1)
//   inv_freq = interp * (1 - keep) + extrap * keep
// Each product is its own statement so that no compiler fuses them into an
// FMA that torch does not do.
LLMC_HD inline float ropeYarnInvFreq(int pair, int rotaryDim, float theta, const RopeScaling &s) {
  float pos = powF(theta, ropeExponent(pair, rotaryDim));
  float extrapolated = 1.0f / pos;
  float scaledPos = s.factor * pos;
  float interpolated = 1.0f / scaledPos;
  float ramp = (static_cast<float>(pair) - s.rampLow) / s.rampWidth;
  ramp = ramp < 0.0f ? 0.0f : (ramp > 1.0f ? 1.0f : ramp);
  float keep = 1.0f - ramp;
  float interpolatedPart = interpolated * (1.0f - keep);
  float extrapolatedPart = extrapolated * keep;
  return interpolatedPart + extrapolatedPart;
}

// HF _compute_dynamic_ntk_parameters with seq_len > max_position_embeddings,
// as dynamic_frequency_update calls it (seq_len an int64 tensor, so every
// step is an f32 tensor op):
//   base' = base * (factor * seq_len / max_pos - (factor - 1)) ** (dim / (dim - 2))
//   inv_freq = 1 / (base' ** (2i / dim))
// The ** of the one-element f32 tensor by the Python float dim / (dim - 2)
// runs torch's scalar loop, std::pow(float, double): a double pow with the
// exponent unrounded, rounded to f32 once. (powf with the exponent rounded to
// f32 was an ulp off at some lengths, e.g. 2144 and 2155 of long-dynamic,
// which moved those decode steps' logits by 1.6e-4.)
LLMC_HD inline float ropeDynamicInvFreq(int pair, int rotaryDim, float theta, const RopeScaling &s,
                                        int seqLen) {
  float grown = s.factor * static_cast<float>(seqLen);
  grown = grown / s.originalMaxPositions;
  grown = grown - static_cast<float>(static_cast<double>(s.factor) - 1.0);
  const double power = static_cast<double>(rotaryDim) / (rotaryDim - 2);
  float base = theta * static_cast<float>(powD(grown, power));
  return 1.0f / powF(base, ropeExponent(pair, rotaryDim));
}

// HF _compute_longrope_parameters: inv_freq = 1 / (ext[i] * base ** (2i / dim)).
LLMC_HD inline float ropeLongRopeInvFreq(int pair, int rotaryDim, float theta, const RopeScaling &s,
                                         int seqLen) {
  const float *ext = static_cast<float>(seqLen) > s.originalMaxPositions ? s.longFactor
                                                                         : s.shortFactor;
  float pos = powF(theta, ropeExponent(pair, rotaryDim));
  float scaled = ext[pair] * pos;
  return 1.0f / scaled;
}

// True when the frequencies depend on the forward pass's seqLen.
LLMC_HD inline bool ropeDependsOnLength(RopeScalingKind kind) {
  return kind == RopeScalingKind::Dynamic || kind == RopeScalingKind::LongRope;
}

// The inverse frequency of pair `pair` for a head rotating `rotaryDim`
// features, in a forward pass whose largest position is seqLen - 1.
LLMC_HD inline float ropeInvFreqAt(int pair, int rotaryDim, float theta, const RopeScaling &s,
                                   int seqLen) {
  switch (s.kind) {
  case RopeScalingKind::None:
    return ropeDefaultInvFreq(pair, rotaryDim, theta);
  case RopeScalingKind::Linear:
    return ropeDefaultInvFreq(pair, rotaryDim, theta) / s.factor;
  case RopeScalingKind::Llama3:
    return ropeLlama3InvFreq(ropeDefaultInvFreq(pair, rotaryDim, theta), s);
  case RopeScalingKind::Yarn:
    return ropeYarnInvFreq(pair, rotaryDim, theta, s);
  case RopeScalingKind::Dynamic:
    if (static_cast<float>(seqLen) <= s.originalMaxPositions)
      return ropeDefaultInvFreq(pair, rotaryDim, theta);
    return ropeDynamicInvFreq(pair, rotaryDim, theta, s, seqLen);
  case RopeScalingKind::LongRope:
    return ropeLongRopeInvFreq(pair, rotaryDim, theta, s, seqLen);
  }
  return ropeDefaultInvFreq(pair, rotaryDim, theta);
}

// The frequencies of the kinds that do not depend on the length (and of a
// pass within the original length for the others).
LLMC_HD inline float ropeInvFreq(int pair, int rotaryDim, float theta, const RopeScaling &s) {
  return ropeInvFreqAt(pair, rotaryDim, theta, s, 1);
}

// HF: freqs = position (as f32) * inv_freq in f32; cos/sin taken in f32.
LLMC_HD inline float ropeAngle(int position, float invFreq) {
  return static_cast<float>(position) * invFreq;
}

// cos and sin of a pair's angle, times the attention factor (HF:
// emb.cos() * self.attention_scaling, in f32).
LLMC_HD inline void ropeCosSin(int position, float invFreq, float attentionFactor, float &cosA,
                               float &sinA) {
  float angle = ropeAngle(position, invFreq);
  cosA = cosF(angle) * attentionFactor;
  sinA = sinF(angle) * attentionFactor;
}

// The features of pair `pair` within a head (see the top of this file).
LLMC_HD inline void ropePairFeatures(int pair, int rotaryDim, bool interleaved, int &first,
                                     int &second) {
  first = interleaved ? 2 * pair : pair;
  second = interleaved ? 2 * pair + 1 : pair + rotaryDim / 2;
}

// Rotates the pair (x0, x1) in place.
LLMC_HD inline void ropeRotate(float &x0, float &x1, float cosA, float sinA) {
  float r0 = x0 * cosA - x1 * sinA;
  float r1 = x1 * cosA + x0 * sinA;
  x0 = r0;
  x1 = r1;
}

} // namespace llmc::hd
