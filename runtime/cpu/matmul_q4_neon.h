// Internal: the NEON int4 kernel (matmul_q4.h numerics, W4A8) as a template
// over the integer dot product of one Q8 block, included by
// matmul_q4_neon.cpp (SMULL/SADALP, base AArch64) and matmul_q4_neon_dot.cpp
// (SDOT, compiled for Armv8.2 + dotprod and run only where the CPU reports
// it). Its functions have internal linkage, so neither file's copy can stand
// in for the other's at link time.
//
// A tile is 4 rows (one f32 lane each) x 1-4 tokens. Per Q8 block b of 32
// columns and per row and token, the block's integer dot product
//   dot = sum_c q[n, c] * xq[t, c]
// is exact (both ways give the same integer), then
//   acc = fma(float(dot), scale[n, g] * d[t, b], acc)   over b ascending,
//   zero = fma(scale[n, g] * zero[n, g], groupSums[t, g], zero)   over g ascending,
//   y = (acc - zero) + bias (+ y),
// lane by lane. So an output's bits depend neither on the tile, the lane its
// row takes, the token count or the thread split, nor on whether SDOT ran.
#pragma once
#if defined(__aarch64__)

#include "cpu/matmul_q4.h"
#include "kernels/common/q4_layout.h"

#include <arm_neon.h>

#include <cstdint>

namespace llmc::cpu::detail {

// Rows [rowBegin, rowEnd) of y from p.xq (scaleLanes 8, no chunkScales).
void matmulQ4RowsNeonWidening(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);
void matmulQ4RowsNeonSdot(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);

namespace {
namespace q4neon {

// Rows of a 16-row block share a tile loop (16 rows of K = 4096 are 32 KiB).
constexpr int64_t kBlockRows = 16;
constexpr int kTileRows = 4;

// The f16 values at index g of four rows' scales, as f32 lanes.
inline float32x4_t rowHalves(const uint16_t *const (&rows)[kTileRows], int64_t g) {
  const uint16_t h[kTileRows] = {rows[0][g], rows[1][g], rows[2][g], rows[3][g]};
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// Rows n0 .. n0 + count (count 1..4; unused lanes repeat the last row and are
// not stored) x TT tokens from t0. Dot::block(lo, hi, xe, xo) returns 4
// int32 lanes whose sum is lo . xe + hi . xo (16 int8 products each).
template <class Dot, int TT>
void tile(const Q4Problem &p, int64_t n0, int64_t count, int64_t t0) {
  const int64_t words = hd::q4WordsPerRow(p.w.cols), blocks = words / 4;
  const int64_t groupSize = p.w.groupSize, groups = hd::q4NumGroups(p.w.cols, groupSize);
  const Q8Activations &xq = p.xq;
  const uint8_t *packed[kTileRows];
  const uint16_t *scales[kTileRows];
  const uint8_t *zeros[kTileRows];
  for (int r = 0; r < kTileRows; ++r) {
    const int64_t n = n0 + (r < count ? r : count - 1);
    packed[r] = reinterpret_cast<const uint8_t *>(p.w.qweight + n * words);
    scales[r] = p.w.scales + n * groups;
    zeros[r] = p.w.zeros + n * q4ZeroRowBytes(groups);
  }
  const int8_t *xv[TT];
  const float *xd[TT], *sums[TT];
  float32x4_t acc[TT], zero[TT];
#pragma GCC unroll 4
  for (int t = 0; t < TT; ++t) {
    xv[t] = xq.values + (t0 + t) * xq.pairs * kQ8PairBytes;
    xd[t] = xq.scales + (t0 + t) * xq.pairs * xq.scaleLanes;
    sums[t] = xq.groupSums + (t0 + t) * groups;
    acc[t] = vdupq_n_f32(0.0f);
    zero[t] = vdupq_n_f32(0.0f);
  }
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  float32x4_t scale = vdupq_n_f32(0.0f);
  int64_t group = -1, groupEnd = 0; // blocks [.., groupEnd) are in `group`
  for (int64_t b = 0; b < blocks; ++b) {
    if (b >= groupEnd) { // the next group: its scales, and its zero-point term
      group = b * kQ8Block / groupSize;
      groupEnd = ((group + 1) * groupSize + kQ8Block - 1) / kQ8Block;
      scale = rowHalves(scales, group);
      const float zeroLanes[kTileRows] = {static_cast<float>(q4ZeroAt(zeros[0], group)),
                                          static_cast<float>(q4ZeroAt(zeros[1], group)),
                                          static_cast<float>(q4ZeroAt(zeros[2], group)),
                                          static_cast<float>(q4ZeroAt(zeros[3], group))};
      const float32x4_t scaledZero = vmulq_f32(scale, vld1q_f32(zeroLanes));
#pragma GCC unroll 4
      for (int t = 0; t < TT; ++t)
        zero[t] = vfmaq_n_f32(zero[t], scaledZero, sums[t][group]);
    }
    // Byte j of a block's 16 holds its columns 2j (low nibble) and 2j + 1.
    int8x16_t lo[kTileRows], hi[kTileRows];
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const uint8x16_t w = vld1q_u8(packed[r] + 16 * b);
      lo[r] = vreinterpretq_s8_u8(vandq_u8(w, low4));
      hi[r] = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
    }
    // The block's even columns at byte 16 * (b % 2) of its pair, odd ones 32 later.
    const int64_t xOffset = (b / 2) * kQ8PairBytes + 16 * (b % 2);
    const int64_t dOffset = (b / 2) * xq.scaleLanes + 4 * (b % 2);
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) {
      const int8x16_t xe = vld1q_s8(xv[t] + xOffset), xo = vld1q_s8(xv[t] + xOffset + 32);
      int32x4_t dots[kTileRows];
#pragma GCC unroll 4
      for (int r = 0; r < kTileRows; ++r)
        dots[r] = Dot::block(lo[r], hi[r], xe, xo);
      // Lane r: row r's whole block dot product (exact).
      const int32x4_t rowDots =
          vpaddq_s32(vpaddq_s32(dots[0], dots[1]), vpaddq_s32(dots[2], dots[3]));
      acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(rowDots), vmulq_n_f32(scale, xd[t][dOffset]));
    }
  }
  for (int t = 0; t < TT; ++t) {
    float out[kTileRows];
    vst1q_f32(out, vsubq_f32(acc[t], zero[t]));
    for (int r = 0; r < count; ++r)
      storeQ4Output(p, t0 + t, n0 + r, out[r]);
  }
}

// Rows n0 .. n0 + count x min(tokens, 4) tokens from t0.
template <class Dot>
void tileUpTo4(const Q4Problem &p, int64_t n0, int64_t count, int64_t t0, int64_t tokens) {
  switch (tokens < 4 ? tokens : 4) {
  case 1:
    return tile<Dot, 1>(p, n0, count, t0);
  case 2:
    return tile<Dot, 2>(p, n0, count, t0);
  case 3:
    return tile<Dot, 3>(p, n0, count, t0);
  default:
    return tile<Dot, 4>(p, n0, count, t0);
  }
}

// 16-row blocks; in each, 4-row tiles walk over the tokens 4 at a time, so
// that the block's packed rows stay in L1.
template <class Dot> void rows(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  for (int64_t b = rowBegin; b < rowEnd; b += kBlockRows) {
    const int64_t end = b + kBlockRows < rowEnd ? b + kBlockRows : rowEnd;
    for (int64_t t0 = 0; t0 < p.tokens; t0 += 4)
      for (int64_t n = b; n < end; n += kTileRows)
        tileUpTo4<Dot>(p, n, end - n < kTileRows ? end - n : kTileRows, t0, p.tokens - t0);
  }
}

} // namespace q4neon
} // namespace

} // namespace llmc::cpu::detail

#endif // __aarch64__
