// bf16 weights by vdpbf16ps (AVX512-BF16; cpu::x86Bf16Active): x rounded to
// bf16 (round to nearest even), each instruction adding to every f32 lane j
// the products of elements 2j and 2j + 1 of 32 bf16 weights and 32 bf16
// inputs. A bf16 product is exact in f32, so what changes against the f32
// FMA kernels (simd_avx512.cpp) is x's rounding: about 2^-9 relative per
// input, as llama.cpp and oneDNN take on these CPUs. In exchange an
// instruction does 32 multiply-adds, not 16, on weights read as they are
// stored (no widening): prefill runs up to twice the f32 FMA peak.
//
// Numerics, every path (decode runs, small tiles, the prefill GEMM): lane j
// of one accumulator adds, step by step over 32-column steps from column 0,
// vdpbf16ps(w[32s + 2j .. + 1], x[32s + 2j .. + 1]); the K % 32 tail is one
// more step with zeros past K (masked loads, or the panel's zero padding);
// then _mm512_reduce_add_ps's tree (reduceAdd16) and storeOutput. So an
// output has the same bits whatever the token count, tile or thread split.
#if defined(__x86_64__)

#include "cpu/simd.h"
#include "cpu/simd_avx512.h"
#include "cpu/simd_gemm.h"

#include <immintrin.h>

#include <vector>

#define LLMC_AVX512_BF16                                                                           \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

constexpr int64_t kColumns = kBf16DotColumns; // bf16 elements per 512-bit step

// Lanes [0, n) of 16 (n may be <= 0 or >= 16).
LLMC_AVX512_BF16 inline __mmask16 firstLanes16(int64_t n) {
  return n >= 16  ? static_cast<__mmask16>(0xffff)
         : n <= 0 ? static_cast<__mmask16>(0)
                  : static_cast<__mmask16>((1u << n) - 1);
}

// Elements [0, n) of 32 16-bit ones, 0 < n <= 32.
LLMC_AVX512_BF16 inline __mmask32 firstElements32(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << n) - 1);
}

// x[0 .. 32) rounded to bf16, element i at i.
LLMC_AVX512_BF16 inline __m512i roundedStep(const float *x) {
  // _mm512_cvtne2ps_pbh(a, b): elements 0-15 from b, 16-31 from a.
  return reinterpret_cast<__m512i>(
      _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
}

// x[0 .. n) rounded to bf16, zeros past n (0 < n <= 32): a K % 32 tail.
LLMC_AVX512_BF16 inline __m512i roundedTail(const float *x, int64_t n) {
  return reinterpret_cast<__m512i>(
      _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(firstLanes16(n - 16), x + 16),
                          _mm512_maskz_loadu_ps(firstLanes16(n), x)));
}

LLMC_AVX512_BF16 inline __m512 dotStep(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w), reinterpret_cast<__m512bh>(x));
}

// x[tokens, k] rounded to bf16 into rows of `stride` (k rounded up to 32)
// elements, zeros past k: what the decode tiles read.
LLMC_AVX512_BF16 void roundRows(const float *x, int64_t tokens, int64_t k, int64_t stride,
                                uint16_t *out) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = x + t * k;
    uint16_t *dst = out + t * stride;
    int64_t i = 0;
    for (; i + kColumns <= k; i += kColumns)
      _mm512_storeu_si512(dst + i, roundedStep(row + i));
    if (i < k)
      _mm512_storeu_si512(dst + i, roundedTail(row + i, k - i));
  }
}

// y[t0 .. t0+TT, n0 .. n0+R]: the R weight rows at rows (rowBytes apart)
// against TT tokens of xb (rows of `stride` bf16, zero padded to a multiple of
// 32), R*TT accumulators. Row r of the tile is output row n0 + r * rowStep.
// Ahead > 0: each row's stream is prefetched Ahead bytes in front of its loads.
template <int R, int TT, int Ahead = 0>
LLMC_AVX512_BF16 void dotTile(const MatmulProblem &p, const uint16_t *xb, int64_t stride,
                              const char *rows, int64_t rowBytes, int64_t n0, int64_t t0,
                              int64_t rowStep = 1) {
  const int64_t k = p.w.cols;
  const uint16_t *x = xb + t0 * stride;
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + kColumns <= k; i += kColumns) { // one 64-byte line of each row per step
    if constexpr (Ahead > 0)
      for (int r = 0; r < R; ++r)
        _mm_prefetch(rows + r * rowBytes + 2 * i + Ahead, _MM_HINT_T0);
    __m512i xv[TT];
    for (int t = 0; t < TT; ++t)
      xv[t] = _mm512_loadu_si512(x + t * stride + i);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = _mm512_loadu_si512(rows + r * rowBytes + 2 * i);
      for (int t = 0; t < TT; ++t)
        acc[r][t] = dotStep(acc[r][t], wv, xv[t]);
    }
  }
  if (i < k) {
    const __mmask32 mask = firstElements32(k - i);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = _mm512_maskz_loadu_epi16(mask, rows + r * rowBytes + 2 * i);
      for (int t = 0; t < TT; ++t)
        acc[r][t] = dotStep(acc[r][t], wv, _mm512_loadu_si512(x + t * stride + i));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      storeOutput(p, t0 + t, n0 + r * rowStep, _mm512_reduce_add_ps(acc[r][t]));
}

// Decode (1 or TT = 2 tokens): rows [rowBegin, rowEnd) in 4 equal runs, tile
// j taking row j of each run, each run one sequential stream (as
// simd_avx512.cpp streamedRows, which measured why).
template <int TT>
LLMC_AVX512_BF16 void streamedRows(const MatmulProblem &p, const uint16_t *xb, int64_t stride,
                                   int64_t rowBegin, int64_t rowEnd) {
  constexpr int kStreams = 4, kAhead = 256;
  const int64_t rowBytes = p.w.cols * 2;
  const char *weights = static_cast<const char *>(p.w.data);
  const int64_t run = (rowEnd - rowBegin) / kStreams;
  for (int64_t j = 0; j < run; ++j)
    dotTile<kStreams, TT, kAhead>(p, xb, stride, weights + (rowBegin + j) * rowBytes,
                                  run * rowBytes, rowBegin + j, 0, run);
  for (int64_t n = rowBegin + kStreams * run; n < rowEnd; ++n)
    dotTile<1, TT>(p, xb, stride, weights + n * rowBytes, rowBytes, n, 0);
}

// A tile of R rows by min(tokens, TT) tokens.
template <int R, int TT>
LLMC_AVX512_BF16 void tileUpTo(const MatmulProblem &p, const uint16_t *xb, int64_t stride,
                               int64_t n0, int64_t t0, int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return tileUpTo<R, TT - 1>(p, xb, stride, n0, t0, tokens);
  const int64_t rowBytes = p.w.cols * 2;
  dotTile<R, TT>(p, xb, stride, static_cast<const char *>(p.w.data) + n0 * rowBytes, rowBytes, n0,
                 t0);
}

// The prefill GEMM's kernel (simd_gemm.h) for bf16 weights: panels of the
// weights' own bf16 (copied, not converted), token tiles of x rounded to
// bf16, 32 columns a step. 6 rows x 4 tokens, 24 accumulators, 6 weight
// vectors and one x vector of the 32 zmm registers; a step is 6 panel loads,
// 4 token loads and 24 vdpbf16ps (768 multiply-adds). The sums are dotTile's.
struct Bf16DotGemm {
  using Element = uint16_t;
  static constexpr int kRows = 6, kTokens = 4, kColumns = 32;

  template <DType D>
  LLMC_AVX512_BF16 static void convert(const char *row, int64_t k, uint16_t *out) {
    static_assert(D == DType::BF16, "the bf16 dot-product GEMM takes bf16 weights only");
    int64_t i = 0;
    for (; i + kColumns <= k; i += kColumns)
      _mm512_store_si512(out + i * kRows, _mm512_loadu_si512(row + 2 * i));
    if (i < k)
      _mm512_store_si512(out + i * kRows,
                         _mm512_maskz_loadu_epi16(firstElements32(k - i), row + 2 * i));
  }

  template <int R, int TT, bool PackTokens>
  LLMC_AVX512_BF16 static void tile(const MatmulProblem &p, const uint16_t *panel, uint16_t *xs,
                                    int64_t n0, int64_t t0, int64_t kBegin, int64_t kEnd,
                                    float *carry) {
    const int64_t k = p.w.cols, steps = (kEnd - kBegin) / kColumns;
    __m512 acc[R][TT];
    startLanes(acc, carry, kBegin == 0);
    const uint16_t *w = panel;
    const float *x = p.x + t0 * k + kBegin;
    uint16_t *xv = xs;
    for (int64_t s = 0; s < steps;
         ++s, w += kRows * kColumns, x += kColumns, xv += kTokens * kColumns) {
      __m512i wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        wv[r] = _mm512_load_si512(w + r * kColumns);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512i x32 =
            PackTokens ? roundedStep(x + t * k) : _mm512_load_si512(xv + t * kColumns);
        if constexpr (PackTokens)
          _mm512_store_si512(xv + t * kColumns, x32);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = dotStep(acc[r][t], wv[r], x32);
      }
    }
    if (kEnd < k)
      return carryLanes(acc, carry);
    if (const int64_t tail = k - (kBegin + steps * kColumns); tail > 0) {
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512i x32 = roundedTail(x + t * k, tail);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = dotStep(acc[r][t], _mm512_load_si512(w + r * kColumns), x32);
      }
    }
    storeTile<R, TT>(p, acc, n0, t0);
  }
};

// A token tile's step for packTokenTileSteps: 32 columns rounded to bf16.
struct RoundStep {
  LLMC_AVX512_BF16 void operator()(const float *from, uint16_t *to) const {
    _mm512_store_si512(to, roundedStep(from));
  }
};

// From this many tokens on, a problem goes through the GEMM (as the f32 kernels).
constexpr int64_t kGemmTokens = 32;

// x rounded to bf16 for the decode tiles: the calling thread's buffer.
uint16_t *decodeInputs(const MatmulProblem &p, int64_t stride) {
  thread_local std::vector<uint16_t> buffer;
  const size_t needed = static_cast<size_t>(p.tokens * stride);
  if (buffer.size() < needed)
    buffer.resize(needed);
  roundRows(p.x, p.tokens, p.w.cols, stride, buffer.data());
  return buffer.data();
}

} // namespace

void matmulRowsBf16Dot(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens >= kGemmTokens)
    return packedGemm<Bf16DotGemm, DType::BF16>(p, rowBegin, rowEnd, 0, p.tokens);
  const int64_t stride = (p.w.cols + kColumns - 1) / kColumns * kColumns;
  const uint16_t *xb = decodeInputs(p, stride);
  if (p.tokens == 2)
    return streamedRows<2>(p, xb, stride, rowBegin, rowEnd);
  if (p.tokens == 1)
    return streamedRows<1>(p, xb, stride, rowBegin, rowEnd);
  // 3-31 tokens: tiles of 4 rows x 4 tokens over L2-resident blocks of rows.
  constexpr int kRows = 4, kTokens = 4;
  const int64_t block = rowsPerL2Block(p.w.cols * 2, kRows);
  for (int64_t b = rowBegin; b < rowEnd; b += block) {
    const int64_t bEnd = b + block < rowEnd ? b + block : rowEnd;
    for (int64_t t0 = 0; t0 < p.tokens; t0 += kTokens) {
      int64_t n = b;
      for (; n + kRows <= bEnd; n += kRows)
        tileUpTo<kRows, kTokens>(p, xb, stride, n, t0, p.tokens - t0);
      for (; n < bEnd; ++n)
        tileUpTo<1, kTokens>(p, xb, stride, n, t0, p.tokens - t0);
    }
  }
}

void packedGemmBf16Dot(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                       int64_t tokenEnd) {
  packedGemm<Bf16DotGemm, DType::BF16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
}

void packBf16TokenTiles(const float *x, int64_t tokens, int64_t k, int64_t tileBegin,
                        int64_t tileEnd, uint16_t *out) {
  packTokenTileSteps(x, tokens, k, kColumns, tileBegin, tileEnd, out, RoundStep{});
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
