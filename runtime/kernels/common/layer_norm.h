// LayerNorm math shared by the CPU kernel (runtime/cpu/layer_norm.cpp) and
// the CUDA device function (codegen/cuda/kernels/layer_norm.cuh), as HF's
// nn.LayerNorm and CohereLayerNorm compute it in f32:
//   mean = sum(x) / n, var = sum((x - mean)^2) / n (biased),
//   y = (x - mean) * (1 / sqrt(var + eps)) * (offset + gamma) (+ beta).
// Both backends take the two sums over the centered values, never
// E[x^2] - E[x]^2, which loses the variance of rows with a large mean.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

// 1 / sqrt(variance + eps) from the sum of squared deviations of n values.
LLMC_HD inline float layerNormInvStd(float sumSquaredDeviations, int n, float eps) {
  return 1.0f / sqrtF(sumSquaredDeviations / static_cast<float>(n) + eps);
}

// One normalized output: ((x - mean) * invStd) * scale + shift, scale being
// offset + gamma and shift beta (0 without a bias).
LLMC_HD inline float layerNormValue(float centered, float invStd, float scale, float shift) {
  return centered * invStd * scale + shift;
}

// Which gamma / beta element feature i of a row uses: its own (`shared`
// false: the weights hold one value per feature) or the one of its place in
// the group (`shared`: one value per feature of a group, every group alike).
LLMC_HD inline int layerNormWeightIndex(int feature, int groupWidth, bool shared) {
  return shared ? feature % groupWidth : feature;
}

} // namespace llmc::hd
