// Online softmax (Milakov & Gimelshein 2018; flash attention): a softmax over
// a long row computed in pieces. Each piece keeps a running max `m` and a sum
// `l` of exp(score - m); two pieces merge by rescaling to the larger max.
// Attention carries an accumulator acc = sum_j exp(s_j - m) * v_j next to
// (m, l); the merge returns the factors by which each side's acc is scaled.
//
// An empty piece is m = -inf, l = 0; merging with it never produces NaN.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

struct SoftmaxState {
  float max; // running max of the scores seen; -inf when none
  float sum; // sum of exp(score - max)
};

LLMC_HD inline SoftmaxState softmaxEmpty() { return {-infinity(), 0.0f}; }

struct SoftmaxMerge {
  SoftmaxState state; // the merged (m, l)
  float scaleA;       // multiply side a's accumulator by this
  float scaleB;       // multiply side b's accumulator by this
};

LLMC_HD inline SoftmaxMerge softmaxMerge(SoftmaxState a, SoftmaxState b) {
  float m = maxF(a.max, b.max);
  if (m == -infinity()) // both empty
    return {softmaxEmpty(), 0.0f, 0.0f};
  float scaleA = expF(a.max - m); // exp(-inf) = 0 for an empty side
  float scaleB = expF(b.max - m);
  return {{m, a.sum * scaleA + b.sum * scaleB}, scaleA, scaleB};
}

// Adds one score: returns the merge with the single-element state (s, 1);
// the new element's weight is scaleB.
LLMC_HD inline SoftmaxMerge softmaxPush(SoftmaxState a, float score) {
  return softmaxMerge(a, SoftmaxState{score, 1.0f});
}

// Merging N pieces at once (flash-decoding's split merge, one piece per
// lane): with m the largest of their maxes, each piece's sum and accumulator
// are scaled by this factor (0 for an empty piece) and summed. Equal to
// folding softmaxMerge over the pieces, up to rounding.
LLMC_HD inline float softmaxScaleTo(SoftmaxState s, float max) {
  return s.max == -infinity() ? 0.0f : expF(s.max - max);
}

// 1 / sum, or 0 for an empty row (attention over no keys yields zeros).
LLMC_HD inline float softmaxInvSum(SoftmaxState s) { return s.sum > 0.0f ? 1.0f / s.sum : 0.0f; }

} // namespace llmc::hd
