// AVX-512 int4 decode (matmul_q4.h): the AVX2 kernel's nibble planes at
// twice the width, 128 columns (16 words) per block. Prefill, and group
// sizes that neither divide 128 nor are a multiple of it, use the AVX2 path.
#if defined(__x86_64__)

#include "cpu/matmul_q4.h"
#include "kernels/common/q4_layout.h"

#include <immintrin.h>

#include <vector>

#define LLMC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

// One row's scales and zero points as f32, padded with 4 zeros so that a
// block's 4-group load never leaves the buffer.
LLMC_AVX512 void rowParams(const uint16_t *halves, int64_t groups, float *out) {
  int64_t g = 0;
  for (; g + 16 <= groups; g += 16)
    _mm512_storeu_ps(out + g, _mm512_cvtph_ps(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i *>(halves + g))));
  for (; g < groups; ++g)
    out[g] = _cvtsh_ss(halves[g]);
  for (int i = 0; i < 4; ++i)
    out[groups + i] = 0.0f;
}

// Decode: R packed rows against TT tokens, 16 words (128 columns) at a time.
// Lane j of nibble plane i is column 8j + i of the block; lanes 4q .. 4q+3
// are quarter q (32 columns), which lies in group (128b + 32q) / G, i.e.
// g0 + quarterGroup[q] with a pattern that is the same for every block
// when G divides 128 or 128 divides G.
template <int R, int TT> LLMC_AVX512 void decodeTile(const Q4Problem &p, int64_t n0) {
  const int64_t words = hd::q4WordsPerRow(p.w.cols);
  const int64_t groups = hd::q4NumGroups(p.w.cols, p.w.groupSize), g = p.w.groupSize;
  const int64_t planeStride = p.blocks * 128;
  thread_local std::vector<float> params;
  params.resize(2 * R * (groups + 4));
  float *scales = params.data(), *zeros = params.data() + R * (groups + 4);
  for (int r = 0; r < R; ++r) {
    rowParams(p.w.scales + (n0 + r) * groups, groups, scales + r * (groups + 4));
    rowParams(p.w.zeros + (n0 + r) * groups, groups, zeros + r * (groups + 4));
  }
  // Lane j reads the group (32 * (j / 4)) / G after the block's first.
  const __m512i quarterGroup =
      g >= 128 ? _mm512_setzero_si512()
               : _mm512_srli_epi32(
                     _mm512_setr_epi32(0, 0, 0, 0, 32, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 96),
                     __builtin_ctzll(static_cast<unsigned long long>(g)));
  const __m512i low4 = _mm512_set1_epi32(0xf);
  __m512 total[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      total[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < p.blocks; ++b) {
    const int64_t valid = words - 16 * b < 16 ? words - 16 * b : 16; // 4, 8, 12 or 16
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    __m512i v[R];
    for (int r = 0; r < R; ++r)
      v[r] = _mm512_maskz_loadu_epi32(mask, p.w.qweight + (n0 + r) * words + 16 * b);
    __m512 acc[R][TT];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm512_setzero_ps();
#pragma clang loop unroll(full)
    for (int i = 0; i < 8; ++i) {
      __m512 xv[TT];
      for (int t = 0; t < TT; ++t)
        xv[t] = _mm512_loadu_ps(p.xPlanes + t * planeStride + b * 128 + 16 * i);
      for (int r = 0; r < R; ++r) {
        __m512 q = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v[r], 4 * i), low4));
        for (int t = 0; t < TT; ++t)
          acc[r][t] = _mm512_fmadd_ps(q, xv[t], acc[r][t]);
      }
    }
    const int64_t g0 = 128 * b / g;
    for (int r = 0; r < R; ++r) {
      // Quarters past the row's end hold zero planes: their padded scale 0 is fine.
      __m512 s = _mm512_permutexvar_ps(
          quarterGroup, _mm512_castps128_ps512(_mm_loadu_ps(scales + r * (groups + 4) + g0)));
      for (int t = 0; t < TT; ++t)
        total[r][t] = _mm512_fmadd_ps(s, acc[r][t], total[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      // The zero points' share: sum_g scale * zero * (sum of x over group g).
      const float *s = scales + r * (groups + 4), *z = zeros + r * (groups + 4);
      const float *sums = p.xGroupSums + t * groups;
      __m512 zacc = _mm512_setzero_ps();
      int64_t k = 0;
      for (; k + 16 <= groups; k += 16)
        zacc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(s + k), _mm512_loadu_ps(z + k)),
                               _mm512_loadu_ps(sums + k), zacc);
      float zero = _mm512_reduce_add_ps(zacc);
      for (; k < groups; ++k)
        zero += s[k] * z[k] * sums[k];
      storeQ4Output(p, t, n0 + r, _mm512_reduce_add_ps(total[r][t]) - zero);
    }
}

template <int TT>
LLMC_AVX512 void decodeRows(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  constexpr int R = TT == 1 ? 8 : 4; // R * TT * 2 accumulators + R packed rows in 32 zmm
  int64_t n = rowBegin;
  for (; n + R <= rowEnd; n += R)
    decodeTile<R, TT>(p, n);
  for (; n < rowEnd; ++n)
    decodeTile<1, TT>(p, n);
}

} // namespace

LLMC_AVX512 void matmulQ4DecodeAvx512(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens == 1)
    return decodeRows<1>(p, rowBegin, rowEnd);
  decodeRows<2>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
