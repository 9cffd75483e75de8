// AVX2 + FMA + F16C int8 linear layer (matmul_q8.h): tiles of 4 rows x 1-2
// tokens, 8 columns per step: the int8 weights widened to f32 (vpmovsxbd,
// vcvtdq2ps) and multiply-added to f32 x; the group's scale multiplies
// each group's lane sums once. Decode reads the rows in 4 prefetched runs.
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

// Decode reads a call's rows in kStreams runs, each prefetched kAhead bytes
// ahead (as the float GEMV, simd_avx2.cpp streamedRows).
constexpr int kStreams = 4;
constexpr int64_t kAhead = 256;

// 8 int8 weights as f32.
LLMC_Q8_AVX2 inline __m256 weights8(const int8_t *q) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(q));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// Rows n0 + r * rowStep (r < R), tokens t0 .. t0 + TT: per group, each lane
// sums q[c] * x[c] over its columns (c % 8) in column order, then the
// group's scale times that adds into the lane's total (group 0: the total is
// the product). Whatever R, TT and rowStep, every output gets the same bits.
// Columns past K read the row's zero padding against masked (zero) x.
// Ahead: prefetch each row's stream that many bytes ahead (0: none).
template <int R, int TT, bool OneGroup, int64_t Ahead = 0>
LLMC_Q8_AVX2 void tile(const Q8Problem &p, int64_t n0, int64_t t0, int64_t rowStep = 1) {
  const int64_t k = p.w.cols, rowBytes = hd::q8RowBytes(k);
  const int64_t width = hd::q8GroupColumns(k, p.w.groupSize);
  const int64_t groups = OneGroup ? 1 : hd::q8NumGroups(k, p.w.groupSize);
  const int8_t *rows[R];
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    rows[r] = p.w.qweight + (n0 + r * rowStep) * rowBytes;
  // Columns c .. c + 7 (full) or c .. k - 1 (the row's last few).
  auto step = [&](__m256 (&acc)[R][TT], int64_t c, auto full) LLMC_Q8_AVX2 {
    if constexpr (TT == 1) { // each weight vector is used once: no array of them
      const float *xc = p.x + t0 * k + c;
      const __m256 x = full ? _mm256_loadu_ps(xc) : _mm256_maskload_ps(xc, firstLanes(k - c));
      LLMC_Q8_UNROLL
      for (int r = 0; r < R; ++r)
        acc[r][0] = _mm256_fmadd_ps(weights8(rows[r] + c), x, acc[r][0]);
      return;
    }
    __m256 w[R];
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r)
      w[r] = weights8(rows[r] + c);
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t) {
      const float *xc = p.x + (t0 + t) * k + c;
      const __m256 x = full ? _mm256_loadu_ps(xc) : _mm256_maskload_ps(xc, firstLanes(k - c));
      LLMC_Q8_UNROLL
      for (int r = 0; r < R; ++r)
        acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
    }
  };
  // The lane sums of group g (no scale).
  auto groupSums = [&](__m256 (&acc)[R][TT], int64_t g) LLMC_Q8_AVX2 {
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r)
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm256_setzero_ps();
    const int64_t begin = g * width, end = std::min(k, (g + 1) * width);
    const int64_t fullEnd = begin + (end - begin) / 8 * 8;
    int64_t c = begin;
    // Decode: 64 columns (a line of each row) per prefetch, unrolled.
    if constexpr (Ahead > 0)
      for (; c + 64 <= fullEnd; c += 64) {
        LLMC_Q8_UNROLL
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char *>(rows[r]) + c + Ahead, _MM_HINT_T0);
        LLMC_Q8_UNROLL
        for (int s = 0; s < 64; s += 8)
          step(acc, c + s, std::true_type{});
      }
    for (; c < fullEnd; c += 8)
      step(acc, c, std::true_type{});
    if (fullEnd < end)
      step(acc, fullEnd, std::false_type{});
  };
  // The group's scale times its sums, into total (group 0 sets it).
  auto scaleInto = [&](__m256 (&total)[R][TT], const __m256 (&acc)[R][TT], int64_t g, auto first)
                       LLMC_Q8_AVX2 {
                         LLMC_Q8_UNROLL
                         for (int r = 0; r < R; ++r) {
                           const __m256 scale = _mm256_set1_ps(q8Scale(p.w, n0 + r * rowStep, g));
                           LLMC_Q8_UNROLL
                           for (int t = 0; t < TT; ++t)
                             total[r][t] = first ? _mm256_mul_ps(scale, acc[r][t])
                                                 : _mm256_fmadd_ps(scale, acc[r][t], total[r][t]);
                         }
                       };
  __m256 total[R][TT], acc[R][TT];
  groupSums(acc, 0);
  scaleInto(total, acc, 0, std::true_type{});
  for (int64_t g = 1; g < groups; ++g) {
    groupSums(acc, g);
    scaleInto(total, acc, g, std::false_type{});
  }
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t)
      storeQ8Output(p, t0 + t, n0 + r * rowStep, hsum(total[r][t]));
}

// Tiles of R rows: pairs of tokens, then the last one.
template <int R, bool OneGroup> LLMC_Q8_AVX2 void rowTile(const Q8Problem &p, int64_t n0) {
  int64_t t = 0;
  for (; t + 2 <= p.tokens; t += 2)
    tile<R, 2, OneGroup>(p, n0, t);
  if (t < p.tokens)
    tile<R, 1, OneGroup>(p, n0, t);
}

// Decode (one token): rows [rowBegin, rowEnd) in kStreams equal runs, tile j
// taking row j of each run, so that a tile reads kStreams long sequential
// streams. Tiles of 4 adjacent rows read 4 streams of one row each (768 B
// for the 32000 x 768 head), which end before the hardware prefetcher has
// ramped up: 10-14 G weights/s from DRAM against 18-20 for the runs (docs/perf.md,
// "CPU decode: int8 head, 2-thread float decode, thread pool"). The
// remainder (fewer than kStreams rows) goes in 1-row tiles.
template <bool OneGroup>
LLMC_Q8_AVX2 void streamedRows(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t run = (rowEnd - rowBegin) / kStreams;
  for (int64_t j = 0; j < run; ++j)
    tile<kStreams, 1, OneGroup, kAhead>(p, rowBegin + j, 0, run);
  for (int64_t n = rowBegin + kStreams * run; n < rowEnd; ++n)
    tile<1, 1, OneGroup>(p, n, 0);
}

// Decode: streamed runs; prefill: tiles of 4 rows x 2 tokens.
template <bool OneGroup>
LLMC_Q8_AVX2 void rowsFor(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens == 1)
    return streamedRows<OneGroup>(p, rowBegin, rowEnd);
  int64_t n = rowBegin;
  for (; n + 4 <= rowEnd; n += 4)
    rowTile<4, OneGroup>(p, n);
  for (; n < rowEnd; ++n)
    rowTile<1, OneGroup>(p, n);
}

} // namespace

LLMC_Q8_AVX2 void matmulQ8RowsAvx2(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (hd::q8NumGroups(p.w.cols, p.w.groupSize) == 1)
    return rowsFor<true>(p, rowBegin, rowEnd);
  rowsFor<false>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
