// The int8 linear layer (W8A16): y[T, N] = x[T, K] . W[N, K]^T (+ bias[N]) (+ y),
// with W symmetric int8 per output channel or per group of columns, in the
// plan layout of kernels/common/q8_layout.h.
//
// Numerics: the activations stay f32 (no activation quantization: the
// near-lossless option next to int4's W4A8); the scalar path
// dequantizes every weight to f32 exactly as hd::q8Dequant does (q * scale,
// one rounding) and sum the products in f32:
//   y[t, n] = sum_k (q[n, k] * scale[n, k / G]) * x[t, k],
// so a plan whose float weights were fake-quantized computes the same up to
// the order of the f32 additions. The AVX2 and NEON paths take each group's
// scale out of its sum, y[t, n] = sum_g scale[n, g] * sum_{k in g} q[n, k] *
// x[t, k] (a multiply per group instead of per weight), the same within f32
// rounding, in one order (the same bits on both ISAs, and for a row whatever
// the token count or tile). Scalar, AVX2 (AVX-512 machines run it too) and
// NEON paths, chosen at run time, tiles of rows x tokens; rows split over
// the thread pool; AVX2 decode reads the rows in 4 prefetched runs.
#pragma once

#include "support/status.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <string_view>

namespace llmc::cpu {

// An int8 [rows, cols] weight matrix in the plan layout.
struct Q8Matrix {
  const int8_t *qweight = nullptr; // [rows, hd::q8RowBytes(cols)]
  const void *scales = nullptr;    // [rows, hd::q8NumGroups(cols, groupSize)] f32, or f16
  bool halfScales = false;         // scales are f16
  int64_t rows = 0;                // N
  int64_t cols = 0;                // K
  int64_t groupSize = 0;           // G: 0 (per output channel) or a multiple of 32
};

// Fails, naming `name`, for null data, non-positive dims or a bad group size.
Status checkWeight(const Q8Matrix &w, std::string_view name);

// x: [tokens, w.cols]; bias: [w.rows] or null; y: [tokens, w.rows]. beta 0
// overwrites y, 1 adds to it. x and y must not overlap. w passed checkWeight.
void matmulQ8(ThreadPool &pool, const float *x, int64_t tokens, const Q8Matrix &w,
              const float *bias, float beta, float *y);

namespace detail {

struct Q8Problem {
  const float *x; // [tokens, K]
  int64_t tokens;
  Q8Matrix w;
  const float *bias;
  float beta;
  float *y; // [tokens, N]
};

// The scale of group g of row n.
float q8Scale(const Q8Matrix &w, int64_t n, int64_t g);

// y[t, n] = dot + bias + (beta ? y : 0).
inline void storeQ8Output(const Q8Problem &p, int64_t t, int64_t n, float dot) {
  float *out = p.y + t * p.w.rows + n;
  float value = dot + (p.bias ? p.bias[n] : 0.0f);
  *out = p.beta != 0.0f ? *out + value : value;
}

// Rows [rowBegin, rowEnd) of y, per ISA.
void matmulQ8RowsScalar(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd);
#if defined(__x86_64__)
void matmulQ8RowsAvx2(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd);
#endif
#if defined(__aarch64__)
void matmulQ8RowsNeon(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd);
#endif

} // namespace detail
} // namespace llmc::cpu
