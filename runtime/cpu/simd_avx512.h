// Internal: what the AVX-512 float kernels share (simd_avx512.cpp for f32,
// f16 and bf16 weights by f32 FMAs; matmul_bf16_avx512.cpp for bf16 weights
// by vdpbf16ps): the lanes' reduction and the epilogue. Every output of
// either goes through these, so all sum their lanes in one tree.
#pragma once
#if defined(__x86_64__)

#include "cpu/simd.h"

#include <immintrin.h>

#define LLMC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace llmc::cpu::detail {

// _mm512_reduce_add_ps of each of v[0..15] into out[0..15], with its bits
// (its tree: lanes i and i + 8, then i and i + 4, then i and i + 2, then the
// pair), in 45 instructions instead of 16 x 8: two vectors' halves at a
// time, then four vectors' quarters, then a 4 x 4 transpose in each 128-bit
// lane. The last step leaves lane 4c + m holding the sum of its input 4m + c,
// so the inputs are taken in that (transposed) order.
LLMC_AVX512 inline void reduceAdd16(const __m512 *v, float *out) {
  __m512 in[16];
  for (int i = 0; i < 16; ++i)
    in[i] = v[i % 4 * 4 + i / 4];
  __m512 halves[8]; // halves[j]: lanes i + (i + 8) of in[2j] (low 256 bits), in[2j + 1] (high)
  for (int j = 0; j < 8; ++j)
    halves[j] = _mm512_add_ps(_mm512_shuffle_f32x4(in[2 * j], in[2 * j + 1], 0x44),
                              _mm512_shuffle_f32x4(in[2 * j], in[2 * j + 1], 0xee));
  __m512 quarters[4]; // 128-bit lane c of quarters[m]: the 4 quarter sums of in[4m + c]
  for (int m = 0; m < 4; ++m)
    quarters[m] = _mm512_add_ps(
        _mm512_shuffle_f32x4(halves[2 * m], halves[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
        _mm512_shuffle_f32x4(halves[2 * m], halves[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 a =
      _mm512_add_ps(_mm512_shuffle_ps(quarters[0], quarters[1], _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_shuffle_ps(quarters[0], quarters[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 b =
      _mm512_add_ps(_mm512_shuffle_ps(quarters[2], quarters[3], _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_shuffle_ps(quarters[2], quarters[3], _MM_SHUFFLE(3, 2, 3, 2)));
  _mm512_storeu_ps(out, _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
}

// storeOutput for outputs n0 .. n0 + R of token t, their dots at dots[0..R):
// the same additions lane by lane (a missing bias adds 0, as there).
template <int R>
LLMC_AVX512 inline void storeOutputs(const MatmulProblem &p, int64_t t, int64_t n0,
                                     const float *dots) {
  constexpr __mmask16 kMask = static_cast<__mmask16>((1u << R) - 1);
  float *out = p.y + t * p.w.rows + n0;
  __m512 value =
      _mm512_add_ps(_mm512_maskz_loadu_ps(kMask, dots),
                    p.bias ? _mm512_maskz_loadu_ps(kMask, p.bias + n0) : _mm512_setzero_ps());
  if (p.beta != 0.0f)
    value = _mm512_add_ps(_mm512_maskz_loadu_ps(kMask, out), value);
  _mm512_mask_storeu_ps(out, kMask, value);
}

// A GEMM tile's lanes at the start of a depth chunk (simd_gemm.h): carried
// from the chunk before, or zeros for the first.
template <int R, int TT>
LLMC_AVX512 inline void startLanes(__m512 (&acc)[R][TT], const float *carry, bool first) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      acc[r][t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(carry + (r * TT + t) * 16);
}

// Keeps a tile's lanes for the next depth chunk.
template <int R, int TT>
LLMC_AVX512 inline void carryLanes(const __m512 (&acc)[R][TT], float *carry) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      _mm512_storeu_ps(carry + (r * TT + t) * 16, acc[r][t]);
}

// Finishes a GEMM tile: acc[r][t], the 16 lanes of output (t0 + t, n0 + r),
// reduced by _mm512_reduce_add_ps's tree (reduceAdd16) and stored by
// storeOutputs, token by token (each token's R rows together), 16 at a time.
template <int R, int TT>
LLMC_AVX512 inline void storeTile(const MatmulProblem &p, const __m512 (&acc)[R][TT], int64_t n0,
                                  int64_t t0) {
  constexpr int kDots = R * TT, kPadded = (kDots + 15) / 16 * 16;
  __m512 lanes[kPadded];
#pragma GCC unroll 16
  for (int t = 0; t < TT; ++t)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      lanes[t * R + r] = acc[r][t];
#pragma GCC unroll 16
  for (int i = kDots; i < kPadded; ++i)
    lanes[i] = _mm512_setzero_ps();
  float dots[kPadded];
#pragma GCC unroll 2
  for (int i = 0; i < kPadded; i += 16)
    reduceAdd16(lanes + i, dots + i);
#pragma GCC unroll 16
  for (int t = 0; t < TT; ++t)
    storeOutputs<R>(p, t0 + t, n0, dots + t * R);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
