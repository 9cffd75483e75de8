// AVX2 + FMA + F16C kernels (8 f32 lanes). Every function carries the target
// attribute, so the rest of the binary stays baseline x86-64.
#if defined(__x86_64__)

#include "cpu/simd.h"
#include "cpu/simd_gemm.h"

#include <immintrin.h>

#include <algorithm>

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

LLMC_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// y[t0 .. t0+TT, n0 .. n0+R]: R weight rows against TT tokens, R*TT accumulators.
template <DType D, int R, int TT>
LLMC_AVX2 void tile(const MatmulProblem &p, int64_t n0, int64_t t0) {
  const int64_t k = p.w.cols;
  const int64_t rowBytes = k * static_cast<int64_t>(dtypeSize(D));
  const char *rows = static_cast<const char *>(p.w.data) + n0 * rowBytes;
  const float *x = p.x + t0 * k;
  __m256 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 xv[TT];
    for (int t = 0; t < TT; ++t)
      xv[t] = _mm256_loadu_ps(x + t * k + i);
    for (int r = 0; r < R; ++r) {
      __m256 wv = load8<D>(rows + r * rowBytes, i);
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const void *row = rows + r * rowBytes;
    for (int t = 0; t < TT; ++t) {
      float sum = hsum(acc[r][t]);
      for (int64_t j = i; j < k; ++j) // tail of fewer than 8
        sum += weightAt(row, D, j) * x[t * k + j];
      storeOutput(p, t0 + t, n0 + r, sum);
    }
  }
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

// Transposes 8 vectors in place: v[i][j] becomes v[j][i].
LLMC_AVX2 inline void transpose8(__m256 (&v)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// The packed GEMM's AVX2 kernel (simd_gemm.h): 6 tokens x 16 rows, 12
// accumulators; a step is 2 panel loads, 6 broadcasts and 12 FMAs.
struct Avx2Gemm {
  static constexpr int kMr = 6, kNr = 16;

  // Eight rows at a time: 8 x 8 weights converted, transposed, stored.
  template <DType D>
  LLMC_AVX2 static void pack(const char *row0, int64_t rowBytes, int64_t rows, int64_t k0,
                             int64_t depth, float *panel) {
    for (int64_t half = 0; half < kNr; half += 8) {
      const int64_t count = std::min<int64_t>(8, std::max<int64_t>(0, rows - half));
      const char *base = row0 + half * rowBytes;
      int64_t k = 0;
      for (; k + 8 <= depth; k += 8) {
        __m256 v[8];
        for (int r = 0; r < 8; ++r)
          v[r] = r < count ? load8<D>(base + r * rowBytes, k0 + k) : _mm256_setzero_ps();
        transpose8(v);
        for (int i = 0; i < 8; ++i)
          _mm256_store_ps(panel + (k + i) * kNr + half, v[i]);
      }
      for (; k < depth; ++k)
        for (int64_t r = 0; r < 8; ++r)
          panel[k * kNr + half + r] = r < count ? weightAt(base + r * rowBytes, D, k0 + k) : 0.0f;
    }
  }

  template <int MR>
  LLMC_AVX2 static void micro(const float *x, int64_t ldx, const float *panel, int64_t depth,
                              float *c, int64_t ldc, bool load) {
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int t = 0; t < MR; ++t)
      for (int h = 0; h < 2; ++h)
        acc[t][h] = load ? _mm256_loadu_ps(c + t * ldc + 8 * h) : _mm256_setzero_ps();
    for (int64_t k = 0; k < depth; ++k) {
      const __m256 b0 = _mm256_load_ps(panel + k * kNr), b1 = _mm256_load_ps(panel + k * kNr + 8);
#pragma GCC unroll 6
      for (int t = 0; t < MR; ++t) {
        const __m256 a = _mm256_broadcast_ss(x + t * ldx + k);
        acc[t][0] = _mm256_fmadd_ps(a, b0, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(a, b1, acc[t][1]);
      }
    }
#pragma GCC unroll 6
    for (int t = 0; t < MR; ++t)
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_ps(c + t * ldc + 8 * h, acc[t][h]);
  }
};

// matmul splits a problem over tokens as well as rows from this many tokens.
// (Were the packed GEMM the default, this would be its threshold too: packing
// a block costs about what 16-32 tokens of FMAs on it do.)
constexpr int64_t kAvx2SplitTokens = 32;

template <DType D>
void blockOf(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
             int64_t tokenEnd) {
  packedGemm<Avx2Gemm, D>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
}

// Decode (1-2 tokens): four weight rows stream at once. Prefill: each weight
// vector loaded serves four tokens. Every output is the same sum in the same
// order whatever the token count (tile), so a prompt prefilled whole or in
// chunks, or a sequence decoded alone or in a batch, gets the same bits.
template <DType D> LLMC_AVX2 void rows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens >= 3)
    tiledRows<D, 2, 4>(p, rowBegin, rowEnd);
  else
    tiledRows<D, 4, 2>(p, rowBegin, rowEnd);
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

void matmulBlockAvx2(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                     int64_t tokenEnd) {
  // The tiles compute every token; a token range is a problem of its own.
  MatmulProblem part = p;
  part.x = p.x + tokenBegin * p.w.cols;
  part.tokens = tokenEnd - tokenBegin;
  part.y = p.y + tokenBegin * p.w.rows;
  matmulRowsAvx2(part, rowBegin, rowEnd);
}

void packedGemmAvx2(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                    int64_t tokenEnd) {
  switch (p.w.dtype) {
  case DType::F32:
    return blockOf<DType::F32>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::F16:
    return blockOf<DType::F16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
  case DType::BF16:
    return blockOf<DType::BF16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
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

const IsaOps kAvx2Ops = {matmulRowsAvx2,   matmulBlockAvx2, packedGemmAvx2,
                         kAvx2SplitTokens, Avx2Gemm::kMr,   kGemmRowBlock,
                         dotAvx2,          axpyAvx2,        scaleAvx2};

} // namespace llmc::cpu::detail

#endif // __x86_64__
