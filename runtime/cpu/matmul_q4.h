// The int4 linear layer: y[T, N] = x[T, K] . W[N, K]^T (+ bias[N]) (+ y),
// with W group-quantized in the plan layout of kernels/common/q4_layout.h.
//
// Numerics (W4A8): each row of x is quantized once per call to int8 in
// blocks of 32 columns (scale d = max|x| / 127 over the block, values
// round(x / d), round half to even); the kernels take integer dot products
// of the unsigned nibbles with the int8 values per block and accumulate
// them in f32 with the block's d and the group's scale; the zero points are
// applied once per group through the sum of the int8 values:
//   y[t, n] = sum_g scale[n, g] * (sum_{b in g} d[t, b] * (q[n, b] . xq[t, b])
//                                  - zero[n, g] * sum_{b in g} d[t, b] * sum(xq[t, b])).
// Every ISA path computes this, up to the order of the f32 additions. The
// weights are never dequantized; decode (T = 1, 2) and prefill share the
// kernel, tiles of rows x tokens over 16-row blocks that stay in L1.
// Scalar, AVX2 (vpmaddubsw, or vpdpbusd on AVX-512 VNNI machines), AVX-512
// VNNI decode and prefill panel kernels (the AVX2 kernel's bits) and NEON
// paths, chosen at run time; rows split over the thread pool.
#pragma once

#include "support/status.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace llmc::cpu {

// An int4 [rows, cols] weight matrix: the plan layout's words and scales,
// and its zero points (f16 in the plan, integral 0..15) packed to 4 bits at
// load time (packQ4Zeros), which saves 1.5 of the 20 bytes a group of 32
// weights reads per decode step.
struct Q4Matrix {
  const uint32_t *qweight = nullptr; // [rows, hd::q4WordsPerRow(cols)]
  const uint16_t *scales = nullptr;  // [rows, groups] f16
  const uint8_t *zeros = nullptr;    // [rows, q4ZeroRowBytes(groups)] nibbles
  int64_t rows = 0;                  // N
  int64_t cols = 0;                  // K
  int64_t groupSize = 0;             // G, a multiple of 32
  // The same matrix in 16-row panels (cpu/q4_panels.h), or null. Where set
  // and q4PanelsUsed(), the AVX-512 VNNI kernels read only these; the
  // row-major pointers above stay valid for the other paths.
  const uint8_t *panels = nullptr;
};

// Bytes of one row of packed zero points: group g's zero is the low (g
// even) or high (g odd) nibble of byte g / 2; an odd count pads with 0.
inline int64_t q4ZeroRowBytes(int64_t groups) { return (groups + 1) / 2; }

// The zero point of group g of a row of packed zeros.
inline int q4ZeroAt(const uint8_t *rowZeros, int64_t g) {
  return (rowZeros[g / 2] >> (4 * (g % 2))) & 0x0f;
}

// Packs f16 zero points [rows, groups] (the plan's) into `out` [rows,
// q4ZeroRowBytes(groups)]. Fails, naming `name` and the first bad cell,
// when a zero is not an integer 0..15 (kernels/common/q4_layout.h).
Status packQ4Zeros(ThreadPool &pool, const uint16_t *zeros, int64_t rows, int64_t groups,
                   uint8_t *out, std::string_view name);
// The same into a new vector, on the calling thread (tests, benchmarks).
Expected<std::vector<uint8_t>> packQ4Zeros(const uint16_t *zeros, int64_t rows, int64_t groups,
                                           std::string_view name);

// Fails, naming `name`, for null data, non-positive dims or a bad group size.
Status checkWeight(const Q4Matrix &w, std::string_view name);

// x: [tokens, w.cols]; bias: [w.rows] or null; y: [tokens, w.rows]. beta 0
// overwrites y, 1 adds to it. x and y must not overlap. w passed checkWeight.
void matmulQ4(ThreadPool &pool, const float *x, int64_t tokens, const Q4Matrix &w,
              const float *bias, float beta, float *y);

// Test hook: with `exact`, later matmulQ4 calls take x in f32 (W4A16, the
// plain dequantize-and-dot path, slow) instead of the int8 blocks above:
// the reference that GPU kernels, whose activations stay f16/bf16/f32, are
// compared with. Not thread-safe with kernels running.
void setQ4ExactActivationsForTesting(bool exact);

namespace detail {

// Activations per 32-column block ("Q8 block"), padded with zero blocks to
// whole pairs of blocks (64 columns, one 256-bit load of packed weights).
constexpr int64_t kQ8Block = 32;
constexpr int64_t kQ8PairBytes = 64;

// Pairs of Q8 blocks per row of K columns.
inline int64_t q8Pairs(int64_t cols) { return (cols + 2 * kQ8Block - 1) / (2 * kQ8Block); }

// x quantized per Q8 block, in the order the kernels read it. Pair p covers
// columns 64p .. 64p + 63 (blocks 2p and 2p + 1) in 64 bytes: the even
// columns of block 2p, of block 2p + 1, then the odd columns of each,
//   byte 32 * (c % 2) + 16 * ((c / 32) % 2) + (c % 32) / 2  for column c,
// which matches the packed weights (byte j of a 16-byte block holds its
// columns 2j and 2j + 1 in the low and high nibble). Columns past K are 0.
struct Q8Activations {
  const int8_t *values; // [tokens, pairs, 64]
  // [tokens, pairs, scaleLanes]: d of block 2p in lanes 0..3, of block
  // 2p + 1 in lanes 4..7, repeated for lanes 8..15 when scaleLanes = 16
  // (the lane order of the kernels' 32-bit dot products); 0 past K.
  const float *scales;
  const float *groupSums; // [tokens, groups]: sum_{b in g} d[b] * sum(xq[b])
  int64_t pairs;          // q8Pairs(K)
  int64_t scaleLanes;     // 8 (AVX2, scalar) or 16 (AVX-512)
  // [tokens, q8Chunks(K), 8] for the AVX2 kernel, else null: the d of the
  // blocks of pairs 4c .. 4c + 3 (a "chunk", 256 columns), the even blocks
  // 8c, 8c + 2, 8c + 4, 8c + 6 in lanes 0..3 and the odd ones in 4..7, so
  // that one in-lane broadcast (vpermilps) gives pair 4c + i's scale lanes.
  const float *chunkScales = nullptr;
};

// Pairs per chunk of chunkScales, and chunks per row (the last may be partial).
constexpr int64_t kQ8ChunkPairs = 4;
inline int64_t q8Chunks(int64_t cols) {
  return (q8Pairs(cols) + kQ8ChunkPairs - 1) / kQ8ChunkPairs;
}

// chunkScales of tokens [tokenBegin, tokenEnd) from scales (scaleLanes 8);
// lanes of blocks past the last pair are 0.
void chunkQ8Scales(const float *scales, int64_t pairs, int64_t tokenBegin, int64_t tokenEnd,
                   float *chunkScales);

// What the per-ISA row kernels share: the problem and its quantized x.
struct Q4Problem {
  const float *x; // [tokens, K]
  int64_t tokens;
  Q4Matrix w;
  const float *bias;
  float beta;
  float *y; // [tokens, N]
  Q8Activations xq;
};

// Quantizes tokens [tokenBegin, tokenEnd) of x [*, cols] into buffers laid
// out as Q8Activations (values, scales, groupSums are whole-tensor pointers).
// Both give the same bytes and floats.
void quantizeQ8Scalar(const float *x, int64_t cols, int64_t groupSize, int64_t scaleLanes,
                      int64_t tokenBegin, int64_t tokenEnd, int8_t *values, float *scales,
                      float *groupSums);
#if defined(__x86_64__)
void quantizeQ8Avx2(const float *x, int64_t cols, int64_t groupSize, int64_t scaleLanes,
                    int64_t tokenBegin, int64_t tokenEnd, int8_t *values, float *scales,
                    float *groupSums);
#endif

// Rows [rowBegin, rowEnd) of y, per ISA, from p.xq.
void matmulQ4RowsScalar(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);
#if defined(__x86_64__)
void matmulQ4RowsAvx2(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd); // lanes 8
// AVX-512 VNNI, from the AVX2 quantizer's layout with chunkScales unused:
// 16-row panels unpacked per call (from p.w.panels where set, rowBegin then
// a multiple of 16), lanes = rows, for calls of kQ4PanelMinTokens tokens
// or more. The bits of matmulQ4RowsAvx2.
void matmulQ4RowsPanelAvx512(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);
// AVX-512 VNNI decode (one token, chunkScales set): the AVX2 kernel's row
// runs two rows per 512-bit vector, its bits; other calls go to it.
void matmulQ4RowsDecodeAvx512(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);
// AVX-512 VNNI on p.w.panels (set), rowBegin a multiple of 16, calls of
// fewer than kQ4PanelMinTokens tokens: the panel kernel's arithmetic with
// the nibbles unpacked in registers. The bits of matmulQ4RowsAvx2.
void matmulQ4RowsPanelNibblesAvx512(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);
#endif
// Tokens from which x86VnniActive() machines take the panel kernel: below,
// unpacking the panel costs more than it saves (bench_q4_cputime).
constexpr int64_t kQ4PanelMinTokens = 10;
#if defined(__aarch64__)
// lanes 8: SDOT where neonDotProdActive() (cpu/isa.h), else widening multiplies.
void matmulQ4RowsNeon(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);
#endif
// Rows of y from f32 x (dequantize and dot; setQ4ExactActivationsForTesting).
void matmulQ4RowsExact(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd);

// y[t, n] = dot + bias + (beta ? y : 0).
inline void storeQ4Output(const Q4Problem &p, int64_t t, int64_t n, float dot) {
  float *out = p.y + t * p.w.rows + n;
  float value = dot + (p.bias ? p.bias[n] : 0.0f);
  *out = p.beta != 0.0f ? *out + value : value;
}

} // namespace detail
} // namespace llmc::cpu
