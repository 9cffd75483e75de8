// The CPU LayerNorm kernel (HF nn.LayerNorm, CohereLayerNorm; the math is
// kernels/common/layer_norm.h), over whole rows or per group of features
// (the per-head q/k norms of Cohere, Phi and StableLM).
#pragma once

#include "cpu/weights.h"
#include "support/thread_pool.h"

#include <cstdint>

namespace llmc::cpu {

struct LayerNormShape {
  int64_t width;      // features per row of x and y
  int64_t groupWidth; // features normalized together; divides width (width: whole rows)
};

// y = (x - mean) / sqrt(var + eps) * (offset + gamma) + beta for each group of
// each row of x [tokens, width]. gamma (and beta when beta.data is non-null)
// hold `width` values (one per feature) or `groupWidth` (shared by every
// group), in F32, F16 or BF16. y may alias x.
void layerNorm(ThreadPool &pool, const float *x, int64_t tokens, const LayerNormShape &shape,
               const WeightVector &gamma, const WeightVector &beta, float eps, float *y,
               float offset = 0.0f);

} // namespace llmc::cpu
