// AVX2 + FMA + F16C int4 linear layer (matmul_q4.h). Every function carries
// the target attribute, so the rest of the binary stays baseline x86-64.
#if defined(__x86_64__)

#include "cpu/matmul_q4.h"
#include "kernels/common/q4_layout.h"

#include <immintrin.h>

#include <vector>

#define LLMC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

LLMC_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

LLMC_AVX2 inline float halfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// Geometry of one problem's packed rows.
struct Rows {
  int64_t words;  // u32 per row
  int64_t groups; // scales / zeros per row
  explicit Rows(const Q4Matrix &w)
      : words(hd::q4WordsPerRow(w.cols)), groups(hd::q4NumGroups(w.cols, w.groupSize)) {}
};

// sum_g scale[g] * zero[g] * xGroupSums[g]: the zero points' share of a dot
// product, subtracted once per (row, token).
LLMC_AVX2 float zeroTerm(const uint16_t *scales, const uint16_t *zeros, const float *sums,
                         int64_t groups) {
  __m256 acc = _mm256_setzero_ps();
  int64_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales + g)));
    __m256 z = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(zeros + g)));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(s, z), _mm256_loadu_ps(sums + g), acc);
  }
  float total = hsum(acc);
  for (; g < groups; ++g)
    total += halfToFloat(scales[g]) * halfToFloat(zeros[g]) * sums[g];
  return total;
}

// Decode: R packed rows against TT tokens, one 64-column block (8 words) at
// a time. Nibble plane i of the block's words (columns 8j + i in lane j)
// meets plane i of the permuted x; the block's two 32-column halves each
// lie in one group, so a per-half scale vector applies the group scales.
template <int R, int TT> LLMC_AVX2 void decodeTile(const Q4Problem &p, int64_t n0) {
  const Rows geo(p.w);
  const int64_t planeStride = p.blocks * 64, g = p.w.groupSize;
  const __m256i low4 = _mm256_set1_epi32(0xf);
  __m256 total[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      total[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < p.blocks; ++b) {
    const bool full = 8 * b + 8 <= geo.words; // else the row's last 4 words
    __m256i v[R];
    for (int r = 0; r < R; ++r) {
      const hd::u32 *words = p.w.qweight + (n0 + r) * geo.words + 8 * b;
      v[r] =
          full ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(words))
               : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(words)));
    }
    __m256 acc[R][TT];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm256_setzero_ps();
#pragma clang loop unroll(full)
    for (int i = 0; i < 8; ++i) {
      __m256 xv[TT];
      for (int t = 0; t < TT; ++t)
        xv[t] = _mm256_loadu_ps(p.xPlanes + t * planeStride + b * 64 + 8 * i);
      for (int r = 0; r < R; ++r) {
        __m256 q = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v[r], 4 * i), low4));
        for (int t = 0; t < TT; ++t)
          acc[r][t] = _mm256_fmadd_ps(q, xv[t], acc[r][t]);
      }
    }
    // A half past the last group only holds zero planes; any group index does.
    const int64_t g0 = (64 * b) / g;
    const int64_t g1 = (64 * b + 32) / g < geo.groups ? (64 * b + 32) / g : g0;
    for (int r = 0; r < R; ++r) {
      const uint16_t *scales = p.w.scales + (n0 + r) * geo.groups;
      __m256 s = _mm256_set_m128(_mm_set1_ps(halfToFloat(scales[g1])),
                                 _mm_set1_ps(halfToFloat(scales[g0])));
      for (int t = 0; t < TT; ++t)
        total[r][t] = _mm256_fmadd_ps(s, acc[r][t], total[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t n = n0 + r;
    const uint16_t *scales = p.w.scales + n * geo.groups, *zeros = p.w.zeros + n * geo.groups;
    for (int t = 0; t < TT; ++t) {
      float zero = zeroTerm(scales, zeros, p.xGroupSums + t * geo.groups, geo.groups);
      storeQ4Output(p, t, n, hsum(total[r][t]) - zero);
    }
  }
}

template <int TT> LLMC_AVX2 void decodeRows(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  constexpr int R = TT == 1 ? 4 : 2; // R * TT * 2 accumulators + R packed vectors fit 16 ymm
  int64_t n = rowBegin;
  for (; n + R <= rowEnd; n += R)
    decodeTile<R, TT>(p, n);
  for (; n < rowEnd; ++n)
    decodeTile<1, TT>(p, n);
}

// Prefill: rows dequantized to f32 (scale and zero applied), padded with
// zeros to a multiple of 8 columns.
constexpr int64_t kBlockRows = 16;

LLMC_AVX2 void dequantizeRows(const Q4Matrix &w, int64_t n0, int64_t count, int64_t stride,
                              float *out) {
  const Rows geo(w);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i low4 = _mm256_set1_epi32(0xf);
  for (int64_t r = 0; r < count; ++r) {
    const hd::u32 *words = w.qweight + (n0 + r) * geo.words;
    const uint16_t *scales = w.scales + (n0 + r) * geo.groups;
    const uint16_t *zeros = w.zeros + (n0 + r) * geo.groups;
    float *row = out + r * stride;
    for (int64_t j = 0; j * 8 < w.cols; ++j) {
      const int64_t group = j * 8 / w.groupSize;
      const float s = halfToFloat(scales[group]), z = halfToFloat(zeros[group]);
      __m256i q = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(words[j])), shifts), low4);
      __m256 value =
          _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(z)), _mm256_set1_ps(s));
      _mm256_storeu_ps(row + 8 * j, value);
    }
    for (int64_t c = w.cols; c < stride; ++c) // pad nibbles past K: exact zeros
      row[c] = 0.0f;
  }
}

// Lanes [0, n) of a mask, for the last x vector of a row.
LLMC_AVX2 inline __m256i tailMask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// y[t0 .. t0+TT, n0 .. n0+R] from R dequantized rows: R * TT accumulators.
template <int R, int TT>
LLMC_AVX2 void prefillTile(const Q4Problem &p, const float *rows, int64_t stride, int64_t n0,
                           int64_t t0) {
  const int64_t k = p.w.cols;
  const float *x = p.x + t0 * k;
  __m256 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm256_setzero_ps();
  const __m256i mask = tailMask(k % 8);
  for (int64_t i = 0; i < k; i += 8) {
    const bool tail = i + 8 > k;
    __m256 xv[TT];
    for (int t = 0; t < TT; ++t)
      xv[t] = tail ? _mm256_maskload_ps(x + t * k + i, mask) : _mm256_loadu_ps(x + t * k + i);
    for (int r = 0; r < R; ++r) {
      __m256 wv = _mm256_loadu_ps(rows + r * stride + i);
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      storeQ4Output(p, t0 + t, n0 + r, hsum(acc[r][t]));
}

template <int R, int TT>
LLMC_AVX2 void prefillTileUpTo(const Q4Problem &p, const float *rows, int64_t stride, int64_t n0,
                               int64_t t0, int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return prefillTileUpTo<R, TT - 1>(p, rows, stride, n0, t0, tokens);
  prefillTile<R, TT>(p, rows, stride, n0, t0);
}

LLMC_AVX2 void prefillRows(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t stride = (p.w.cols + 7) / 8 * 8;
  thread_local std::vector<float> block;
  block.resize(kBlockRows * stride);
  for (int64_t b = rowBegin; b < rowEnd; b += kBlockRows) {
    const int64_t count = b + kBlockRows < rowEnd ? kBlockRows : rowEnd - b;
    dequantizeRows(p.w, b, count, stride, block.data());
    for (int64_t t0 = 0; t0 < p.tokens; t0 += 4) {
      int64_t r = 0;
      for (; r + 2 <= count; r += 2)
        prefillTileUpTo<2, 4>(p, block.data() + r * stride, stride, b + r, t0, p.tokens - t0);
      for (; r < count; ++r)
        prefillTileUpTo<1, 4>(p, block.data() + r * stride, stride, b + r, t0, p.tokens - t0);
    }
  }
}

} // namespace

LLMC_AVX2 void matmulQ4RowsAvx2(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.xPlanes == nullptr)
    return prefillRows(p, rowBegin, rowEnd);
  if (p.tokens == 1)
    return decodeRows<1>(p, rowBegin, rowEnd);
  decodeRows<2>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
