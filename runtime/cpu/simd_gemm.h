// Internal: the packed prefill GEMM shared by the ISA files,
// y[T, N] = x[T, K] . W[N, K]^T (+ bias) (+ y), compute-bound for large T.
//
// Blocking (Goto's scheme, with the weights as the re-used operand): a block
// of kGemmRowBlock weight rows by kGemmDepth columns is converted to f32 once
// and packed into panels of Kernel::kNr rows, k-major,
//   panel[j][k][c] = W[n0 + j * kNr + c][k0 + k]   (rows past N are zero),
// 128 KiB that stay in L2 while every tile of Kernel::kMr tokens passes over
// them. The micro-kernel keeps kMr x kNr outputs in registers for kGemmDepth
// steps; a step is kNr / lanes panel loads and one x broadcast per token.
// f16/bf16 are converted in the packing, never in the inner loop.
//
// Numerics: every output is one f32 sum in k order, acc = fma(x[k], w[k], acc)
// for k = 0 .. K-1 (carried across depth blocks through y, or through a
// scratch tile when y holds a residual), then y = (acc + bias) (+ y) as
// storeOutput does. The value of an output depends on nothing else: not on
// the ranges of rows or tokens a thread computes, nor on the tile it is in.
//
// Kernel provides, with its ISA's target attribute:
//   static constexpr int kMr, kNr;
//   template <DType D> static void pack(const char *row0, int64_t rowBytes,
//       int64_t rows, int64_t k0, int64_t depth, float *panel);
//     packs rows (<= kNr) rows starting at row0, columns [k0, k0 + depth).
//   template <int MR> static void micro(const float *x, int64_t ldx,
//       const float *panel, int64_t depth, float *c, int64_t ldc, bool load);
//     c[MR][kNr] (= or, with load, +=) x[MR][depth] . panel.
#pragma once

#include "cpu/simd.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace llmc::cpu::detail {

constexpr int64_t kGemmRowBlock = 128; // weight rows per packed block
constexpr int64_t kGemmDepth = 256;    // K columns per packed block

// Per-thread buffers of the GEMM, 64-byte aligned.
class GemmScratch {
public:
  float *panels(int64_t floats) { return aligned(panels_, floats); }
  float *partials(int64_t floats) { return aligned(partials_, floats); }

private:
  static float *aligned(std::vector<float> &v, int64_t floats) {
    if (static_cast<int64_t>(v.size()) < floats + 16)
      v.resize(floats + 16);
    uintptr_t address = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - address % 64) % 64) / sizeof(float);
  }
  std::vector<float> panels_, partials_;
};

inline GemmScratch &gemmScratch() {
  thread_local GemmScratch scratch;
  return scratch;
}

// One tile of mr (<= kMr) tokens by `valid` (<= kNr) rows. A partial tile of
// rows goes through a full-width buffer, so the micro-kernel always stores kNr.
template <typename Kernel, int MR>
void gemmTileOf(const float *x, int64_t ldx, const float *panel, int64_t depth, float *c,
                int64_t ldc, int64_t valid, bool load) {
  if (valid == Kernel::kNr)
    return Kernel::template micro<MR>(x, ldx, panel, depth, c, ldc, load);
  float buffer[MR * Kernel::kNr];
  for (int t = 0; t < MR; ++t)
    for (int64_t i = 0; i < Kernel::kNr; ++i)
      buffer[t * Kernel::kNr + i] = load && i < valid ? c[t * ldc + i] : 0.0f;
  Kernel::template micro<MR>(x, ldx, panel, depth, buffer, Kernel::kNr, load);
  for (int t = 0; t < MR; ++t)
    for (int64_t i = 0; i < valid; ++i)
      c[t * ldc + i] = buffer[t * Kernel::kNr + i];
}

template <typename Kernel, int MR = Kernel::kMr>
void gemmTile(int64_t mr, const float *x, int64_t ldx, const float *panel, int64_t depth, float *c,
              int64_t ldc, int64_t valid, bool load) {
  if constexpr (MR > 1)
    if (mr < MR)
      return gemmTile<Kernel, MR - 1>(mr, x, ldx, panel, depth, c, ldc, valid, load);
  gemmTileOf<Kernel, MR>(x, ldx, panel, depth, c, ldc, valid, load);
}

// After the last depth block: y = (acc + bias) (+ y), acc at c.
inline void gemmEpilogue(const MatmulProblem &p, int64_t t0, int64_t mr, int64_t n0, int64_t valid,
                         const float *c, int64_t ldc) {
  if (p.beta == 0.0f && p.bias == nullptr)
    return; // c is y, and holds the result
  for (int64_t t = 0; t < mr; ++t)
    for (int64_t i = 0; i < valid; ++i)
      storeOutput(p, t0 + t, n0 + i, c[t * ldc + i]);
}

// y[tokenBegin .. tokenEnd, rowBegin .. rowEnd) with weights of dtype D.
template <typename Kernel, DType D>
void packedGemm(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                int64_t tokenEnd) {
  constexpr int64_t kMr = Kernel::kMr, kNr = Kernel::kNr;
  static_assert(kGemmRowBlock % kNr == 0, "a row block is whole panels");
  const int64_t kDim = p.w.cols, nDim = p.w.rows;
  const int64_t rowBytes = kDim * static_cast<int64_t>(dtypeSize(D));
  const char *weights = static_cast<const char *>(p.w.data);
  // y itself carries the partial sums unless it holds a residual to add.
  const bool direct = p.beta == 0.0f;
  GemmScratch &scratch = gemmScratch();
  float *panels = scratch.panels(kGemmRowBlock * kGemmDepth);
  float *partials = direct ? nullptr : scratch.partials((tokenEnd - tokenBegin) * kGemmRowBlock);
  for (int64_t r0 = rowBegin; r0 < rowEnd; r0 += kGemmRowBlock) {
    const int64_t rows = std::min(kGemmRowBlock, rowEnd - r0);
    const int64_t numPanels = (rows + kNr - 1) / kNr;
    for (int64_t k0 = 0; k0 < kDim; k0 += kGemmDepth) {
      const int64_t depth = std::min(kGemmDepth, kDim - k0);
      const bool load = k0 > 0, last = k0 + depth == kDim;
      for (int64_t j = 0; j < numPanels; ++j)
        Kernel::template pack<D>(weights + (r0 + j * kNr) * rowBytes, rowBytes,
                                 std::min(kNr, rows - j * kNr), k0, depth,
                                 panels + j * kNr * depth);
      for (int64_t t0 = tokenBegin; t0 < tokenEnd; t0 += kMr) {
        const int64_t mr = std::min(kMr, tokenEnd - t0);
        const float *x = p.x + t0 * kDim + k0;
        for (int64_t j = 0; j < numPanels; ++j) {
          const int64_t n0 = r0 + j * kNr, valid = std::min(kNr, rows - j * kNr);
          float *c = direct ? p.y + t0 * nDim + n0
                            : partials + (t0 - tokenBegin) * kGemmRowBlock + j * kNr;
          const int64_t ldc = direct ? nDim : kGemmRowBlock;
          gemmTile<Kernel>(mr, x, kDim, panels + j * kNr * depth, depth, c, ldc, valid, load);
          if (last)
            gemmEpilogue(p, t0, mr, n0, valid, c, ldc);
        }
      }
    }
  }
}

} // namespace llmc::cpu::detail
