// AArch64 Advanced SIMD (NEON) kernels. NEON is part of the base
// architecture, so nothing here needs a target attribute.
//
// An output is summed in exactly the AVX2 order (simd_avx2.cpp, simd_gemm.h
// "Numerics"): "8 lanes" are two 4-lane registers (lanes 0..3 and 4..7), lane
// j adds x[k] * w[k] by fma for k = j, j + 8, ..., hsum adds the lanes in the
// AVX2 tree, the K % 8 tail goes by fma, then storeOutput. So the decode
// tiles, the prefill tiles and the packed GEMM give the same bits for any
// rows x tokens split, and the same bits as the AVX2 kernels on x86-64.
#if defined(__aarch64__)

#include "cpu/simd.h"
#include "cpu/lanes_neon.h"
#include "cpu/simd_gemm.h"

#include <arm_neon.h>

#include <cmath>

namespace llmc::cpu::detail {
namespace {

inline Lanes8 zero8() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }

inline Lanes8 loadF32x8(const float *p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }

inline void storeF32x8(float *p, Lanes8 v) {
  vst1q_f32(p, v.lo);
  vst1q_f32(p + 4, v.hi);
}

// acc + w * x, fused per lane.
inline Lanes8 fma8(Lanes8 acc, Lanes8 w, Lanes8 x) {
  return {vfmaq_f32(acc.lo, w.lo, x.lo), vfmaq_f32(acc.hi, w.hi, x.hi)};
}

// Loads 8 weights starting at element k of a row as f32 (exact).
template <DType D> inline Lanes8 load8(const char *row, int64_t k);

template <> inline Lanes8 load8<DType::F32>(const char *row, int64_t k) {
  return loadF32x8(reinterpret_cast<const float *>(row) + k);
}

template <> inline Lanes8 load8<DType::BF16>(const char *row, int64_t k) {
  const uint16x8_t bits = vld1q_u16(reinterpret_cast<const uint16_t *>(row) + k);
  return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(bits), 16)),
          vreinterpretq_f32_u32(vshll_high_n_u16(bits, 16))};
}

template <> inline Lanes8 load8<DType::F16>(const char *row, int64_t k) {
  const float16x8_t halves =
      vreinterpretq_f16_u16(vld1q_u16(reinterpret_cast<const uint16_t *>(row) + k));
  return {vcvt_f32_f16(vget_low_f16(halves)), vcvt_high_f32_f16(halves)};
}

// y[t0 .. t0+TT, n0 .. n0+R]: the R weight rows at rows (rowBytes apart,
// dtype D) against TT tokens, R * TT accumulators of 8 lanes (2 registers
// each). A k-step holds R weight vectors and one x vector, so 2 (R * TT + R
// + 1) of the 32 registers.
//
// The GEMM may run columns [kBegin, kEnd) only (kBegin a multiple of 8; rows
// then points at column kBegin): the lanes come from carry[R][TT][8] unless
// kBegin is 0 and go back there unless kEnd is K, stored and loaded exactly,
// so a depth split leaves every sum as it is.
template <DType D, int R, int TT>
void dotTile(const MatmulProblem &p, const char *rows, int64_t rowBytes, int64_t n0, int64_t t0,
             int64_t kBegin = 0, int64_t kEnd = -1, float *carry = nullptr) {
  const int64_t k = p.w.cols, end = kEnd < 0 ? k : kEnd;
  const float *x = p.x + t0 * k;
  Lanes8 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      acc[r][t] = kBegin > 0 ? loadF32x8(carry + (r * TT + t) * 8) : zero8();
  int64_t i = kBegin;
  for (; i + 8 <= end; i += 8) {
    Lanes8 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      wv[r] = load8<D>(rows + r * rowBytes, i - kBegin);
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      const Lanes8 xv = loadF32x8(x + t * k + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        acc[r][t] = fma8(acc[r][t], wv[r], xv);
    }
  }
  if (end < k) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        storeF32x8(carry + (r * TT + t) * 8, acc[r][t]);
    return;
  }
  float sums[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      sums[r][t] = hsum(acc[r][t]);
  for (int r = 0; r < R; ++r) {
    const void *row = rows + r * rowBytes;
    for (int t = 0; t < TT; ++t) {
      float sum = sums[r][t];
      for (int64_t j = i; j < k; ++j) // tail of fewer than 8
        sum = std::fma(weightAt(row, D, j - kBegin), x[t * k + j], sum);
      storeOutput(p, t0 + t, n0 + r, sum);
    }
  }
}

// The tile on the problem's own weight rows n0 .. n0+R.
template <DType D, int R, int TT> void tile(const MatmulProblem &p, int64_t n0, int64_t t0) {
  const int64_t rowBytes = p.w.cols * static_cast<int64_t>(dtypeSize(D));
  dotTile<D, R, TT>(p, static_cast<const char *>(p.w.data) + n0 * rowBytes, rowBytes, n0, t0);
}

// A tile of R rows by min(tokens, TT) tokens.
template <DType D, int R, int TT>
void tileUpTo(const MatmulProblem &p, int64_t n0, int64_t t0, int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return tileUpTo<D, R, TT - 1>(p, n0, t0, tokens);
  tile<D, R, TT>(p, n0, t0);
}

// Rows [rowBegin, rowEnd) in tiles of R rows x TT tokens over L2-sized row blocks.
template <DType D, int R, int TT>
void tiledRows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t block = rowsPerL2Block(p.w.cols * dtypeSize(D), R);
  for (int64_t b = rowBegin; b < rowEnd; b += block) {
    const int64_t bEnd = b + block < rowEnd ? b + block : rowEnd;
    for (int64_t t0 = 0; t0 < p.tokens; t0 += TT) {
      int64_t n = b;
      for (; n + R <= bEnd; n += R)
        tileUpTo<D, R, TT>(p, n, t0, p.tokens - t0);
      for (; n < bEnd; ++n)
        tileUpTo<D, 1, TT>(p, n, t0, p.tokens - t0);
    }
  }
}

// The prefill GEMM's NEON kernel (simd_gemm.h): 2 rows x 4 tokens, 16
// accumulator registers; a k-step is 4 weight loads from the panel, 8 x
// loads from the packed token tile and 16 FMAs, the sums in dotTile's order.
// (3 x 4 would take all 32 registers and spill.)
struct NeonGemm {
  using Element = float; // panels and token tiles in f32
  static constexpr int kRows = 2, kTokens = 4, kColumns = 8;

  template <DType D> static void convert(const char *row, int64_t k, float *out) {
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
      storeF32x8(out + i * kRows, load8<D>(row, i));
    for (; i < k; ++i)
      out[i / 8 * kRows * 8 + i % 8] = weightAt(row, D, i);
  }

  template <int R, int TT, bool PackTokens>
  static void tile(const MatmulProblem &p, const float *panel, float *xs, int64_t n0,
                   int64_t t0, int64_t kBegin, int64_t kEnd, float *carry) {
    const int64_t k = p.w.cols, steps = (kEnd - kBegin) / 8;
    Lanes8 acc[R][TT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        acc[r][t] = kBegin > 0 ? loadF32x8(carry + (r * TT + t) * 8) : zero8();
    const float *w = panel, *x = p.x + t0 * k + kBegin;
    float *xv = xs;
    for (int64_t s = 0; s < steps; ++s, w += kRows * 8, x += 8, xv += kTokens * 8) {
      Lanes8 wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        wv[r] = loadF32x8(w + r * 8);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const Lanes8 x8 = PackTokens ? loadF32x8(x + t * k) : loadF32x8(xv + t * 8);
        if constexpr (PackTokens)
          storeF32x8(xv + t * 8, x8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = fma8(acc[r][t], wv[r], x8);
      }
    }
    if (kEnd < k) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int t = 0; t < TT; ++t)
          storeF32x8(carry + (r * TT + t) * 8, acc[r][t]);
      return;
    }
    float sums[R][TT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        sums[r][t] = hsum(acc[r][t]);
    const int64_t tail = kBegin + steps * 8;
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t) {
        float sum = sums[r][t];
        for (int64_t j = tail; j < k; ++j) // fewer than 8
          sum = std::fma(w[r * 8 + j - tail], p.x[(t0 + t) * k + j], sum);
        storeOutput(p, t0 + t, n0 + r, sum);
      }
  }
};

// From this many tokens on, the packed GEMM and the split over tokens (the
// AVX2 choice; not measured on an ARM machine).
constexpr int64_t kNeonGemmTokens = 32;
// Weight rows per item of a split prefill: whole 2-row tiles.
constexpr int64_t kNeonGemmRowBlock = 120;

// Decode (1-2 tokens): four weight rows at once; up to 31 tokens: 2 rows x
// 4 tokens; prefill: the GEMM. One summation order for all (dotTile).
template <DType D> void rows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens >= kNeonGemmTokens)
    packedGemm<NeonGemm, D>(p, rowBegin, rowEnd, 0, p.tokens);
  else if (p.tokens >= 3)
    tiledRows<D, 2, 4>(p, rowBegin, rowEnd);
  else
    tiledRows<D, 4, 2>(p, rowBegin, rowEnd);
}

void matmulRowsNeon(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  switch (p.w.dtype) {
  case DType::F32:
    return rows<DType::F32>(p, rowBegin, rowEnd);
  case DType::F16:
    return rows<DType::F16>(p, rowBegin, rowEnd);
  case DType::BF16:
    return rows<DType::BF16>(p, rowBegin, rowEnd);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

void packedGemmNeon(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                    int64_t tokenEnd) {
  switch (p.w.dtype) {
  case DType::F32:
    return packedGemm<NeonGemm, DType::F32>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::F16:
    return packedGemm<NeonGemm, DType::F16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::BF16:
    return packedGemm<NeonGemm, DType::BF16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

// Four 4-lane accumulators over 16 columns a step, then 4 at a time, then a
// scalar tail: a fixed order, not the matmul order (attention and norms use it).
float dotNeon(const float *a, const float *b, int64_t n) {
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
    acc1 = vfmaq_f32(acc1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    acc2 = vfmaq_f32(acc2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
    acc3 = vfmaq_f32(acc3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
  }
  for (; i + 4 <= n; i += 4)
    acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
  float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
  for (; i < n; ++i)
    sum = std::fma(a[i], b[i], sum);
  return sum;
}

void axpyNeon(float a, const float *x, float *y, int64_t n) {
  const float32x4_t av = vdupq_n_f32(a);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), av, vld1q_f32(x + i)));
  for (; i < n; ++i)
    y[i] = std::fma(a, x[i], y[i]);
}

void scaleNeon(float a, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), a));
  for (; i < n; ++i)
    y[i] *= a;
}

} // namespace

const IsaOps kNeonOps = {matmulRowsNeon,    packedGemmNeon,    packedGemmNeon,
                         kNeonGemmTokens,   NeonGemm::kTokens, kNeonGemmRowBlock, NeonGemm::kColumns,
                         dotNeon,           axpyNeon,          scaleNeon};

} // namespace llmc::cpu::detail

#endif // __aarch64__
