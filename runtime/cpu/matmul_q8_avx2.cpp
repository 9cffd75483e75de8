// AVX2 + FMA + F16C int8 linear layer (matmul_q8.h): tiles of 4 rows x 1-2
// tokens, 8 columns per step: the int8 weights widened to f32 (vpmovsxbd,
// vcvtdq2ps), times the group's scale, multiply-added to f32 x.
#if defined(__x86_64__)

#include "cpu/matmul_q8.h"
#include "kernels/common/q8_layout.h"

#include <immintrin.h>

#include <algorithm>

#define LLMC_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LLMC_Q8_UNROLL _Pragma("GCC unroll 8")

namespace llmc::cpu::detail {
namespace {

LLMC_Q8_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes [0, n) of a mask, n <= 8.
LLMC_Q8_AVX2 inline __m256i tailMask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 int8 weights as f32 times `scale`.
LLMC_Q8_AVX2 inline __m256 weights8(const int8_t *q, __m256 scale) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(q));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), scale);
}

// Rows n0 .. n0 + R, tokens t0 .. t0 + TT. Columns past K read the row's
// zero padding against masked (zero) x.
template <int R, int TT>
LLMC_Q8_AVX2 void tile(const Q8Problem &p, int64_t n0, int64_t t0) {
  const int64_t k = p.w.cols, rowBytes = hd::q8RowBytes(k);
  const int64_t width = hd::q8GroupColumns(k, p.w.groupSize);
  const int64_t groups = hd::q8NumGroups(k, p.w.groupSize);
  __m256 acc[R][TT];
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256 scale[R];
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r)
      scale[r] = _mm256_set1_ps(q8Scale(p.w, n0 + r, g));
    const int64_t end = std::min(k, (g + 1) * width);
    for (int64_t c = g * width; c < end; c += 8) {
      __m256 w[R];
      LLMC_Q8_UNROLL
      for (int r = 0; r < R; ++r)
        w[r] = weights8(p.w.qweight + (n0 + r) * rowBytes + c, scale[r]);
      const bool full = c + 8 <= k;
      const __m256i mask = full ? _mm256_set1_epi32(-1) : tailMask(k - c);
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t) {
        const float *xc = p.x + (t0 + t) * k + c;
        const __m256 x = full ? _mm256_loadu_ps(xc) : _mm256_maskload_ps(xc, mask);
        LLMC_Q8_UNROLL
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
      }
    }
  }
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t)
      storeQ8Output(p, t0 + t, n0 + r, hsum(acc[r][t]));
}

template <int R> LLMC_Q8_AVX2 void rowTile(const Q8Problem &p, int64_t n0) {
  int64_t t = 0;
  for (; t + 2 <= p.tokens; t += 2)
    tile<R, 2>(p, n0, t);
  if (t < p.tokens)
    tile<R, 1>(p, n0, t);
}

} // namespace

LLMC_Q8_AVX2 void matmulQ8RowsAvx2(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  int64_t n = rowBegin;
  for (; n + 4 <= rowEnd; n += 4)
    rowTile<4>(p, n);
  for (; n < rowEnd; ++n)
    rowTile<1>(p, n);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
