// Internal: the per-ISA implementations behind the public kernels. Each ISA
// file (simd_scalar.cpp, simd_avx2.cpp, simd_avx512.cpp) fills one table.
#pragma once

#include "cpu/isa.h"
#include "cpu/weights.h"

#include <cstdint>

namespace llmc::cpu::detail {

struct MatmulProblem {
  const float *x; // [tokens, w.cols]
  int64_t tokens;
  WeightMatrix w;    // [N, K]
  const float *bias; // [N] or null
  float beta;        // 0 or 1
  float *y;          // [tokens, N]
};

// Writes one output element: the dot product plus the epilogue.
inline void storeOutput(const MatmulProblem &p, int64_t t, int64_t n, float dot) {
  float *out = p.y + t * p.w.rows + n;
  float value = dot + (p.bias ? p.bias[n] : 0.0f);
  *out = p.beta != 0.0f ? *out + value : value;
}

// Weight rows per L2-resident block when several token tiles pass over them.
inline int64_t rowsPerL2Block(int64_t rowBytes, int64_t rowTile) {
  constexpr int64_t kL2Budget = 256 * 1024;
  int64_t rows = kL2Budget / rowBytes / rowTile * rowTile;
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

// The table for the active ISA.
const IsaOps &activeOps();

} // namespace llmc::cpu::detail
