// LayerNorm (HF nn.LayerNorm, CohereLayerNorm), as the CPU backend computes it
// (runtime/cpu/layer_norm.cpp; the math is kernels/common/layer_norm.h):
//   y = (x - mean) * (1 / sqrt(var + eps)) * (offset + gamma) (+ beta)
// over each group of G features of a row of W (G == W: whole rows; G =
// head_dim: the per-head q/k norms). One block per token row (grid.x = T).
// Weights: w[0] gamma, w[1] beta (BIAS), each W values or, SHARED, G values
// that every group reuses.
#pragma once

#include "kernels/common/layer_norm.h"
#include "llmc/common.cuh"

namespace llmc::dev {

// Whole rows: the block reduces the row twice (the sum, then the centered
// sum of squares), each thread keeping its W / BLOCK values in registers.
template <class TA, class TW, int W, bool BIAS, int BLOCK>
__device__ __forceinline__ void layerNormRow(const TA *x, TA *y, const TW *gamma, const TW *beta,
                                             float eps, float offset) {
  constexpr int kPerThread = (W + BLOCK - 1) / BLOCK;
  __shared__ float scratch[32];
  float values[kPerThread];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * BLOCK;
    values[j] = i < W ? toFloat(x[i]) : 0.0f;
    sum += values[j];
  }
  const float mean = blockSum<BLOCK>(sum, scratch) / static_cast<float>(W);
  float squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * BLOCK;
    values[j] = i < W ? values[j] - mean : 0.0f;
    squares += values[j] * values[j];
  }
  const float inv = hd::layerNormInvStd(blockSum<BLOCK>(squares, scratch), W, eps);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * BLOCK;
    if (i < W)
      y[i] = fromFloat<TA>(hd::layerNormValue(values[j], inv, toFloat(gamma[i]) + offset,
                                              BIAS ? toFloat(beta[i]) : 0.0f));
  }
}

// Groups of G < W features: each warp normalizes whole groups (warp
// reductions, no block barrier), the block's warps taking every
// (BLOCK / 32)-th group.
template <class TA, class TW, int W, int G, bool SHARED, bool BIAS, int BLOCK>
__device__ __forceinline__ void layerNormGroups(const TA *x, TA *y, const TW *gamma,
                                                const TW *beta, float eps, float offset) {
  constexpr int kPerLane = (G + 31) / 32;
  constexpr int kWarps = BLOCK / 32;
  const int lane = threadIdx.x % 32;
  for (int g = threadIdx.x / 32; g < W / G; g += kWarps) {
    const int first = g * G;
    float values[kPerLane];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int i = lane + j * 32;
      values[j] = i < G ? toFloat(x[first + i]) : 0.0f;
      sum += values[j];
    }
    const float mean = warpSum(sum) / static_cast<float>(G);
    float squares = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int i = lane + j * 32;
      values[j] = i < G ? values[j] - mean : 0.0f;
      squares += values[j] * values[j];
    }
    const float inv = hd::layerNormInvStd(warpSum(squares), G, eps);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int i = lane + j * 32;
      if (i < G) {
        const int k = hd::layerNormWeightIndex(first + i, G, SHARED);
        y[first + i] = fromFloat<TA>(hd::layerNormValue(values[j], inv, toFloat(gamma[k]) + offset,
                                                        BIAS ? toFloat(beta[k]) : 0.0f));
      }
    }
  }
}

template <class TA, class TW, int W, int G, bool SHARED, bool BIAS, int BLOCK>
__device__ __forceinline__ void layerNorm(const abi::StepArgs &a, float eps, float offset = 0.0f) {
  static_assert(W % G == 0, "the group width must divide the row");
  static_assert(BLOCK % 32 == 0, "whole warps");
  const int t = blockIdx.x;
  if (t >= a.rows)
    return;
  const TA *x = static_cast<const TA *>(a.in[0]) + static_cast<i64>(t) * W;
  TA *y = static_cast<TA *>(a.out) + static_cast<i64>(t) * W;
  const TW *gamma = static_cast<const TW *>(a.w[0]);
  const TW *beta = BIAS ? static_cast<const TW *>(a.w[1]) : nullptr;
  if constexpr (G == W)
    layerNormRow<TA, TW, W, BIAS, BLOCK>(x, y, gamma, beta, eps, offset);
  else
    layerNormGroups<TA, TW, W, G, SHARED, BIAS, BLOCK>(x, y, gamma, beta, eps, offset);
}

} // namespace llmc::dev
