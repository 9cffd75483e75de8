// RoPE as the generated kernels apply it (the Rope step in elementwise.cuh,
// attention's on-the-fly rotation in attention.cuh), with the math of
// kernels/common/rope.h that the CPU backend uses. Each kernel that rotates
// takes a spec R that its translation unit defines (codegen/cuda/ops/
// support.cpp ropeSpec) from the step's RopeParams:
//   R::kRotaryDim        features rotated per head (partial rotary: < D; the
//                        rest pass through);
//   R::kInterleaved      pairs (2i, 2i + 1), else (i, i + kRotaryDim / 2);
//   R::kAttentionFactor  cos and sin times it (yarn, longrope; else 1);
//   R::kPerPass          the frequencies depend on the forward pass's length
//                        (dynamic NTK, longrope): only then do kernels read
//                        the sequence layout to find it;
//   R::invFreq(pair, seqLen)  the pair's inverse frequency in a forward pass
//                        whose largest position is seqLen - 1: a table baked
//                        at build time, two for longrope (short and long
//                        factors), the plain one for dynamic NTK up to its
//                        original length and hd::ropeDynamicInvFreq beyond.
#pragma once

#include "kernels/common/rope.h"
#include "llmc/common.cuh"

namespace llmc::dev {

// The spec of kernels that rotate nothing.
struct NoRope {
  static constexpr int kRotaryDim = 2;
  static constexpr bool kInterleaved = false;
  static constexpr float kAttentionFactor = 1.0f;
  static constexpr bool kPerPass = false;
  static __device__ __forceinline__ float invFreq(int, int) { return 0.0f; }
};

// seqLen of sequence `seq`'s forward pass, as the CPU's run tables take it:
// its largest position in this step + 1 (a sequence's rows hold consecutive
// positions, so the last row's); 1 (unused) for specs without kPerPass.
template <class R> __device__ __forceinline__ int ropeSeqLen(const abi::StepArgs &a, int seq) {
  if constexpr (R::kPerPass)
    return a.positions[a.seqFirstRow[seq] + a.seqNumRows[seq] - 1] + 1;
  else
    return 1;
}

// cos and sin (times the attention factor) of pair `pair` at `position`.
template <class R>
__device__ __forceinline__ void ropeCosSinAt(int position, int pair, int seqLen, float &cosA,
                                             float &sinA) {
  hd::ropeCosSin(position, R::invFreq(pair, seqLen), R::kAttentionFactor, cosA, sinA);
}

// The two features of pair `pair` within a head.
template <class R> __device__ __forceinline__ void ropePair(int pair, int &first, int &second) {
  hd::ropePairFeatures(pair, R::kRotaryDim, R::kInterleaved, first, second);
}

// Rotates pair `pair` of the head vector at v (element stride 1) in place.
template <class R>
__device__ __forceinline__ void ropeRotateAt(float *v, int pair, int position, int seqLen) {
  int f0, f1;
  ropePair<R>(pair, f0, f1);
  float c, s;
  ropeCosSinAt<R>(position, pair, seqLen, c, s);
  hd::ropeRotate(v[f0], v[f1], c, s);
}

} // namespace llmc::dev
