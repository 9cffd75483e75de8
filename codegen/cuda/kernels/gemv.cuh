// The decode linear layers: y[T, N] = x[T, K] . W[N, K]^T for few tokens
// (T <= TMAX, a template constant): memory-bound GEMVs that stream each
// weight row once for all T tokens, with the fused forms' prologue and
// epilogues:
//   NORM    x is RMS-normalized first (RmsNormLinear, LmHead): x * gamma
//           enters the dot products and the row's 1 / rms scales the result;
//   SWIGLU  W = [gate; up] is [2N, K]; y = act(x . gate^T) * (x . up^T), act the
//           GateKind GATE (kernels/common/activations.h: silu, or gelu for GeGLU);
//   gammaOffset (run time, with NORM): x * (gammaOffset + gamma), Gemma's (1 + w);
//   softcap (run time, 0: off): y = softcap * tanh(y / softcap) (Gemma 2's logits);
//   outScale (run time, 1: none): y = (x . W^T + bias) * outScale before the soft-cap and the
//           residual add (Cohere's and Granite's logits, a Linear's output_scale: Granite's
//           residual_multiplier);
//   BIAS, ACCUM (y += ...), GATHER (Logits, LmHead: token t reads x row
//           logitRows[t], numLogitRows tokens, the output compacted).
//
// Each warp owns R consecutive output rows (2R weight rows with SWIGLU); its
// lanes walk K in VEC-element vectors (one 16-byte load each), UNROLL
// vectors per row in flight before the first use, held as loaded (raw) until
// then: UNROLL x WR x 512 bytes per warp (4 KB at batch 1). NORM's gamma
// (f32) comes in 16-byte pieces too. Accumulation is f32 in
// registers, reduced over the warp at the end. Split-K (grid.y = SPLITK > 1,
// chosen when the grid would not fill the GPU) gives each block K / SPLITK
// columns; blocks write f32 partials (and NORM's partial sums of squares)
// to the workspace, and the last block of a row group sums them in split
// order (deterministic) and applies the epilogue.
#pragma once

#include "kernels/common/activations.h"
#include "kernels/common/attention_scores.h"
#include "kernels/common/int4.h"
#include "llmc/common.cuh"

namespace llmc::dev {

// The epilogue of output element (t, n): bias, scale (Logits' scale or a
// Linear's output_scale; 1: none), soft-cap (0: off), residual
// accumulation, store; the CPU's order (cpu/ops/logits.cpp:
// softcap((x . W^T + bias) * scale); cpu/ops/linear.cpp: out + (x . W^T +
// bias) * output_scale, the product rounded before it is added: __fmul_rn
// keeps the multiply out of a fused multiply-add with the residual).
template <class TO, class TB, bool ACCUM, bool BIAS>
__device__ __forceinline__ void linearStore(void *output, const void *bias, int t, int n, int N,
                                            float y, float softcap = 0.0f, float outScale = 1.0f) {
  TO *out = static_cast<TO *>(output) + static_cast<i64>(t) * N + n;
  if (BIAS)
    y += toFloat(static_cast<const TB *>(bias)[n]);
  if (outScale != 1.0f) // a literal at every call: no code without a scale
    y = __fmul_rn(y, outScale);
  y = hd::softCap(y, softcap);
  if (ACCUM)
    y += toFloat(*out);
  *out = fromFloat<TO>(y);
}

// Where a linear-family step finds its operands (engine.fbs): with NORM the
// weights are gamma, W (, bias); else W (, bias). Q4: W is three weights,
// qweight, scales, zeros.
template <bool NORM, bool Q4 = false> struct LinearOperands {
  static constexpr int kMatrix = NORM ? 1 : 0;
  static constexpr int kBias = kMatrix + (Q4 ? 3 : 1);
};

// 1 / rms of a row from its sum of squares, as cpu::rmsNorm computes it.
__device__ __forceinline__ float invRms(float sumSquares, int k, float eps) {
  return 1.0f / hd::sqrtF(sumSquares / static_cast<float>(k) + eps);
}

// Sums each lane's partial dot products (and NORM's sums of squares) over
// the warp: every lane then holds the totals.
template <int TMAX, int WR, bool NORM>
__device__ __forceinline__ void warpSumPartials(float (&acc)[WR][TMAX], float (&sumSquares)[TMAX]) {
#pragma unroll
  for (int t = 0; t < TMAX; ++t) {
    if (NORM)
      sumSquares[t] = warpSum(sumSquares[t]);
#pragma unroll
    for (int r = 0; r < WR; ++r)
      acc[r][t] = warpSum(acc[r][t]);
  }
}

// The weight row behind warp row r (of 2R with SWIGLU) of a warp whose
// output rows start at rowBase: output row rowBase + r (gate), or for r >= R
// the up row N + rowBase + r - R. Rows past N read row N - 1 (of their
// half) and are never stored.
template <int R, int N> __device__ __forceinline__ int warpWeightRow(int rowBase, int r) {
  const int out = min(rowBase + r % R, N - 1);
  return r < R ? out : N + out;
}

template <class TA, class TW, class TO, class TB, class TG, int N, int K, int TMAX, int R,
          int WARPS, int SPLITK, int VEC, int UNROLL, bool ACCUM, bool BIAS, bool GATHER, bool NORM,
          bool SWIGLU, int GATE = hd::kGateSilu>
__device__ __forceinline__ void gemv(const abi::StepArgs &a, float eps, float gammaOffset = 0.0f,
                                     float softcap = 0.0f, float outScale = 1.0f) {
  static_assert(K % (SPLITK * VEC) == 0, "K must split into whole vectors");
  constexpr int kSliceK = K / SPLITK;             // columns per split
  constexpr int kVecs = kSliceK / VEC;            // vectors per row and split
  constexpr int kRowsPerBlock = WARPS * R;        // output rows
  constexpr int WR = SWIGLU ? 2 * R : R;          // weight rows per warp
  constexpr int kWeightRows = SWIGLU ? 2 * N : N; // rows of W
  using Ops = LinearOperands<NORM>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rowBase = blockIdx.x * kRowsPerBlock + warp * R;
  const int split = blockIdx.y;
  const int tokens = GATHER ? a.numLogitRows : a.rows;
  const TA *x = static_cast<const TA *>(a.in[0]);
  const TW *w = static_cast<const TW *>(a.w[Ops::kMatrix]);
  const TG *gamma = NORM ? static_cast<const TG *>(a.w[0]) : nullptr;
  const int colBase = split * kSliceK;

  const TW *wRow[WR];
#pragma unroll
  for (int r = 0; r < WR; ++r)
    wRow[r] = w + static_cast<i64>(warpWeightRow<R, N>(rowBase, r)) * K + colBase;
  const TA *xRow[TMAX];
#pragma unroll
  for (int t = 0; t < TMAX; ++t) {
    const int row = t < tokens ? (GATHER ? a.logitRows[t] : t) : 0;
    xRow[t] = x + static_cast<i64>(row) * K + colBase;
  }

  float acc[WR][TMAX] = {};
  float sumSquares[TMAX] = {};

  using RawW = typename RawVec<VEC * sizeof(TW)>::type;
  for (int v0 = lane; v0 < kVecs; v0 += 32 * UNROLL) {
    RawW wraw[UNROLL][WR];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int v = v0 + u * 32;
#pragma unroll
      for (int r = 0; r < WR; ++r)
        wraw[u][r] = v < kVecs ? *reinterpret_cast<const RawW *>(wRow[r] + v * VEC) : RawW{};
    }
#pragma unroll
    for (int t = 0; t < TMAX; ++t) {
      if (t >= tokens)
        break;
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int v = v0 + u * 32;
        if (v < kVecs) {
          float xv[VEC];
          loadVec<VEC>(xRow[t] + v * VEC, xv);
          if (NORM) { // gamma at its use: shared by every warp, an L1 hit
            float gv[VEC];
            loadVecWide<VEC>(gamma + colBase + v * VEC, gv);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              sumSquares[t] += xv[e] * xv[e];
              xv[e] *= gv[e] + gammaOffset;
            }
          }
#pragma unroll
          for (int r = 0; r < WR; ++r) {
            float wv[VEC];
            loadVec<VEC>(reinterpret_cast<const TW *>(&wraw[u][r]), wv);
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              acc[r][t] += wv[e] * xv[e];
          }
        }
      }
    }
  }

  warpSumPartials<TMAX, WR, NORM>(acc, sumSquares);

  const void *bias = BIAS ? a.w[Ops::kBias] : nullptr;
  // Lane (r * TMAX + t) % 32 handles output (t, rowBase + r): the indices
  // stay compile-time constants, so acc stays in registers.
  float *partials = static_cast<float *>(a.workspace); // [SPLITK, tokens, kWeightRows]
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TMAX; ++t) {
      const int n = rowBase + r;
      if (t >= tokens || n >= N || lane != (r * TMAX + t) % 32)
        continue;
      if (SPLITK == 1) {
        const float scale = NORM ? invRms(sumSquares[t], K, eps) : 1.0f;
        const float y = SWIGLU ? hd::gated(GATE, acc[r][t] * scale, acc[R + r][t] * scale)
                               : acc[r][t] * scale;
        linearStore<TO, TB, ACCUM, BIAS>(a.out, bias, t, n, N, y, softcap, outScale);
      } else {
        float *part = partials + (static_cast<i64>(split) * tokens + t) * kWeightRows;
        part[n] = acc[r][t];
        if (SWIGLU)
          part[N + n] = acc[R + r][t];
      }
    }
  if (SPLITK == 1)
    return;
  // NORM: this split's sums of squares, [gridDim.x, SPLITK, tokens] after the partials.
  float *squares = partials + static_cast<i64>(SPLITK) * tokens * kWeightRows;
  if (NORM && warp == 0)
#pragma unroll
    for (int t = 0; t < TMAX; ++t)
      if (t < tokens && lane == t % 32)
        squares[(static_cast<i64>(blockIdx.x) * SPLITK + split) * tokens + t] = sumSquares[t];
  if (!arriveLast(a.counters + blockIdx.x, SPLITK))
    return;
  const int firstRow = blockIdx.x * kRowsPerBlock;
  for (int i = threadIdx.x; i < kRowsPerBlock * tokens; i += WARPS * 32) {
    const int n = firstRow + i % kRowsPerBlock, t = i / kRowsPerBlock;
    if (n >= N)
      continue;
    float gate = 0.0f, up = 0.0f, ss = 0.0f;
    for (int s = 0; s < SPLITK; ++s) {
      const float *part = partials + (static_cast<i64>(s) * tokens + t) * kWeightRows;
      gate += loadCoherent(part + n);
      if (SWIGLU)
        up += loadCoherent(part + N + n);
      if (NORM)
        ss += loadCoherent(squares + (static_cast<i64>(blockIdx.x) * SPLITK + s) * tokens + t);
    }
    const float scale = NORM ? invRms(ss, K, eps) : 1.0f;
    const float y = SWIGLU ? hd::gated(GATE, gate * scale, up * scale) : gate * scale;
    linearStore<TO, TB, ACCUM, BIAS>(a.out, bias, t, n, N, y, softcap, outScale);
  }
}

// NORM's gamma staged once per block in shared memory (f32), 4 floats of
// padding after every 32 so that the lanes' 16-byte reads of their own 32
// columns fall in different banks; zeros past K. Staged while it fits.
__device__ __forceinline__ int gammaStagedIndex(int k) { return k + (k / 32) * 4; }
template <int K> struct GammaStage {
  static constexpr int kFloats = (K + 31) / 32 * 36;
  static constexpr bool kFits = kFloats * 4 <= 40 * 1024;
};

// One 32-column piece of a W4A16 GEMV (gemvQ4): for every token t < tokens,
// acc[r][t] += scale[r] * sum_j wq[r][j] * x[t][k0 + j] (x times gamma with
// NORM, whose sum of squares it also accumulates); columns past K read 0.
// gamma: the block's staged copy (gammaStaged) when `staged`, else global.
template <class TA, class TG, int K, int TMAX, int WR, bool NORM, bool STAGED>
__device__ __forceinline__ void
accumulateQ4Piece(const TA *x, const TG *gamma, const float *staged, int k0, int tokens,
                  const float (&wq)[WR][32], const float (&scale)[WR], float (&acc)[WR][TMAX],
                  float (&sumSquares)[TMAX], float gammaOffset) {
  constexpr int kPiece = 16 / static_cast<int>(sizeof(TA)); // x elements per 16-byte load
  constexpr bool kAligned = K % kPiece == 0;                // x rows allow 16-byte loads
#pragma unroll
  for (int t = 0; t < TMAX; ++t) {
    if (t >= tokens)
      break;
    const TA *xr = x + static_cast<i64>(t) * K + k0;
    float xv[32];
    if constexpr (kAligned) {
#pragma unroll
      for (int c = 0; c < 32 / kPiece; ++c) {
        float piece[kPiece] = {};
        if (k0 + c * kPiece < K)
          loadVec<kPiece>(xr + c * kPiece, piece);
#pragma unroll
        for (int e = 0; e < kPiece; ++e)
          xv[c * kPiece + e] = piece[e];
      }
    } else {
#pragma unroll
      for (int j = 0; j < 32; ++j)
        xv[j] = k0 + j < K ? toFloat(xr[j]) : 0.0f;
    }
    if constexpr (NORM && STAGED) {
      // 32 columns at the padded offset: 16-byte reads, no bank conflicts.
      const float4 *g = reinterpret_cast<const float4 *>(staged + gammaStagedIndex(k0));
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float4 g4 = g[c];
        const float gs[4] = {g4.x, g4.y, g4.z, g4.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sumSquares[t] += xv[4 * c + e] * xv[4 * c + e];
          xv[4 * c + e] *= gs[e];
        }
      }
    } else if constexpr (NORM) {
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        sumSquares[t] += xv[j] * xv[j];
        xv[j] *= k0 + j < K ? toFloat(gamma[k0 + j]) + gammaOffset : 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < WR; ++r) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        part += wq[r][j] * xv[j];
      acc[r][t] += scale[r] * part;
    }
  }
}

// Eight weights (q - zero) of one int4 word, columns 0..7, through the
// bf16x2 pair form (kernels/common/int4.h): per pair one lop3 (mask and
// OR 0x4300), one bf16x2 FMA by 1 with -(128 + zero), and two bit moves to
// f32; exactly int4MinusMagicZero's values when int4ZeroFitsBf16x2(zero).
__device__ __forceinline__ u32 lop3AndOr(u32 a, u32 b, u32 c) { // (a & b) | c
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ u32 fmaBf16x2(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ void int4WordMinusZero(u32 word, u32 negMagic, float *out) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const u32 pair = lop3AndOr(word >> (4 * s), 0x000f000fu, 0x43004300u);
    const u32 d = fmaBf16x2(pair, 0x3f803f80u, negMagic); // (1.0, 1.0)
    out[s] = hd::bitsToFloat(d << 16);
    out[s + 4] = hd::bitsToFloat(d & 0xffff0000u);
  }
}

// W4A16: y[T, N] = x[T, K] . W^T (+ bias) (+ y) with W in the int4 layout
// of kernels/common/q4_layout.h (weights (gamma,) qweight, scales, zeros
// (, bias)), with gemv's NORM prologue and SWIGLU epilogue (W = [gate; up],
// [2N, K] in int4 rows; no bias with NORM: four weight slots).
// A lane's 16-byte load is 32 columns of one group: one scale, one zero,
// so it sums (q - zero) * x over its 32 columns and scales the sum once.
// Each warp owns R output rows (2R weight rows with SWIGLU); no split-K
// (the 4x smaller rows fill the GPU with more rows per block instead).
template <class TA, class TO, class TB, class TG, int N, int K, int G, int TMAX, int R, int WARPS,
          bool ACCUM, bool BIAS, bool NORM, bool SWIGLU, int GATE = hd::kGateSilu>
__device__ __forceinline__ void gemvQ4(const abi::StepArgs &a, float eps,
                                       float gammaOffset = 0.0f, float outScale = 1.0f) {
  static_assert(G % 32 == 0, "groups are whole 32-column loads");
  constexpr int kWords = (K + 31) / 32 * 4; // u32 per stored row
  constexpr int kGroups = (K + G - 1) / G;
  constexpr int kLoads = kWords / 4;     // 16-byte loads per row
  constexpr int WR = SWIGLU ? 2 * R : R; // weight rows per warp
  using Ops = LinearOperands<NORM, true>;
  constexpr int kQ = Ops::kMatrix; // weight index of qweight
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rowBase = (blockIdx.x * WARPS + warp) * R;
  const int tokens = a.rows;
  const TA *x = static_cast<const TA *>(a.in[0]);
  const TG *gamma = NORM ? static_cast<const TG *>(a.w[0]) : nullptr;
  const uint4 *q = static_cast<const uint4 *>(a.w[kQ]);
  const u16 *scales = static_cast<const u16 *>(a.w[kQ + 1]);
  const u16 *zeros = static_cast<const u16 *>(a.w[kQ + 2]);
  const void *bias = BIAS ? a.w[Ops::kBias] : nullptr;
  int wRow[WR];
#pragma unroll
  for (int r = 0; r < WR; ++r)
    wRow[r] = warpWeightRow<R, N>(rowBase, r);
  float acc[WR][TMAX] = {};
  float sumSquares[TMAX] = {};
  constexpr bool kStaged = NORM && GammaStage<K>::kFits;
  __shared__ __align__(16) float gammaStaged[kStaged ? GammaStage<K>::kFloats : 4];
  if constexpr (kStaged) {
    for (int i = threadIdx.x; i < GammaStage<K>::kFloats; i += WARPS * 32) {
      const int k = i / 36 * 32 + i % 36; // the padding reads as 0
      gammaStaged[i] = i % 36 < 32 && k < K ? toFloat(gamma[k]) + gammaOffset : 0.0f;
    }
    __syncthreads();
  }
  // Each lane issues the loads of U pieces (32 columns each) of every warp
  // row before it dequantizes the first, so U x WR 16-byte loads are in flight.
  constexpr int U = 2;
  for (int l0 = lane; l0 < kLoads; l0 += 32 * U) {
    uint4 words[U][WR];
    float scale[U][WR], zero[U][WR];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int l = l0 + 32 * u;
      const bool inside = l < kLoads;
      const int group = inside ? l * 32 / G : 0;
#pragma unroll
      for (int r = 0; r < WR; ++r) {
        const i64 g = static_cast<i64>(wRow[r]) * kGroups + group;
        words[u][r] = inside ? q[static_cast<i64>(wRow[r]) * kLoads + l] : make_uint4(0, 0, 0, 0);
        scale[u][r] = inside ? hd::f16ToF32(scales[g]) : 0.0f;
        zero[u][r] = inside ? hd::f16ToF32(zeros[g]) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int l = l0 + 32 * u;
      if (l >= kLoads)
        break;
      const int k0 = l * 32;
      float wq[WR][32]; // q - zero, integers in [-15, 15]
#pragma unroll
      for (int r = 0; r < WR; ++r) {
        const u32 word[4] = {words[u][r].x, words[u][r].y, words[u][r].z, words[u][r].w};
        // Zero points are integers 0..15 (q4_layout.h): int4ZeroFitsBf16x2.
        const u32 negMagic = hd::int4NegMagicZeroBf16x2(zero[u][r]);
#pragma unroll
        for (int w = 0; w < 4; ++w)
          int4WordMinusZero(word[w], negMagic, &wq[r][8 * w]);
      }
      accumulateQ4Piece<TA, TG, K, TMAX, WR, NORM, kStaged>(x, gamma, gammaStaged, k0, tokens, wq,
                                                            scale[u], acc, sumSquares,
                                                            gammaOffset);
    }
  }
  warpSumPartials<TMAX, WR, NORM>(acc, sumSquares);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TMAX; ++t) {
      const int n = rowBase + r;
      if (t >= tokens || n >= N || lane != (r * TMAX + t) % 32)
        continue;
      const float scale = NORM ? invRms(sumSquares[t], K, eps) : 1.0f;
      const float y = SWIGLU ? hd::gated(GATE, acc[r][t] * scale, acc[R + r][t] * scale)
                             : acc[r][t] * scale;
      linearStore<TO, TB, ACCUM, BIAS>(a.out, bias, t, n, N, y, 0.0f, outScale);
    }
}

} // namespace llmc::dev
