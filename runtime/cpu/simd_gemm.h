// Internal: the prefill GEMM shared by the ISA files,
// y[T, N] = x[T, K] . W[N, K]^T (+ bias) (+ y), compute-bound for large T.
//
// Blocking: a block of weight rows whose f32 copy fits in L2 (rowsPerL2Block)
// is converted to f32 once, and every tile of Kernel::kTokens tokens passes
// over it; rows wider than kGemmDepthMax go in depth chunks, the tiles' lanes
// carried between them. A tile keeps kRows x kTokens vector accumulators in
// registers; a k-step loads kRows weight vectors and kTokens x vectors for
// kRows * kTokens FMAs.
//
// Layout: both operands of a tile are read as one sequential stream each.
// The block's rows are packed k-major in panels of kRows rows (panel i holds
// rows i * kRows ..: C = Kernel::kColumns columns of row 0, the same C of
// row 1, ..., then the next C; C is the ISA's vector width, 8 or 16),
// converted from f16/bf16 in the same pass; a token tile's x columns of the
// depth chunk are copied the same way (kTokens tokens per C columns)
// by the block's first row tile as it reads them (a separate copying pass
// per tile waits on x from L3: 5-10% of the GEMM), into a buffer that stays
// in L1 while the block's other row tiles read it. Row-major tiles read
// kRows + kTokens streams, and at K = 2048 the x rows, 8 KiB apart, fall in
// the same L1 sets. Where the caller packed all of x once in that layout
// (MatmulProblem::xTiles: matmul and matmulSwiglu), every row tile reads its
// token tile there, and each row tile prefetches a share of the next token
// tile's chunk into L1, so that the next token tile's first row tile does
// not wait on it from L3 or DRAM (the copying first row tile did: about 11%
// of a 110M prefill's time went to it, for 5% of the FMAs).
//
// Numerics: every output is summed exactly as the ISA's decode tiles
// (matmulRows) sum it: lane j of one vector accumulator adds x[k] * w[k] by
// fma for k = j, j + L, j + 2L, ... (L = C lanes, k below K rounded down to
// L), then the K % L tail as the ISA's decode tiles take it (AVX2 and NEON:
// by fma after the lanes are added by the ISA's fixed tree; AVX-512: as one
// more masked step into the lanes, then the tree), then storeOutput. The kernels' tiles of every size share one function, so an
// output depends neither on the rows, tokens or tile a thread computes nor on
// the path (GEMV or GEMM) computing it: a prompt prefilled whole, in chunks
// or after a cached prefix, and a sequence decoded alone or in a batch, get
// the same bits.
//
// Kernel provides, with its ISA's target attribute:
//   static constexpr int kRows, kTokens (= kGemmTileTokens), kColumns (C);
//   template <DType D> static void convert(const char *row, int64_t k, float *out);
//     columns [0, k) of the row as f32 (exact), column i at
//     out[i / C * kRows * C + i % C] (one row of a panel, tail included).
//   template <int R, int TT, bool PackTokens> static void tile(const MatmulProblem &p,
//       const float *panel, float *xs, int64_t n0, int64_t t0,
//       int64_t kBegin, int64_t kEnd, float *carry);
//     y[t0 .. t0 + TT, n0 .. n0 + R) from the first R rows of the panel and
//     the TT tokens of xs, both starting at column kBegin, over columns
//     [kBegin, kEnd) (the tail of fewer than C from the panel and p.x); lanes
//     from carry unless kBegin is 0, to carry unless kEnd is K (then finished).
//     PackTokens: x comes from p.x's rows t0 .., and the tile writes it to
//     xs, column i of token t at xs[i / C * kTokens * C + t * C + i % C].
#pragma once

#include "cpu/simd.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace llmc::cpu::detail {

// Per-thread buffers of the GEMM (the packed rows, a packed token tile, the
// lanes carried between depth chunks), 64-byte aligned.
class GemmScratch {
public:
  float *panels(int64_t floats) { return alignedFloats(panels_, floats); }
  float *tokens(int64_t floats) { return alignedFloats(tokens_, floats); }
  float *carries(int64_t floats) { return alignedFloats(carries_, floats); }

private:
  std::vector<float> panels_, tokens_, carries_;
};

inline GemmScratch &gemmScratch() {
  thread_local GemmScratch scratch;
  return scratch;
}

// Columns per depth chunk: all of K up to kGemmDepthMax, else equal chunks of
// at most kGemmDepth, each a multiple of the kernel's `columns` (a lane sums
// the same columns whatever the chunks). Past about 1024 columns the 4 tokens
// of x of a tile (16 KiB) and its rows no longer share L1 (32 KiB on Zen 3).
constexpr int64_t kGemmDepthMax = 1024, kGemmDepth = 768;

inline int64_t depthChunk(int64_t k, int64_t columns) {
  if (k <= kGemmDepthMax)
    return k;
  const int64_t chunks = (k + kGemmDepth - 1) / kGemmDepth;
  return ((k + chunks - 1) / chunks + columns - 1) / columns * columns;
}

// Rows per block: at most rowsPerL2Block of f32 rows of `depth` columns, in
// blocks of about equal size (120 rows at most 84 per block make two of 60,
// not 84 and 36). 192 and 384 KiB blocks measured the same as 256.
inline int64_t balancedBlock(int64_t rows, int64_t depth, int64_t rowTile) {
  const int64_t most = rowsPerL2Block(depth * static_cast<int64_t>(sizeof(float)), rowTile);
  const int64_t blocks = (rows + most - 1) / most;
  const int64_t tiles = ((rows + blocks - 1) / blocks + rowTile - 1) / rowTile;
  return tiles * rowTile;
}

// Where a tile reads its rows, tokens and columns, and keeps its lanes
// between chunks.
struct GemmSpan {
  const float *panel; // the tile's panel at column kBegin
  float *xs;          // the token tile, packed, at column kBegin
  int64_t kBegin, kEnd;
  float *carry; // [kRows][kTokens][C], or null when the chunk is all of K
  bool packTokens; // the tile reads x from p.x and writes xs (the first row tile)
};

inline int64_t rowTilesOf(int64_t rows, int64_t rowTile) { return (rows + rowTile - 1) / rowTile; }

// Prefetches share `part` of `parts` of the 64-byte lines of floats [0,
// count) of `data` into L1. With x's token tiles packed, a token tile's first
// row tile otherwise waits on them from L3 or DRAM: fetched a share per row
// tile of the tile before, the GEMM ran 1.05-1.2x faster at K = 2048 and 8192
// on a loaded machine (docs/perf.md, "CPU prefill GEMM: x packed once, the
// next token tile prefetched").
inline void prefetchShare(const float *data, int64_t count, int64_t part, int64_t parts) {
  const int64_t lines = (count + kCacheLineFloats - 1) / kCacheLineFloats;
  for (int64_t l = part * lines / parts; l < (part + 1) * lines / parts; ++l)
    __builtin_prefetch(data + l * kCacheLineFloats, 0, 3);
}

// A tile of R rows by tokens (<= Kernel::kTokens) tokens.
template <typename Kernel, int R, int TT = Kernel::kTokens>
void gemmTile(int64_t tokens, const MatmulProblem &p, const GemmSpan &s, int64_t n0, int64_t t0) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return gemmTile<Kernel, R, TT - 1>(tokens, p, s, n0, t0);
  if (s.packTokens)
    Kernel::template tile<R, TT, true>(p, s.panel, s.xs, n0, t0, s.kBegin, s.kEnd, s.carry);
  else
    Kernel::template tile<R, TT, false>(p, s.panel, s.xs, n0, t0, s.kBegin, s.kEnd, s.carry);
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
  constexpr int64_t kRows = Kernel::kRows, kTokens = Kernel::kTokens, kColumns = Kernel::kColumns;
  const int64_t k = p.w.cols, depth = depthChunk(k, kColumns);
  // A panel of kRows rows by depth columns (the tail's step padded to kColumns).
  const int64_t steps = (depth + kColumns - 1) / kColumns, panelFloats = steps * kRows * kColumns;
  const int64_t rowBytes = k * static_cast<int64_t>(dtypeSize(D));
  const int64_t block = balancedBlock(rowEnd - rowBegin, depth, kRows);
  const char *weights = static_cast<const char *>(p.w.data);
  GemmScratch &scratch = gemmScratch();
  const int64_t blockRows = std::min(block, rowEnd - rowBegin);
  const int64_t rowTiles = rowTilesOf(blockRows, kRows);
  float *panels = scratch.panels(rowTiles * panelFloats);
  float *xs = scratch.tokens(steps * kTokens * kColumns);
  // One carry slot per tile of the block.
  constexpr int64_t kSlot = kRows * kTokens * kColumns;
  const int64_t tokenTiles = (tokenEnd - tokenBegin + kTokens - 1) / kTokens;
  float *carries = depth < k ? scratch.carries(rowTiles * tokenTiles * kSlot) : nullptr;
  // x already in token tiles (packTokenTiles, from token 0): every row tile
  // reads them there. Otherwise a block's first row tile copies each tile.
  static_assert(kTokens == kGemmTileTokens);
  const bool packed = p.xTiles != nullptr && tokenBegin % kTokens == 0;
  for (int64_t r0 = rowBegin; r0 < rowEnd; r0 += block) {
    const int64_t rows = std::min(block, rowEnd - r0), blockTiles = rowTilesOf(rows, kRows);
    for (int64_t k0 = 0; k0 < k; k0 += depth) {
      const int64_t width = std::min(depth, k - k0);
      const char *first = weights + r0 * rowBytes + k0 * static_cast<int64_t>(dtypeSize(D));
      for (int64_t r = 0; r < rows; ++r)
        Kernel::template convert<D>(first + r * rowBytes, width,
                                    panels + r / kRows * panelFloats + r % kRows * kColumns);
      GemmSpan span{panels, xs, k0, k0 + width, nullptr, false};
      for (int64_t t0 = tokenBegin; t0 < tokenEnd; t0 += kTokens) {
        const int64_t tokens = std::min(kTokens, tokenEnd - t0);
        if (packed) // read only: the tiles write xs only when packTokens is set
          span.xs = const_cast<float *>(p.xTiles) + t0 / kTokens * tokenTileFloats(k, kColumns) +
                    k0 / kColumns * kTokens * kColumns;
        // The next token tile's columns of this chunk, fetched a share per
        // row tile while this one runs (packed: one sequential run).
        const float *next =
            packed && t0 + kTokens < tokenEnd ? span.xs + tokenTileFloats(k, kColumns) : nullptr;
        for (int64_t r = 0; r < rows; r += kRows) {
          span.panel = panels + r / kRows * panelFloats;
          span.packTokens = !packed && r == 0;
          if (next != nullptr)
            prefetchShare(next, width / kColumns * kTokens * kColumns, r / kRows, blockTiles);
          if (carries != nullptr)
            span.carry = carries + ((t0 - tokenBegin) / kTokens * rowTiles + r / kRows) * kSlot;
          gemmTileUpTo<Kernel>(std::min(kRows, rows - r), tokens, p, span, r0 + r, t0);
        }
      }
    }
  }
}

} // namespace llmc::cpu::detail
