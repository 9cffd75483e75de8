// Internal: the inner loops of cpu::pagedAttention over one block of keys
// and values for one query head, with the keys' and values' rows kept in
// registers across the block instead of one ops.dot / ops.axpy call per
// position. They give the bits of the IsaOps calls they replace (the AVX2
// dotAvx2, scaleAvx2 and axpyAvx2 of simd_avx2.cpp, same products, same
// order), so decode and prefill keep summing alike.
#pragma once

#include <cstdint>

namespace llmc::cpu::detail {

// Whether the kernels below take heads of `headDim` features (a multiple of 8).
inline bool attentionKernelsFit(int64_t headDim) { return headDim > 0 && headDim % 8 == 0; }

#if defined(__x86_64__)
// dots[j] = dotAvx2(q, keys + j * stride, dim) for j < count.
void attentionScoresAvx2(const float *q, const float *keys, int64_t stride, int64_t count,
                         int64_t dim, float *dots);

// acc[0 .. dim) = scaleAvx2(scaleA, acc), then axpyAvx2(weights[j] * scaleB,
// values + j * stride, acc) for j = 0 .. count - 1 in order.
void attentionAccumulateAvx2(float *acc, float scaleA, const float *weights, float scaleB,
                             const float *values, int64_t stride, int64_t count, int64_t dim);
#endif

} // namespace llmc::cpu::detail
