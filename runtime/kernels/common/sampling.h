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

} // namespace llmc::hd
