// AVX-512 kernels (16 f32 lanes; F, BW and VL for 16-bit masked loads).
// Every function carries the target attribute, so the rest of the binary
// stays baseline x86-64.
#if defined(__x86_64__)

#include "cpu/simd_avx512.h"
#include "cpu/isa.h"
#include "cpu/simd.h"
#include "cpu/simd_gemm.h"

#include <immintrin.h>

namespace llmc::cpu::detail {
namespace {

// Loads the weights of a row at elements [k, k+16) as f32; lanes outside
// `mask` read nothing and are zero.
template <DType D> LLMC_AVX512 inline __m512 load16(const char *row, int64_t k, __mmask16 mask);

template <>
LLMC_AVX512 inline __m512 load16<DType::F32>(const char *row, int64_t k, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float *>(row) + k);
}

template <>
LLMC_AVX512 inline __m512 load16<DType::BF16>(const char *row, int64_t k, __mmask16 mask) {
  __m256i bits = _mm256_maskz_loadu_epi16(mask, row + 2 * k);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

template <>
LLMC_AVX512 inline __m512 load16<DType::F16>(const char *row, int64_t k, __mmask16 mask) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, row + 2 * k));
}

// One step of a tile over elements [i, i+16) under `mask`.
template <DType D, int R, int TT>
LLMC_AVX512 inline void tileStep(const char *rows, int64_t rowBytes, const float *x, int64_t k,
                                 int64_t i, __mmask16 mask, __m512 (&acc)[R][TT]) {
  __m512 xv[TT];
  for (int t = 0; t < TT; ++t)
    xv[t] = _mm512_maskz_loadu_ps(mask, x + t * k + i);
  for (int r = 0; r < R; ++r) {
    __m512 wv = load16<D>(rows + r * rowBytes, i, mask);
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
  }
}

// y[t0 .. t0+TT, n0 .. n0+R]: the R weight rows at rows (rowBytes apart)
// against TT tokens, R*TT accumulators. Every tile size, the decode streams
// and the prefill GEMM sum an output in one order (simd_gemm.h, "Numerics"):
// 16 lanes of fma over k, the K % 16 tail as a masked step, reduce_add.
// Row r of the tile is output row n0 + r * rowStep (the decode streams take
// rows far apart). Ahead > 0: each row's stream is prefetched Ahead bytes in
// front of its loads, one line per 64 bytes.
template <DType D, int R, int TT, int Ahead = 0>
LLMC_AVX512 void dotTile(const MatmulProblem &p, const char *rows, int64_t rowBytes, int64_t n0,
                         int64_t t0, int64_t rowStep = 1) {
  const int64_t k = p.w.cols;
  const float *x = p.x + t0 * k;
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    if constexpr (Ahead > 0)
      if ((i * dtypeSize(D)) % 64 == 0)
        for (int r = 0; r < R; ++r)
          _mm_prefetch(rows + r * rowBytes + i * dtypeSize(D) + Ahead, _MM_HINT_T0);
    tileStep<D, R, TT>(rows, rowBytes, x, k, i, 0xffff, acc);
  }
  if (i < k)
    tileStep<D, R, TT>(rows, rowBytes, x, k, i, static_cast<__mmask16>((1u << (k - i)) - 1), acc);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      storeOutput(p, t0 + t, n0 + r * rowStep, _mm512_reduce_add_ps(acc[r][t]));
}

// The tile on the problem's own weight rows n0 .. n0+R.
template <DType D, int R, int TT>
LLMC_AVX512 void tile(const MatmulProblem &p, int64_t n0, int64_t t0) {
  const int64_t rowBytes = p.w.cols * static_cast<int64_t>(dtypeSize(D));
  dotTile<D, R, TT>(p, static_cast<const char *>(p.w.data) + n0 * rowBytes, rowBytes, n0, t0);
}

// Decode (1 or TT = 2 tokens): rows [rowBegin, rowEnd) in 4 equal runs, tile
// j taking row j of each run, as on AVX2 (simd_avx2.cpp streamedRows): each
// run is one sequential stream. Tiles of 4 adjacent rows read 4 streams of
// one row each (1.5 KiB of f16 at K = 768), too short for the hardware
// prefetcher: 110M f16 decode read 8.8 GB/s on this Xeon where f32 (3 KiB
// rows) read the probe's 14 (docs/perf.md, "AVX-512 prefill GEMM"). Each
// stream is prefetched 256 B ahead, f32 too: 1-3% more GB/s over a 1B
// layer's f32 matrices on a Zen 4, trials paired against no prefetch
// (docs/perf.md, "f32 decode streams prefetched"); 2 or 8 streams, and 512
// B or 1 KiB ahead, read less.
template <DType D, int TT>
LLMC_AVX512 void streamedRows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  constexpr int kStreams = 4, kAhead = 256;
  const int64_t rowBytes = p.w.cols * static_cast<int64_t>(dtypeSize(D));
  const char *weights = static_cast<const char *>(p.w.data);
  const int64_t run = (rowEnd - rowBegin) / kStreams;
  for (int64_t j = 0; j < run; ++j)
    dotTile<D, kStreams, TT, kAhead>(p, weights + (rowBegin + j) * rowBytes, run * rowBytes,
                                     rowBegin + j, 0, run);
  for (int64_t n = rowBegin + kStreams * run; n < rowEnd; ++n)
    dotTile<D, 1, TT>(p, weights + n * rowBytes, rowBytes, n, 0);
}

// A tile of R rows by min(tokens, TT) tokens.
template <DType D, int R, int TT>
LLMC_AVX512 void tileUpTo(const MatmulProblem &p, int64_t n0, int64_t t0, int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return tileUpTo<D, R, TT - 1>(p, n0, t0, tokens);
  tile<D, R, TT>(p, n0, t0);
}

// The prefill GEMM's AVX-512 kernel (simd_gemm.h): 6 rows x 4 tokens, 24
// accumulators, 6 weight vectors and one x vector of the 32 zmm registers; a
// k-step is 6 weight loads from the panel, 4 x loads from the packed token
// tile and 24 FMAs. The sums are tile's: 16 lanes, the K % 16 tail as one
// more masked step (its panel columns are zeros past K, as tile's masked
// loads give), then _mm512_reduce_add_ps's tree (reduceAdd16).
struct Avx512Gemm {
  using Element = float; // panels and token tiles in f32
  static constexpr int kRows = 6, kTokens = 4, kColumns = 16;

  template <DType D> LLMC_AVX512 static void convert(const char *row, int64_t k, float *out) {
    int64_t i = 0;
    for (; i + 16 <= k; i += 16)
      _mm512_store_ps(out + i * kRows, load16<D>(row, i, 0xffff));
    if (i < k)
      _mm512_store_ps(out + i * kRows,
                      load16<D>(row, i, static_cast<__mmask16>((1u << (k - i)) - 1)));
  }

  template <int R, int TT, bool PackTokens>
  LLMC_AVX512 static void tile(const MatmulProblem &p, const float *panel, float *xs, int64_t n0,
                               int64_t t0, int64_t kBegin, int64_t kEnd, float *carry) {
    const int64_t k = p.w.cols, steps = (kEnd - kBegin) / 16;
    __m512 acc[R][TT];
    startLanes(acc, carry, kBegin == 0);
    const float *w = panel, *x = p.x + t0 * k + kBegin;
    float *xv = xs;
    for (int64_t s = 0; s < steps; ++s, w += kRows * 16, x += 16, xv += kTokens * 16) {
      __m512 wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        wv[r] = _mm512_load_ps(w + r * 16);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512 x16 = PackTokens ? _mm512_loadu_ps(x + t * k) : _mm512_load_ps(xv + t * 16);
        if constexpr (PackTokens)
          _mm512_store_ps(xv + t * 16, x16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm512_fmadd_ps(wv[r], x16, acc[r][t]);
      }
    }
    if (kEnd < k)
      return carryLanes(acc, carry);
    if (const int64_t tail = k - (kBegin + steps * 16); tail > 0) {
      const __mmask16 mask = static_cast<__mmask16>((1u << tail) - 1);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512 x16 = _mm512_maskz_loadu_ps(mask, x + t * k);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm512_fmadd_ps(_mm512_load_ps(w + r * 16), x16, acc[r][t]);
      }
    }
    storeTile<R, TT>(p, acc, n0, t0);
  }
};

// From this many tokens on, a problem goes through the prefill GEMM (as on
// AVX2: converting a block costs about what a few tokens of FMAs on it do).
constexpr int64_t kAvx512GemmTokens = 32;

// Weight rows per item when matmul splits a prefill: whole 6-row tiles.
constexpr int64_t kAvx512GemmRowBlock = 120;

// Decode (1-2 tokens): four runs of weight rows stream at once. Up to 31
// tokens: tiles of 4 rows x 4 tokens (16 accumulators, 4 inputs and one
// weight vector of the 32 zmm registers), each weight vector loaded serving
// four tokens. Prefill: the GEMM. Every output is the same sum whatever the
// token count and the path (see dotTile).
template <DType D> LLMC_AVX512 void rows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens >= kAvx512GemmTokens)
    return packedGemm<Avx512Gemm, D>(p, rowBegin, rowEnd, 0, p.tokens);
  if (p.tokens == 2)
    return streamedRows<D, 2>(p, rowBegin, rowEnd);
  if (p.tokens == 1)
    return streamedRows<D, 1>(p, rowBegin, rowEnd);
  constexpr int kRows = 4, kTokens = 4;
  const int64_t block = rowsPerL2Block(p.w.cols * dtypeSize(D), kRows);
  for (int64_t b = rowBegin; b < rowEnd; b += block) {
    const int64_t bEnd = b + block < rowEnd ? b + block : rowEnd;
    for (int64_t t0 = 0; t0 < p.tokens; t0 += kTokens) {
      int64_t n = b;
      for (; n + kRows <= bEnd; n += kRows)
        tileUpTo<D, kRows, kTokens>(p, n, t0, p.tokens - t0);
      for (; n < bEnd; ++n)
        tileUpTo<D, 1, kTokens>(p, n, t0, p.tokens - t0);
    }
  }
}

LLMC_AVX512 void matmulRowsAvx512(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  switch (p.w.dtype) {
  case DType::F32:
    return rows<DType::F32>(p, rowBegin, rowEnd);
  case DType::F16:
    return rows<DType::F16>(p, rowBegin, rowEnd);
  case DType::BF16:
    return x86Bf16Active() ? matmulRowsBf16Dot(p, rowBegin, rowEnd)
                           : rows<DType::BF16>(p, rowBegin, rowEnd);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

void packedGemmAvx512(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                      int64_t tokenEnd) {
  switch (p.w.dtype) {
  case DType::F32:
    return packedGemm<Avx512Gemm, DType::F32>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::F16:
    return packedGemm<Avx512Gemm, DType::F16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::BF16:
    return x86Bf16Active()
               ? packedGemmBf16Dot(p, rowBegin, rowEnd, tokenBegin, tokenEnd)
               : packedGemm<Avx512Gemm, DType::BF16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

LLMC_AVX512 inline __mmask16 tailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << remaining) - 1);
}

LLMC_AVX512 float dotAvx512(const float *a, const float *b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    __mmask16 m = tailMask(n - i);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

LLMC_AVX512 void axpyAvx512(float a, const float *x, float *y, int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tailMask(n - i);
    __m512 r =
        _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

LLMC_AVX512 void scaleAvx512(float a, float *y, int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tailMask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(av, _mm512_maskz_loadu_ps(m, y + i)));
  }
}

} // namespace

const IsaOps kAvx512Ops = {matmulRowsAvx512,     packedGemmAvx512,    packedGemmAvx512,
                           kAvx512GemmTokens,    Avx512Gemm::kTokens, kAvx512GemmRowBlock,
                           Avx512Gemm::kColumns, dotAvx512,           axpyAvx512,
                           scaleAvx512};

} // namespace llmc::cpu::detail

#endif // __x86_64__
