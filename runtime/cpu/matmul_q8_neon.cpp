// NEON int8 linear layer (matmul_q8.h, W8A16): tiles of 4 rows x 1-2
// tokens, 8 columns per step (two 4-lane registers): the int8 weights
// widened to f32 (SXTL twice, SCVTF) and multiply-added to f32 x; each
// group's scale multiplies the group's lane sums once. The sum of an output
// is the AVX2 kernel's (matmul_q8_avx2.cpp), bit for bit: 8 lanes of fma over
// the group's columns, the row's zero padding against zero x past K, total =
// scale * lanes (group 0) or fma(scale, lanes, total), the lanes added in
// its hsum tree (MatmulQ8.Avx2AndNeonSumInTheGroupOrder).
#if defined(__aarch64__)

#include "cpu/matmul_q8.h"
#include "cpu/lanes_neon.h"
#include "kernels/common/q8_layout.h"

#include <arm_neon.h>

#include <algorithm>

#define LLMC_Q8_UNROLL _Pragma("GCC unroll 8")

namespace llmc::cpu::detail {
namespace {

// 8 int8 weights as f32.
inline Lanes8 weights8(const int8_t *q) {
  const int16x8_t wide = vmovl_s8(vld1_s8(q));
  return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(wide))), vcvtq_f32_s32(vmovl_high_s16(wide))};
}

// 8 floats of x from c, zeros past K (the row's padding columns).
inline Lanes8 x8(const float *row, int64_t c, int64_t k) {
  if (c + 8 <= k)
    return {vld1q_f32(row + c), vld1q_f32(row + c + 4)};
  float padded[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::copy(row + c, row + k, padded);
  return {vld1q_f32(padded), vld1q_f32(padded + 4)};
}

// Rows n0 .. n0 + R, tokens t0 .. t0 + TT.
template <int R, int TT> void tile(const Q8Problem &p, int64_t n0, int64_t t0) {
  const int64_t k = p.w.cols, rowBytes = hd::q8RowBytes(k);
  const int64_t width = hd::q8GroupColumns(k, p.w.groupSize);
  const int64_t groups = hd::q8NumGroups(k, p.w.groupSize);
  // The lane sums of group g (no scale).
  auto groupSums = [&](Lanes8 (&acc)[R][TT], int64_t g) {
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r)
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t)
        acc[r][t] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    const int64_t end = std::min(k, (g + 1) * width);
    for (int64_t c = g * width; c < end; c += 8) {
      Lanes8 w[R];
      LLMC_Q8_UNROLL
      for (int r = 0; r < R; ++r)
        w[r] = weights8(p.w.qweight + (n0 + r) * rowBytes + c);
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t) {
        const Lanes8 x = x8(p.x + (t0 + t) * k, c, k);
        LLMC_Q8_UNROLL
        for (int r = 0; r < R; ++r)
          acc[r][t] = {vfmaq_f32(acc[r][t].lo, w[r].lo, x.lo),
                       vfmaq_f32(acc[r][t].hi, w[r].hi, x.hi)};
      }
    }
  };
  // The group's scale times its sums, into total (group 0 sets it).
  auto scaleInto = [&](Lanes8 (&total)[R][TT], const Lanes8 (&acc)[R][TT], int64_t g,
                       bool first) {
    LLMC_Q8_UNROLL
    for (int r = 0; r < R; ++r) {
      const float32x4_t scale = vdupq_n_f32(q8Scale(p.w, n0 + r, g));
      LLMC_Q8_UNROLL
      for (int t = 0; t < TT; ++t)
        total[r][t] = first ? Lanes8{vmulq_f32(scale, acc[r][t].lo), vmulq_f32(scale, acc[r][t].hi)}
                            : Lanes8{vfmaq_f32(total[r][t].lo, scale, acc[r][t].lo),
                                     vfmaq_f32(total[r][t].hi, scale, acc[r][t].hi)};
    }
  };
  Lanes8 total[R][TT], acc[R][TT];
  groupSums(acc, 0);
  scaleInto(total, acc, 0, true);
  for (int64_t g = 1; g < groups; ++g) {
    groupSums(acc, g);
    scaleInto(total, acc, g, false);
  }
  LLMC_Q8_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q8_UNROLL
    for (int t = 0; t < TT; ++t)
      storeQ8Output(p, t0 + t, n0 + r, hsum(total[r][t]));
}

template <int R> void rowTile(const Q8Problem &p, int64_t n0) {
  int64_t t = 0;
  for (; t + 2 <= p.tokens; t += 2)
    tile<R, 2>(p, n0, t);
  if (t < p.tokens)
    tile<R, 1>(p, n0, t);
}

} // namespace

void matmulQ8RowsNeon(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  int64_t n = rowBegin;
  for (; n + 4 <= rowEnd; n += 4)
    rowTile<4>(p, n);
  for (; n < rowEnd; ++n)
    rowTile<1>(p, n);
}

} // namespace llmc::cpu::detail

#endif // __aarch64__
