// Internal: attentionExp (attention_exp.h) on 8 AVX2 lanes, step for step,
// so that every lane gives the scalar definition's bits. Shared by the
// attention weights (attention_avx2.cpp) and the SiLU rows
// (activation_rows_avx2.cpp).
#pragma once

#if defined(__x86_64__)

#include "cpu/attention_exp.h"

#include <immintrin.h>

#define LLMC_EXP_AVX2 __attribute__((target("avx2,fma")))

namespace llmc::cpu::detail {

// attentionExp (attention_exp.h) on 8 lanes, step for step.
LLMC_EXP_AVX2 inline __m256 expAvx2(__m256 x) {
  using namespace attention_exp;
  // min then max with the constant first: a NaN lane stays NaN.
  x = _mm256_max_ps(_mm256_set1_ps(kLowest), _mm256_min_ps(_mm256_set1_ps(kHighest), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2High), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Low), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kC6), r, _mm256_set1_ps(kC5));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(e, 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 first = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 second = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(e, half), bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, first), second);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
