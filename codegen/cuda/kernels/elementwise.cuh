// Row-wise kernels: embedding gather, RMSNorm, RoPE, element-wise binary and
// unary ops, argmax, and the synthetic-weight fill. One block per token row
// (grid.x = T) unless noted; shapes are template constants.
#pragma once

#include "kernels/common/activations.h"
#include "kernels/common/q4_rtn.h"
#include "kernels/common/rope.h"
#include "kernels/common/sampling.h"
#include "llmc/common.cuh"
#include "llmc/rope.cuh"

namespace llmc::dev {

// out[t, :] = table[ids[t], :] for t < rows. An id outside [0, V) sets the
// error flag (the runtime checks ids before launching; this is a backstop)
// and yields a zero row.
// `scale` multiplies every row (Gemma's sqrt(H); 1: none).
template <class TW, class TA, int H, int V, int BLOCK>
__device__ __forceinline__ void embedding(const abi::StepArgs &a, float scale = 1.0f) {
  const int t = blockIdx.x;
  if (t >= a.rows)
    return;
  const int id = static_cast<const int *>(a.in[0])[t];
  TA *out = static_cast<TA *>(a.out) + static_cast<i64>(t) * H;
  const bool valid = id >= 0 && id < V;
  if (!valid && threadIdx.x == 0 && a.errorFlag != nullptr)
    atomicExch(a.errorFlag, abi::kErrorTokenOutOfRange);
  const TW *row = static_cast<const TW *>(a.w[0]) + static_cast<i64>(valid ? id : 0) * H;
  for (int i = threadIdx.x; i < H; i += BLOCK)
    out[i] = fromFloat<TA>(valid ? toFloat(row[i]) * scale : 0.0f);
}

// HF LlamaRMSNorm, as the CPU backend computes it:
//   y = x * (1 / sqrt(mean(x^2) + eps)) * (offset + gamma)   (offset 1: Gemma's 1 + w).
template <class TA, class TW, int H, int BLOCK>
__device__ __forceinline__ void rmsNorm(const abi::StepArgs &a, float eps, float offset = 0.0f) {
  constexpr int kPerThread = (H + BLOCK - 1) / BLOCK;
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  if (t >= a.rows)
    return;
  const TA *x = static_cast<const TA *>(a.in[0]) + static_cast<i64>(t) * H;
  const TW *gamma = static_cast<const TW *>(a.w[0]);
  TA *y = static_cast<TA *>(a.out) + static_cast<i64>(t) * H;
  float values[kPerThread];
  float sumSquares = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * BLOCK;
    values[j] = i < H ? toFloat(x[i]) : 0.0f;
    sumSquares += values[j] * values[j];
  }
  const float meanSquare = blockSum<BLOCK>(sumSquares, scratch) / static_cast<float>(H);
  const float inv = 1.0f / hd::sqrtF(meanSquare + eps);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * BLOCK;
    if (i < H)
      y[i] = fromFloat<TA>(values[j] * inv * (toFloat(gamma[i]) + offset));
  }
}

// RMSNorm of each group of G features of a row of W (per-head q/k norms:
// the CPU's rows of G), gamma [G] shared by every group: one warp per
// group, the block's warps taking every (BLOCK / 32)-th group.
template <class TA, class TW, int W, int G, int BLOCK>
__device__ __forceinline__ void rmsNormGroups(const abi::StepArgs &a, float eps,
                                              float offset = 0.0f) {
  static_assert(W % G == 0, "the group width must divide the row");
  static_assert(BLOCK % 32 == 0, "whole warps");
  constexpr int kPerLane = (G + 31) / 32;
  const int t = blockIdx.x;
  if (t >= a.rows)
    return;
  const int lane = threadIdx.x % 32;
  const TW *gamma = static_cast<const TW *>(a.w[0]);
  for (int g = threadIdx.x / 32; g < W / G; g += BLOCK / 32) {
    const i64 first = static_cast<i64>(t) * W + g * G;
    const TA *x = static_cast<const TA *>(a.in[0]) + first;
    TA *y = static_cast<TA *>(a.out) + first;
    float values[kPerLane];
    float sumSquares = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int i = lane + j * 32;
      values[j] = i < G ? toFloat(x[i]) : 0.0f;
      sumSquares += values[j] * values[j];
    }
    const float inv = 1.0f / hd::sqrtF(warpSum(sumSquares) / static_cast<float>(G) + eps);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int i = lane + j * 32;
      if (i < G)
        y[i] = fromFloat<TA>(values[j] * inv * (toFloat(gamma[i]) + offset));
    }
  }
}

// Rotary embedding in place: heads [0, HEADS) of D features from column COL
// of rows of STRIDE elements (Rope: COL 0, STRIDE HEADS * D; RopeColumns: q
// or k of a packed qkv buffer); row t at positions[t], in the forward pass
// of its sequence (rope.cuh ropeSeqLen). R: the step's RoPE spec
// (rope.cuh): its first R::kRotaryDim features of each head turn, the rest
// pass through.
template <class TA, class R, int HEADS, int D, int STRIDE, int COL, int BLOCK>
__device__ __forceinline__ void rope(const abi::StepArgs &a) {
  constexpr int kPairs = R::kRotaryDim / 2;
  static_assert(R::kRotaryDim % 2 == 0 && R::kRotaryDim <= D, "whole pairs inside the head");
  __shared__ float cosSin[2 * kPairs];
  const int t = blockIdx.x;
  if (t >= a.rows)
    return;
  const int position = a.positions[t];
  const int seqLen = R::kPerPass ? ropeSeqLen<R>(a, a.rowSequence[t]) : 1;
  for (int i = threadIdx.x; i < kPairs; i += BLOCK)
    ropeCosSinAt<R>(position, i, seqLen, cosSin[i], cosSin[kPairs + i]);
  __syncthreads();
  TA *row = static_cast<TA *>(a.out) + static_cast<i64>(t) * STRIDE + COL;
  for (int p = threadIdx.x; p < HEADS * kPairs; p += BLOCK) {
    const int head = p / kPairs, i = p % kPairs;
    TA *x = row + head * D;
    int f0, f1;
    ropePair<R>(i, f0, f1);
    float x0 = toFloat(x[f0]), x1 = toFloat(x[f1]);
    hd::ropeRotate(x0, x1, cosSin[i], cosSin[kPairs + i]);
    x[f0] = fromFloat<TA>(x0);
    x[f1] = fromFloat<TA>(x1);
  }
}

// Gated forms: act(in0) * in1 (hd::gated, as cpu::swiglu with its GateKind).
enum class Pointwise { Add, Mul, Silu, SwiGlu, GeluTanh, GeluErf, Relu, GeGluTanh, GeGluErf, ReGlu };

__device__ __forceinline__ float silu(float x) { return hd::silu(x); }

template <Pointwise OP> __device__ __forceinline__ float pointwise(float a, float b) {
  switch (OP) {
  case Pointwise::Add:
    return a + b;
  case Pointwise::Mul:
    return a * b;
  case Pointwise::Silu:
    return silu(a);
  case Pointwise::SwiGlu:
    return silu(a) * b;
  case Pointwise::GeluTanh:
    return hd::geluTanh(a);
  case Pointwise::GeluErf:
    return hd::geluErf(a);
  case Pointwise::Relu:
    return hd::relu(a);
  case Pointwise::GeGluTanh:
    return hd::gated(hd::kGateGeluTanh, a, b);
  case Pointwise::GeGluErf:
    return hd::gated(hd::kGateGeluErf, a, b);
  case Pointwise::ReGlu:
    return hd::gated(hd::kGateRelu, a, b);
  }
  return 0.0f;
}

template <Pointwise OP> constexpr bool kPointwiseUnary =
    OP == Pointwise::Silu || OP == Pointwise::GeluTanh || OP == Pointwise::GeluErf ||
    OP == Pointwise::Relu;

// out[t, :] = op(in0[t, :], in1[t, :]) over rows of W elements, VEC elements
// per access (W % VEC == 0).
template <Pointwise OP, class TA, int W, int VEC, int BLOCK>
__device__ __forceinline__ void pointwiseRows(const abi::StepArgs &a) {
  constexpr bool kBinary = !kPointwiseUnary<OP>;
  const int t = blockIdx.x;
  if (t >= a.rows)
    return;
  const i64 base = static_cast<i64>(t) * W;
  const TA *x0 = static_cast<const TA *>(a.in[0]) + base;
  const TA *x1 = kBinary ? static_cast<const TA *>(a.in[1]) + base : x0;
  TA *y = static_cast<TA *>(a.out) + base;
  for (int i = threadIdx.x * VEC; i < W; i += BLOCK * VEC) {
    float u[VEC], v[VEC], r[VEC];
    loadVec<VEC>(x0 + i, u);
    if (kBinary)
      loadVec<VEC>(x1 + i, v);
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      r[e] = pointwise<OP>(u[e], kBinary ? v[e] : 0.0f);
    storeVec<VEC>(y + i, r);
  }
}

// out[r] = the first index of the largest logit of row r (NaNs ignored; 0
// for a row with no number above -inf), as cpu::argmax. One block per row.
template <int BLOCK> __device__ __forceinline__ void argmaxRows(const abi::ArgmaxArgs &a) {
  __shared__ float bestValues[BLOCK];
  __shared__ int bestIndices[BLOCK];
  const int r = blockIdx.x;
  if (r >= a.rows)
    return;
  const float *row = a.logits + static_cast<i64>(r) * a.cols;
  float best = -hd::infinity();
  int bestIndex = 0x7fffffff;
  for (int i = threadIdx.x; i < a.cols; i += BLOCK)
    if (row[i] > best) { // strictly greater: the first of equal values wins
      best = row[i];
      bestIndex = i;
    }
  bestValues[threadIdx.x] = best;
  bestIndices[threadIdx.x] = bestIndex;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = bestValues[threadIdx.x + stride];
      const int otherIndex = bestIndices[threadIdx.x + stride];
      if (other > bestValues[threadIdx.x] ||
          (other == bestValues[threadIdx.x] && otherIndex < bestIndices[threadIdx.x])) {
        bestValues[threadIdx.x] = other;
        bestIndices[threadIdx.x] = otherIndex;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    a.out[r] = bestIndices[0] == 0x7fffffff ? 0 : bestIndices[0];
}

// Top-k sampling candidates of row blockIdx.x (abi::TopKArgs), as
// sampling::topKCandidates computes them: the k-th largest score by a radix
// selection over order-preserving keys (8 bits per pass, from the top: four
// passes of a shared histogram), then every token at or above it collected
// (counted past the capacity), then ranked by (score desc, id asc).
template <int BLOCK> __device__ __forceinline__ void topKRows(const abi::TopKArgs &a) {
  constexpr int CAP = hd::kTopKCapacity;
  __shared__ unsigned hist[256];
  __shared__ unsigned prefix, remaining; // the k-th key's top bits; its rank among them
  __shared__ int count;
  __shared__ float candScore[CAP];
  __shared__ int candId[CAP];
  const int r = blockIdx.x;
  if (r >= a.rows)
    return;
  const float *row = a.logits + static_cast<i64>(r) * a.cols;
  if (threadIdx.x == 0) {
    prefix = 0;
    remaining = static_cast<unsigned>(a.k);
    count = 0;
  }
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    for (int b = threadIdx.x; b < 256; b += BLOCK)
      hist[b] = 0;
    __syncthreads();
    const unsigned want = prefix;
    // Warp-uniform trips, so that the lanes of one bin add together with one
    // atomic: logits share a few top-byte bins, where one shared atomic per
    // lane would serialize.
    const int lane = threadIdx.x % 32;
    for (int c0 = threadIdx.x - lane; c0 < a.cols; c0 += BLOCK) {
      const int c = c0 + lane;
      unsigned bin = 256; // none
      if (c < a.cols) {
        const u32 key = hd::scoreKey(hd::samplingScore(row[c], a.temperature));
        if (pass == 0 || (key >> (shift + 8)) == want)
          bin = (key >> shift) & 255u;
      }
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin < 256 && lane == __ffs(peers) - 1)
        atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
    }
    __syncthreads();
    if (threadIdx.x == 0) { // the bin holding the remaining-th largest of this prefix
      unsigned above = 0;
      int b = 255;
      for (; b > 0; --b) {
        if (above + hist[b] >= remaining)
          break;
        above += hist[b];
      }
      remaining -= above;
      prefix = (prefix << 8) | static_cast<unsigned>(b);
    }
    __syncthreads();
  }
  const u32 kthKey = prefix;
  for (int c = threadIdx.x; c < a.cols; c += BLOCK) {
    const float s = hd::samplingScore(row[c], a.temperature);
    if (hd::scoreKey(s) >= kthKey) {
      const int slot = atomicAdd(&count, 1);
      if (slot < CAP) {
        candScore[slot] = s;
        candId[slot] = c;
      }
    }
  }
  __syncthreads();
  const int n = count;
  if (threadIdx.x == 0)
    a.counts[r] = n;
  if (n > CAP)
    return;
  for (int i = threadIdx.x; i < n; i += BLOCK) {
    const float s = candScore[i];
    const int id = candId[i];
    int rank = 0;
    for (int j = 0; j < n; ++j)
      rank += candScore[j] > s || (candScore[j] == s && candId[j] < id);
    a.scores[static_cast<i64>(r) * CAP + rank] = s;
    a.ids[static_cast<i64>(r) * CAP + rank] = id;
  }
}

// Synthetic weights: the same values as the CPU backend's fillSynthetic
// (engine/weights.cpp), in a grid-stride loop.
template <class T> __device__ __forceinline__ void syntheticFill(const abi::SyntheticFillArgs &a) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  T *out = static_cast<T *>(a.out);
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < a.count; i += stride) {
    float value = 0.0f;
    if (a.kind == 0)
      value = a.stddev * hd::syntheticNormal(a.seed, a.first + i);
    else if (a.kind == 1)
      value = 1.0f;
    out[i] = fromFloat<T>(value);
  }
}

// Synthetic int4 parts, as the CPU's fillSyntheticQ4: one (row, group) cell
// per thread in a grid-stride loop, each its group's range then its values.
__device__ __forceinline__ void syntheticFillQ4(const abi::SyntheticFillArgs &a) {
  const hd::SyntheticQ4 q4{a.seed, a.stddev, a.cols, a.groupSize};
  const long long groups = hd::q4NumGroups(a.cols, a.groupSize);
  const long long wordsPerRow = hd::q4WordsPerRow(a.cols);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < a.count; i += stride) {
    const long long cell = static_cast<long long>(a.first + i);
    const long long row = cell / groups, g = cell % groups;
    const hd::Q4Code code = q4.code(row, g);
    if (a.kind == 3)
      q4.writeGroupWords(row, g, code, static_cast<u32 *>(a.out) + row * wordsPerRow);
    else
      static_cast<hd::u16 *>(a.out)[cell] = a.kind == 4 ? code.scale : code.zero;
  }
}

} // namespace llmc::dev
