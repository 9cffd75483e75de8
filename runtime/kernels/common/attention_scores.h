// How one attention layer shapes its scores before the softmax, shared by the
// CPU kernel (cpu/attention.cpp) and the CUDA one (llmc/attention.cuh):
//   score = softcap * tanh(scale * q . k / softcap)   (Gemma2; skipped when softcap is 0)
//   then a query at position p sees keys at p - window < j <= p
//   (HF transformers' sliding-window mask: Mistral, Qwen2, Gemma2's local
//   layers; every j <= p when window is 0).
// Zero fields are off, so a zero-initialized AttentionScores is plain causal
// attention, bit for bit.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

struct AttentionScores {
  i32 window = 0;       // keys visible to a query, itself included; 0: all earlier ones
  float softcap = 0.0f; // logit soft-capping bound; 0: none
};

// The first position a query at `position` sees (0 without a window). Blocks
// wholly before it are never read.
LLMC_HD inline i32 windowStart(i32 position, i32 window) {
  return window > 0 && position >= window ? position - window + 1 : 0;
}

// A scaled score after soft-capping (unchanged when cap is 0).
LLMC_HD inline float softCap(float score, float cap) {
  return cap > 0.0f ? cap * ::tanhf(score / cap) : score;
}

} // namespace llmc::hd
