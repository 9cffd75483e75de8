// The 8-lane reductions the x86 kernels share (simd_avx2.cpp, attention_avx2.cpp,
// matmul_q4_x86.h, matmul_q8_avx2.cpp). hsum's tree is part of the numerics
// (simd_gemm.h, "Numerics"): outputs that must agree bit for bit across
// kernels add their lanes with this one function. The target is AVX2 alone,
// a subset of every caller's, so it inlines into each of them.
#pragma once
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#define LLMC_LANES_AVX2 __attribute__((target("avx2")))

namespace llmc::cpu::detail {

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
LLMC_LANES_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A mask with the first min(count, 8) lanes on, the others off.
LLMC_LANES_AVX2 inline __m256i firstLanes(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

} // namespace llmc::cpu::detail

#endif
