// AVX-512 kernels (16 f32 lanes; F, BW and VL for 16-bit masked loads).
// Every function carries the target attribute, so the rest of the binary
// stays baseline x86-64.
#if defined(__x86_64__)

#include "cpu/simd.h"

#include <immintrin.h>

#define LLMC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

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

// y[t0 .. t0+TT, n0 .. n0+R]: R weight rows against TT tokens, R*TT accumulators.
template <DType D, int R, int TT>
LLMC_AVX512 void tile(const MatmulProblem &p, int64_t n0, int64_t t0) {
  const int64_t k = p.w.cols;
  const int64_t rowBytes = k * static_cast<int64_t>(dtypeSize(D));
  const char *rows = static_cast<const char *>(p.w.data) + n0 * rowBytes;
  const float *x = p.x + t0 * k;
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    tileStep<D, R, TT>(rows, rowBytes, x, k, i, 0xffff, acc);
  if (i < k)
    tileStep<D, R, TT>(rows, rowBytes, x, k, i, static_cast<__mmask16>((1u << (k - i)) - 1), acc);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      storeOutput(p, t0 + t, n0 + r, _mm512_reduce_add_ps(acc[r][t]));
}

// A tile of R rows by min(tokens, TT) tokens.
template <DType D, int R, int TT>
LLMC_AVX512 void tileUpTo(const MatmulProblem &p, int64_t n0, int64_t t0, int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return tileUpTo<D, R, TT - 1>(p, n0, t0, tokens);
  tile<D, R, TT>(p, n0, t0);
}

// Rows [rowBegin, rowEnd) in tiles of 4 rows x 4 tokens: 16 accumulators,
// 4 inputs and one weight vector of the 32 zmm registers. Decode streams four
// weight rows at once; prefill uses each weight vector loaded for four tokens.
template <DType D> LLMC_AVX512 void rows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
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
    return rows<DType::BF16>(p, rowBegin, rowEnd);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

// The GEMV tiles compute every token; a token range is a problem of its own.
void matmulBlockAvx512(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                       int64_t tokenEnd) {
  MatmulProblem part = p;
  part.x = p.x + tokenBegin * p.w.cols;
  part.tokens = tokenEnd - tokenBegin;
  part.y = p.y + tokenBegin * p.w.rows;
  matmulRowsAvx512(part, rowBegin, rowEnd);
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

const IsaOps kAvx512Ops = {matmulRowsAvx512, matmulBlockAvx512, nullptr,    0, 1, 1,
                           dotAvx512,        axpyAvx512,        scaleAvx512};

} // namespace llmc::cpu::detail

#endif // __x86_64__
