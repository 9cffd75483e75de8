// Internal: the prefill GEMM shared by the ISA files,
// y[T, N] = x[T, K] . W[N, K]^T (+ bias) (+ y), compute-bound for large T.
//
// Blocking: a block of weight rows whose f32 copy fits in L2 (rowsPerL2Block)
// is converted to f32 once, row-major (aligned f32 weights are read in place),
// and every tile of Kernel::kTokens tokens passes over it; rows wider than
// kGemmDepthMax go in depth chunks, the tiles' lanes carried between them. A tile keeps kRows x
// kTokens vector accumulators in registers; a k-step loads kRows weight
// vectors and kTokens x vectors for kRows * kTokens FMAs. f16/bf16 are
// converted in the packing, never in the inner loop.
//
// Numerics: every output is summed exactly as the ISA's decode tiles
// (matmulRows) sum it: lane j of one vector accumulator adds x[k] * w[k] by
// fma for k = j, j + L, j + 2L, ... (L lanes, k below K rounded down to L),
// the lanes are added by the ISA's fixed tree, the K % L tail by fma, then
// storeOutput. The kernels' tiles of every size share one function, so an
// output depends neither on the rows, tokens or tile a thread computes nor on
// the path (GEMV or GEMM) computing it: a prompt prefilled whole, in chunks
// or after a cached prefix, and a sequence decoded alone or in a batch, get
// the same bits.
//
// Kernel provides, with its ISA's target attribute:
//   static constexpr int kRows, kTokens;
//   template <DType D> static void convert(const char *row, int64_t k, float *out);
//     out[0 .. k) = the row as f32 (exact).
//   template <int R, int TT> static void tile(const MatmulProblem &p,
//       const float *w, int64_t ldw, int64_t n0, int64_t t0, int64_t kBegin,
//       int64_t kEnd, float *carry);
//     y[t0 .. t0 + TT, n0 .. n0 + R) from the R f32 rows at w (ldw apart,
//     starting at column kBegin) over columns [kBegin, kEnd); lanes from
//     carry unless kBegin is 0, to carry unless kEnd is K (then finished).
#pragma once

#include "cpu/simd.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace llmc::cpu::detail {

// Per-thread buffers of the GEMM (the converted rows, the lanes carried
// between depth chunks), 64-byte aligned.
class GemmScratch {
public:
  float *panels(int64_t floats) { return aligned(panels_, floats); }
  float *carries(int64_t floats) { return aligned(carries_, floats); }

private:
  static float *aligned(std::vector<float> &v, int64_t floats) {
    if (static_cast<int64_t>(v.size()) < floats + 16)
      v.resize(floats + 16);
    uintptr_t address = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - address % 64) % 64) / sizeof(float);
  }
  std::vector<float> panels_, carries_;
};

inline GemmScratch &gemmScratch() {
  thread_local GemmScratch scratch;
  return scratch;
}

// Columns per depth chunk: all of K up to kGemmDepthMax, else equal chunks of
// at most kGemmDepth (a multiple of 8). Past about 1024 columns the 4 tokens
// of x of a tile (16 KiB) and its rows no longer share L1 (32 KiB on Zen 3).
constexpr int64_t kGemmDepthMax = 1024, kGemmDepth = 768;

inline int64_t depthChunk(int64_t k) {
  if (k <= kGemmDepthMax)
    return k;
  const int64_t chunks = (k + kGemmDepth - 1) / kGemmDepth;
  return ((k + chunks - 1) / chunks + 7) / 8 * 8;
}

// Rows per block: at most rowsPerL2Block of f32 rows of `depth` columns, in
// blocks of about equal size (120 rows at most 84 per block make two of 60,
// not 84 and 36).
inline int64_t balancedBlock(int64_t rows, int64_t depth, int64_t rowTile) {
  const int64_t most = rowsPerL2Block(depth * static_cast<int64_t>(sizeof(float)), rowTile);
  const int64_t blocks = (rows + most - 1) / most;
  const int64_t tiles = ((rows + blocks - 1) / blocks + rowTile - 1) / rowTile;
  return tiles * rowTile;
}

// Where a tile reads its rows and columns, and keeps its lanes between chunks.
struct GemmSpan {
  const float *w; // the tile's first row at column kBegin
  int64_t ldw;    // floats between rows
  int64_t kBegin, kEnd;
  float *carry; // [kRows][kTokens][8], or null when the chunk is all of K
};

// A tile of R rows by tokens (<= Kernel::kTokens) tokens.
template <typename Kernel, int R, int TT = Kernel::kTokens>
void gemmTile(int64_t tokens, const MatmulProblem &p, const GemmSpan &s, int64_t n0, int64_t t0) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return gemmTile<Kernel, R, TT - 1>(tokens, p, s, n0, t0);
  Kernel::template tile<R, TT>(p, s.w, s.ldw, n0, t0, s.kBegin, s.kEnd, s.carry);
}

// A tile of rows (<= Kernel::kRows) rows by tokens tokens.
template <typename Kernel, int R = Kernel::kRows>
void gemmTileUpTo(int64_t rows, int64_t tokens, const MatmulProblem &p, const GemmSpan &s,
                  int64_t n0, int64_t t0) {
  if constexpr (R > 1)
    if (rows < R)
      return gemmTileUpTo<Kernel, R - 1>(rows, tokens, p, s, n0, t0);
  gemmTile<Kernel, R>(tokens, p, s, n0, t0);
}

// y[tokenBegin .. tokenEnd, rowBegin .. rowEnd) with weights of dtype D.
template <typename Kernel, DType D>
void packedGemm(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                int64_t tokenEnd) {
  constexpr int64_t kRows = Kernel::kRows, kTokens = Kernel::kTokens;
  const int64_t k = p.w.cols, depth = depthChunk(k);
  const int64_t rowBytes = k * static_cast<int64_t>(dtypeSize(D));
  const int64_t block = balancedBlock(rowEnd - rowBegin, depth, kRows);
  const char *weights = static_cast<const char *>(p.w.data);
  // f32 rows that start 32-byte aligned are read in place; others are copied,
  // since loads that cross cache lines cost the tiles about a tenth. So are
  // depth chunks: rows 8 KiB apart in place fall in the same L1 sets (K =
  // 2048: 55-58% of the peak in place, 65-70% copied).
  const bool inPlace = D == DType::F32 && depth == k &&
                       reinterpret_cast<uintptr_t>(weights) % 32 == 0 && rowBytes % 32 == 0;
  GemmScratch &scratch = gemmScratch();
  const int64_t blockRows = std::min(block, rowEnd - rowBegin);
  float *converted = inPlace ? nullptr : scratch.panels(blockRows * depth);
  // One carry slot per tile of the block.
  constexpr int64_t kSlot = kRows * kTokens * 8;
  const int64_t rowTiles = (blockRows + kRows - 1) / kRows;
  const int64_t tokenTiles = (tokenEnd - tokenBegin + kTokens - 1) / kTokens;
  float *carries = depth < k ? scratch.carries(rowTiles * tokenTiles * kSlot) : nullptr;
  for (int64_t r0 = rowBegin; r0 < rowEnd; r0 += block) {
    const int64_t rows = std::min(block, rowEnd - r0);
    for (int64_t k0 = 0; k0 < k; k0 += depth) {
      const int64_t width = std::min(depth, k - k0);
      const char *first = weights + r0 * rowBytes + k0 * static_cast<int64_t>(dtypeSize(D));
      GemmSpan span{reinterpret_cast<const float *>(first), k, k0, k0 + width, nullptr};
      if (!inPlace) {
        for (int64_t r = 0; r < rows; ++r)
          Kernel::template convert<D>(first + r * rowBytes, width, converted + r * depth);
        span.w = converted;
        span.ldw = depth;
      }
      const float *w0 = span.w;
      for (int64_t t0 = tokenBegin; t0 < tokenEnd; t0 += kTokens) {
        const int64_t tokens = std::min(kTokens, tokenEnd - t0);
        for (int64_t r = 0; r < rows; r += kRows) {
          span.w = w0 + r * span.ldw;
          if (carries != nullptr)
            span.carry = carries + ((t0 - tokenBegin) / kTokens * rowTiles + r / kRows) * kSlot;
          gemmTileUpTo<Kernel>(std::min(kRows, rows - r), tokens, p, span, r0 + r, t0);
        }
      }
    }
  }
}

} // namespace llmc::cpu::detail
