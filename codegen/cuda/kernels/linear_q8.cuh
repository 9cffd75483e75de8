// The int8 linear layer (W8A16, kernels/common/q8_layout.h): y[T, N] (+)=
// x[T, K] . dequant(W)[N, K]^T (+ bias), activations f32/bf16/f16 as they
// are (no activation quantization), each weight dequantized to f32 as
// hd::q8Dequant does (q * scale) and multiplied in f32, as the CPU backend
// computes (cpu/matmul_q8.h).
//
// One kernel for decode and prefill: each warp owns R consecutive output
// rows and streams them once for a tile of up to TMAX tokens; its lanes
// take the rows' 16-byte pieces (16 weights, one group: G % 32 == 0) in
// turn. TILED (prefill): grid.y covers the rows in tiles of TMAX tokens
// (the step's grid_token_axis), so weights are read once per tile.
// Partial sums are f32 in registers, reduced over the warp at the end.
// The fused forms of a Linear step, as gemv.cuh has them: NORM (an RMSNorm
// prologue: weights gamma, qweight, scales; x * (gammaOffset + gamma)
// enters the dot products, the row's 1 / rms scales the sums) and SWIGLU
// (W = [gate; up], [2N, K]; y = act_GATE(gate) * up, 2R weight rows per warp).
#pragma once

#include "kernels/common/q8_layout.h"
#include "llmc/gemv.cuh"

namespace llmc::dev {

// The 16 x values at columns c0 .. c0 + 15 of row `row` (zeros past K).
template <class TA, int K>
__device__ __forceinline__ void loadX16(const TA *x, i64 row, int c0, float (&v)[16]) {
  const TA *p = x + row * K + c0;
  // Whole, 16-byte aligned rows: 16-byte loads; else element by element.
  if constexpr ((K * sizeof(TA)) % 16 == 0 && K % 16 == 0) {
    constexpr int kPiece = 16 / sizeof(TA);
#pragma unroll
    for (int c = 0; c < 16 / kPiece; ++c) {
      float piece[kPiece];
      loadVec<kPiece>(p + c * kPiece, piece);
#pragma unroll
      for (int e = 0; e < kPiece; ++e)
        v[c * kPiece + e] = piece[e];
    }
  } else {
#pragma unroll
    for (int e = 0; e < 16; ++e)
      v[e] = c0 + e < K ? toFloat(p[e]) : 0.0f;
  }
}

// 16 int8 weights of one 16-byte piece, dequantized with `scale`.
__device__ __forceinline__ void dequant16(uint4 raw, float scale, float (&w)[16]) {
  const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int b = 0; b < 4; ++b)
      w[4 * i + b] =
          static_cast<float>(static_cast<signed char>((words[i] >> (8 * b)) & 0xffu)) * scale;
}

// Weights: (gamma [K] of TG,) qweight [N', q8RowBytes(K)] I8, scales
// [N', groups] (TS: float or f16) (, bias [N] of TB); N' = 2N with SWIGLU.
template <class TA, class TO, class TB, class TS, int N, int K, int G, int TMAX, int R,
          int WARPS, bool TILED, bool ACCUM, bool BIAS, bool NORM = false, bool SWIGLU = false,
          int GATE = hd::kGateSilu, class TG = float>
__device__ __forceinline__ void linearQ8(const abi::StepArgs &a, float eps = 0.0f,
                                         float gammaOffset = 0.0f, float outScale = 1.0f) {
  constexpr int WR = SWIGLU ? 2 * R : R; // weight rows per warp
  constexpr int M = NORM ? 1 : 0;        // weight index of qweight
  static_assert(G == 0 || G % 32 == 0, "a 16-byte piece lies in one group");
  constexpr int kRowBytes = static_cast<int>(hd::q8RowBytes(K));
  constexpr int kPieces = kRowBytes / 16;
  constexpr int kGroups = static_cast<int>(hd::q8NumGroups(K, G));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rowBase = (blockIdx.x * WARPS + warp) * R;
  const int t0 = TILED ? static_cast<int>(blockIdx.y) * TMAX : 0;
  const int tokens = min(TMAX, a.rows - t0);
  if (tokens <= 0)
    return;
  const TA *x = static_cast<const TA *>(a.in[0]);
  const unsigned char *q = static_cast<const unsigned char *>(a.w[M]);
  const TS *scales = static_cast<const TS *>(a.w[M + 1]);
  const void *bias = BIAS ? a.w[M + 2] : nullptr;
  const TG *gamma = NORM ? static_cast<const TG *>(a.w[0]) : nullptr;
  float acc[WR][TMAX] = {};
  float sumSquares[TMAX] = {};
  for (int piece = lane; piece < kPieces; piece += 32) {
    const int c0 = piece * 16;
    float w[WR][16];
#pragma unroll
    for (int r = 0; r < WR; ++r) {
      const int out = rowBase + r % R;                 // the output row
      const int n = r < R ? out : N + out;             // its gate row, or up row
      if (out < N) {
        const uint4 raw =
            *reinterpret_cast<const uint4 *>(q + static_cast<i64>(n) * kRowBytes + c0);
        const int g = G > 0 ? c0 / G : 0;
        dequant16(raw, toFloat(scales[static_cast<i64>(n) * kGroups + (g < kGroups ? g : 0)]), w[r]);
      } else {
#pragma unroll
        for (int e = 0; e < 16; ++e)
          w[r][e] = 0.0f;
      }
    }
#pragma unroll
    for (int t = 0; t < TMAX; ++t) {
      if (t >= tokens)
        break;
      float xv[16];
      loadX16<TA, K>(x, t0 + t, c0, xv);
      if constexpr (NORM) { // columns past K are 0 in x: no term
#pragma unroll
        for (int e = 0; e < 16; ++e) {
          sumSquares[t] += xv[e] * xv[e];
          xv[e] *= c0 + e < K ? toFloat(gamma[c0 + e]) + gammaOffset : 0.0f;
        }
      }
#pragma unroll
      for (int r = 0; r < WR; ++r)
#pragma unroll
        for (int e = 0; e < 16; ++e)
          acc[r][t] += w[r][e] * xv[e];
    }
  }
#pragma unroll
  for (int t = 0; t < TMAX; ++t) {
    if (NORM)
      sumSquares[t] = warpSum(sumSquares[t]);
#pragma unroll
    for (int r = 0; r < WR; ++r)
      acc[r][t] = warpSum(acc[r][t]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TMAX; ++t) {
      const int n = rowBase + r;
      if (t < tokens && n < N && lane == (r * TMAX + t) % 32) {
        const float scale = NORM ? invRms(sumSquares[t], K, eps) : 1.0f;
        const float y = SWIGLU ? hd::gated(GATE, acc[r][t] * scale, acc[R + r][t] * scale)
                               : acc[r][t] * scale;
        linearStore<TO, TB, ACCUM, BIAS>(a.out, bias, t0 + t, n, N, y, 0.0f, outScale);
      }
    }
}

} // namespace llmc::dev
