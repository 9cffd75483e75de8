// AVX-512 int8 linear layer (matmul_q8.h): tiles of 4 rows x 1-4 tokens, 16
// columns per step (vpmovsxbd, vcvtdq2ps, times the group's scale, vfmadd
// into f32 accumulators; masked x loads for the tail).
#if defined(__x86_64__)

#include "cpu/matmul_q8.h"
#include "kernels/common/q8_layout.h"

#include <immintrin.h>

#include <algorithm>

#define LLMC_Q8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define LLMC_Q8_UNROLL _Pragma("GCC unroll 8")

namespace llmc::cpu::detail {
namespace {

LLMC_Q8_AVX512 inline __m512 weights16(const int8_t *q, __m512 scale) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(q));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), scale);
}

template <int R, int TT>
LLMC_Q8_AVX512 void tile(const Q8Problem &p, int64_t n0, int64_t t0) {
  const int64_t k = p.w.cols, rowBytes = hd::q8RowBytes(k);
  const int64_t width = hd::q8GroupColumns(k, p.w.groupSize);
  const int64_t groups = hd::q8NumGroups(k, p.w.groupSize);
  __m512 acc[R][TT];
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512 scale[R];
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r)
      scale[r] = _mm512_set1_ps(q8Scale(p.w, n0 + r, g));
    const int64_t end = std::min(k, (g + 1) * width);
    for (int64_t c = g * width; c < end; c += 16) {
      __m512 w[R];
      LLMC_Q8_UNROLL
      for (int r = 0; r < R; ++r)
        w[r] = weights16(p.w.qweight + (n0 + r) * rowBytes + c, scale[r]);
      const __mmask16 mask =
          c + 16 <= k ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (k - c)) - 1u);
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t) {
        const __m512 x = _mm512_maskz_loadu_ps(mask, p.x + (t0 + t) * k + c);
        LLMC_Q8_UNROLL
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm512_fmadd_ps(w[r], x, acc[r][t]);
      }
    }
  }
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t)
      storeQ8Output(p, t0 + t, n0 + r, _mm512_reduce_add_ps(acc[r][t]));
}

template <int R> LLMC_Q8_AVX512 void rowTile(const Q8Problem &p, int64_t n0) {
  int64_t t = 0;
  for (; t + 4 <= p.tokens; t += 4)
    tile<R, 4>(p, n0, t);
  switch (p.tokens - t) {
  case 3:
    tile<R, 3>(p, n0, t);
    break;
  case 2:
    tile<R, 2>(p, n0, t);
    break;
  case 1:
    tile<R, 1>(p, n0, t);
    break;
  default:
    break;
  }
}

} // namespace

LLMC_Q8_AVX512 void matmulQ8RowsAvx512(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  int64_t n = rowBegin;
  for (; n + 4 <= rowEnd; n += 4)
    rowTile<4>(p, n);
  for (; n < rowEnd; ++n)
    rowTile<1>(p, n);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
