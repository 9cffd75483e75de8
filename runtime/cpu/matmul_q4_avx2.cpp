// AVX2 + FMA + F16C int4 linear layer (matmul_q4.h): the Q8 quantizer and
// the integer tile (vpmaddubsw on the unsigned nibbles against the int8 x,
// or vpdpbusd where the CPU has AVX-512 VNNI).
#if defined(__x86_64__)

#include "cpu/isa.h"
#include "cpu/matmul_q4.h"
#include "cpu/matmul_q4_x86.h"
#include "kernels/common/q4_layout.h"

#include <immintrin.h>

#include <cmath>

namespace llmc::cpu::detail {
namespace {

using namespace q4x86;

LLMC_Q4_AVX2 inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// One Q8 block of `n` (0..32) columns: its int8 values into `pair` (even
// columns at 0.., odd at 32..), d into its scale lanes; returns d * sum(xq).
LLMC_Q4_AVX2 float quantizeBlock(const float *x, int64_t n, int8_t *pair, float *lanes,
                                 int64_t scaleLanes) {
  __m256 v[4];
  LLMC_Q4_UNROLL
  for (int j = 0; j < 4; ++j) {
    const int64_t left = n - 8 * j;
    v[j] = left >= 8  ? _mm256_loadu_ps(x + 8 * j)
           : left > 0 ? _mm256_maskload_ps(x + 8 * j, firstLanes(left))
                      : _mm256_setzero_ps();
  }
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 amax = _mm256_setzero_ps(), poison = _mm256_setzero_ps();
  LLMC_Q4_UNROLL
  for (int j = 0; j < 4; ++j) {
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[j], absMask));
    poison = _mm256_add_ps(poison, _mm256_mul_ps(v[j], _mm256_setzero_ps()));
  }
  // As quantizeQ8Scalar: NaN or Inf in the block makes d NaN and the values 0.
  const bool finite = !std::isnan(hsum(poison));
  const float top = hmax(amax);
  const float d = finite ? top / 127.0f : NAN;
  const __m256 inv = _mm256_set1_ps(finite && top > 0.0f ? 127.0f / top : 0.0f);
  __m256i q[4]; // columns 8j .. 8j + 7, in -127..127 (0 in a non-finite block)
  LLMC_Q4_UNROLL
  for (int j = 0; j < 4; ++j)
    q[j] = finite ? _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inv)) : _mm256_setzero_si256();
  // To int8 (no saturation in range), then the even columns to pair[0..15]
  // and the odd ones to pair[32..47].
  __m128i half[4];
  LLMC_Q4_UNROLL
  for (int j = 0; j < 4; ++j)
    half[j] = _mm_packs_epi32(_mm256_castsi256_si128(q[j]), _mm256_extracti128_si256(q[j], 1));
  const __m128i evenOdd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m128i first = _mm_shuffle_epi8(_mm_packs_epi16(half[0], half[1]), evenOdd);
  const __m128i second = _mm_shuffle_epi8(_mm_packs_epi16(half[2], half[3]), evenOdd);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(pair), _mm_unpacklo_epi64(first, second));
  _mm_storeu_si128(reinterpret_cast<__m128i *>(pair + 32), _mm_unpackhi_epi64(first, second));
  // The integer sum (exact, any order).
  __m256i total = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  __m128i four = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
  four = _mm_add_epi32(four, _mm_shuffle_epi32(four, 0x4e));
  four = _mm_add_epi32(four, _mm_shuffle_epi32(four, 0xb1));
  const int32_t sum = _mm_cvtsi128_si32(four);
  for (int64_t l = 0; l < scaleLanes; l += 8)
    _mm_storeu_ps(lanes + l, _mm_set1_ps(n > 0 ? d : 0.0f));
  return d * static_cast<float>(sum);
}

// One token: tile j takes row j of each of kDecodeRuns equal runs of
// [rowBegin, rowEnd); the 0..3 rows left go one at a time.
template <Groups G, bool Vnni>
LLMC_Q4_AVX2 void decodeRuns(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const Rows geo(p.w);
  const int64_t run = (rowEnd - rowBegin) / kDecodeRuns;
  for (int64_t j = 0; j < run; ++j)
    Q4Tile<kDecodeRuns, 1, G, Vnni>::runRows(p, geo, rowBegin + j, run, 0);
  for (int64_t n = rowBegin + kDecodeRuns * run; n < rowEnd; ++n)
    Q4Tile<1, 1, G, Vnni>::run(p, geo, n, 0);
}

// Tokens per prefill tile.
constexpr int kPrefillTokens = 8;

// 4 rows per decode tile, 1 row x 8 tokens for prefill (8 accumulators,
// 8 chunk scale vectors that the compilers may keep in L1): the row's
// nibbles and epilogue loads serve 8 tokens (measured 4-10% faster than
// 1 x 4 at T = 64 and 512, bench_q4_cputime). With 2 rows x 4 tokens the
// compilers keep each token's x for both and spill accumulators (16 ymm);
// measured 10% slower than 1 x 4.
template <bool Vnni>
LLMC_Q4_AVX2 void matmulQ4Rows(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens == 1)
    return withGroups(p.w.groupSize, [&](auto groups) {
      decodeRuns<decltype(groups)::value, Vnni>(p, rowBegin, rowEnd);
    });
  if constexpr (Vnni)
    tiledRows<VnniTile, kDecodeRuns, 1, kPrefillTokens>(p, rowBegin, rowEnd);
  else
    tiledRows<Avx2Tile, kDecodeRuns, 1, kPrefillTokens>(p, rowBegin, rowEnd);
}

} // namespace

LLMC_Q4_AVX2 void quantizeQ8Avx2(const float *x, int64_t cols, int64_t groupSize,
                                 int64_t scaleLanes, int64_t tokenBegin, int64_t tokenEnd,
                                 int8_t *values, float *scales, float *groupSums) {
  const int64_t pairs = q8Pairs(cols), groups = hd::q4NumGroups(cols, groupSize);
  for (int64_t t = tokenBegin; t < tokenEnd; ++t) {
    const float *row = x + t * cols;
    int8_t *v = values + t * pairs * kQ8PairBytes;
    float *s = scales + t * pairs * scaleLanes;
    float *sums = groupSums + t * groups;
    for (int64_t g = 0; g < groups; ++g)
      sums[g] = 0.0f;
    for (int64_t b = 0; b < 2 * pairs; ++b) {
      const int64_t c0 = b * kQ8Block;
      const int64_t n = cols - c0 < 0 ? 0 : cols - c0 < kQ8Block ? cols - c0 : kQ8Block;
      const float share =
          quantizeBlock(row + (n > 0 ? c0 : 0), n, v + (b / 2) * kQ8PairBytes + 16 * (b % 2),
                        s + (b / 2) * scaleLanes + 4 * (b % 2), scaleLanes);
      if (n > 0)
        sums[c0 / groupSize] += share;
    }
  }
}

// The VNNI dot products where the CPU has them (the same bits).
LLMC_Q4_AVX2 void matmulQ4RowsAvx2(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (x86VnniActive())
    return matmulQ4Rows<true>(p, rowBegin, rowEnd);
  matmulQ4Rows<false>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
