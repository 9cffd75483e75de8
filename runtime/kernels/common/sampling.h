// Per-token rules of the sampling filters, with the semantics of Hugging Face
// generate's logits processors. The selection around them (sorting, partial
// selection, the random draw) differs between backends; these rules do not.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

// RepetitionPenaltyLogitsProcessor: a seen token's logit is divided by the
// penalty when positive, multiplied by it otherwise. Applied once per
// distinct token, to the raw logit.
LLMC_HD inline float repetitionPenalty(float logit, float penalty) {
  return logit < 0.0f ? logit * penalty : logit / penalty;
}

// TopPLogitsWarper on probabilities sorted in descending order: token i is
// kept when the mass of the tokens before it is below topP (HF removes tokens
// whose ascending cumulative mass is <= 1 - topP), so the first is always
// kept. `before` is the mass of the tokens ahead of sortedProbs[0] (0 when it
// is the most probable). Returns how many of `count` are kept; stops at the
// first dropped one.
LLMC_HD inline int topPKeepCount(const float *sortedProbs, int count, float topP,
                                 float before = 0.0f) {
  int kept = 0;
  while (kept < count && ((kept == 0 && before == 0.0f) || before < topP)) {
    before += sortedProbs[kept];
    ++kept;
  }
  return kept;
}

// MinPLogitsWarper: a token is dropped when its probability is below
// minP * max probability, i.e. exp(logit - maxLogit) < minP. Normalization
// cancels out, so this works on logits directly.
LLMC_HD inline bool minPKeeps(float logit, float maxLogit, float minP) {
  return expF(logit - maxLogit) >= minP;
}

// TopKLogitsWarper keeps every token whose logit is >= the k-th largest
// (ties with the k-th are kept too).
LLMC_HD inline bool topKKeeps(float logit, float kthLargest) { return logit >= kthLargest; }

// Top-k candidates computed next to the logits (the CUDA top-k kernel, or
// the host's topKCandidates): k <= kTopKMaxK, and up to kTopKCapacity kept
// tokens are returned (more only when many tie with the k-th: then the
// caller samples from the full logits).
constexpr int kTopKMaxK = 64;
constexpr int kTopKCapacity = 128;

// The score a sampler ranks a logit by without a repetition penalty: NaN as
// -inf (never drawn), divided by the temperature when it is not 1.
LLMC_HD inline float samplingScore(float logit, float temperature) {
  const float s = logit != logit ? -infinity() : logit;
  return temperature != 1.0f ? s / temperature : s;
}

// An unsigned key in the order of the (non-NaN) scores, -0 equal to +0:
// what a radix selection of the k-th largest score compares.
LLMC_HD inline u32 scoreKey(float score) {
  const u32 u = floatBits(score == 0.0f ? 0.0f : score);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

} // namespace llmc::hd
