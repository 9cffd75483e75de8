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
// more masked step into the lanes, then the tree), then storeOutput. The
// bf16 dot-product kernel (matmul_bf16_avx512.cpp) sums the same way with
// vdpbf16ps on x rounded to bf16: lane j adds the products of columns 2j
// and 2j + 1 of every 32-column step. The kernels' tiles of every size share one function, so an
// output depends neither on the rows, tokens or tile a thread computes nor on
// the path (GEMV or GEMM) computing it: a prompt prefilled whole, in chunks
// or after a cached prefix, and a sequence decoded alone or in a batch, get
// the same bits.
//
// Kernel provides, with its ISA's target attribute:
//   using Element: the panels' and token tiles' element (float; uint16_t
//     bf16 bits for the bf16 dot-product kernel);
//   static constexpr int kRows, kTokens (= kGemmTileTokens), kColumns (C);
//   template <DType D> static void convert(const char *row, int64_t k, Element *out);
//     columns [0, k) of the row as Element (exact), column i at
//     out[i / C * kRows * C + i % C] (one row of a panel, tail included).
//   optionally, for coded bf16 rows (WeightMatrix::coded, cpu/bf16_coded.h):
//   static bool codedRows(const MatmulProblem &p): whether it reads p's coded rows;
//   static void convertCoded(const MatmulProblem &p, int64_t row, int64_t k0,
//       int64_t width, Element *out): columns [k0, k0 + width) of that row as
//       convert writes them (k0 a multiple of C);
//   template <int R, int TT, bool PackTokens> static void tile(const MatmulProblem &p,
//       const Element *panel, Element *xs, int64_t n0, int64_t t0,
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
#include <type_traits>
#include <vector>

namespace llmc::cpu::detail {

// Per-thread buffers of the GEMM (the packed rows, a packed token tile, the
// lanes carried between depth chunks), 64-byte aligned.
class GemmScratch {
public:
  // `count` elements of E (float, or the bf16 kernel's uint16_t bf16 bits).
  template <typename E> E *panels(int64_t count) {
    return reinterpret_cast<E *>(alignedFloats(panels_, floatsFor<E>(count)));
  }
  template <typename E> E *tokens(int64_t count) {
    return reinterpret_cast<E *>(alignedFloats(tokens_, floatsFor<E>(count)));
  }
  float *carries(int64_t floats) { return alignedFloats(carries_, floats); }

private:
  template <typename E> static int64_t floatsFor(int64_t count) {
    return (count * static_cast<int64_t>(sizeof(E)) + 3) / 4;
  }
  std::vector<float> panels_, tokens_, carries_;
};

inline GemmScratch &gemmScratch() {
  thread_local GemmScratch scratch;
  return scratch;
}

// Columns per depth chunk: all of K up to kGemmDepthMax, else equal chunks of
// at most kGemmDepth, each a multiple of the kernel's `columns` (a lane sums
// the same columns whatever the chunks). Past about 1024 f32 columns the 4
// tokens of x of a tile (16 KiB) and its rows no longer share L1 (32 KiB on
// Zen 3). 2-byte elements (the bf16 kernel's) take all of K up to 2048 (the
// 1B's K = 2048 ran 81-87% of the vdpbf16ps peak on a Zen 4, against 55-56%
// in chunks of 688), else chunks of at most 1024 (K = 8192: 76-82%, 1536:
// 68-76%, 768: 45-72%; docs/perf.md, "bf16 weights by vdpbf16ps").
constexpr int64_t kGemmDepthMax = 1024, kGemmDepth = 768;
constexpr int64_t kGemmDepthMaxBf16 = 2048, kGemmDepthBf16 = 1024;

inline int64_t depthChunk(int64_t k, int64_t columns, int64_t elementBytes = 4) {
  const int64_t most = elementBytes == 2 ? kGemmDepthMaxBf16 : kGemmDepthMax;
  const int64_t chunk = elementBytes == 2 ? kGemmDepthBf16 : kGemmDepth;
  if (k <= most)
    return k;
  const int64_t chunks = (k + chunk - 1) / chunk;
  return ((k + chunks - 1) / chunks + columns - 1) / columns * columns;
}

// Rows per block: at most rowsPerL2Block of packed rows of `rowBytes` bytes
// (a depth chunk's f32 or bf16 panel row), in blocks of about equal size (120
// rows at most 84 per block make two of 60, not 84 and 36). 192 and 384 KiB
// blocks measured the same as 256.
inline int64_t balancedBlock(int64_t rows, int64_t rowBytes, int64_t rowTile) {
  const int64_t most = rowsPerL2Block(rowBytes, rowTile);
  const int64_t blocks = (rows + most - 1) / most;
  const int64_t tiles = ((rows + blocks - 1) / blocks + rowTile - 1) / rowTile;
  return tiles * rowTile;
}

// Where a tile reads its rows, tokens and columns, and keeps its lanes
// between chunks.
template <typename Element> struct GemmSpan {
  const Element *panel; // the tile's panel at column kBegin
  Element *xs;          // the token tile, packed, at column kBegin
  int64_t kBegin, kEnd;
  float *carry;    // [kRows][kTokens][C], or null when the chunk is all of K
  bool packTokens; // the tile reads x from p.x and writes xs (the first row tile)
};

inline int64_t rowTilesOf(int64_t rows, int64_t rowTile) { return (rows + rowTile - 1) / rowTile; }

// Prefetches share `part` of `parts` of the 64-byte lines of the `bytes`
// bytes at `data` into L1. With x's token tiles packed, a token tile's first
// row tile otherwise waits on them from L3 or DRAM: fetched a share per row
// tile of the tile before, the GEMM ran 1.05-1.2x faster at K = 2048 and 8192
// on a loaded machine (docs/perf.md, "CPU prefill GEMM: x packed once, the
// next token tile prefetched").
inline void prefetchShare(const void *data, int64_t bytes, int64_t part, int64_t parts) {
  const int64_t lines = (bytes + 63) / 64;
  for (int64_t l = part * lines / parts; l < (part + 1) * lines / parts; ++l)
    __builtin_prefetch(static_cast<const char *>(data) + l * 64, 0, 3);
}

// A tile of R rows by tokens (<= Kernel::kTokens) tokens.
template <typename Kernel, int R, int TT = Kernel::kTokens>
void gemmTile(int64_t tokens, const MatmulProblem &p, const GemmSpan<typename Kernel::Element> &s,
              int64_t n0, int64_t t0) {
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
void gemmTileUpTo(int64_t rows, int64_t tokens, const MatmulProblem &p,
                  const GemmSpan<typename Kernel::Element> &s, int64_t n0, int64_t t0) {
  if constexpr (R > 1)
    if (rows < R)
      return gemmTileUpTo<Kernel, R - 1>(rows, tokens, p, s, n0, t0);
  gemmTile<Kernel, R>(tokens, p, s, n0, t0);
}

// Whether Kernel fills its panels from coded bf16 rows (convertCoded).
template <typename Kernel, typename = void> struct ConvertsCoded : std::false_type {};
template <typename Kernel>
struct ConvertsCoded<Kernel, std::void_t<decltype(&Kernel::convertCoded)>> : std::true_type {};

// y[tokenBegin .. tokenEnd, rowBegin .. rowEnd) with weights of dtype D.
template <typename Kernel, DType D>
void packedGemm(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                int64_t tokenEnd) {
  using Element = typename Kernel::Element;
  constexpr int64_t kRows = Kernel::kRows, kTokens = Kernel::kTokens, kColumns = Kernel::kColumns;
  const int64_t k = p.w.cols, depth = depthChunk(k, kColumns, sizeof(Element));
  // A panel of kRows rows by depth columns (the tail's step padded to kColumns).
  const int64_t steps = (depth + kColumns - 1) / kColumns, panelFloats = steps * kRows * kColumns;
  const int64_t rowBytes = k * static_cast<int64_t>(dtypeSize(D));
  const int64_t block =
      balancedBlock(rowEnd - rowBegin, depth * static_cast<int64_t>(sizeof(Element)), kRows);
  const char *weights = static_cast<const char *>(p.w.data);
  GemmScratch &scratch = gemmScratch();
  const int64_t blockRows = std::min(block, rowEnd - rowBegin);
  const int64_t rowTiles = rowTilesOf(blockRows, kRows);
  Element *panels = scratch.panels<Element>(rowTiles * panelFloats);
  Element *xs = scratch.tokens<Element>(steps * kTokens * kColumns);
  // One carry slot per tile of the block.
  constexpr int64_t kSlot = kRows * kTokens * kColumns;
  const int64_t tokenTiles = (tokenEnd - tokenBegin + kTokens - 1) / kTokens;
  float *carries = depth < k ? scratch.carries(rowTiles * tokenTiles * kSlot) : nullptr;
  // x already in token tiles (packTokenTiles, from token 0): every row tile
  // reads them there. Otherwise a block's first row tile copies each tile.
  static_assert(kTokens == kGemmTileTokens);
  const bool packed = p.xTiles != nullptr && tokenBegin % kTokens == 0;
  bool coded = false; // the rows come from p.w.coded, not p.w.data
  if constexpr (ConvertsCoded<Kernel>::value)
    coded = Kernel::codedRows(p);
  for (int64_t r0 = rowBegin; r0 < rowEnd; r0 += block) {
    const int64_t rows = std::min(block, rowEnd - r0), blockTiles = rowTilesOf(rows, kRows);
    for (int64_t k0 = 0; k0 < k; k0 += depth) {
      const int64_t width = std::min(depth, k - k0);
      const char *first = weights + r0 * rowBytes + k0 * static_cast<int64_t>(dtypeSize(D));
      for (int64_t r = 0; r < rows; ++r) {
        Element *panelRow = panels + r / kRows * panelFloats + r % kRows * kColumns;
        if constexpr (ConvertsCoded<Kernel>::value)
          if (coded) {
            Kernel::convertCoded(p, r0 + r, k0, width, panelRow);
            continue;
          }
        Kernel::template convert<D>(first + r * rowBytes, width, panelRow);
      }
      GemmSpan<Element> span{panels, xs, k0, k0 + width, nullptr, false};
      for (int64_t t0 = tokenBegin; t0 < tokenEnd; t0 += kTokens) {
        const int64_t tokens = std::min(kTokens, tokenEnd - t0);
        if (packed) // read only: the tiles write xs only when packTokens is set
          span.xs = const_cast<Element *>(static_cast<const Element *>(p.xTiles)) +
                    t0 / kTokens * tokenTileFloats(k, kColumns) +
                    k0 / kColumns * kTokens * kColumns;
        // The next token tile's columns of this chunk, fetched a share per
        // row tile while this one runs (packed: one sequential run).
        const Element *next =
            packed && t0 + kTokens < tokenEnd ? span.xs + tokenTileFloats(k, kColumns) : nullptr;
        for (int64_t r = 0; r < rows; r += kRows) {
          span.panel = panels + r / kRows * panelFloats;
          span.packTokens = !packed && r == 0;
          if (next != nullptr)
            prefetchShare(next, width / kColumns * kTokens * kColumns * sizeof(Element), r / kRows,
                          blockTiles);
          if (carries != nullptr)
            span.carry = carries + ((t0 - tokenBegin) / kTokens * rowTiles + r / kRows) * kSlot;
          gemmTileUpTo<Kernel>(std::min(kRows, rows - r), tokens, p, span, r0 + r, t0);
        }
      }
    }
  }
}

} // namespace llmc::cpu::detail
