// The decode linear layer: y[T, N] = x[T, K] . W[N, K]^T (+ bias[N]) (+ y),
// for few tokens (T <= TMAX, a template constant): a memory-bound GEMV that
// streams each weight row once for all T tokens.
//
// Each warp owns R consecutive weight rows; its lanes walk K in VEC-element
// vectors (one 16-byte load each), UNROLL vectors per row in flight before
// the first use. Accumulation is f32 in registers acc[R][TMAX], reduced over
// the warp at the end. Split-K (grid.y = SPLITK > 1, chosen when the grid
// would not fill the GPU) gives each block K / SPLITK columns; blocks write
// f32 partials to the workspace and the last block of a row group sums them
// in split order (deterministic) and applies the epilogue.
//
// GATHER (Logits): token t of the output reads x row logitRows[t] and there
// are numLogitRows tokens; the output is compacted [numLogitRows, N].
#pragma once

#include "llmc/common.cuh"

namespace llmc::dev {

// The epilogue of output element (t, n): bias, residual accumulation, store.
template <class TO, class TB, bool ACCUM, bool BIAS>
__device__ __forceinline__ void linearStore(const abi::StepArgs &a, int t, int n, int N, float y) {
  TO *out = static_cast<TO *>(a.out) + static_cast<i64>(t) * N + n;
  if (BIAS)
    y += toFloat(static_cast<const TB *>(a.w[1])[n]);
  if (ACCUM)
    y += toFloat(*out);
  *out = fromFloat<TO>(y);
}

template <class TA, class TW, class TO, class TB, int N, int K, int TMAX, int R, int WARPS,
          int SPLITK, int VEC, int UNROLL, bool ACCUM, bool BIAS, bool GATHER>
__device__ __forceinline__ void gemv(const abi::StepArgs &a) {
  static_assert(K % (SPLITK * VEC) == 0, "K must split into whole vectors");
  constexpr int kSliceK = K / SPLITK;  // columns per split
  constexpr int kVecs = kSliceK / VEC; // vectors per row and split
  constexpr int kRowsPerBlock = WARPS * R;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rowBase = blockIdx.x * kRowsPerBlock + warp * R;
  const int split = blockIdx.y;
  const int tokens = GATHER ? a.numLogitRows : a.rows;
  const TA *x = static_cast<const TA *>(a.in[0]);
  const TW *w = static_cast<const TW *>(a.w[0]);
  const int colBase = split * kSliceK;

  // Rows past N (the last block) read row N - 1 and are never stored.
  const TW *wRow[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    wRow[r] = w + static_cast<i64>(min(rowBase + r, N - 1)) * K + colBase;
  const TA *xRow[TMAX];
#pragma unroll
  for (int t = 0; t < TMAX; ++t) {
    const int row = t < tokens ? (GATHER ? a.logitRows[t] : t) : 0;
    xRow[t] = x + static_cast<i64>(row) * K + colBase;
  }

  float acc[R][TMAX];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TMAX; ++t)
      acc[r][t] = 0.0f;

  for (int v0 = lane; v0 < kVecs; v0 += 32 * UNROLL) {
    float wv[UNROLL][R][VEC];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int v = v0 + u * 32;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (v < kVecs) {
          loadVec<VEC>(wRow[r] + v * VEC, wv[u][r]);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            wv[u][r][e] = 0.0f;
        }
      }
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
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              acc[r][t] += wv[u][r][e] * xv[e];
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TMAX; ++t)
      acc[r][t] = warpSum(acc[r][t]);

  // Lane (r * TMAX + t) % 32 stores element (t, rowBase + r): the indices
  // stay compile-time constants, so acc stays in registers.
  float *partials = static_cast<float *>(a.workspace); // [SPLITK, tokens, N]
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TMAX; ++t) {
      const int n = rowBase + r;
      if (t < tokens && n < N && lane == (r * TMAX + t) % 32) {
        if (SPLITK == 1)
          linearStore<TO, TB, ACCUM, BIAS>(a, t, n, N, acc[r][t]);
        else
          partials[(static_cast<i64>(split) * tokens + t) * N + n] = acc[r][t];
      }
    }
  if (SPLITK == 1)
    return;
  if (!arriveLast(a.counters + blockIdx.x, SPLITK))
    return;
  const int firstRow = blockIdx.x * kRowsPerBlock;
  for (int i = threadIdx.x; i < kRowsPerBlock * tokens; i += WARPS * 32) {
    const int n = firstRow + i % kRowsPerBlock, t = i / kRowsPerBlock;
    if (n >= N)
      continue;
    float y = 0.0f;
    for (int s = 0; s < SPLITK; ++s)
      y += loadCoherent(partials + (static_cast<i64>(s) * tokens + t) * N + n);
    linearStore<TO, TB, ACCUM, BIAS>(a, t, n, N, y);
  }
}

} // namespace llmc::dev
