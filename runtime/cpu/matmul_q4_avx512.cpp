// AVX-512 VNNI int4 kernels (matmul_q4.h).
//
// Decode (one token): the AVX2 tile's 4 row runs (matmul_q4_x86.h
// Q4Tile<4, 1, G, true>) with two rows per 512-bit vector, run r's row in
// lanes 0..7 and run r + 1's in lanes 8..15, so that each vpdpbusd, the
// conversion, the scale permute and the FMA serve two rows. The same
// integers, products and order per lane as the AVX2 tile: its bits.
//
// Prefill, lanes = rows: each call
// unpacks a 16-row block's nibbles once into a panel of bytes, 16 rows x 4
// columns per 64-byte vector, so that one vpdpbusd with x's 4 bytes
// broadcast (EVEX {1to16}) takes 64 products for 16 rows, and the tokens
// of a call reuse the panel from L1/L2. No horizontal sums: a 16-row vector
// of outputs is stored directly.
//
// Bits: the same as the AVX2 kernel (matmul_q4_avx2.cpp) for every token,
// so a token's output does not depend on how many tokens share its call
// (prefill, batched decode and decode agree). The AVX2 tile keeps 8 f32
// lanes per row and token, lane l summing, pair after pair, the dot
// products of x's bytes 4l .. 4l + 3 and 32 + 4l .. 32 + 4l + 3 of the pair
// times the group scale times x's d of the lane's block, then adds the 8
// lanes in the order of hsum8; here lane l of a row is accumulator l of its
// 16-row vector, with the same integers, products and order. The zero-point
// term follows storeTileLanes the same way.
#if defined(__x86_64__)

#include "cpu/matmul_q4.h"
#include "cpu/matmul_q4_x86.h"
#include "cpu/q4_panels.h"
#include "kernels/common/q4_layout.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

#define LLMC_Q4_AVX512                                                                             \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

using namespace q4x86;

// Rows 2h (lanes 0..7) and 2h + 1 (lanes 8..15) of a decode tile.
LLMC_Q4_AVX512 inline __m512i loadRowPair(const hd::u32 *first, const hd::u32 *second) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(first))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i *>(second)), 1);
}

LLMC_Q4_AVX512 inline __m512 joinHalves(__m256 low, __m256 high) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1);
}

// Pair 4c + I of chunk c for the 4 rows at w, two per vector, with the
// chunk's scales (the lanes of chunkScales times x's d).
template <int I>
LLMC_Q4_AVX512 inline void chunkPair(const hd::u32 *const (&w)[4], const int8_t *xv, int64_t c,
                                     const __m512 (&scale)[2], __m512 (&acc)[2]) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const int64_t q = kQ8ChunkPairs * c + I;
  const __m256i *x = reinterpret_cast<const __m256i *>(xv + q * kQ8PairBytes);
  const __m512i x0 = _mm512_broadcast_i64x4(_mm256_loadu_si256(x));
  const __m512i x1 = _mm512_broadcast_i64x4(_mm256_loadu_si256(x + 1));
  LLMC_Q4_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m512i v = loadRowPair(w[2 * h] + 8 * q, w[2 * h + 1] + 8 * q);
    const __m512i lo = _mm512_and_si512(v, low4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    const __m512i dots =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x0), hi, x1);
    // vpermilps per 128-bit lane: pair I's scales in both rows' lanes.
    acc[h] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_permute_ps(scale[h], 0x55 * I), acc[h]);
  }
}

// How far ahead the decode tile prefetches each run: 1.2x the dram figures
// of 512 B with 1.5 to 3 KiB on a Zen 5 (bench_q4_cputime 1 32), as the
// tile runs 1.5x faster than the AVX2 one; 1 KiB and 6 KiB were slower.
// Into L2, not L1: on a Zen 4 (bench_q4_cputime 1 32 1b) the DRAM rate rose
// from 20.5-28.3 to 30.2-35.7 G weights/s (prefetching nothing read
// 23.7-29.4), 1.5 KiB to 6 KiB alike; the 1B int4 decode from 21.8-23.7 to
// 29.7-29.8 tok/s on 1 thread (docs/perf.md, "int4 decode prefetch into
// L2"). Lines prefetched this far ahead into L1 hold its miss buffers,
// which the tile's own loads then wait for.
constexpr int64_t kDecodePrefetchBytes = 3072;

// Rows n0 + r * step (r < 4) for one token: the whole chunks two rows per
// vector, then Q4Tile's pairsFrom and storeTileLanes for the rest.
template <Groups G>
LLMC_Q4_AVX512 void decodeTile(const Q4Problem &p, const Rows &geo, int64_t n0, int64_t step) {
  static_assert(kDecodeRuns == 4, "two vectors of two rows");
  const int8_t *xv = p.xq.values;
  const float *xd = p.xq.chunkScales;
  const hd::u32 *w[4];
  const uint16_t *s[4];
  LLMC_Q4_UNROLL
  for (int r = 0; r < 4; ++r) {
    w[r] = p.w.qweight + (n0 + r * step) * geo.words;
    s[r] = p.w.scales + (n0 + r * step) * geo.groups;
  }
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  const int64_t whole = geo.fullPairs / kQ8ChunkPairs;
  for (int64_t c = 0; c < whole; ++c) {
    prefetchRuns(p, geo, n0, step, c, kDecodePrefetchBytes, PrefetchInto::L2);
    const __m256 xs = _mm256_loadu_ps(xd + 8 * c);
    __m512 scale[2];
    LLMC_Q4_UNROLL
    for (int h = 0; h < 2; ++h)
      scale[h] = joinHalves(_mm256_mul_ps(chunkScales<G>(s[2 * h], c, p.w.groupSize), xs),
                            _mm256_mul_ps(chunkScales<G>(s[2 * h + 1], c, p.w.groupSize), xs));
    // Kept whole in zmm registers: otherwise clang splits each pair's
    // vpermilps of the joined vector into two ymm permutes and an insert,
    // 3 instructions instead of 1 (l2 rate 48.3 -> 50.3 G weights/s on a
    // Zen 4, bench_q4_cputime 1 32 1b).
    LLMC_Q4_UNROLL
    for (int h = 0; h < 2; ++h)
      asm("" : "+v"(scale[h]));
    chunkPair<0>(w, xv, c, scale, acc);
    chunkPair<1>(w, xv, c, scale, acc);
    chunkPair<2>(w, xv, c, scale, acc);
    chunkPair<3>(w, xv, c, scale, acc);
  }
  __m256 tile[4][1] = {{_mm512_castps512_ps256(acc[0])},
                       {_mm512_extractf32x8_ps(acc[0], 1)},
                       {_mm512_castps512_ps256(acc[1])},
                       {_mm512_extractf32x8_ps(acc[1], 1)}};
  Q4Tile<4, 1, G, true>::pairsFrom(p, geo, n0, step, 0, whole * kQ8ChunkPairs, tile);
  storeTileLanes<4, 1>(p, geo, n0, 0, tile, step);
}

// As the AVX2 kernel's decodeRuns: tile j takes row j of each of 4 equal
// runs of [rowBegin, rowEnd); the 0..3 rows left go one at a time.
template <Groups G>
LLMC_Q4_AVX512 void decodeRuns(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const Rows geo(p.w);
  const int64_t run = (rowEnd - rowBegin) / kDecodeRuns;
  for (int64_t j = 0; j < run; ++j)
    decodeTile<G>(p, geo, rowBegin + j, run);
  for (int64_t n = rowBegin + kDecodeRuns * run; n < rowEnd; ++n)
    Q4Tile<1, 1, G, true>::run(p, geo, n, 0);
}

constexpr int kRows = 16;      // rows per panel, one per 32-bit lane
constexpr int kQuads = 16;     // 4-byte quads of x per pair (64 columns)
constexpr int kQuadBytes = 64; // one quad of 16 rows
constexpr int kPairBytes = kQuads * kQuadBytes;

// A 16-row block unpacked for the tiles. quads: [pairs][16][64 B], slot 2l
// holding x's quad l (bytes 4l .. 4l + 3 of the pair: the low nibbles) and
// slot 2l + 1 quad 8 + l (the high nibbles) of every row, in the order the
// tiles read them; rows past the block's end are zero. blockScales:
// [2 * pairs][16] f32, the group scale of each Q8 block (the half pair's
// missing block takes its first block's, as pairScales does); zeroScales:
// [groups][16] f32, scale * zero per group.
struct Panel {
  std::vector<uint8_t> quads;
  std::vector<float> blockScales, zeroScales;
};

// The 16 x 16 transpose of 32-bit lanes: out[k] lane r = in[r] lane k.
LLMC_Q4_AVX512 void transpose16(const __m512i (&in)[16], __m512i (&out)[16]) {
  __m512i t[16], u[16];
  LLMC_Q4_UNROLL
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(in[i], in[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(in[i], in[i + 1]);
  }
  // u[4a + c], 128-bit lane L: rows 4a .. 4a + 3, lane 4L + c.
  LLMC_Q4_UNROLL
  for (int a = 0; a < 4; ++a) {
    u[4 * a] = _mm512_unpacklo_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 1] = _mm512_unpackhi_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 2] = _mm512_unpacklo_epi64(t[4 * a + 1], t[4 * a + 3]);
    u[4 * a + 3] = _mm512_unpackhi_epi64(t[4 * a + 1], t[4 * a + 3]);
  }
  LLMC_Q4_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    out[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    out[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
    out[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    out[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
  }
}

// Pair q of `rows` rows from n0 into the panel: each row's 32 bytes (16,
// zero-extended, for the half pair at the end) as 16 lanes of nibbles, the
// low nibbles (quads 0..7) then the high ones (8..15), transposed.
LLMC_Q4_AVX512 void packPair(const Q4Matrix &w, int64_t words, int64_t n0, int rows, int64_t q,
                             bool full, uint8_t *out) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m512i in[16], cols[16];
  LLMC_Q4_UNROLL
  for (int r = 0; r < kRows; ++r) {
    __m256i v = _mm256_setzero_si256();
    if (r < rows) {
      const hd::u32 *src = w.qweight + (n0 + r) * words + 8 * q;
      v = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src))
               : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src)));
    }
    const __m256i lo = _mm256_and_si256(v, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    in[r] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  transpose16(in, cols);
  LLMC_Q4_UNROLL
  for (int k = 0; k < kQuads; ++k)
    _mm512_storeu_si512(out + (2 * (k % 8) + k / 8) * kQuadBytes, cols[k]);
}

// The panel of rows [n0, n0 + rows), rows <= 16.
LLMC_Q4_AVX512 void packPanel(const Q4Problem &p, int64_t n0, int rows, Panel &panel) {
  const Q4Matrix &w = p.w;
  const int64_t words = hd::q4WordsPerRow(w.cols), groups = hd::q4NumGroups(w.cols, w.groupSize);
  const int64_t pairs = p.xq.pairs, fullPairs = words / 8, blocks = words / 4;
  panel.quads.resize(pairs * kPairBytes);
  panel.blockScales.assign(2 * pairs * kRows, 0.0f);
  panel.zeroScales.assign(groups * kRows, 0.0f);
  for (int64_t q = 0; q < pairs; ++q)
    packPair(w, words, n0, rows, q, q < fullPairs, panel.quads.data() + q * kPairBytes);
  for (int r = 0; r < rows; ++r) {
    const uint16_t *scales = w.scales + (n0 + r) * groups;
    const uint8_t *zeros = w.zeros + (n0 + r) * q4ZeroRowBytes(groups);
    for (int64_t b = 0; b < 2 * pairs; ++b) {
      const int64_t block = b < blocks ? b : b - 1; // the half pair's missing block
      panel.blockScales[b * kRows + r] = _cvtsh_ss(scales[block * kQ8Block / w.groupSize]);
    }
    for (int64_t g = 0; g < groups; ++g)
      panel.zeroScales[g * kRows + r] =
          _cvtsh_ss(scales[g]) * static_cast<float>(q4ZeroAt(zeros, g));
  }
}

// Lanes r of a panel's 16 f16 scales of one group (q4_panels.h).
LLMC_Q4_AVX512 inline __m512 panelScale(const uint8_t *scales) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(scales)));
}

// Word l of a pair of a panel's 16 rows (the pair's words at `words`): its
// low nibbles (x's quad l) and high nibbles (quad 8 + l) as bytes, the
// unpacked panel's slots 2l and 2l + 1.
LLMC_Q4_AVX512 inline void unpackPanelWord(const uint8_t *words, int l, __m512i &low,
                                           __m512i &high) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i v = _mm512_loadu_si512(words + l * kRows * 4);
  low = _mm512_and_si512(v, low4);
  high = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
}

// Panel b of p.w.panels (q4_panels.h).
class NibblePanel {
public:
  NibblePanel(const Q4Problem &p, const Q4PanelShape &shape, int64_t b)
      : shape_(shape), panel_(p.w.panels + b * shape.stride) {}
  const uint8_t *begin() const { return panel_; }
  const uint8_t *words(int64_t q) const { return panel_ + q4PanelWordsOffset(shape_, q); }
  // Lanes r of the scale of group g.
  LLMC_Q4_AVX512 __m512 scale(int64_t g) const {
    return panelScale(panel_ + q4PanelScalesOffset(shape_, g));
  }
  // Lanes r of scale * zero point of group g: the arithmetic of packPanel's
  // zeroScales.
  LLMC_Q4_AVX512 __m512 zeroScale(int64_t g) const {
    const __m512i both = _mm512_cvtepu8_epi32(_mm_loadu_si128(
        reinterpret_cast<const __m128i *>(panel_ + shape_.zerosOffset + (g / 2) * kRows)));
    const __m512i zero =
        g % 2 != 0 ? _mm512_srli_epi32(both, 4) : _mm512_and_si512(both, _mm512_set1_epi32(0x0f));
    return _mm512_mul_ps(scale(g), _mm512_cvtepi32_ps(zero));
  }

private:
  Q4PanelShape shape_;
  const uint8_t *panel_;
};

// The group of each block of 32 columns, the half pair's missing block
// taking its first block's (as packPanel), counted rather than divided.
class BlockGroups {
public:
  BlockGroups(int64_t groupSize, int64_t blocks)
      : perGroup_(groupSize / kQ8Block), left_(perGroup_), blocks_(blocks) {}
  // The group of the next block (blocks in order from 0).
  int64_t next() {
    if (block_++ >= blocks_)
      return last_;
    last_ = group_;
    if (--left_ == 0) {
      ++group_;
      left_ = perGroup_;
    }
    return last_;
  }

private:
  int64_t perGroup_, left_, blocks_, block_ = 0, group_ = 0, last_ = 0;
};

// packPanel from panel n0 / 16 of p.w.panels: the same bytes and floats.
LLMC_Q4_AVX512 void unpackPanel(const Q4Problem &p, int64_t n0, Panel &panel) {
  const Q4PanelShape shape = q4PanelShape(p.w.cols, p.w.groupSize);
  const NibblePanel in(p, shape, n0 / kRows);
  const int64_t pairs = p.xq.pairs;
  panel.quads.resize(pairs * kPairBytes);
  panel.blockScales.resize(2 * pairs * kRows);
  panel.zeroScales.resize(shape.groups * kRows);
  for (int64_t q = 0; q < pairs; ++q)
    LLMC_Q4_UNROLL
  for (int l = 0; l < 8; ++l) {
    __m512i low, high;
    unpackPanelWord(in.words(q), l, low, high);
    _mm512_storeu_si512(panel.quads.data() + q * kPairBytes + 2 * l * kQuadBytes, low);
    _mm512_storeu_si512(panel.quads.data() + q * kPairBytes + (2 * l + 1) * kQuadBytes, high);
  }
  BlockGroups groups(p.w.groupSize, shape.words / 4);
  for (int64_t b = 0; b < 2 * pairs; ++b)
    _mm512_storeu_ps(panel.blockScales.data() + b * kRows, in.scale(groups.next()));
  for (int64_t g = 0; g < shape.groups; ++g)
    _mm512_storeu_ps(panel.zeroScales.data() + g * kRows, in.zeroScale(g));
}

LLMC_Q4_AVX512 inline __m512i broadcastQuad(const int8_t *x) {
  int32_t v;
  std::memcpy(&v, x, sizeof(v));
  return _mm512_set1_epi32(v);
}

// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)), hsum8's order.
LLMC_Q4_AVX512 inline __m512 laneSum(const __m512 (&v)[8]) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                       _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
}

// y for the panel's rows and one token from its 8 lane accumulators:
// minus the zero-point term (storeTileLanes: 8 lanes over the groups in
// steps of 8, their lane sum, then the last groups one at a time), plus
// bias, plus y where beta is 1.
// zeroScale(g): lanes r of scale * zero point of group g.
template <class ZeroScale>
LLMC_Q4_AVX512 void storeRows(const Q4Problem &p, const ZeroScale &zeroScale, int64_t n0, int rows,
                              int64_t t, const __m512 (&acc)[8]) {
  const int64_t groups = hd::q4NumGroups(p.w.cols, p.w.groupSize), vectorGroups = groups / 8 * 8;
  const float *sums = p.xq.groupSums + t * groups;
  __m512 z[8];
  LLMC_Q4_UNROLL
  for (int j = 0; j < 8; ++j)
    z[j] = _mm512_setzero_ps();
  for (int64_t g = 0; g < vectorGroups; g += 8)
    LLMC_Q4_UNROLL
  for (int j = 0; j < 8; ++j)
    z[j] = _mm512_fmadd_ps(zeroScale(g + j), _mm512_set1_ps(sums[g + j]), z[j]);
  __m512 zero = laneSum(z);
  for (int64_t g = vectorGroups; g < groups; ++g)
    zero = _mm512_fmadd_ps(zeroScale(g), _mm512_set1_ps(sums[g]), zero);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  const __m512 bias =
      p.bias != nullptr ? _mm512_maskz_loadu_ps(mask, p.bias + n0) : _mm512_setzero_ps();
  float *out = p.y + t * p.w.rows + n0;
  __m512 value = _mm512_add_ps(_mm512_sub_ps(laneSum(acc), zero), bias);
  if (p.beta != 0.0f)
    value = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, out), value);
  _mm512_mask_storeu_ps(out, mask, value);
}

// TT tokens from t0 against 16 rows of a panel source: per pair and
// token, lane l adds (quad l + quad 8 + l dot products) x (group scale x d)
// of its block. A source gives, in pair order, beginPair(q), the block
// scales blockScale(q, half), the quads of word l quads(q, l, low, high),
// and zeroScale(g) (BytePanel, NibblePanelSource).
template <int TT, class Source>
LLMC_Q4_AVX512 void panelTile(const Q4Problem &p, Source &source, int64_t n0, int rows,
                              int64_t t0) {
  const Q8Activations &xq = p.xq;
  const int64_t xStride = xq.pairs * kQ8PairBytes, sStride = xq.pairs * xq.scaleLanes;
  const int8_t *x = xq.values + t0 * xStride;
  const float *d = xq.scales + t0 * sStride;
  __m512 acc[TT][8];
  LLMC_Q4_UNROLL
  for (int t = 0; t < TT; ++t)
    LLMC_Q4_UNROLL
  for (int l = 0; l < 8; ++l)
    acc[t][l] = _mm512_setzero_ps();
  for (int64_t q = 0; q < xq.pairs; ++q) {
    source.beginPair(q);
    LLMC_Q4_UNROLL
    for (int half = 0; half < 2; ++half) {
      const __m512 blockScale = source.blockScale(q, half);
      __m512 scale[TT];
      LLMC_Q4_UNROLL
      for (int t = 0; t < TT; ++t)
        scale[t] = _mm512_mul_ps(blockScale,
                                 _mm512_set1_ps(d[t * sStride + q * xq.scaleLanes + 4 * half]));
      LLMC_Q4_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int l = 4 * half + i;
        __m512i w0, w1;
        source.quads(q, l, w0, w1);
        LLMC_Q4_UNROLL
        for (int t = 0; t < TT; ++t) {
          const int8_t *xp = x + t * xStride + q * kQ8PairBytes;
          __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0, broadcastQuad(xp + 4 * l));
          dot = _mm512_dpbusd_epi32(dot, w1, broadcastQuad(xp + 32 + 4 * l));
          acc[t][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale[t], acc[t][l]);
        }
      }
    }
  }
  auto zeroScale = [&source](int64_t g) LLMC_Q4_AVX512 { return source.zeroScale(g); };
  LLMC_Q4_UNROLL
  for (int t = 0; t < TT; ++t)
    storeRows(p, zeroScale, n0, rows, t0 + t, acc[t]);
}

// A Panel unpacked for the call (packPanel, unpackPanel).
struct BytePanel {
  const Panel &panel;
  LLMC_Q4_AVX512 void beginPair(int64_t) const {}
  LLMC_Q4_AVX512 __m512 blockScale(int64_t q, int half) const {
    return _mm512_loadu_ps(panel.blockScales.data() + (2 * q + half) * kRows);
  }
  LLMC_Q4_AVX512 void quads(int64_t q, int l, __m512i &low, __m512i &high) const {
    const uint8_t *pair = panel.quads.data() + q * kPairBytes;
    low = _mm512_loadu_si512(pair + 2 * l * kQuadBytes);
    high = _mm512_loadu_si512(pair + (2 * l + 1) * kQuadBytes);
  }
  LLMC_Q4_AVX512 __m512 zeroScale(int64_t g) const {
    return _mm512_loadu_ps(panel.zeroScales.data() + g * kRows);
  }
};

constexpr int kPanelTokens = 3; // tokens per tile: 24 accumulators

// Panel b of p.w.panels, its nibbles unpacked in registers: the bytes of
// the unpacked panel, so the same bits, without writing it. The panel is
// read in address order, one stream (q4_panels.h): the pairs' words are
// found by walking past each scale unit, and blocks' groups are counted
// (BlockGroups). Nothing is prefetched in software: the hardware prefetcher
// follows the one stream faster (docs/perf.md, "int4 panels in one stream").
class NibblePanelSource {
public:
  NibblePanelSource(const Q4Problem &p, const Q4PanelShape &shape, int64_t b)
      : in_(p, shape, b), groups_(p.w.groupSize, shape.words / 4), next_(in_.begin()),
        pairsPerUnit_(shape.pairsPerUnit) {}
  LLMC_Q4_AVX512 void beginPair(int64_t) {
    if (unitLeft_ == 0) { // a scale unit comes before this pair
      unit_ = next_;
      next_ += kQ4PanelUnitBytes;
      unitLeft_ = pairsPerUnit_;
    }
    words_ = next_;
    next_ += kQ4PanelPairBytes;
    --unitLeft_;
  }
  // A pair's blocks belong to the groups of the unit walked past last.
  LLMC_Q4_AVX512 __m512 blockScale(int64_t, int) {
    return panelScale(unit_ + (groups_.next() & 1) * (kQ4PanelUnitBytes / 2));
  }
  LLMC_Q4_AVX512 void quads(int64_t, int l, __m512i &low, __m512i &high) const {
    unpackPanelWord(words_, l, low, high);
  }
  LLMC_Q4_AVX512 __m512 zeroScale(int64_t g) const { return in_.zeroScale(g); }

private:
  NibblePanel in_;
  BlockGroups groups_;
  const uint8_t *next_, *words_ = nullptr, *unit_ = nullptr;
  int64_t pairsPerUnit_, unitLeft_ = 0;
};

// panelTile<TT> on panel b of p.w.panels (NibblePanelSource).
template <int TT>
LLMC_Q4_AVX512 void panelNibbleTile(const Q4Problem &p, const Q4PanelShape &shape, int64_t b,
                                    int rows, int64_t t0) {
  NibblePanelSource source(p, shape, b);
  panelTile<TT>(p, source, b * kRows, rows, t0);
}

} // namespace

LLMC_Q4_AVX512 void matmulQ4RowsDecodeAvx512(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens != 1 || p.xq.chunkScales == nullptr || groupsOf(p.w.groupSize) == Groups::Mixed)
    return matmulQ4RowsAvx2(p, rowBegin, rowEnd); // Mixed groups: one pair at a time
  withGroups(p.w.groupSize, [&](auto groups) {
    if constexpr (decltype(groups)::value != Groups::Mixed)
      decodeRuns<decltype(groups)::value>(p, rowBegin, rowEnd);
  });
}

LLMC_Q4_AVX512 void matmulQ4RowsPanelNibblesAvx512(const Q4Problem &p, int64_t rowBegin,
                                                   int64_t rowEnd) {
  const Q4PanelShape shape = q4PanelShape(p.w.cols, p.w.groupSize);
  for (int64_t n0 = rowBegin; n0 < rowEnd; n0 += kRows) {
    const int rows = static_cast<int>(rowEnd - n0 < kRows ? rowEnd - n0 : kRows);
    int64_t t = 0;
    for (; t + kPanelTokens <= p.tokens; t += kPanelTokens)
      panelNibbleTile<kPanelTokens>(p, shape, n0 / kRows, rows, t);
    for (; t + 2 <= p.tokens; t += 2)
      panelNibbleTile<2>(p, shape, n0 / kRows, rows, t);
    for (; t < p.tokens; ++t)
      panelNibbleTile<1>(p, shape, n0 / kRows, rows, t);
  }
}

LLMC_Q4_AVX512 void matmulQ4RowsPanelAvx512(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  thread_local Panel panel;
  for (int64_t n0 = rowBegin; n0 < rowEnd; n0 += kRows) {
    const int rows = static_cast<int>(rowEnd - n0 < kRows ? rowEnd - n0 : kRows);
    if (p.w.panels != nullptr)
      unpackPanel(p, n0, panel);
    else
      packPanel(p, n0, rows, panel);
    BytePanel source{panel};
    int64_t t = 0;
    for (; t + kPanelTokens <= p.tokens; t += kPanelTokens)
      panelTile<kPanelTokens>(p, source, n0, rows, t);
    for (; t + 2 <= p.tokens; t += 2)
      panelTile<2>(p, source, n0, rows, t);
    for (; t < p.tokens; ++t)
      panelTile<1>(p, source, n0, rows, t);
  }
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
