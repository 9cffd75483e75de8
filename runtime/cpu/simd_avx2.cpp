// AVX2 + FMA + F16C kernels (8 f32 lanes). Every function carries the target
// attribute, so the rest of the binary stays baseline x86-64.
#if defined(__x86_64__)

#include "cpu/simd.h"
#include "cpu/lanes_avx2.h"
#include "cpu/simd_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#define LLMC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

// Loads 8 weights starting at element k of a row as f32.
template <DType D> LLMC_AVX2 inline __m256 load8(const char *row, int64_t k);

template <> LLMC_AVX2 inline __m256 load8<DType::F32>(const char *row, int64_t k) {
  return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + k);
}

template <> LLMC_AVX2 inline __m256 load8<DType::BF16>(const char *row, int64_t k) {
  __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * k));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

template <> LLMC_AVX2 inline __m256 load8<DType::F16>(const char *row, int64_t k) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * k)));
}

// y[t0 .. t0+TT, n0 .. n0+R]: the R weight rows at rows (rowBytes apart, dtype
// D) against TT tokens, R*TT accumulators. Every tile size, the decode GEMV
// and the prefill GEMM (on rows converted to f32, which is exact) sum an output
// in one order (simd_gemm.h, "Numerics"): 8 lanes of fma over k, hsum, fma
// tail. A k-step holds R weight vectors and one x vector at a time, so R * TT
// + R + 1 registers.
//
// The GEMM may run columns [kBegin, kEnd) only (kBegin a multiple of 8; rows
// then points at column kBegin): the lanes come from carry[R][TT][8] unless
// kBegin is 0 and go back there unless kEnd is K, stored and loaded exactly,
// so a depth split leaves every sum as it is.
//
// Row r of the tile is output row n0 + r * rowStep (the decode streams take
// rows far apart). Ahead > 0: each row's stream is prefetched Ahead bytes
// in front of its loads, one line per 64 bytes.
template <DType D, int R, int TT, int Ahead = 0>
LLMC_AVX2 void dotTile(const MatmulProblem &p, const char *rows, int64_t rowBytes, int64_t n0,
                       int64_t t0, int64_t kBegin = 0, int64_t kEnd = -1, float *carry = nullptr,
                       int64_t rowStep = 1) {
  const int64_t k = p.w.cols, end = kEnd < 0 ? k : kEnd;
  const float *x = p.x + t0 * k;
  __m256 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      acc[r][t] = kBegin > 0 ? _mm256_loadu_ps(carry + (r * TT + t) * 8) : _mm256_setzero_ps();
  int64_t i = kBegin;
  for (; i + 8 <= end; i += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r)
      wv[r] = load8<D>(rows + r * rowBytes, i - kBegin);
    if constexpr (Ahead > 0)
      if (((i - kBegin) * dtypeSize(D)) % 64 == 0)
        for (int r = 0; r < R; ++r)
          _mm_prefetch(rows + r * rowBytes + (i - kBegin) * dtypeSize(D) + Ahead, _MM_HINT_T0);
    for (int t = 0; t < TT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * k + i);
      for (int r = 0; r < R; ++r)
        acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (end < k) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        _mm256_storeu_ps(carry + (r * TT + t) * 8, acc[r][t]);
    return;
  }
  // Unrolled, so that acc stays in registers (a rolled loop over it makes the
  // compiler keep acc in memory and store it in every k-step).
  float sums[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      sums[r][t] = hsum(acc[r][t]);
  for (int r = 0; r < R; ++r) {
    const void *row = rows + r * rowBytes;
    for (int t = 0; t < TT; ++t) {
      float sum = sums[r][t];
      for (int64_t j = i; j < k; ++j) // tail of fewer than 8
        sum = std::fma(weightAt(row, D, j - kBegin), x[t * k + j], sum);
      storeOutput(p, t0 + t, n0 + r * rowStep, sum);
    }
  }
}

// The tile on the problem's own weight rows n0 .. n0+R.
template <DType D, int R, int TT>
LLMC_AVX2 void tile(const MatmulProblem &p, int64_t n0, int64_t t0) {
  const int64_t rowBytes = p.w.cols * static_cast<int64_t>(dtypeSize(D));
  dotTile<D, R, TT>(p, static_cast<const char *>(p.w.data) + n0 * rowBytes, rowBytes, n0, t0);
}

// A tile of R rows by min(tokens, TT) tokens.
template <DType D, int R, int TT>
LLMC_AVX2 void tileUpTo(const MatmulProblem &p, int64_t n0, int64_t t0, int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return tileUpTo<D, R, TT - 1>(p, n0, t0, tokens);
  tile<D, R, TT>(p, n0, t0);
}

// Rows [rowBegin, rowEnd) in tiles of R rows x TT tokens. R * TT accumulators,
// TT inputs and one weight vector must fit in the 16 ymm registers.
template <DType D, int R, int TT>
LLMC_AVX2 void tiledRows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t block = rowsPerL2Block(p.w.cols * dtypeSize(D), R);
  for (int64_t b = rowBegin; b < rowEnd; b += block) {
    const int64_t bEnd = b + block < rowEnd ? b + block : rowEnd;
    for (int64_t t0 = 0; t0 < p.tokens; t0 += TT) {
      int64_t n = b;
      for (; n + R <= bEnd; n += R)
        tileUpTo<D, R, TT>(p, n, t0, p.tokens - t0);
      for (; n < bEnd; ++n)
        tileUpTo<D, 1, TT>(p, n, t0, p.tokens - t0);
    }
  }
}

// Decode (1 or TT = 2 tokens): rows [rowBegin, rowEnd) in 4 equal runs, tile
// j taking row j of each run. Rows are adjacent in memory, so each run is one
// sequential stream and a tile reads 4 of them. Tiles of 4 adjacent rows
// instead read 4 streams of one row each (1.5 KiB of bf16 at K = 768), too
// short for the hardware prefetcher to ramp up on: 11-12 GB/s of f16/bf16
// and 16 of f32 from DRAM on Zen 3 against 22-24 for the runs (docs/perf.md,
// "CPU decode GEMV and bandwidth probe"). f16/bf16 runs prefetch 256 bytes
// ahead, which helps short runs (the 64-row blocks of matmulSwiglu and
// matmulArgmax) start. The order of each sum is dotTile's, as for any tile.
template <DType D, int TT>
LLMC_AVX2 void streamedRows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  constexpr int kStreams = 4, kAhead = D == DType::F32 ? 0 : 256;
  const int64_t rowBytes = p.w.cols * static_cast<int64_t>(dtypeSize(D));
  const char *weights = static_cast<const char *>(p.w.data);
  const int64_t run = (rowEnd - rowBegin) / kStreams;
  for (int64_t j = 0; j < run; ++j)
    dotTile<D, kStreams, TT, kAhead>(p, weights + (rowBegin + j) * rowBytes, run * rowBytes,
                                     rowBegin + j, 0, 0, -1, nullptr, run);
  for (int64_t n = rowBegin + kStreams * run; n < rowEnd; ++n)
    dotTile<D, 1, TT>(p, weights + n * rowBytes, rowBytes, n, 0);
}

// [hsum(a), hsum(b), hsum(c), hsum(d)], each in hsum's tree (lanes_avx2.h):
// the lanes k and k + 4 of all four, then k and k + 2, then the pair, so
// the bits are hsum's in a third of its instructions.
LLMC_AVX2 inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20),
                                  _mm256_permute2f128_ps(a, b, 0x31)); // a: l0+l4 .. l3+l7 | b
  const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20),
                                  _mm256_permute2f128_ps(c, d, 0x31));
  // [a0+a2, a1+a3, c0+c2, c1+c3 | b0+b2, b1+b3, d0+d2, d1+d3] of those sums.
  const __m256 pairs = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 sums = _mm256_hadd_ps(pairs, pairs); // [a, c, a, c | b, d, b, d]
  return _mm_unpacklo_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1));
}

// The first N floats at p, the other lanes 0.
template <int N> LLMC_AVX2 inline __m128 loadFirst(const float *p) {
  static_assert(N >= 1 && N <= 4);
  if constexpr (N == 1)
    return _mm_load_ss(p);
  if constexpr (N == 2)
    return _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double *>(p)));
  if constexpr (N == 3)
    return _mm_movelh_ps(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double *>(p))),
                         _mm_load_ss(p + 2));
  if constexpr (N == 4)
    return _mm_loadu_ps(p);
}

// Stores the first N lanes of v at p.
template <int N> LLMC_AVX2 inline void storeFirst(float *p, __m128 v) {
  static_assert(N >= 1 && N <= 4);
  if constexpr (N == 1)
    _mm_store_ss(p, v);
  if constexpr (N == 2 || N == 3)
    _mm_storel_pi(reinterpret_cast<__m64 *>(p), v);
  if constexpr (N == 3)
    _mm_store_ss(p + 2, _mm_movehl_ps(v, v));
  if constexpr (N == 4)
    _mm_storeu_ps(p, v);
}

// storeOutput for outputs n0 .. n0 + R of token t, the dots in dots' first R
// lanes: the same additions lane by lane (a missing bias adds 0, as there).
template <int R>
LLMC_AVX2 inline void storeOutputs(const MatmulProblem &p, int64_t t, int64_t n0, __m128 dots) {
  float *out = p.y + t * p.w.rows + n0;
  __m128 value = _mm_add_ps(dots, p.bias ? loadFirst<R>(p.bias + n0) : _mm_setzero_ps());
  if (p.beta != 0.0f)
    value = _mm_add_ps(loadFirst<R>(out), value);
  storeFirst<R>(out, value);
}

// The prefill GEMM's AVX2 kernel (simd_gemm.h): 3 rows x 4 tokens, 12
// accumulators; a k-step is 3 weight loads from the panel, 4 x loads from
// the packed token tile and 12 FMAs, the sums in dotTile's order.
struct Avx2Gemm {
  using Element = float; // panels and token tiles in f32
  static constexpr int kRows = 3, kTokens = 4, kColumns = 8;

  template <DType D> LLMC_AVX2 static void convert(const char *row, int64_t k, float *out) {
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
      _mm256_storeu_ps(out + i * kRows, load8<D>(row, i));
    for (; i < k; ++i)
      out[i / 8 * kRows * 8 + i % 8] = weightAt(row, D, i);
  }

  template <int R, int TT, bool PackTokens>
  LLMC_AVX2 static void tile(const MatmulProblem &p, const float *panel, float *xs,
                             int64_t n0, int64_t t0, int64_t kBegin, int64_t kEnd, float *carry) {
    const int64_t k = p.w.cols, steps = (kEnd - kBegin) / 8;
    __m256 acc[R][TT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        acc[r][t] = kBegin > 0 ? _mm256_loadu_ps(carry + (r * TT + t) * 8) : _mm256_setzero_ps();
    const float *w = panel, *x = p.x + t0 * k + kBegin;
    float *xv = xs;
    for (int64_t s = 0; s < steps; ++s, w += kRows * 8, x += 8, xv += kTokens * 8) {
      __m256 wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        wv[r] = _mm256_load_ps(w + r * 8);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m256 x8 = PackTokens ? _mm256_loadu_ps(x + t * k) : _mm256_load_ps(xv + t * 8);
        if constexpr (PackTokens)
          _mm256_store_ps(xv + t * 8, x8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm256_fmadd_ps(wv[r], x8, acc[r][t]);
      }
    }
    if (kEnd < k) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int t = 0; t < TT; ++t)
          _mm256_storeu_ps(carry + (r * TT + t) * 8, acc[r][t]);
      return;
    }
    const int64_t tail = kBegin + steps * 8;
    if (tail == k) { // no tail: each token's R outputs as one vector
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        storeOutputs<R>(p, t0 + t, n0,
                        hsum4(acc[0][t], acc[R > 1 ? 1 : 0][t], acc[R > 2 ? 2 : 0][t],
                              acc[R > 3 ? 3 : 0][t]));
      return;
    }
    float sums[R][TT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        sums[r][t] = hsum(acc[r][t]);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t) {
        float sum = sums[r][t];
        for (int64_t j = tail; j < k; ++j) // fewer than 8
          sum = std::fma(w[r * 8 + j - tail], p.x[(t0 + t) * k + j], sum);
        storeOutput(p, t0 + t, n0 + r, sum);
      }
  }
};

// From this many tokens on, a problem goes through the prefill GEMM (converting
// a block costs about what a few tokens of FMAs on it do) and matmul splits it
// over tokens as well as rows.
constexpr int64_t kAvx2GemmTokens = 32;

// Weight rows per item when matmul splits a prefill: whole 3-row tiles, and
// two L2 blocks of f32 rows of K = 768 or so.
constexpr int64_t kAvx2GemmRowBlock = 120;

// Decode (1-2 tokens): four runs of weight rows stream at once. Up to 31
// tokens: each weight vector loaded serves four tokens. Prefill: the GEMM.
// Every output is the same sum in the same order whatever the token count and
// the path (see dotTile), so a prompt prefilled whole or in chunks, or a
// sequence decoded alone or in a batch, gets the same bits.
template <DType D> LLMC_AVX2 void rows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens >= kAvx2GemmTokens)
    packedGemm<Avx2Gemm, D>(p, rowBegin, rowEnd, 0, p.tokens);
  else if (p.tokens >= 3)
    tiledRows<D, 2, 4>(p, rowBegin, rowEnd);
  else if (p.tokens == 2)
    streamedRows<D, 2>(p, rowBegin, rowEnd);
  else
    streamedRows<D, 1>(p, rowBegin, rowEnd);
}

LLMC_AVX2 void matmulRowsAvx2(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  switch (p.w.dtype) {
  case DType::F32:
    return rows<DType::F32>(p, rowBegin, rowEnd);
  case DType::F16:
    return rows<DType::F16>(p, rowBegin, rowEnd);
  case DType::BF16:
    return rows<DType::BF16>(p, rowBegin, rowEnd);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

void packedGemmAvx2(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                    int64_t tokenEnd) {
  switch (p.w.dtype) {
  case DType::F32:
    return packedGemm<Avx2Gemm, DType::F32>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::F16:
    return packedGemm<Avx2Gemm, DType::F16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::BF16:
    return packedGemm<Avx2Gemm, DType::BF16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

LLMC_AVX2 float dotAvx2(const float *a, const float *b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

LLMC_AVX2 void axpyAvx2(float a, const float *x, float *y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i)
    y[i] += a * x[i];
}

LLMC_AVX2 void scaleAvx2(float a, float *y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(av, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i)
    y[i] *= a;
}

} // namespace

const IsaOps kAvx2Ops = {matmulRowsAvx2,    packedGemmAvx2,   packedGemmAvx2,
                         kAvx2GemmTokens,   Avx2Gemm::kTokens, kAvx2GemmRowBlock, Avx2Gemm::kColumns,
                         dotAvx2,           axpyAvx2,          scaleAvx2};

} // namespace llmc::cpu::detail

#endif // __x86_64__
