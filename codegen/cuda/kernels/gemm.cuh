// The prefill linear layer: y[M, N] = x[M, K] . W[N, K]^T (+ bias) (+ y) for
// any number of rows M (run time: the step's T, or its logit rows with
// GATHER), tiled over a grid (ceil(N / BN), ceil(M / BM)).
//
//   gemmFma: f32 FMA on shared-memory tiles, any dtypes (f32 plans, f16
//            weights, K not a multiple of 8). 256 threads, 4x4 outputs each.
//   gemmMma: bf16 tensor cores (mma.sync m16n8k16, sm_80+) with cp.async
//            double buffering; bf16 activations and weights, K % 8 == 0.
//            256 threads = 8 warps of 64x32 outputs over a 128x128 tile.
#pragma once

#include "llmc/gemv.cuh"

namespace llmc::dev {

// The x row that output row m reads.
template <bool GATHER> __device__ __forceinline__ int sourceRow(const abi::StepArgs &a, int m) {
  return GATHER ? a.logitRows[m] : m;
}

template <class TA, class TW, class TO, class TB, int N, int K, bool ACCUM, bool BIAS, bool GATHER>
__device__ __forceinline__ void gemmFma(const abi::StepArgs &a) {
  constexpr int BM = 64, BN = 64, BK = 16;
  __shared__ float xs[BK][BM + 4]; // x tile, transposed: xs[k][m]
  __shared__ float ws[BK][BN + 4]; // W tile, transposed: ws[k][n]
  const int M = GATHER ? a.numLogitRows : a.rows;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (m0 >= M)
    return;
  const TA *x = static_cast<const TA *>(a.in[0]);
  const TW *w = static_cast<const TW *>(a.w[0]);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    // 256 threads load 64 x 16 elements of each tile, 4 each.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = threadIdx.x + j * 256;
      const int row = i / BK, k = i % BK;
      const bool kIn = k0 + k < K;
      const int m = m0 + row, n = n0 + row;
      xs[k][row] = (m < M && kIn)
                       ? toFloat(x[static_cast<i64>(sourceRow<GATHER>(a, m)) * K + k0 + k])
                       : 0.0f;
      ws[k][row] = (n < N && kIn) ? toFloat(w[static_cast<i64>(n) * K + k0 + k]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float xr[4], wr[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        xr[i] = xs[k][ty * 4 + i];
        wr[i] = ws[k][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += xr[i] * wr[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (m < M && n < N)
        linearStore<TO, TB, ACCUM, BIAS>(a, m, n, N, acc[i][j]);
    }
}

// 16 bytes global -> shared, asynchronously; zero-fills when !valid (the
// source address must still be mapped: callers pass a clamped one).
__device__ __forceinline__ void cpAsync16(void *smem, const void *global, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global),
               "r"(bytes));
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

// d += a . b for one m16n8k16 tile (bf16 inputs, f32 accumulators).
__device__ __forceinline__ void mmaBf16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <class TO, class TB, int N, int K, bool ACCUM, bool BIAS, bool GATHER>
__device__ __forceinline__ void gemmMma(const abi::StepArgs &a) {
  static_assert(K % 8 == 0, "16-byte copies need K % 8 == 0");
  constexpr int BM = 128, BN = 128, BK = 32, kPitch = BK + 8; // +8: no bank conflicts
  constexpr int kTiles = (K + BK - 1) / BK;
  __shared__ __align__(16) u16 xs[2][BM][kPitch];
  __shared__ __align__(16) u16 ws[2][BN][kPitch];
  const int M = GATHER ? a.numLogitRows : a.rows;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (m0 >= M)
    return;
  const u16 *x = static_cast<const u16 *>(a.in[0]);
  const u16 *w = static_cast<const u16 *>(a.w[0]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warpM = (warp / 4) * 64, warpN = (warp % 4) * 32;
  const int group = lane / 4, quad = lane % 4; // mma fragment coordinates

  // Each tile is 128 rows x 4 chunks of 16 bytes; 256 threads copy 2 chunks
  // of x and 2 of W per stage.
  auto loadStage = [&](int stage, int k0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int i = threadIdx.x + j * 256;
      const int row = i / 4, chunk = i % 4, k = k0 + chunk * 8;
      const int m = m0 + row, n = n0 + row;
      const bool mOk = m < M && k < K, nOk = n < N && k < K;
      const u16 *xSrc = x + static_cast<i64>(mOk ? sourceRow<GATHER>(a, m) : 0) * K + (mOk ? k : 0);
      const u16 *wSrc = w + static_cast<i64>(nOk ? n : 0) * K + (nOk ? k : 0);
      cpAsync16(&xs[stage][row][chunk * 8], xSrc, mOk);
      cpAsync16(&ws[stage][row][chunk * 8], wSrc, nOk);
    }
    cpAsyncCommit();
  };

  float acc[4][4][4] = {}; // [m tile][n tile][fragment]
  loadStage(0, 0);
  for (int kt = 0; kt < kTiles; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < kTiles) {
      loadStage(stage ^ 1, (kt + 1) * BK);
      cpAsyncWait<1>();
    } else {
      cpAsyncWait<0>();
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      u32 af[4][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const int r = warpM + mi * 16 + group;
        af[mi][0] = *reinterpret_cast<const u32 *>(&xs[stage][r][kk + quad * 2]);
        af[mi][1] = *reinterpret_cast<const u32 *>(&xs[stage][r + 8][kk + quad * 2]);
        af[mi][2] = *reinterpret_cast<const u32 *>(&xs[stage][r][kk + 8 + quad * 2]);
        af[mi][3] = *reinterpret_cast<const u32 *>(&xs[stage][r + 8][kk + 8 + quad * 2]);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int c = warpN + ni * 8 + group;
        bf[ni][0] = *reinterpret_cast<const u32 *>(&ws[stage][c][kk + quad * 2]);
        bf[ni][1] = *reinterpret_cast<const u32 *>(&ws[stage][c][kk + 8 + quad * 2]);
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mmaBf16(acc[mi][ni], af[mi], bf[ni]);
    }
    __syncthreads();
  }
  // Fragment element e of tile (mi, ni): row group (+8 for e >= 2), column
  // quad * 2 + (e & 1).
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + warpM + mi * 16 + group + (e >= 2 ? 8 : 0);
        const int n = n0 + warpN + ni * 8 + quad * 2 + (e & 1);
        if (m < M && n < N)
          linearStore<TO, TB, ACCUM, BIAS>(a, m, n, N, acc[mi][ni][e]);
      }
}

} // namespace llmc::dev
