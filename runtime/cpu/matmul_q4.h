// The int4 linear layer (W4A16 with f32 activations): y[T, N] = x[T, K] .
// W[N, K]^T (+ bias[N]) (+ y), with W group-quantized in the plan layout of
// kernels/common/q4_layout.h. Weights are dequantized in registers, never
// written out whole.
//
// Decode (T = 1, 2) streams each packed row once for all tokens: nibble
// planes of 64 (AVX2) or 128 (AVX-512) columns at a time against a copy of x
// permuted to match, the zero points folded in afterwards through per-group
// sums of x. Prefill dequantizes a block of rows to f32 in L1/L2 and runs
// f32 tiles over every token. Rows are split over the thread pool. Scalar,
// AVX2 and (decode only) AVX-512 paths.
#pragma once

#include "support/status.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <string_view>

namespace llmc::cpu {

// An int4 [rows, cols] weight matrix in the plan layout.
struct Q4Matrix {
  const uint32_t *qweight = nullptr; // [rows, hd::q4WordsPerRow(cols)]
  const uint16_t *scales = nullptr;  // [rows, groups] f16
  const uint16_t *zeros = nullptr;   // [rows, groups] f16 (integral 0..15)
  int64_t rows = 0;                  // N
  int64_t cols = 0;                  // K
  int64_t groupSize = 0;             // G, a multiple of 32
};

// Fails, naming `name`, for null data, non-positive dims or a bad group size.
Status checkWeight(const Q4Matrix &w, std::string_view name);

// x: [tokens, w.cols]; bias: [w.rows] or null; y: [tokens, w.rows]. beta 0
// overwrites y, 1 adds to it. x and y must not overlap. w passed checkWeight.
void matmulQ4(ThreadPool &pool, const float *x, int64_t tokens, const Q4Matrix &w,
              const float *bias, float beta, float *y);

namespace detail {

// What the per-ISA row kernels share: the problem, plus x rearranged for the
// decode path (see matmul_q4.cpp).
struct Q4Problem {
  const float *x; // [tokens, K]
  int64_t tokens;
  Q4Matrix w;
  const float *bias;
  float beta;
  float *y; // [tokens, N]
  // Decode only: x rearranged in blocks of B columns (B = 8 * lanes: 64
  // for AVX2, 128 for AVX-512): [tokens, blocks * B], column 8j + i of a
  // block at offset lanes * i + j; zero past K.
  const float *xPlanes;
  const float *xGroupSums; // [tokens, groups]: sum of x over each group's columns
  int64_t blocks;          // ceil(K / B)
};

// Rows [rowBegin, rowEnd) of y, per ISA.
void matmulQ4RowsScalar(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);
#if defined(__x86_64__)
void matmulQ4RowsAvx2(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);     // B = 64
void matmulQ4DecodeAvx512(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd); // B = 128
#endif

// y[t, n] = dot + bias + (beta ? y : 0).
inline void storeQ4Output(const Q4Problem &p, int64_t t, int64_t n, float dot) {
  float *out = p.y + t * p.w.rows + n;
  float value = dot + (p.bias ? p.bias[n] : 0.0f);
  *out = p.beta != 0.0f ? *out + value : value;
}

} // namespace detail
} // namespace llmc::cpu
