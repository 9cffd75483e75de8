// The x86 int4 kernel's building blocks, shared by matmul_q4_avx2.cpp and
// the AVX-512 decode kernel (matmul_q4_avx512.cpp): row geometry, the
// per-pair group scales, the zero-point term, the 8-lane tile (Q4Tile)
// and the row x token tiling. Every function carries the
// AVX2 target attribute, so the rest of the binary stays baseline x86-64.
#pragma once
#if defined(__x86_64__)

#include "cpu/matmul_q4.h"
#include "cpu/lanes_avx2.h"
#include "kernels/common/q4_layout.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

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
  int64_t zeroBytes; // bytes of packed zeros per row
  int64_t fullPairs; // pairs whose two blocks both lie in the row
  explicit Rows(const Q4Matrix &w)
      : words(hd::q4WordsPerRow(w.cols)), groups(hd::q4NumGroups(w.cols, w.groupSize)),
        zeroBytes(q4ZeroRowBytes(groups)), fullPairs(words / 8) {}
};

// The zero points of groups g .. g + 7 (g a multiple of 8, g + 7 < groups)
// of a row of packed zeros, as f32: their 4 bytes are one 32-bit word whose
// nibble i is group g + i, so lane i shifts the broadcast word by 4i.
LLMC_Q4_AVX2 inline __m256 zeros8(const uint8_t *rowZeros, int64_t g) {
  int32_t word;
  std::memcpy(&word, rowZeros + g / 2, sizeof(word));
  const __m256i nibbles = _mm256_srlv_epi32(_mm256_set1_epi32(word),
                                            _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
  return _mm256_cvtepi32_ps(_mm256_and_si256(nibbles, _mm256_set1_epi32(0x0f)));
}

// Which groups the two blocks of a pair (columns 64p .. 64p + 63) read.
enum class Groups {
  PerBlock,   // G = 32: blocks 2p and 2p + 1 are groups 2p and 2p + 1
  PerPair,    // G = 64: both in group p
  TwoPairs,   // G = 128: both in group p / 2
  PerChunk,   // 256 | G: the 4 pairs of a chunk (256 columns) in one group
  PairsOther, // other multiples of 64 (192, 320, ...): both in group 64p / G
  Mixed,      // other multiples of 32 (96, 160, ...): either
};

// The pattern of group size g (a positive multiple of 32).
constexpr Groups groupsOf(int64_t g) {
  return g == 32        ? Groups::PerBlock
         : g == 64      ? Groups::PerPair
         : g == 128     ? Groups::TwoPairs
         : g % 256 == 0 ? Groups::PerChunk
         : g % 64 == 0  ? Groups::PairsOther
                        : Groups::Mixed;
}

// f(std::integral_constant<Groups, groupsOf(g)>{}): a kernel instantiated
// per pattern, chosen at run time.
template <class F> inline void withGroups(int64_t g, F &&f) {
  switch (groupsOf(g)) {
  case Groups::PerBlock:
    return f(std::integral_constant<Groups, Groups::PerBlock>{});
  case Groups::PerPair:
    return f(std::integral_constant<Groups, Groups::PerPair>{});
  case Groups::TwoPairs:
    return f(std::integral_constant<Groups, Groups::TwoPairs>{});
  case Groups::PerChunk:
    return f(std::integral_constant<Groups, Groups::PerChunk>{});
  case Groups::PairsOther:
    return f(std::integral_constant<Groups, Groups::PairsOther>{});
  case Groups::Mixed:
    return f(std::integral_constant<Groups, Groups::Mixed>{});
  }
}

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
  // Groups outer, rows inner: the R x TT chains of FMAs run side by side
  // (one row after another, each waited on its FMA latency per 8 groups).
  const uint16_t *scales[R];
  const uint8_t *zeros[R];
  LLMC_Q4_UNROLL
  for (int r = 0; r < R; ++r) {
    scales[r] = p.w.scales + (n0 + r * rowStep) * geo.groups;
    zeros[r] = p.w.zeros + (n0 + r * rowStep) * geo.zeroBytes;
  }
  __m256 *z = v + kOut; // [R][TT]
  LLMC_Q4_UNROLL
  for (int i = 0; i < kOut; ++i)
    z[i] = _mm256_setzero_ps();
  for (int64_t g = 0; g < vectorGroups; g += 8) {
    LLMC_Q4_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256 s =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales[r] + g)));
      const __m256 zr = zeros8(zeros[r], g);
      const __m256 sz = _mm256_mul_ps(s, zr);
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        z[r * TT + t] =
            _mm256_fmadd_ps(sz, _mm256_loadu_ps(sums + t * geo.groups + g), z[r * TT + t]);
    }
  }
  for (int i = 2 * kOut; i < kPadded; ++i)
    v[i] = _mm256_setzero_ps();
  float h[kPadded];
  for (int i = 0; i < kPadded; i += 8)
    hsum8(v + i, h + i);
  LLMC_Q4_UNROLL
  for (int r = 0; r < R; ++r) {
    float *zeroes = h + kOut + r * TT;
    // The last groups one at a time, each a fused multiply-add whatever the
    // compiler's contraction rule (the AVX-512 panel kernel has these bits).
    for (int64_t g = vectorGroups; g < geo.groups; ++g) {
      const __m128 sz =
          _mm_set_ss(halfToFloat(scales[r][g]) * static_cast<float>(q4ZeroAt(zeros[r], g)));
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

// The 32-bit dot products of one pair of Q8 blocks of a row (lo, hi: its
// 32 bytes' low and high nibbles) with x's pair (64 bytes), as f32: block
// 2p's partial sums in lanes 0..3, block 2p + 1's in 4..7. The low nibbles
// are the even columns of both blocks, the high nibbles the odd ones, as in
// the Q8 layout, so two vpmaddubsw and one vpmaddwd suffice (at most
// 4 x 15 x 127 per 16-bit lane: no saturation). With Vnni, two vpdpbusd
// give each 32-bit lane the same 8 products (bytes 4l .. 4l + 3 of lo and of
// hi), so the same integers and the same bits, in 2 instructions instead
// of 4. It is written as inline asm (EVEX, AVX-512 VNNI + VL) so that the
// kernel's functions keep their AVX2 target and one instantiation serves
// both; x86VnniActive() says when the CPU has it.
template <bool Vnni> LLMC_Q4_AVX2 inline __m256 pairDot(__m256i lo, __m256i hi, const int8_t *x) {
  const __m256i *v = reinterpret_cast<const __m256i *>(x);
  const __m256i x0 = _mm256_loadu_si256(v), x1 = _mm256_loadu_si256(v + 1);
  if constexpr (Vnni) {
    __m256i dots = _mm256_setzero_si256();
    asm("%{evex%} vpdpbusd %[x0], %[lo], %[dots]\n\t"
        "%{evex%} vpdpbusd %[x1], %[hi], %[dots]"
        : [dots] "+x"(dots)
        : [lo] "x"(lo), [hi] "x"(hi), [x0] "x"(x0), [x1] "x"(x1));
    return _mm256_cvtepi32_ps(dots);
  } else {
    const __m256i d16 =
        _mm256_add_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_maddubs_epi16(hi, x1));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(d16, _mm256_set1_epi16(1)));
  }
}

// The nibbles of a full pair's 32 bytes.
LLMC_Q4_AVX2 inline void pairNibbles(const hd::u32 *words, __m256i &lo, __m256i &hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(words));
  lo = _mm256_and_si256(v, low4);
  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
}

// Rows per decode tile: row j of each of kDecodeRuns equal runs of a call's
// rows, so that a decode step reads kDecodeRuns long sequential streams.
constexpr int kDecodeRuns = 4;

// How far ahead of a tile's chunk each run is prefetched: 256 to 2048 B
// measured alike for the AVX2 tile on a Zen 3 (bench_q4_cputime 1 32 1b).
constexpr int64_t kPrefetchBytes = 512;

// Where prefetchRuns puts the lines: L1 (prefetcht0), or L2 only
// (prefetcht1), which leaves the L1 miss buffers to the loads.
enum class PrefetchInto { L1, L2 };

// Prefetches, in each run, the weights `ahead` bytes past chunk c of the
// tile's rows (two lines: a chunk is 128 B of a row; past a row's end, the
// run's next rows). The scales and zero points (1/8 of the bytes at
// G = 32) were measured no faster prefetched too.
LLMC_Q4_AVX2 inline void prefetchRuns(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t step,
                                      int64_t c, int64_t ahead = kPrefetchBytes,
                                      PrefetchInto into = PrefetchInto::L1) {
  LLMC_Q4_UNROLL
  for (int r = 0; r < kDecodeRuns; ++r) {
    const char *w = reinterpret_cast<const char *>(p.w.qweight + (n0 + r * step) * geo.words +
                                                   8 * kQ8ChunkPairs * c) +
                    ahead;
    if (into == PrefetchInto::L2) {
      _mm_prefetch(w, _MM_HINT_T1);
      _mm_prefetch(w + 64, _MM_HINT_T1);
    } else {
      _mm_prefetch(w, _MM_HINT_T0);
      _mm_prefetch(w + 64, _MM_HINT_T0);
    }
  }
}

// The integer tile: R packed rows x TT tokens; each pair of Q8 blocks (64
// columns, 32 bytes of nibbles) adds pairDot times the group scale times the
// block's d into 8 f32 lanes per row and token. Pairs go 4 at a time
// ("chunks", 256 columns) where a pair's blocks share the group pattern of
// the chunk (G a multiple of 32 but not Mixed): the chunk's group scales are
// converted and multiplied by x's d once (8 lanes, Q8Activations::chunkScales)
// and each pair takes its lanes with one vpermilps, instead of converting a
// scale and multiplying per pair; the products and their order are the same,
// so both ways give the same bits. The pairs after the last whole chunk (and
// every pair for Mixed groups) go one at a time.
template <int R, int TT, Groups G, bool Vnni> struct Q4Tile {
  using Acc = __m256[R][TT];

  // Pair 4c + I of chunk c, with the chunk's scales (lanes of chunkScales).
  template <int I>
  LLMC_Q4_AVX2 static void chunkPair(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t step,
                                     const int8_t *xv, int64_t xStride, int64_t c,
                                     const __m256 (&scale)[R][TT], Acc &acc) {
    const int64_t q = kQ8ChunkPairs * c + I;
    LLMC_Q4_UNROLL
    for (int r = 0; r < R; ++r) {
      __m256i lo, hi;
      pairNibbles(p.w.qweight + (n0 + r * step) * geo.words + 8 * q, lo, hi);
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm256_fmadd_ps(pairDot<Vnni>(lo, hi, xv + t * xStride + q * kQ8PairBytes),
                                    _mm256_permute_ps(scale[r][t], I * 0x55), acc[r][t]);
    }
  }

  // The whole chunks of the rows; returns the pairs they cover.
  LLMC_Q4_AVX2 static int64_t chunks(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t step,
                                     int64_t t0, Acc &acc) {
    const Q8Activations &xq = p.xq;
    const int64_t xStride = xq.pairs * kQ8PairBytes, cStride = q8Chunks(p.w.cols) * 8;
    const int8_t *xv = xq.values + t0 * xStride;
    const float *xd = xq.chunkScales + t0 * cStride;
    const int64_t whole = geo.fullPairs / kQ8ChunkPairs;
    for (int64_t c = 0; c < whole; ++c) {
      if constexpr (TT == 1 && R == kDecodeRuns)
        prefetchRuns(p, geo, n0, step, c);
      __m256 scale[R][TT];
      LLMC_Q4_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256 s =
            chunkScales<G>(p.w.scales + (n0 + r * step) * geo.groups, c, p.w.groupSize);
        LLMC_Q4_UNROLL
        for (int t = 0; t < TT; ++t)
          scale[r][t] = _mm256_mul_ps(s, _mm256_loadu_ps(xd + t * cStride + 8 * c));
      }
      chunkPair<0>(p, geo, n0, step, xv, xStride, c, scale, acc);
      chunkPair<1>(p, geo, n0, step, xv, xStride, c, scale, acc);
      chunkPair<2>(p, geo, n0, step, xv, xStride, c, scale, acc);
      chunkPair<3>(p, geo, n0, step, xv, xStride, c, scale, acc);
    }
    return whole * kQ8ChunkPairs;
  }

  // Pairs [first, pairs) one at a time.
  LLMC_Q4_AVX2 static void pairsFrom(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t step,
                                     int64_t t0, int64_t first, Acc &acc) {
    const Q8Activations &xq = p.xq;
    const int64_t xStride = xq.pairs * kQ8PairBytes, sStride = xq.pairs * 8;
    const int8_t *xv = xq.values + t0 * xStride;
    const float *xs = xq.scales + t0 * sStride;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    PairGroups groups(p.w.groupSize);
    for (int64_t q = first; q < xq.pairs; ++q) {
      const bool full = q < geo.fullPairs; // else the row's last 4 words
      groups.advanceTo(q);
      LLMC_Q4_UNROLL
      for (int r = 0; r < R; ++r) {
        const hd::u32 *words = p.w.qweight + (n0 + r * step) * geo.words + 8 * q;
        const __m256i v =
            full
                ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(words))
                : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(words)));
        const __m256i lo = _mm256_and_si256(v, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        const __m256 s = pairScales<G>(p.w.scales + (n0 + r * step) * geo.groups, groups, full);
        LLMC_Q4_UNROLL
        for (int t = 0; t < TT; ++t) {
          const __m256 scale = _mm256_mul_ps(s, _mm256_loadu_ps(xs + t * sStride + 8 * q));
          acc[r][t] = _mm256_fmadd_ps(pairDot<Vnni>(lo, hi, xv + t * xStride + q * kQ8PairBytes),
                                      scale, acc[r][t]);
        }
      }
    }
  }

  LLMC_Q4_AVX2 static void run(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t t0) {
    runRows(p, geo, n0, 1, t0);
  }

  // Rows n0, n0 + step, ..., n0 + (R - 1) * step.
  LLMC_Q4_AVX2 static void runRows(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t step,
                                   int64_t t0) {
    Acc acc;
    LLMC_Q4_UNROLL
    for (int r = 0; r < R; ++r) {
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        acc[r][t] = _mm256_setzero_ps();
    }
    int64_t first = 0;
    if constexpr (G != Groups::Mixed)
      if (p.xq.chunkScales != nullptr) // else every pair one at a time
        first = chunks(p, geo, n0, step, t0, acc);
    pairsFrom(p, geo, n0, step, t0, first, acc);
    storeTileLanes<R, TT>(p, geo, n0, t0, acc, step);
  }
};

template <int R, int TT, Groups G> using Avx2Tile = Q4Tile<R, TT, G, false>;
template <int R, int TT, Groups G> using VnniTile = Q4Tile<R, TT, G, true>;

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
  withGroups(p.w.groupSize, [&](auto groups) {
    tiledRowsFor<Tile, decltype(groups)::value, DecodeR, PrefillR, PrefillT>(p, rowBegin, rowEnd);
  });
}

} // namespace llmc::cpu::detail::q4x86

#endif // __x86_64__
