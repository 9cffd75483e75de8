// The prefill linear layers: y[M, N] = x[M, K] . W[N, K]^T for any number
// of rows M (run time: the step's T, or its logit rows with GATHER), tiled
// over a grid (output column tiles, ceil(M / BM)), with the fused forms of
// gemv.cuh (NORM, SWIGLU, BIAS, ACCUM, GATHER).
//
//   gemmFma: f32 FMA on shared-memory tiles, any dtypes (f32 plans, f16
//            weights, K not a multiple of 8) and int4 weights (G > 0:
//            dequantized into the tile). 256 threads, 4x4 products each.
//   gemmMma: bf16 tensor cores (mma.sync m16n8k16, sm_80+) with cp.async
//            double buffering; bf16 activations and weights, K % 8 == 0.
//            256 threads = 8 warps of 64x32 products over a 128x128 tile.
// SWIGLU tiles interleave gate and up rows so that each thread holds both
// products of its outputs: a tile of BN weight rows makes BN / 2 outputs.
#pragma once

#include "kernels/common/int4.h"
#include "llmc/gemv.cuh"

namespace llmc::dev {

// The x row that output row m reads.
template <bool GATHER> __device__ __forceinline__ int sourceRow(const abi::StepArgs &a, int m) {
  return GATHER ? a.logitRows[m] : m;
}

// NORM prologue: rowScale[r] = 1 / rms of x row m0 + r, r < BM, by the
// block's warps (rows past M get 0).
template <class TA, int K, int BM, int WARPS, bool GATHER>
__device__ __forceinline__ void rowScales(const abi::StepArgs &a, int M, int m0, float eps,
                                          float *rowScale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const TA *x = static_cast<const TA *>(a.in[0]);
  for (int r = warp; r < BM; r += WARPS) {
    const int m = m0 + r;
    float ss = 0.0f;
    if (m < M) {
      const TA *row = x + static_cast<i64>(sourceRow<GATHER>(a, m)) * K;
      for (int k = lane; k < K; k += 32) {
        const float v = toFloat(row[k]);
        ss += v * v;
      }
    }
    ss = warpSum(ss);
    if (lane == 0)
      rowScale[r] = m < M ? invRms(ss, K, eps) : 0.0f;
  }
  __syncthreads();
}

// Weight row and output column of tile row `row` of a tile starting at
// output column n0: SWIGLU tiles hold 16 gate rows then the 16 matching up
// rows per 32 tile rows.
template <bool SWIGLU, int N>
__device__ __forceinline__ void tileRow(int n0, int row, int *weightRow, int *outCol) {
  if (SWIGLU) {
    const int group = row / 32, j = row % 32;
    *outCol = n0 + group * 16 + j % 16;
    *weightRow = j < 16 ? *outCol : N + *outCol;
  } else {
    *outCol = *weightRow = n0 + row;
  }
}

// A GEMM's matrix: W, or with int4 weights (G > 0) qweight, scales and
// zeros. Read from the step's weight array once, before the tile loops
// (their barriers would make the compiler read it again every tile).
struct MatrixOperands {
  const void *part[3];
};

template <int K, int G>
__device__ __forceinline__ MatrixOperands matrixOperands(const abi::StepArgs &a, int first) {
  MatrixOperands m{{a.w[first], nullptr, nullptr}};
  if constexpr (G > 0) {
    m.part[1] = a.w[first + 1];
    m.part[2] = a.w[first + 2];
  }
  return m;
}

// Weight (n, k) as f32: a float matrix, or int4 (G > 0; kernels/common/q4_layout.h).
template <class TW, int K, int G>
__device__ __forceinline__ float weightAt(const MatrixOperands &m, int n, int k) {
  if constexpr (G == 0) {
    return toFloat(static_cast<const TW *>(m.part[0])[static_cast<i64>(n) * K + k]);
  } else {
    constexpr int kWords = (K + 31) / 32 * 4, kGroups = (K + G - 1) / G;
    const u32 word = static_cast<const u32 *>(m.part[0])[static_cast<i64>(n) * kWords + k / 8];
    const i64 g = static_cast<i64>(n) * kGroups + k / G;
    const float zero = hd::f16ToF32(static_cast<const u16 *>(m.part[2])[g]);
    const float scale = hd::f16ToF32(static_cast<const u16 *>(m.part[1])[g]);
    return hd::int4MinusMagicZero(word, k % 8, hd::int4MagicZero(zero)) * scale;
  }
}

template <class TA, class TW, class TO, class TB, class TG, int N, int K, int G, bool ACCUM,
          bool BIAS, bool GATHER, bool NORM, bool SWIGLU, int GATE = hd::kGateSilu>
__device__ __forceinline__ void gemmFma(const abi::StepArgs &a, float eps, float gammaOffset = 0.0f,
                                        float softcap = 0.0f, float outScale = 1.0f) {
  constexpr int BM = 64, BN = 64, BK = 16;
  constexpr int kOutCols = SWIGLU ? BN / 2 : BN;
  using Ops = LinearOperands<NORM, (G > 0)>;
  __shared__ float xs[BK][BM + 4]; // x tile, transposed: xs[k][m]
  __shared__ float ws[BK][BN + 4]; // W tile, transposed: ws[k][n]
  __shared__ float rowScale[BM];
  const int M = GATHER ? a.numLogitRows : a.rows;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * kOutCols;
  if (m0 >= M)
    return;
  if (NORM)
    rowScales<TA, K, BM, 8, GATHER>(a, M, m0, eps, rowScale);
  const MatrixOperands matrix = matrixOperands<K, G>(a, Ops::kMatrix);
  const TA *x = static_cast<const TA *>(a.in[0]);
  const TG *gamma = NORM ? static_cast<const TG *>(a.w[0]) : nullptr;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  // This thread's 4 tile columns: 4 consecutive, or with SWIGLU 2 gate
  // columns and their 2 up columns.
  int cols[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    cols[j] = SWIGLU ? (j < 2 ? tx * 2 + j : 32 + tx * 2 + j - 2) : tx * 4 + j;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    // 256 threads load 64 x 16 elements of each tile, 4 each.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = threadIdx.x + j * 256;
      const int row = i / BK, k = k0 + i % BK;
      const int m = m0 + row;
      float xv = 0.0f;
      if (m < M && k < K) {
        xv = toFloat(x[static_cast<i64>(sourceRow<GATHER>(a, m)) * K + k]);
        if (NORM)
          xv *= toFloat(gamma[k]) + gammaOffset;
      }
      xs[i % BK][row] = xv;
      // SWIGLU: tile columns [0, 32) gate, [32, 64) up, for outputs n0 + c % 32.
      const int outCol = n0 + (SWIGLU ? row % 32 : row);
      const int weightRow = SWIGLU && row >= 32 ? N + outCol : outCol;
      ws[i % BK][row] = (outCol < N && k < K) ? weightAt<TW, K, G>(matrix, weightRow, k) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float xr[4], wr[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        xr[i] = xs[k][ty * 4 + i];
        wr[i] = ws[k][cols[i]];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += xr[i] * wr[j];
    }
    __syncthreads();
  }
  const void *bias = BIAS ? a.w[Ops::kBias] : nullptr;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty * 4 + i;
    const float scale = NORM ? rowScale[ty * 4 + i] : 1.0f;
#pragma unroll
    for (int j = 0; j < (SWIGLU ? 2 : 4); ++j) {
      const int n = n0 + (SWIGLU ? tx * 2 + j : cols[j]);
      if (m >= M || n >= N)
        continue;
      const float y = SWIGLU ? hd::gated(GATE, acc[i][j] * scale, acc[i][j + 2] * scale)
                             : acc[i][j] * scale;
      linearStore<TO, TB, ACCUM, BIAS>(a.out, bias, m, n, N, y, softcap, outScale);
    }
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

// The 8 weights (n, k..k+7) of an int4 matrix (G > 0: qweight, scales,
// zeros), dequantized: one u32 word, one group.
template <int K, int G>
__device__ __forceinline__ void int4Chunk(const MatrixOperands &m, int n, int k, float (&v)[8]) {
  constexpr int kWords = (K + 31) / 32 * 4, kGroups = (K + G - 1) / G;
  const u32 word = static_cast<const u32 *>(m.part[0])[static_cast<i64>(n) * kWords + k / 8];
  const i64 g = static_cast<i64>(n) * kGroups + k / G;
  const float scale = hd::f16ToF32(static_cast<const u16 *>(m.part[1])[g]);
  const float zeroMagic = hd::int4MagicZero(hd::f16ToF32(static_cast<const u16 *>(m.part[2])[g]));
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = hd::int4MinusMagicZero(word, e, zeroMagic) * scale;
}

// G > 0: int4 weights, dequantized to bf16 on their way into the W tile
// (8 columns, one word and one group, per 16-byte chunk).
template <class TO, class TB, class TG, int N, int K, int G, bool ACCUM, bool BIAS, bool GATHER,
          bool NORM, bool SWIGLU, int GATE = hd::kGateSilu>
__device__ __forceinline__ void gemmMma(const abi::StepArgs &a, float eps, float gammaOffset = 0.0f,
                                        float softcap = 0.0f, float outScale = 1.0f) {
  static_assert(K % 8 == 0, "16-byte copies need K % 8 == 0");
  static_assert(G == 0 || G % 32 == 0, "int4: whole words per group");
  constexpr int BM = 128, BN = 128, BK = 32, kPitch = BK + 8; // +8: no bank conflicts
  constexpr int kTiles = (K + BK - 1) / BK;
  constexpr int kOutCols = SWIGLU ? BN / 2 : BN;
  using Ops = LinearOperands<NORM, (G > 0)>;
  __shared__ __align__(16) u16 xs[2][BM][kPitch];
  __shared__ __align__(16) u16 ws[2][BN][kPitch];
  __shared__ float rowScale[BM];
  const int M = GATHER ? a.numLogitRows : a.rows;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * kOutCols;
  if (m0 >= M)
    return;
  if (NORM)
    rowScales<bf16, K, BM, 8, GATHER>(a, M, m0, eps, rowScale);
  const u16 *x = static_cast<const u16 *>(a.in[0]);
  const MatrixOperands matrix = matrixOperands<K, G>(a, Ops::kMatrix);
  const u16 *w = static_cast<const u16 *>(matrix.part[0]);
  const TG *gamma = NORM ? static_cast<const TG *>(a.w[0]) : nullptr;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warpM = (warp / 4) * 64, warpN = (warp % 4) * 32;
  const int group = lane / 4, quad = lane % 4; // mma fragment coordinates

  // Each tile is 128 rows x 4 chunks of 16 bytes; 256 threads copy 2 chunks
  // of x and 2 of W per stage. NORM scales x by gamma on the way, through
  // registers (cp.async cannot transform).
  auto loadStage = [&](int stage, int k0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int i = threadIdx.x + j * 256;
      const int row = i / 4, chunk = i % 4, k = k0 + chunk * 8;
      const int m = m0 + row;
      int weightRow, outCol;
      tileRow<SWIGLU, N>(n0, row, &weightRow, &outCol);
      const bool mOk = m < M && k < K, nOk = outCol < N && k < K;
      const u16 *xSrc = x + static_cast<i64>(mOk ? sourceRow<GATHER>(a, m) : 0) * K + (mOk ? k : 0);
      const u16 *wSrc = G > 0 ? w : w + static_cast<i64>(nOk ? weightRow : 0) * K + (nOk ? k : 0);
      if (NORM) {
        float v[8] = {}, g0[4], g1[4];
        if (mOk) {
          loadVec<8>(reinterpret_cast<const bf16 *>(xSrc), v);
          loadVec<4>(gamma + k, g0);
          loadVec<4>(gamma + k + 4, g1);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            v[e] *= g0[e] + gammaOffset;
            v[e + 4] *= g1[e] + gammaOffset;
          }
        }
        storeVec<8>(reinterpret_cast<bf16 *>(&xs[stage][row][chunk * 8]), v);
      } else {
        cpAsync16(&xs[stage][row][chunk * 8], xSrc, mOk);
      }
      if constexpr (G > 0) {
        float v[8] = {};
        if (nOk)
          int4Chunk<K, G>(matrix, weightRow, k, v);
        storeVec<8>(reinterpret_cast<bf16 *>(&ws[stage][row][chunk * 8]), v);
      } else {
        cpAsync16(&ws[stage][row][chunk * 8], wSrc, nOk);
      }
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
      u32 af[4][4], bfr[4][2];
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
        bfr[ni][0] = *reinterpret_cast<const u32 *>(&ws[stage][c][kk + quad * 2]);
        bfr[ni][1] = *reinterpret_cast<const u32 *>(&ws[stage][c][kk + 8 + quad * 2]);
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mmaBf16(acc[mi][ni], af[mi], bfr[ni]);
    }
    __syncthreads();
  }
  // Fragment element e of tile (mi, ni): row group (+8 for e >= 2), column
  // quad * 2 + (e & 1). With SWIGLU, tiles 0, 1 of a warp are gate columns
  // and tiles 2, 3 the up columns of the same outputs.
  const void *bias = BIAS ? a.w[Ops::kBias] : nullptr;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < (SWIGLU ? 2 : 4); ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = warpM + mi * 16 + group + (e >= 2 ? 8 : 0);
        const int m = m0 + r;
        const int col = ni * 8 + quad * 2 + (e & 1);
        const int n = SWIGLU ? n0 + (warp % 4) * 16 + col : n0 + warpN + col;
        if (m >= M || n >= N)
          continue;
        const float scale = NORM ? rowScale[r] : 1.0f;
        const float y = SWIGLU ? hd::gated(GATE, acc[mi][ni][e] * scale, acc[mi][ni + 2][e] * scale)
                               : acc[mi][ni][e] * scale;
        linearStore<TO, TB, ACCUM, BIAS>(a.out, bias, m, n, N, y, softcap, outScale);
      }
}

} // namespace llmc::dev
