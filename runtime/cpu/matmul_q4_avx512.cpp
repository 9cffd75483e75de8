// AVX-512 VNNI int4 linear layer (matmul_q4.h): the AVX2 tile's integer
// dot products with one vpdpbusd per pair of Q8 blocks and token. CPUs with
// AVX-512 but no VNNI use the AVX2 kernel.
#if defined(__x86_64__)

#include "cpu/matmul_q4.h"
#include "cpu/matmul_q4_x86.h"
#include "kernels/common/q4_layout.h"

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics start from self-initialized "undefined"
// vectors, which -Wuninitialized reports at every inlined call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define LLMC_Q4_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

using namespace q4x86;

LLMC_Q4_AVX512 inline __m512 twice(__m256 v) {
  const __m512 wide = _mm512_castps256_ps512(v);
  return _mm512_shuffle_f32x4(wide, wide, _MM_SHUFFLE(1, 0, 1, 0));
}

// R packed rows x TT tokens, one pair of Q8 blocks per step: the pair's 32
// bytes widened to [low nibbles | high nibbles] are the even then odd
// columns of both blocks, as the pair's 64 bytes of x, so vpdpbusd gives
// block 2p's partial dot products in lanes 0..3 and 8..11, block 2p + 1's
// in 4..7 and 12..15: the lanes of the 16-lane Q8 scales.
template <int R, int TT, Groups G> struct Avx512Tile {
  LLMC_Q4_AVX512 static void run(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t t0) {
    const Q8Activations &xq = p.xq;
    const int64_t xStride = xq.pairs * kQ8PairBytes, sStride = xq.pairs * 16;
    const int8_t *xv = xq.values + t0 * xStride;
    const float *xs = xq.scales + t0 * sStride;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512 acc[R][TT];
    LLMC_Q4_UNROLL
    for (int r = 0; r < R; ++r) {
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm512_setzero_ps();
    }
    PairGroups groups(p.w.groupSize);
    for (int64_t q = 0; q < xq.pairs; ++q) {
      const bool full = q < geo.fullPairs; // else the row's last 4 words
      groups.advanceTo(q);
      LLMC_Q4_UNROLL
      for (int r = 0; r < R; ++r) {
        const hd::u32 *words = p.w.qweight + (n0 + r) * geo.words + 8 * q;
        const __m256i v =
            full ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(words))
                 : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(words)));
        const __m512i nibbles = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), low4);
        const __m512 s =
            twice(pairScales<G>(p.w.scales + (n0 + r) * geo.groups, groups, full));
        LLMC_Q4_UNROLL
        for (int t = 0; t < TT; ++t) {
          const __m512i x = _mm512_loadu_si512(xv + t * xStride + q * kQ8PairBytes);
          const __m512 dot =
              _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, x));
          const __m512 scale = _mm512_mul_ps(s, _mm512_loadu_ps(xs + t * sStride + 16 * q));
          acc[r][t] = _mm512_fmadd_ps(dot, scale, acc[r][t]);
        }
      }
    }
    float dots[R][TT];
    LLMC_Q4_UNROLL
    for (int r = 0; r < R; ++r) {
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        dots[r][t] = _mm512_reduce_add_ps(acc[r][t]);
    }
    storeTile<R, TT>(p, geo, n0, t0, dots);
  }
};

} // namespace

// 4 rows per decode tile, 2 rows x 4 tokens for prefill (8 accumulators,
// each token's x and scales, a row's nibbles and scales: 22 of 32 zmm).
LLMC_Q4_AVX512 void matmulQ4RowsAvx512Vnni(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  tiledRows<Avx512Tile, 4, 2, 4>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
