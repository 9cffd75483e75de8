// AVX2 + FMA + F16C int8 linear layer (matmul_q8.h): tiles of 4 rows x 1-2
// tokens, 8 columns per step: the int8 weights widened to f32 (vpmovsxbd,
// vcvtdq2ps) and multiply-added to f32 x; the group's scale multiplies
// each group's lane sums once. Decode tiles prefetch the rows ahead.
#if defined(__x86_64__)

#include "cpu/matmul_q8.h"
#include "cpu/lanes_avx2.h"
#include "kernels/common/q8_layout.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#define LLMC_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LLMC_Q8_UNROLL _Pragma("GCC unroll 8")

namespace llmc::cpu::detail {
namespace {

// How many tiles ahead decode tiles prefetch their rows.
constexpr int64_t kPrefetchTiles = 2;
// Rows per decode tile with one group per row.
constexpr int kDecodeRowsOneGroup = 4; // 6 and 8: no faster (8 measured 35% slower)

// 8 int8 weights as f32.
LLMC_Q8_AVX2 inline __m256 weights8(const int8_t *q) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(q));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// Rows n0 .. n0 + R, tokens t0 .. t0 + TT: per group, each lane sums
// q[c] * x[c] over its columns (c % 8) in column order, then the group's
// scale times that adds into the lane's total (one group: the total is the
// product). Whatever R and TT, every output gets the same bits. Columns past
// K read the row's zero padding against masked (zero) x.
// OneGroup (a scale per row, or G >= K): the total is scale * acc, with
// no registers for it (room for 8 rows).
template <int R, int TT, bool OneGroup>
LLMC_Q8_AVX2 void tile(const Q8Problem &p, int64_t n0, int64_t t0) {
  const int64_t k = p.w.cols, rowBytes = hd::q8RowBytes(k);
  const int64_t width = hd::q8GroupColumns(k, p.w.groupSize);
  const int64_t groups = OneGroup ? 1 : hd::q8NumGroups(k, p.w.groupSize);
  __m256 total[R][TT], acc[R][TT];
  // Columns c .. c + 7 (full) or c .. k - 1 (the row's last few).
  auto step = [&](int64_t c, auto full) LLMC_Q8_AVX2 {
    __m256 w[R];
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r)
      w[r] = weights8(p.w.qweight + (n0 + r) * rowBytes + c);
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t) {
      const float *xc = p.x + (t0 + t) * k + c;
      const __m256 x = full ? _mm256_loadu_ps(xc) : _mm256_maskload_ps(xc, firstLanes(k - c));
      LLMC_Q8_UNROLL
      for (int r = 0; r < R; ++r)
        acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
    }
  };
  for (int64_t g = 0; g < groups; ++g) {
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r)
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm256_setzero_ps();
    const int64_t begin = g * width, end = std::min(k, (g + 1) * width);
    const int64_t fullEnd = begin + (end - begin) / 8 * 8;
    for (int64_t c = begin; c < fullEnd; c += 8) {
      // Decode streams the rows once: fetch the rows kPrefetchTiles tiles
      // ahead, a line per row every 64 columns (a few short row streams
      // are more than the hardware prefetcher keeps ahead of: measured
      // 6.6 -> 10.3 G weights/s from DRAM at 32000 x 768).
      if constexpr (TT == 1)
        if ((c & 63) == 0) {
          LLMC_Q8_UNROLL
          for (int r = 0; r < R; ++r)
            _mm_prefetch(reinterpret_cast<const char *>(p.w.qweight) +
                             (n0 + kPrefetchTiles * R + r) * rowBytes + c,
                         _MM_HINT_T0);
        }
      step(c, std::true_type{});
    }
    if (fullEnd < end)
      step(fullEnd, std::false_type{});
    if constexpr (OneGroup)
      break;
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256 scale = _mm256_set1_ps(q8Scale(p.w, n0 + r, g));
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t)
        total[r][t] = g == 0 ? _mm256_mul_ps(scale, acc[r][t])
                             : _mm256_fmadd_ps(scale, acc[r][t], total[r][t]);
    }
  }
  if constexpr (OneGroup) {
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256 scale = _mm256_set1_ps(q8Scale(p.w, n0 + r, 0));
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t)
        total[r][t] = _mm256_mul_ps(scale, acc[r][t]);
    }
  }
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t)
      storeQ8Output(p, t0 + t, n0 + r, hsum(total[r][t]));
}

// Tiles of R rows: pairs of tokens, then the last one.
template <int R, bool OneGroup> LLMC_Q8_AVX2 void rowTile(const Q8Problem &p, int64_t n0) {
  int64_t t = 0;
  for (; t + 2 <= p.tokens; t += 2)
    tile<R, 2, OneGroup>(p, n0, t);
  if (t < p.tokens)
    tile<R, 1, OneGroup>(p, n0, t);
}

// DecodeR rows per decode tile (one token), 4 per prefill tile.
template <bool OneGroup, int DecodeR>
LLMC_Q8_AVX2 void rowsFor(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  int64_t n = rowBegin;
  if (p.tokens == 1)
    for (; n + DecodeR <= rowEnd; n += DecodeR)
      tile<DecodeR, 1, OneGroup>(p, n, 0);
  for (; n + 4 <= rowEnd; n += 4)
    rowTile<4, OneGroup>(p, n);
  for (; n < rowEnd; ++n)
    rowTile<1, OneGroup>(p, n);
}

} // namespace

LLMC_Q8_AVX2 void matmulQ8RowsAvx2(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (hd::q8NumGroups(p.w.cols, p.w.groupSize) == 1)
    return rowsFor<true, kDecodeRowsOneGroup>(p, rowBegin, rowEnd);
  rowsFor<false, 4>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
