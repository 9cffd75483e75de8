// AVX2 + FMA inner loops of the paged attention (attention_kernels.h).
#if defined(__x86_64__)

#include "cpu/attention_kernels.h"

#include <immintrin.h>

#define LLMC_ATTN_AVX2 __attribute__((target("avx2,fma")))

namespace llmc::cpu::detail {
namespace {

// The horizontal sum of simd_avx2.cpp's dotAvx2, step for step.
LLMC_ATTN_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// KEYS keys at once, each summed as dotAvx2 sums it: columns 16i .. 16i + 7
// into acc0, 16i + 8 .. 16i + 15 into acc1, a last 8 into acc0, then
// hsum(acc0 + acc1) (dim is a multiple of 8: no scalar tail).
template <int KEYS>
LLMC_ATTN_AVX2 inline void dots(const float *q, const float *keys, int64_t stride, int64_t dim,
                                float *out) {
  __m256 acc0[KEYS], acc1[KEYS];
#pragma GCC unroll 4
  for (int k = 0; k < KEYS; ++k)
    acc0[k] = acc1[k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    const __m256 qa = _mm256_loadu_ps(q + i), qb = _mm256_loadu_ps(q + i + 8);
#pragma GCC unroll 4
    for (int k = 0; k < KEYS; ++k) {
      acc0[k] = _mm256_fmadd_ps(qa, _mm256_loadu_ps(keys + k * stride + i), acc0[k]);
      acc1[k] = _mm256_fmadd_ps(qb, _mm256_loadu_ps(keys + k * stride + i + 8), acc1[k]);
    }
  }
  if (i + 8 <= dim) {
    const __m256 qa = _mm256_loadu_ps(q + i);
#pragma GCC unroll 4
    for (int k = 0; k < KEYS; ++k)
      acc0[k] = _mm256_fmadd_ps(qa, _mm256_loadu_ps(keys + k * stride + i), acc0[k]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < KEYS; ++k)
    out[k] = hsum(_mm256_add_ps(acc0[k], acc1[k]));
}

// acc[0 .. 8 * V) of the accumulate, the V vectors in registers over the block.
template <int V>
LLMC_ATTN_AVX2 inline void accumulate(float *acc, float scaleA, const float *weights,
                                      float scaleB, const float *values, int64_t stride,
                                      int64_t count) {
  __m256 a[V];
  const __m256 first = _mm256_set1_ps(scaleA);
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v)
    a[v] = _mm256_mul_ps(first, _mm256_loadu_ps(acc + 8 * v));
  for (int64_t j = 0; j < count; ++j) {
    const __m256 w = _mm256_set1_ps(weights[j] * scaleB);
    const float *row = values + j * stride;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      a[v] = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + 8 * v), a[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v)
    _mm256_storeu_ps(acc + 8 * v, a[v]);
}

} // namespace

LLMC_ATTN_AVX2 void attentionScoresAvx2(const float *q, const float *keys, int64_t stride,
                                        int64_t count, int64_t dim, float *out) {
  int64_t j = 0;
  for (; j + 4 <= count; j += 4)
    dots<4>(q, keys + j * stride, stride, dim, out + j);
  for (; j < count; ++j)
    dots<1>(q, keys + j * stride, stride, dim, out + j);
}

// 64 features (8 registers) at a time: every feature's sum is independent
// of the others', so splitting the head changes no bit.
LLMC_ATTN_AVX2 void attentionAccumulateAvx2(float *acc, float scaleA, const float *weights,
                                            float scaleB, const float *values, int64_t stride,
                                            int64_t count, int64_t dim) {
  int64_t d = 0;
  for (; d + 64 <= dim; d += 64)
    accumulate<8>(acc + d, scaleA, weights, scaleB, values + d, stride, count);
  for (; d + 8 <= dim; d += 8)
    accumulate<1>(acc + d, scaleA, weights, scaleB, values + d, stride, count);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
