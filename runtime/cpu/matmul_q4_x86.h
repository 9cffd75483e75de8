// The x86 int4 kernel's building blocks (matmul_q4_avx2.cpp; an AVX-512
// kernel would share them): row geometry, the per-pair group scales, the
// zero-point term and the row x token tiling. Every function carries the
// AVX2 target attribute, so the rest of the binary stays baseline x86-64.
#pragma once
#if defined(__x86_64__)

#include "cpu/matmul_q4.h"
#include "cpu/lanes_avx2.h"
#include "kernels/common/q4_layout.h"

#include <immintrin.h>

#include <cstring>

#define LLMC_Q4_AVX2 __attribute__((target("avx2,fma,f16c")))
// Small loops over the tile's rows and tokens (compile-time bounds) are
// unrolled by both GCC and clang, so the accumulators stay in registers.
#define LLMC_Q4_UNROLL _Pragma("GCC unroll 16")

namespace llmc::cpu::detail::q4x86 {

// Rows of a 16-row block share a tile loop; 16 rows of K = 4096 are 32 KiB.
constexpr int64_t kBlockRows = 16;
// Tokens per prefill panel: 64 tokens of K = 768 are 48 KiB of Q8 x.
constexpr int64_t kTokenPanel = 64;

// hsum of each of v[0..7] into out[0..7], each with the bits of hsum(v[i])
// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)), in 23 instructions
// instead of 8 x 6: the halves of two vectors at a time, then a 4 x 4
// transpose in each 128-bit lane.
LLMC_Q4_AVX2 inline void hsum8(const __m256 *v, float *out) {
  __m256 s[4]; // s[j]: the 4 half sums of v[2j] (low lane) and v[2j + 1] (high)
  LLMC_Q4_UNROLL
  for (int j = 0; j < 4; ++j)
    s[j] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * j], v[2 * j + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * j], v[2 * j + 1], 0x31));
  const __m256 t0 = _mm256_unpacklo_ps(s[0], s[1]), t1 = _mm256_unpackhi_ps(s[0], s[1]);
  const __m256 t2 = _mm256_unpacklo_ps(s[2], s[3]), t3 = _mm256_unpackhi_ps(s[2], s[3]);
  // Lane i of r[c]: half sum c of v[2i] (low lane) or v[2i - 7] (high).
  const __m256 r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 r2 = _mm256_shuffle_ps(t1, t3, 0x44), r3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 sums = _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3));
  _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

LLMC_Q4_AVX2 inline float halfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// Geometry of one problem's packed rows.
struct Rows {
  int64_t words;     // u32 per row: 4 per Q8 block
  int64_t groups;    // scales / zeros per row
  int64_t fullPairs; // pairs whose two blocks both lie in the row
  explicit Rows(const Q4Matrix &w)
      : words(hd::q4WordsPerRow(w.cols)), groups(hd::q4NumGroups(w.cols, w.groupSize)),
        fullPairs(words / 8) {}
};

// Which groups the two blocks of a pair (columns 64p .. 64p + 63) read.
enum class Groups {
  PerBlock,   // G = 32: blocks 2p and 2p + 1 are groups 2p and 2p + 1
  PerPair,    // G = 64: both in group p
  TwoPairs,   // G = 128: both in group p / 2
  PerChunk,   // 256 | G: the 4 pairs of a chunk (256 columns) in one group
  PairsOther, // other multiples of 64 (192, 320, ...): both in group 64p / G
  Mixed,      // other multiples of 32 (96, 160, ...): either
};

// Whether both blocks of a pair always share a group.
constexpr bool pairInOneGroup(Groups g) { return g != Groups::PerBlock && g != Groups::Mixed; }

// The groups of blocks 2p and 2p + 1 (columns 64p and 64p + 32), kept by
// counting rather than dividing per pair.
struct PairGroups {
  int64_t groupSize, first = 0, second = 0;
  explicit PairGroups(int64_t g) : groupSize(g) {}
  void advanceTo(int64_t pair) {
    while ((first + 1) * groupSize <= 64 * pair)
      ++first;
    while ((second + 1) * groupSize <= 64 * pair + 32)
      ++second;
  }
};

// The group scales of a pair of blocks of a row, in the lanes of the AVX2
// dot products: block 2p's in lanes 0..3, block 2p + 1's in 4..7. A block
// past the row's end (full false) multiplies zeros: any finite scale does.
template <Groups G>
LLMC_Q4_AVX2 inline __m256 pairScales(const uint16_t *scales, const PairGroups &groups,
                                      bool full) {
  if constexpr (G == Groups::PerBlock) {
    if (!full)
      return _mm256_set1_ps(halfToFloat(scales[groups.first]));
    uint32_t both; // groups 2p and 2p + 1
    std::memcpy(&both, scales + groups.first, sizeof(both));
    const __m128 two = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(both)));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two),
                                    _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  } else if constexpr (pairInOneGroup(G)) {
    return _mm256_set1_ps(halfToFloat(scales[groups.first]));
  } else {
    const int64_t second = full ? groups.second : groups.first;
    return _mm256_set_m128(_mm_set1_ps(halfToFloat(scales[second])),
                           _mm_set1_ps(halfToFloat(scales[groups.first])));
  }
}

// The group scales of chunk c (pairs 4c .. 4c + 3, all in the row) of a
// row in the lane order of Q8Activations::chunkScales: pair 4c + i's even
// block in lane i, its odd block in lane 4 + i. Reads only groups the chunk
// covers. Not for Groups::Mixed.
template <Groups G>
LLMC_Q4_AVX2 inline __m256 chunkScales(const uint16_t *scales, int64_t c, int64_t groupSize) {
  if constexpr (G == Groups::PerBlock) { // groups 8c .. 8c + 7, deinterleaved
    const __m256 eight =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales + 8 * c)));
    return _mm256_permutevar8x32_ps(eight, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  } else if constexpr (G == Groups::PerPair) { // groups 4c .. 4c + 3, twice
    const __m128 four =
        _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(scales + 4 * c)));
    return _mm256_set_m128(four, four);
  } else if constexpr (G == Groups::TwoPairs) { // groups 2c, 2c + 1
    uint32_t both;
    std::memcpy(&both, scales + 2 * c, sizeof(both));
    const __m128 two = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(both)));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two),
                                    _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1));
  } else if constexpr (G == Groups::PerChunk) {
    return _mm256_set1_ps(halfToFloat(scales[c * 256 / groupSize]));
  } else {
    static_assert(G == Groups::PairsOther, "no chunk scales for Groups::Mixed");
    const int64_t q = kQ8ChunkPairs * c;
    const __m128 four = _mm_setr_ps(
        halfToFloat(scales[64 * q / groupSize]), halfToFloat(scales[64 * (q + 1) / groupSize]),
        halfToFloat(scales[64 * (q + 2) / groupSize]),
        halfToFloat(scales[64 * (q + 3) / groupSize]));
    return _mm256_set_m128(four, four);
  }
}

// Stores y for R rows x TT tokens from their 8-lane accumulators: the
// lanes' sums (hsum8, 8 outputs at a time) minus the zero-point term
// sum_g scale[g] * zero[g] * groupSums[t, g] (8 lanes over the groups, then
// the last groups one at a time). Row r
// of the tile is row n0 + r * rowStep of y.
template <int R, int TT>
LLMC_Q4_AVX2 void storeTileLanes(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t t0,
                                 const __m256 (&acc)[R][TT], int64_t rowStep = 1) {
  constexpr int kOut = R * TT, kPadded = (2 * kOut + 7) / 8 * 8;
  __m256 v[kPadded]; // the dots' lanes, then the zero-point terms'
  LLMC_Q4_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_Q4_UNROLL
    for (int t = 0; t < TT; ++t)
      v[r * TT + t] = acc[r][t];
  const float *sums = p.xq.groupSums + t0 * geo.groups;
  const int64_t vectorGroups = geo.groups / 8 * 8;
  LLMC_Q4_UNROLL
  for (int r = 0; r < R; ++r) {
    const uint16_t *scales = p.w.scales + (n0 + r * rowStep) * geo.groups;
    const uint16_t *zeros = p.w.zeros + (n0 + r * rowStep) * geo.groups;
    __m256 *z = v + kOut + r * TT;
    LLMC_Q4_UNROLL
    for (int t = 0; t < TT; ++t)
      z[t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < vectorGroups; g += 8) {
      const __m256 s =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales + g)));
      const __m256 zr =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(zeros + g)));
      const __m256 sz = _mm256_mul_ps(s, zr);
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        z[t] = _mm256_fmadd_ps(sz, _mm256_loadu_ps(sums + t * geo.groups + g), z[t]);
    }
  }
  for (int i = 2 * kOut; i < kPadded; ++i)
    v[i] = _mm256_setzero_ps();
  float h[kPadded];
  for (int i = 0; i < kPadded; i += 8)
    hsum8(v + i, h + i);
  LLMC_Q4_UNROLL
  for (int r = 0; r < R; ++r) {
    const uint16_t *scales = p.w.scales + (n0 + r * rowStep) * geo.groups;
    const uint16_t *zeros = p.w.zeros + (n0 + r * rowStep) * geo.groups;
    float *zeroes = h + kOut + r * TT;
    // The last groups one at a time, each a fused multiply-add whatever the
    // compiler's contraction rule (the AVX-512 panel kernel has these bits).
    for (int64_t g = vectorGroups; g < geo.groups; ++g) {
      const __m128 sz = _mm_set_ss(halfToFloat(scales[g]) * halfToFloat(zeros[g]));
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        zeroes[t] = _mm_cvtss_f32(
            _mm_fmadd_ss(sz, _mm_set_ss(sums[t * geo.groups + g]), _mm_set_ss(zeroes[t])));
    }
    LLMC_Q4_UNROLL
    for (int t = 0; t < TT; ++t)
      storeQ4Output(p, t0 + t, n0 + r * rowStep, h[r * TT + t] - zeroes[t]);
  }
}

// One tile of R rows x min(tokens, TT) tokens from token t0.
template <template <int, int, Groups> class Tile, int R, Groups G, int TT>
LLMC_Q4_AVX2 inline void runTokens(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t t0,
                                   int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return runTokens<Tile, R, G, TT - 1>(p, geo, n0, t0, tokens);
  Tile<R, TT, G>::run(p, geo, n0, t0);
}

// Rows [rowBegin, rowEnd) of y with Tile<R, TT, G>::run(p, geo, n0, t0):
// 16-row blocks, and in each, tiles of DecodeR rows for one token, or of
// PrefillR rows x up to PrefillT tokens, so that a block's packed rows and
// a tile's x stay in L1 while the tiles walk over every token.
template <template <int, int, Groups> class Tile, Groups G, int DecodeR, int PrefillR,
          int PrefillT>
LLMC_Q4_AVX2 void tiledRowsFor(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const Rows geo(p.w);
  if (p.tokens == 1) {
    for (int64_t b = rowBegin; b < rowEnd; b += kBlockRows) {
      const int64_t end = b + kBlockRows < rowEnd ? b + kBlockRows : rowEnd;
      int64_t n = b;
      for (; n + DecodeR <= end; n += DecodeR)
        Tile<DecodeR, 1, G>::run(p, geo, n, 0);
      for (; n < end; ++n)
        Tile<1, 1, G>::run(p, geo, n, 0);
    }
    return;
  }
  // Panels of kTokenPanel tokens outermost: a panel's Q8 x stays in L2
  // while the rows stream past it.
  for (int64_t panel = 0; panel < p.tokens; panel += kTokenPanel) {
    const int64_t panelEnd = panel + kTokenPanel < p.tokens ? panel + kTokenPanel : p.tokens;
    for (int64_t b = rowBegin; b < rowEnd; b += kBlockRows) {
      const int64_t end = b + kBlockRows < rowEnd ? b + kBlockRows : rowEnd;
      for (int64_t t0 = panel; t0 < panelEnd; t0 += PrefillT) {
        const int64_t left = panelEnd - t0;
        int64_t n = b;
        for (; n + PrefillR <= end; n += PrefillR)
          runTokens<Tile, PrefillR, G, PrefillT>(p, geo, n, t0, left);
        for (; n < end; ++n)
          runTokens<Tile, 1, G, PrefillT>(p, geo, n, t0, left);
      }
    }
  }
}

// tiledRowsFor with the group pattern of p.w.groupSize.
template <template <int, int, Groups> class Tile, int DecodeR, int PrefillR, int PrefillT>
LLMC_Q4_AVX2 void tiledRows(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t g = p.w.groupSize;
  if (g == 32)
    return tiledRowsFor<Tile, Groups::PerBlock, DecodeR, PrefillR, PrefillT>(p, rowBegin, rowEnd);
  if (g == 64)
    return tiledRowsFor<Tile, Groups::PerPair, DecodeR, PrefillR, PrefillT>(p, rowBegin, rowEnd);
  if (g == 128)
    return tiledRowsFor<Tile, Groups::TwoPairs, DecodeR, PrefillR, PrefillT>(p, rowBegin, rowEnd);
  if (g % 256 == 0)
    return tiledRowsFor<Tile, Groups::PerChunk, DecodeR, PrefillR, PrefillT>(p, rowBegin, rowEnd);
  if (g % 64 == 0)
    return tiledRowsFor<Tile, Groups::PairsOther, DecodeR, PrefillR, PrefillT>(p, rowBegin,
                                                                              rowEnd);
  tiledRowsFor<Tile, Groups::Mixed, DecodeR, PrefillR, PrefillT>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail::q4x86

#endif // __x86_64__
