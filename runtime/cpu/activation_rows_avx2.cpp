// AVX2 lanes of cpu/activation_rows.h: silu(x) = x / (1 + expAvx2(-x)),
// each step the scalar definition's (negation exact, one rounding per add,
// divide and multiply), so every lane has siluOfRow's bits.
#if defined(__x86_64__)

#include "cpu/activation_rows.h"
#include "cpu/attention_exp_avx2.h"
#include "cpu/lanes_avx2.h"

#include <immintrin.h>

namespace llmc::cpu::detail {
namespace {

LLMC_EXP_AVX2 inline __m256 siluAvx2(__m256 x) {
  const __m256 minusX = _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), expAvx2(minusX)));
}

} // namespace

LLMC_EXP_AVX2 void siluRowAvx2(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, siluAvx2(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i lanes = firstLanes(n - i);
    _mm256_maskstore_ps(y + i, lanes, siluAvx2(_mm256_maskload_ps(x + i, lanes)));
  }
}

LLMC_EXP_AVX2 void swigluRowAvx2(const float *gate, const float *up, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_mul_ps(siluAvx2(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i lanes = firstLanes(n - i);
    _mm256_maskstore_ps(y + i, lanes,
                        _mm256_mul_ps(siluAvx2(_mm256_maskload_ps(gate + i, lanes)),
                                      _mm256_maskload_ps(up + i, lanes)));
  }
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
