#include "cpu/fused.h"

#include "cpu/activation_rows.h"
#include "cpu/bf16_coded.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/q4_panels.h"
#include "cpu/simd.h"
#include "kernels/common/activations.h"
#include "kernels/common/q4_layout.h"

#include <algorithm>
#include <cmath>

namespace llmc::cpu {
namespace {

// Weight rows per block of the SwiGLU and argmax kernels: a tile of
// tokens x blockRows products stays in L1/L2 next to the weights. Decode (1-2
// tokens) takes 512: the GEMV reads a block's rows as 4 sequential runs
// (simd_avx2.cpp streamedRows), which read DRAM about 1.1-1.2x faster at 128
// rows each than at 16 (docs/perf.md, "CPU decode GEMV and bandwidth probe").
int64_t blockRows(int64_t tokens) { return tokens <= 2 ? 512 : 64; }

// Rows [begin, begin + count) of w as a matrix of their own.
WeightMatrix rowsOf(const WeightMatrix &w, int64_t begin, int64_t count) {
  const char *base = static_cast<const char *>(w.data);
  return {base + begin * w.cols * static_cast<int64_t>(dtypeSize(w.dtype)), w.dtype, count, w.cols,
          w.coded.table != nullptr ? codedBf16From(w.coded, w.cols, begin) : CodedBf16{}};
}

// tile[tokens, rows.rows] = x . rows^T, on the calling thread; xTiles: x in
// the GEMM's token tiles (prefillTokenTiles), or null.
void product(const float *x, int64_t tokens, const WeightMatrix &rows, float *tile,
             const void *xTiles = nullptr) {
  detail::MatmulProblem problem{x, tokens, rows, nullptr, 0.0f, tile};
  problem.xTiles = xTiles;
  detail::activeOps().matmulRows(problem, 0, rows.rows);
}

// Blocks of blockRows weight rows, at least ~64 KiB of weights per chunk
// (matmul's rule) so that small layers do not wake every thread.
int64_t blockGrain(const WeightMatrix &w, int64_t tokens) {
  const int64_t rowBytes = w.cols * static_cast<int64_t>(dtypeSize(w.dtype));
  return 64 * 1024 / (rowBytes * tokens * blockRows(tokens)) + 1;
}

} // namespace

void rmsNormMatmul(ThreadPool &pool, const float *x, int64_t tokens, const WeightVector &gamma,
                   float eps, const WeightMatrix &w, const float *bias, float beta, float *y,
                   std::vector<float> &scratch, float normOffset) {
  if (static_cast<int64_t>(scratch.size()) < tokens * w.cols)
    scratch.resize(tokens * w.cols);
  rmsNorm(pool, x, tokens, gamma, eps, scratch.data(), normOffset);
  matmul(pool, scratch.data(), tokens, w, bias, beta, y);
}

void matmulSwigluQ4(ThreadPool &pool, const float *x, int64_t tokens, const Q4Matrix &w, float *y,
                    std::vector<float> &products, int gateKind) {
  const int64_t inter = w.rows / 2;
  if (static_cast<int64_t>(products.size()) < 2 * tokens * inter)
    products.resize(2 * tokens * inter);
  // Rows [0, I) and [I, 2I) of the stacked matrix as matrices of their own.
  const int64_t words = hd::q4WordsPerRow(w.cols), groups = hd::q4NumGroups(w.cols, w.groupSize);
  // The panels split there only where I is a multiple of 16: up's first
  // panel would otherwise hold gate's last rows.
  const bool panelsSplit = w.panels != nullptr && inter % kQ4PanelRows == 0;
  const Q4Matrix gate{w.qweight, w.scales, w.zeros, inter, w.cols, w.groupSize, w.panels};
  const Q4Matrix up{w.qweight + inter * words,
                    w.scales + inter * groups,
                    w.zeros + inter * q4ZeroRowBytes(groups),
                    inter,
                    w.cols,
                    w.groupSize,
                    panelsSplit
                        ? w.panels + inter / kQ4PanelRows * q4PanelShape(w.cols, w.groupSize).stride
                        : nullptr};
  float *gateOut = products.data(), *upOut = products.data() + tokens * inter;
  if (tokens == 1) {
    // One token: [2, 1, I] is the stacked matrix's output row, so one call
    // (x quantized once, one parallel section, every row's bits as in two).
    matmulQ4(pool, x, tokens, w, nullptr, 0.0f, gateOut);
  } else {
    matmulQ4(pool, x, tokens, gate, nullptr, 0.0f, gateOut);
    matmulQ4(pool, x, tokens, up, nullptr, 0.0f, upOut);
  }
  swiglu(pool, gateOut, upOut, y, tokens * inter, gateKind);
}

void matmulSwiglu(ThreadPool &pool, const float *x, int64_t tokens, const WeightMatrix &w, float *y,
                  int gateKind) {
  const int64_t inter = w.rows / 2, perBlock = blockRows(tokens);
  const int64_t blocks = (inter + perBlock - 1) / perBlock;
  // x packed once for every block's two GEMMs (prefill), not once per block.
  const void *xTiles = prefillTokenTiles(pool, x, tokens, w);
  pool.parallelFor(
      blocks,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> gate, up;
        if (static_cast<int64_t>(gate.size()) < tokens * perBlock) {
          gate.resize(tokens * perBlock);
          up.resize(tokens * perBlock);
        }
        for (int64_t b = begin; b < end; ++b) {
          const int64_t first = b * perBlock, count = std::min(perBlock, inter - first);
          product(x, tokens, rowsOf(w, first, count), gate.data(), xTiles);
          product(x, tokens, rowsOf(w, inter + first, count), up.data(), xTiles);
          for (int64_t t = 0; t < tokens; ++t)
            gatedRow(gateKind, gate.data() + t * count, up.data() + t * count,
                     y + t * inter + first, count);
        }
      },
      blockGrain(w, tokens));
}

void rmsNormMatmulSwiglu(ThreadPool &pool, const float *x, int64_t tokens,
                         const WeightVector &gamma, float eps, const WeightMatrix &w, float *y,
                         std::vector<float> &scratch, float normOffset, int gateKind) {
  if (static_cast<int64_t>(scratch.size()) < tokens * w.cols)
    scratch.resize(tokens * w.cols);
  rmsNorm(pool, x, tokens, gamma, eps, scratch.data(), normOffset);
  matmulSwiglu(pool, scratch.data(), tokens, w, y, gateKind);
}

void matmulArgmax(ThreadPool &pool, const float *x, int64_t rows, const WeightMatrix &w,
                  int32_t *ids) {
  struct Best {
    float value;
    int32_t index;
  };
  const int64_t perBlock = blockRows(rows);
  const int64_t blocks = (w.rows + perBlock - 1) / perBlock;
  // One best per (block, row); merged in block order so the first index wins ties.
  std::vector<Best> best(blocks * rows, Best{-INFINITY, -1});
  pool.parallelFor(
      blocks,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> tile;
        if (static_cast<int64_t>(tile.size()) < rows * perBlock)
          tile.resize(rows * perBlock);
        for (int64_t b = begin; b < end; ++b) {
          const int64_t first = b * perBlock, count = std::min(perBlock, w.rows - first);
          product(x, rows, rowsOf(w, first, count), tile.data());
          for (int64_t r = 0; r < rows; ++r) {
            Best &mine = best[b * rows + r];
            for (int64_t i = 0; i < count; ++i)
              if (tile[r * count + i] > mine.value)
                mine = {tile[r * count + i], static_cast<int32_t>(first + i)};
          }
        }
      },
      blockGrain(w, rows));
  for (int64_t r = 0; r < rows; ++r) {
    Best winner{-INFINITY, 0};
    for (int64_t b = 0; b < blocks; ++b)
      if (best[b * rows + r].value > winner.value)
        winner = best[b * rows + r];
    ids[r] = winner.index;
  }
}

} // namespace llmc::cpu
