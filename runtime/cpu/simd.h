// Internal: the per-ISA implementations behind the public kernels. Each ISA
// file (simd_scalar.cpp, simd_avx2.cpp, simd_avx512.cpp) fills one table.
#pragma once

#include "cpu/isa.h"
#include "cpu/weights.h"

#include <cstdint>
#include <vector>

namespace llmc::cpu::detail {

struct MatmulProblem {
  const float *x; // [tokens, w.cols]
  int64_t tokens;
  WeightMatrix w;    // [N, K]
  const float *bias; // [N] or null
  float beta;        // 0 or 1
  float *y;          // [tokens, N]
  // x in token tiles (tiles of the GEMM's kTokens from token 0), or null: the
  // prefill GEMM then copies each tile as it first reads it. f32 tiles
  // (packTokenTiles), or for bf16 weights under the bf16 dot-product kernels
  // (cpu::x86Bf16Active) x rounded to bf16 (packBf16TokenTiles).
  const void *xTiles = nullptr;
};

// Floats per 64-byte cache line: the prefetches' step.
constexpr int64_t kCacheLineFloats = 64 / sizeof(float);

// Tokens per packed token tile of the prefill GEMMs (simd_gemm.h: every
// kernel takes 4 tokens; the columns per step are the ISA's, 8 for the AVX2
// and NEON kernels, 16 for AVX-512's: IsaOps::gemmColumns).
constexpr int64_t kGemmTileTokens = 4;

// Floats of one token tile of x's k columns (its whole `columns` steps).
inline int64_t tokenTileFloats(int64_t k, int64_t columns) {
  return k / columns * kGemmTileTokens * columns;
}

// Floats of x's token tiles for `tokens` tokens of k columns.
inline int64_t tokenTilesFloats(int64_t tokens, int64_t k, int64_t columns) {
  return (tokens + kGemmTileTokens - 1) / kGemmTileTokens * tokenTileFloats(k, columns);
}

// At least `floats` floats of v, 64-byte aligned (v grows when short).
inline float *alignedFloats(std::vector<float> &v, int64_t floats) {
  if (static_cast<int64_t>(v.size()) < floats + 16)
    v.resize(floats + 16);
  const uintptr_t address = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((64 - address % 64) % 64) / sizeof(float);
}

// Token tiles [tileBegin, tileEnd) of x[tokens, k] into out (elements E),
// in steps of C = `columns` columns: tile j holds tokens 4j .. 4j + 3, its
// columns i < k rounded down to C at out + j * tokenTileFloats(k, C) + i / C
// * 4C + (t - 4j) * C + i % C (a tile's steps in order, each step its
// tokens' C columns). copyStep(from, to) writes one step: the C columns at
// `from` (in x) to `to`. The k % C tail stays in x; a last tile of fewer
// than 4 tokens leaves the missing tokens' slots unwritten.
template <typename E, typename CopyStep>
inline void packTokenTileSteps(const float *x, int64_t tokens, int64_t k, int64_t columns,
                               int64_t tileBegin, int64_t tileEnd, E *out,
                               const CopyStep &copyStep) {
  const int64_t steps = k / columns, tileElements = tokenTileFloats(k, columns);
  for (int64_t j = tileBegin; j < tileEnd; ++j) {
    const int64_t first = j * kGemmTileTokens;
    const int64_t count = first + kGemmTileTokens <= tokens ? kGemmTileTokens : tokens - first;
    E *tile = out + j * tileElements;
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t t = 0; t < count; ++t)
        copyStep(x + (first + t) * k + s * columns, tile + (s * kGemmTileTokens + t) * columns);
  }
}

// The f32 GEMMs' token tiles: x's columns as they are.
inline void packTokenTiles(const float *x, int64_t tokens, int64_t k, int64_t columns,
                           int64_t tileBegin, int64_t tileEnd, float *out) {
  packTokenTileSteps(x, tokens, k, columns, tileBegin, tileEnd, out,
                     [columns](const float *from, float *to) {
                       for (int64_t c = 0; c < columns; ++c)
                         to[c] = from[c];
                     });
}

// Writes one output element: the dot product plus the epilogue.
inline void storeOutput(const MatmulProblem &p, int64_t t, int64_t n, float dot) {
  float *out = p.y + t * p.w.rows + n;
  float value = dot + (p.bias ? p.bias[n] : 0.0f);
  *out = p.beta != 0.0f ? *out + value : value;
}

// Bytes of f32 weight rows per L2-resident block of the prefill GEMMs: 3/8
// of the core's L2 (cpu::l2CacheBytes; the token tiles and x's stream share
// it), at least 256 KiB (Zen 3's 512 KiB L2 measured the same at 192, 256
// and 384) and at most 1 MiB; 256 KiB where the size is unknown. With 2 MiB
// (Sapphire Rapids) a 120-row item of K = 768 to 2048 is one block, not two:
// 5-10% more GFLOP/s (docs/perf.md, "AVX-512 prefill GEMM").
int64_t gemmL2Budget();

// Test hook: forces gemmL2Budget() to `bytes` (0: the machine's again).
void setGemmL2BudgetForTesting(int64_t bytes);

// Weight rows per L2-resident block when several token tiles pass over them.
inline int64_t rowsPerL2Block(int64_t rowBytes, int64_t rowTile) {
  int64_t rows = gemmL2Budget() / rowBytes / rowTile * rowTile;
  return rows < rowTile ? rowTile : rows;
}

struct IsaOps {
  // Computes y rows [rowBegin, rowEnd) for every token.
  void (*matmulRows)(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd);
  // Computes y[tokenBegin .. tokenEnd, rowBegin .. rowEnd). Every output has
  // the value matmulRows gives it, whatever the ranges (threads may split a
  // GEMM over both tokens and rows).
  void (*matmulBlock)(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                      int64_t tokenEnd);
  // The prefill GEMM (simd_gemm.h) on the same block, or null where the ISA
  // has none. Where it has one, matmulBlock is this GEMM, and matmulRows
  // runs it too from splitMinTokens tokens on; its outputs equal matmulRows'
  // bit for bit at any token count.
  void (*packedGemm)(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                     int64_t tokenEnd);
  // From this many tokens on, matmul splits a problem over tokens too, in
  // whole splitTokenTile tiles and splitRowBlock blocks. 0: never.
  int64_t splitMinTokens;
  int64_t splitTokenTile;
  int64_t splitRowBlock;
  // Columns per k-step of packedGemm's panels and token tiles (its vector
  // lanes: 8 or 16); 0 where there is no packedGemm.
  int64_t gemmColumns;
  float (*dot)(const float *a, const float *b, int64_t n);
  void (*axpy)(float a, const float *x, float *y, int64_t n); // y += a * x
  void (*scale)(float a, float *y, int64_t n);                // y *= a
};

extern const IsaOps kScalarOps;
#if defined(__x86_64__)
extern const IsaOps kAvx2Ops;
extern const IsaOps kAvx512Ops;
#endif
#if defined(__aarch64__)
extern const IsaOps kNeonOps; // simd_neon.cpp
#endif

#if defined(__x86_64__)
// bf16 weights by vdpbf16ps on x rounded to bf16, where cpu::x86Bf16Active()
// (matmul_bf16_avx512.cpp; the AVX-512 table's BF16 cases run these then).
// matmulRowsBf16Dot is IsaOps::matmulRows and packedGemmBf16Dot its
// packedGemm for such weights, with the same promises; xTiles, where set,
// are packBf16TokenTiles'.
void matmulRowsBf16Dot(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd);
void packedGemmBf16Dot(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                       int64_t tokenEnd);

// bf16 elements per step of that GEMM's panels and token tiles.
constexpr int64_t kBf16DotColumns = 32;

// packTokenTiles' layout with kBf16DotColumns columns a step, x rounded to
// bf16 (round to nearest even); `out` 64-byte aligned.
void packBf16TokenTiles(const float *x, int64_t tokens, int64_t k, int64_t tileBegin,
                        int64_t tileEnd, uint16_t *out);
#endif

// The table for the active ISA.
const IsaOps &activeOps();

} // namespace llmc::cpu::detail
