// The int4 linear layer's W4A8 numerics (cpu/matmul_q4.h): the Q8
// quantizer against a plain re-derivation of its rule, the ISA quantizers
// against each other, and every ISA kernel against a double-precision
// reference of the exact numerics (int8 x per 32-column block, integer dot
// products, group scales and zero points), on odd shapes: K not a multiple
// of 32 or 64, ragged last groups, rows and tokens off the tile sizes, group
// sizes 32, 64, 96 and 128. The AVX2 kernel's VNNI dot products run where
// the CPU has them, and give the bits of its vpmaddubsw path.
#include "cpu/fused.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/matmul_q4.h"
#include "cpu/q4_panels.h"
#if defined(__x86_64__)
#include "cpu/matmul_q4_x86.h"
#endif
#include "kernels/common/q4_layout.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace llmc::cpu {
namespace {

using test::bitsOf;
using test::ScopedIsa;
using test::supportedIsas;

// A random int4 matrix in the plan layout; pad nibbles are random (the
// kernels must not read them as weights).
struct RandomQ4 {
  int64_t rows, cols, groupSize;
  std::vector<hd::u32> qweight;
  std::vector<uint16_t> scales, zeros;
  std::vector<uint8_t> packedZeros; // as the runtime loads them

  RandomQ4(std::mt19937 &rng, int64_t n, int64_t k, int64_t g) : rows(n), cols(k), groupSize(g) {
    std::uniform_int_distribution<hd::u32> word;
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    std::uniform_int_distribution<int> nibble(0, 15);
    qweight.resize(n * hd::q4WordsPerRow(k));
    for (hd::u32 &w : qweight)
      w = word(rng);
    for (int64_t i = 0; i < n * hd::q4NumGroups(k, g); ++i) {
      scales.push_back(hd::f32ToF16(scale(rng)));
      zeros.push_back(hd::f32ToF16(static_cast<float>(nibble(rng))));
    }
    packedZeros = *packQ4Zeros(zeros.data(), n, hd::q4NumGroups(k, g), "random");
    panels.resize(q4PanelBytes(n, k, g));
    ThreadPool oneThread(1);
    buildQ4Panels(oneThread, matrix(), panels.data());
  }
  // With `withPanels`, the 16-row panels as the loader adds them (q4_panels.h).
  Q4Matrix matrix(bool withPanels = false) const {
    return {qweight.data(),
            scales.data(),
            packedZeros.data(),
            rows,
            cols,
            groupSize,
            withPanels ? panels.data() : nullptr};
  }
  std::vector<uint8_t> panels;
  int q(int64_t n, int64_t k) const {
    return hd::q4At(qweight.data() + n * hd::q4WordsPerRow(cols), k);
  }
  double scale(int64_t n, int64_t k) const {
    return hd::f16ToF32(scales[n * hd::q4NumGroups(cols, groupSize) + k / groupSize]);
  }
  double zero(int64_t n, int64_t k) const {
    return hd::f16ToF32(zeros[n * hd::q4NumGroups(cols, groupSize) + k / groupSize]);
  }
};

// The rule of matmul_q4.h, restated: per 32-column block d = max|x| / 127,
// xq = round half to even (x * (127 / max|x|)).
struct QuantizedRow {
  std::vector<int> values; // [cols]
  std::vector<float> d;    // [blocks]
};

QuantizedRow quantizeRow(const float *x, int64_t cols) {
  QuantizedRow out;
  for (int64_t c0 = 0; c0 < cols; c0 += 32) {
    const int64_t end = std::min<int64_t>(c0 + 32, cols);
    float amax = 0.0f;
    for (int64_t c = c0; c < end; ++c)
      amax = std::max(amax, std::fabs(x[c]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    out.d.push_back(amax / 127.0f);
    for (int64_t c = c0; c < end; ++c) {
      const float scaled = x[c] * inv;
      const float down = std::floor(scaled), frac = scaled - down;
      const bool up = frac > 0.5f || (frac == 0.5f && std::fmod(down, 2.0f) != 0.0f);
      out.values.push_back(static_cast<int>(down) + (up ? 1 : 0));
    }
  }
  return out;
}

struct Q8Buffers {
  std::vector<int8_t> values;
  std::vector<float> scales, groupSums;
  Q8Buffers(int64_t tokens, int64_t cols, int64_t groupSize, int64_t lanes)
      : values(tokens * detail::q8Pairs(cols) * detail::kQ8PairBytes, 99),
        scales(tokens * detail::q8Pairs(cols) * lanes, -1.0f),
        groupSums(tokens * hd::q4NumGroups(cols, groupSize), -1.0f) {}
};

std::vector<float> randomX(std::mt19937 &rng, int64_t n) {
  std::vector<float> x = test::randomFloats(rng, n, -2.0f, 2.0f);
  // Exact ties of the rounding (a block's max maps to 127, so 63.5 / 127
  // of it rounds to 64, half to even) and an all-zero block.
  if (n >= 64) {
    x[0] = 2.0f;
    x[1] = 1.0f;
    for (int i = 32; i < 64; ++i)
      x[i] = 0.0f;
  }
  return x;
}

// Zero points packed two per byte, rows padded to whole bytes: every value
// 0..15 at even and odd groups, an odd group count (the pad nibble is 0),
// and threads splitting the rows give the same bytes.
TEST(Q4Zeros, PackTwoPerByteAndReadBack) {
  for (int64_t groups : {1, 7, 8, 33}) {
    const int64_t rows = 300;
    std::vector<uint16_t> halves(rows * groups);
    for (int64_t i = 0; i < rows * groups; ++i)
      halves[i] = hd::f32ToF16(static_cast<float>((i * 7 + i / 16) % 16));
    auto packed = packQ4Zeros(halves.data(), rows, groups, "z");
    ASSERT_TRUE(packed.isOk()) << packed.message();
    ASSERT_EQ(static_cast<int64_t>(packed->size()), rows * q4ZeroRowBytes(groups));
    for (int64_t n = 0; n < rows; ++n) {
      const uint8_t *row = packed->data() + n * q4ZeroRowBytes(groups);
      for (int64_t g = 0; g < groups; ++g)
        ASSERT_EQ(q4ZeroAt(row, g), static_cast<int>(hd::f16ToF32(halves[n * groups + g])))
            << "groups " << groups << " row " << n << " group " << g;
      if (groups % 2 == 1)
        EXPECT_EQ(row[groups / 2] >> 4, 0) << "pad nibble, row " << n;
    }
    ThreadPool pool(2);
    std::vector<uint8_t> split(packed->size(), 0xff);
    ASSERT_TRUE(packQ4Zeros(pool, halves.data(), rows, groups, split.data(), "z").isOk());
    EXPECT_EQ(split, *packed) << "groups " << groups;
  }
}

// Of several bad cells, the error names the first, whichever thread saw it.
TEST(Q4Zeros, PackingNamesTheFirstBadCell) {
  const int64_t rows = 4096, groups = 4;
  std::vector<uint16_t> halves(rows * groups, hd::f32ToF16(3.0f));
  halves[3000 * groups + 2] = hd::f32ToF16(2.5f);
  halves[100 * groups + 1] = hd::f32ToF16(15.5f);
  ThreadPool pool(2);
  std::vector<uint8_t> out(rows * q4ZeroRowBytes(groups));
  const Status status = packQ4Zeros(pool, halves.data(), rows, groups, out.data(), "layer.zeros");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("'layer.zeros': row 100, group 1 holds 15.5"), std::string::npos)
      << status.message();
}

TEST(Q8Quantize, FollowsTheRuleAndTheLayout) {
  std::mt19937 rng(3);
  for (int64_t cols : {1, 31, 32, 33, 64, 100, 172, 768}) {
    const int64_t tokens = 3, pairs = detail::q8Pairs(cols), groupSize = 64;
    const std::vector<float> x = randomX(rng, tokens * cols);
    Q8Buffers q(tokens, cols, groupSize, 8);
    detail::quantizeQ8Scalar(x.data(), cols, groupSize, 8, 0, tokens, q.values.data(),
                             q.scales.data(), q.groupSums.data());
    for (int64_t t = 0; t < tokens; ++t) {
      const QuantizedRow want = quantizeRow(x.data() + t * cols, cols);
      const int8_t *v = q.values.data() + t * pairs * 64;
      for (int64_t c = 0; c < pairs * 64; ++c) {
        const int64_t at = (c / 64) * 64 + 32 * (c % 2) + 16 * ((c / 32) % 2) + (c % 32) / 2;
        ASSERT_EQ(v[at], c < cols ? want.values[c] : 0)
            << "cols " << cols << " t " << t << " c " << c;
      }
      std::vector<double> sums(hd::q4NumGroups(cols, groupSize), 0.0);
      for (int64_t b = 0; b < 2 * pairs; ++b) {
        const float d = b < static_cast<int64_t>(want.d.size()) ? want.d[b] : 0.0f;
        for (int l = 0; l < 4; ++l)
          ASSERT_EQ(q.scales[t * pairs * 8 + (b / 2) * 8 + 4 * (b % 2) + l], d) << "block " << b;
        for (int64_t c = b * 32; c < std::min(cols, b * 32 + 32); ++c)
          sums[c / groupSize] += double(d) * want.values[c];
      }
      for (size_t g = 0; g < sums.size(); ++g)
        ASSERT_NEAR(q.groupSums[t * sums.size() + g], sums[g], 1e-5 * (std::fabs(sums[g]) + 1));
    }
  }
}

TEST(Q8Quantize, IsaQuantizersAgree) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
#if defined(__x86_64__)
  std::mt19937 rng(4);
  for (int64_t lanes : {8, 16})
    for (int64_t cols : {5, 64, 96, 200, 1000}) {
      const int64_t tokens = 4, groupSize = 32;
      std::vector<float> x = randomX(rng, tokens * cols);
      if (cols >= 200) { // non-finite blocks: values 0, d NaN in both
        x[cols + 100] = INFINITY;
        x[2 * cols + 150] = NAN;
      }
      Q8Buffers a(tokens, cols, groupSize, lanes), b(tokens, cols, groupSize, lanes);
      detail::quantizeQ8Scalar(x.data(), cols, groupSize, lanes, 0, tokens, a.values.data(),
                               a.scales.data(), a.groupSums.data());
      // Two calls of token ranges, as the thread pool splits them.
      detail::quantizeQ8Avx2(x.data(), cols, groupSize, lanes, 0, 1, b.values.data(),
                             b.scales.data(), b.groupSums.data());
      detail::quantizeQ8Avx2(x.data(), cols, groupSize, lanes, 1, tokens, b.values.data(),
                             b.scales.data(), b.groupSums.data());
      ASSERT_EQ(a.values, b.values) << cols;
      ASSERT_EQ(0, std::memcmp(a.scales.data(), b.scales.data(), a.scales.size() * sizeof(float)))
          << cols;
      for (size_t i = 0; i < a.groupSums.size(); ++i) {
        ASSERT_EQ(std::isnan(a.groupSums[i]), std::isnan(b.groupSums[i])) << cols << " " << i;
        if (!std::isnan(a.groupSums[i]))
          ASSERT_NEAR(a.groupSums[i], b.groupSums[i], 1e-6 * (std::fabs(a.groupSums[i]) + 1));
      }
    }
#endif
}

struct Case {
  int64_t tokens, n, k, groupSize;
};

// matmulQ4 against the exact W4A8 numerics in double.
void checkCase(ThreadPool &pool, const Case &c, bool withBias, float beta, uint32_t seed) {
  std::mt19937 rng(seed);
  RandomQ4 w(rng, c.n, c.k, c.groupSize);
  const std::vector<float> x = randomX(rng, c.tokens * c.k);
  const std::vector<float> bias = test::randomFloats(rng, c.n);
  const std::vector<float> y0 = test::randomFloats(rng, c.tokens * c.n);
  std::vector<float> y = y0;
  matmulQ4(pool, x.data(), c.tokens, w.matrix(), withBias ? bias.data() : nullptr, beta, y.data());
  for (int64_t t = 0; t < c.tokens; ++t) {
    const QuantizedRow xq = quantizeRow(x.data() + t * c.k, c.k);
    for (int64_t n = 0; n < c.n; ++n) {
      double expected = 0, magnitude = 0;
      for (int64_t k = 0; k < c.k; ++k) {
        const double xk = double(xq.d[k / 32]) * xq.values[k];
        expected += (w.q(n, k) - w.zero(n, k)) * w.scale(n, k) * xk;
        magnitude += (w.q(n, k) + w.zero(n, k)) * w.scale(n, k) * std::fabs(xk);
      }
      expected += (withBias ? bias[n] : 0.0) + (beta != 0.0f ? y0[t * c.n + n] : 0.0);
      ASSERT_NEAR(y[t * c.n + n], expected, 4e-6 * magnitude + 2e-6 * std::fabs(expected) + 1e-6)
          << isaName(activeIsa()) << " T=" << c.tokens << " N=" << c.n << " K=" << c.k
          << " G=" << c.groupSize << " t=" << t << " n=" << n;
    }
  }
}

TEST(MatmulQ4Q8, EveryIsaMatchesTheExactNumerics) {
  ThreadPool pool(3);
  const Case cases[] = {
      {1, 67, 172, 32}, {2, 67, 172, 64},  {3, 67, 172, 32},   {17, 33, 172, 64},
      {1, 5, 100, 96},  {2, 9, 37, 32},    {5, 1, 1, 32},      {1, 130, 1000, 128},
      {4, 64, 256, 64}, {1, 3, 96, 32},    {9, 18, 2048, 128}, {6, 7, 224, 96},
      {1, 19, 32, 32},  {7, 21, 800, 160}, {2, 4, 64, 64},     {13, 3, 5, 32},
  };
  uint32_t seed = 1;
  for (Isa isa : supportedIsas()) {
    ScopedIsa scoped(isa);
    for (const Case &c : cases) {
      checkCase(pool, c, false, 0.0f, seed++);
      checkCase(pool, c, true, 1.0f, seed++);
    }
  }
}

// The AVX2 kernel's chunked pairs (4 pairs, 256 columns, per step, for every
// group pattern but Mixed) and the single pairs after them: K with whole
// chunks only, with 1-3 pairs after them, with a half pair at the end;
// rows and tokens off the tile sizes; every group-size mode (32, 64, 128,
// 256 | G, other 64 | G, and Mixed for contrast).
TEST(MatmulQ4Q8, ChunkedPairsMatchTheExactNumerics) {
  ThreadPool pool(2);
  const Case cases[] = {
      {1, 13, 256, 32},  {1, 9, 768, 32},   {2, 6, 800, 32},   {3, 5, 544, 32},
      {1, 11, 1000, 64}, {5, 7, 768, 64},   {1, 4, 320, 64},   {1, 10, 2048, 128},
      {4, 6, 928, 128},  {1, 5, 1312, 256}, {2, 3, 1536, 512}, {1, 9, 960, 192},
      {3, 5, 1100, 320}, {1, 6, 1056, 96},  {6, 5, 2080, 32},  {1, 17, 4096, 32},
  };
  uint32_t seed = 200;
  for (Isa isa : supportedIsas()) {
    ScopedIsa scoped(isa);
    for (const Case &c : cases) {
      checkCase(pool, c, false, 0.0f, seed++);
      checkCase(pool, c, true, 1.0f, seed++);
    }
  }
}

// chunkQ8Scales regroups the per-pair scale lanes: pair 4c + i's blocks in
// lanes i and 4 + i of chunk c, zeros past the last pair.
TEST(Q8Quantize, ChunkScalesRegroupThePairScales) {
  for (int64_t pairs : {1, 3, 4, 5, 12, 13}) {
    const int64_t tokens = 2, chunks = (pairs + 3) / 4;
    std::vector<float> scales(tokens * pairs * 8);
    for (size_t i = 0; i < scales.size(); ++i)
      scales[i] = static_cast<float>(i / 4 + 1); // one value per block
    std::vector<float> out(tokens * chunks * 8, -1.0f);
    detail::chunkQ8Scales(scales.data(), pairs, 0, tokens, out.data());
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t i = 0; i < 4; ++i) {
          const int64_t q = 4 * c + i;
          const float *lanes = out.data() + (t * chunks + c) * 8;
          ASSERT_EQ(lanes[i], q < pairs ? scales[(t * pairs + q) * 8] : 0.0f) << pairs;
          ASSERT_EQ(lanes[4 + i], q < pairs ? scales[(t * pairs + q) * 8 + 4] : 0.0f) << pairs;
        }
  }
}

// Every token of a T-token call has the bits of a T = 1 call (the decode
// tile), whatever tile (rows x tokens), token panel or row block covers it:
// T across the prefill tile (8 tokens on AVX2) and the 64-token panels,
// N off the 16-row blocks and 4-row tiles, K with whole chunks, single pairs
// and a half pair, every group pattern; and a slice of rows (other block
// and tile boundaries) has the whole matrix's bits.
TEST(MatmulQ4Q8, EveryTileGivesTheDecodeBits) {
  ThreadPool pool(1);
  const Case cases[] = {
      {9, 37, 800, 32},   {21, 19, 768, 64}, {70, 21, 544, 32},  {13, 6, 1056, 96},
      {8, 17, 2080, 128}, {130, 5, 256, 32}, {3, 23, 1312, 256}, {17, 9, 960, 192},
  };
  uint32_t seed = 500;
  for (Isa isa : supportedIsas()) {
    ScopedIsa scoped(isa);
    for (const Case &c : cases) {
      std::mt19937 rng(seed++);
      RandomQ4 w(rng, c.n, c.k, c.groupSize);
      const std::vector<float> x = randomX(rng, c.tokens * c.k);
      std::vector<float> all(c.tokens * c.n), one(c.n);
      matmulQ4(pool, x.data(), c.tokens, w.matrix(), nullptr, 0.0f, all.data());
      for (int64_t t = 0; t < c.tokens; ++t) {
        matmulQ4(pool, x.data() + t * c.k, 1, w.matrix(), nullptr, 0.0f, one.data());
        for (int64_t n = 0; n < c.n; ++n)
          ASSERT_EQ(bitsOf(all[t * c.n + n]), bitsOf(one[n]))
              << isaName(isa) << " T=" << c.tokens << " N=" << c.n << " K=" << c.k
              << " G=" << c.groupSize << " t=" << t << " n=" << n;
      }
      const int64_t first = 3, groups = hd::q4NumGroups(c.k, c.groupSize);
      Q4Matrix slice = w.matrix();
      slice.qweight += first * hd::q4WordsPerRow(c.k);
      slice.scales += first * groups;
      slice.zeros += first * q4ZeroRowBytes(groups);
      slice.rows -= first;
      std::vector<float> part(c.tokens * slice.rows);
      matmulQ4(pool, x.data(), c.tokens, slice, nullptr, 0.0f, part.data());
      for (int64_t t = 0; t < c.tokens; ++t)
        for (int64_t n = 0; n < slice.rows; ++n)
          ASSERT_EQ(bitsOf(part[t * slice.rows + n]), bitsOf(all[t * c.n + first + n]))
              << isaName(isa) << " T=" << c.tokens << " N=" << c.n << " K=" << c.k << " row "
              << first + n << " t=" << t;
    }
  }
}

// Decode (T = 1) takes its 4-row tiles from 4 runs of the call's rows
// (row j of each, the 0..3 rows left one at a time, on AVX2): every row of
// a decode call, whole matrix or a slice starting anywhere, 1 or 2 threads
// (other runs per chunk), has the bits of the same token inside a
// 3-token call (the prefill tile), and only the slice's rows are written.
TEST(MatmulQ4Q8, DecodeRunsGiveThePrefillTileBits) {
  const Case cases[] = {
      {3, 1, 256, 32},    {3, 4, 800, 32},  {3, 7, 768, 64},     {3, 18, 1056, 96},
      {3, 33, 2080, 128}, {3, 67, 544, 32}, {3, 130, 1312, 256}, {3, 257, 960, 192},
  };
  uint32_t seed = 900;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (Isa isa : supportedIsas()) {
      ScopedIsa scoped(isa);
      for (const Case &c : cases) {
        std::mt19937 rng(seed++);
        RandomQ4 w(rng, c.n, c.k, c.groupSize);
        const std::vector<float> x = randomX(rng, c.tokens * c.k);
        std::vector<float> all(c.tokens * c.n);
        matmulQ4(pool, x.data(), c.tokens, w.matrix(), nullptr, 0.0f, all.data());
        const int64_t groups = hd::q4NumGroups(c.k, c.groupSize);
        for (int64_t first : {int64_t{0}, int64_t{1}, c.n / 3, c.n - 1}) {
          Q4Matrix slice = w.matrix();
          slice.qweight += first * hd::q4WordsPerRow(c.k);
          slice.scales += first * groups;
          slice.zeros += first * q4ZeroRowBytes(groups);
          slice.rows -= first;
          std::vector<float> one(slice.rows + 1, -7.0f);
          matmulQ4(pool, x.data() + c.k, 1, slice, nullptr, 0.0f, one.data());
          for (int64_t n = 0; n < slice.rows; ++n)
            ASSERT_EQ(bitsOf(one[n]), bitsOf(all[c.n + first + n]))
                << isaName(isa) << " threads " << threads << " N=" << c.n << " K=" << c.k
                << " G=" << c.groupSize << " row " << first + n;
          ASSERT_EQ(one[slice.rows], -7.0f) << "wrote past the slice's rows";
        }
      }
    }
  }
}

// The int4 SwiGLU linear (one stacked-matrix call for one token, a gate and
// an up call from 2 tokens) gives the bits of the unfused steps: matmulQ4 on
// the gate rows and on the up rows, then swiglu; 1 and 2 threads.
TEST(MatmulQ4Q8, SwigluLinearHasTheUnfusedBits) {
  uint32_t seed = 1300;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (Isa isa : supportedIsas()) {
      ScopedIsa scoped(isa);
      for (const Case &c :
           {Case{1, 2 * 37, 800, 32}, Case{1, 2 * 130, 768, 64}, Case{3, 2 * 21, 544, 32},
            Case{2, 2 * 64, 1056, 96}, Case{5, 2 * 48, 256, 32}}) {
        std::mt19937 rng(seed++);
        RandomQ4 w(rng, c.n, c.k, c.groupSize);
        const std::vector<float> x = randomX(rng, c.tokens * c.k);
        const int64_t inter = c.n / 2, groups = hd::q4NumGroups(c.k, c.groupSize);
        Q4Matrix gate = w.matrix(), up = w.matrix();
        gate.rows = up.rows = inter;
        up.qweight += inter * hd::q4WordsPerRow(c.k);
        up.scales += inter * groups;
        up.zeros += inter * q4ZeroRowBytes(groups);
        std::vector<float> g(c.tokens * inter), u(c.tokens * inter), want(c.tokens * inter);
        matmulQ4(pool, x.data(), c.tokens, gate, nullptr, 0.0f, g.data());
        matmulQ4(pool, x.data(), c.tokens, up, nullptr, 0.0f, u.data());
        swiglu(pool, g.data(), u.data(), want.data(), c.tokens * inter);
        // With the loader's panels too: split with the rows where I is a
        // multiple of 16 (I = 64), else up reads the row-major words.
        for (bool withPanels : {false, true}) {
          std::vector<float> got(c.tokens * inter, -7.0f), products;
          matmulSwigluQ4(pool, x.data(), c.tokens, w.matrix(withPanels), got.data(), products);
          for (int64_t i = 0; i < c.tokens * inter; ++i)
            ASSERT_EQ(bitsOf(got[i]), bitsOf(want[i]))
                << isaName(isa) << " threads " << threads << " panels " << withPanels
                << " T=" << c.tokens << " N=" << c.n << " i=" << i;
        }
      }
    }
  }
}

// matmulQ4 on a matrix with the loader's panels gives the bits it gives
// without them, on every ISA (those without AVX-512 VNNI ignore them) and
// token count around the kernels' thresholds, split over 3 threads.
TEST(MatmulQ4Q8, LoadedPanelsGiveTheRowMajorBits) {
  ThreadPool pool(3);
  uint32_t seed = 1700;
  for (Isa isa : supportedIsas()) {
    ScopedIsa scoped(isa);
    for (const Case &c : {Case{16, 200, 800, 32}, Case{12, 77, 768, 64}, Case{11, 300, 544, 128},
                          Case{10, 33, 1056, 96}, Case{3, 1, 100, 32}, Case{9, 4096, 256, 64}}) {
      std::mt19937 rng(seed++);
      RandomQ4 w(rng, c.n, c.k, c.groupSize);
      const std::vector<float> x = randomX(rng, c.tokens * c.k);
      const std::vector<float> bias = test::randomFloats(rng, c.n);
      for (int64_t tokens : {int64_t{1}, int64_t{2}, int64_t{3}, c.tokens}) {
        std::vector<float> rowMajor(tokens * c.n), panels(tokens * c.n);
        matmulQ4(pool, x.data(), tokens, w.matrix(), bias.data(), 0.0f, rowMajor.data());
        matmulQ4(pool, x.data(), tokens, w.matrix(true), bias.data(), 0.0f, panels.data());
        for (int64_t i = 0; i < tokens * c.n; ++i)
          ASSERT_EQ(bitsOf(panels[i]), bitsOf(rowMajor[i]))
              << isaName(isa) << " T=" << tokens << " N=" << c.n << " K=" << c.k
              << " G=" << c.groupSize << " output " << i;
      }
    }
  }
}

// buildQ4Panels puts each row's words, scales and zero points where
// q4_panels.h says, and zeros in the rows past N and the half pair's words;
// the panel is one stream: scale unit u right before pair u * G / 32, every
// pair right after its unit or the pair before, the zero points last.
TEST(Q4Panels, HoldTheRowsWhereTheLayoutSays) {
  std::mt19937 rng(1800);
  for (const Case &c : {Case{1, 37, 800, 32}, Case{1, 16, 96, 96}, Case{1, 5, 1056, 64},
                        Case{1, 3, 300, 128}, Case{1, 17, 64, 4096}}) {
    RandomQ4 w(rng, c.n, c.k, c.groupSize);
    const Q4PanelShape shape = q4PanelShape(c.k, c.groupSize);
    ASSERT_EQ(static_cast<int64_t>(w.panels.size()), q4PanelCount(c.n) * shape.stride);
    ASSERT_EQ(shape.stride % 64, 0);
    const int64_t words = hd::q4WordsPerRow(c.k), groups = hd::q4NumGroups(c.k, c.groupSize);
    // The stream, walked in order: what comes before each pair.
    int64_t at = 0;
    for (int64_t q = 0; q < shape.pairs; ++q) {
      if (q % (c.groupSize / 32) == 0) {
        ASSERT_EQ(q4PanelScalesOffset(shape, 2 * (q / (c.groupSize / 32))), at) << "pair " << q;
        at += 64;
      }
      ASSERT_EQ(q4PanelWordsOffset(shape, q), at) << "K=" << c.k << " G=" << c.groupSize;
      at += 512;
    }
    ASSERT_EQ(shape.zerosOffset, at) << "K=" << c.k << " G=" << c.groupSize;
    for (int64_t n = 0; n < q4PanelCount(c.n) * kQ4PanelRows; ++n) {
      const uint8_t *panel = w.panels.data() + n / kQ4PanelRows * shape.stride;
      const int64_t r = n % kQ4PanelRows;
      for (int64_t j = 0; j < 8 * shape.pairs; ++j) {
        uint32_t got;
        std::memcpy(&got, panel + q4PanelWordsOffset(shape, j / 8) + (j % 8 * kQ4PanelRows + r) * 4,
                    4);
        const uint32_t want = n < c.n && j < words ? w.qweight[n * words + j] : 0u;
        ASSERT_EQ(got, want) << "N=" << c.n << " K=" << c.k << " row " << n << " word " << j;
      }
      for (int64_t g = 0; g < groups; ++g) {
        uint16_t scale;
        std::memcpy(&scale, panel + q4PanelScalesOffset(shape, g) + r * 2, 2);
        ASSERT_EQ(scale, n < c.n ? w.scales[n * groups + g] : 0) << "row " << n << " group " << g;
        const int zero =
            (panel[shape.zerosOffset + g / 2 * kQ4PanelRows + r] >> (4 * (g % 2))) & 15;
        ASSERT_EQ(zero, n < c.n ? static_cast<int>(hd::f16ToF32(w.zeros[n * groups + g])) : 0)
            << "row " << n << " group " << g;
      }
      if (groups % 2 != 0) { // the odd last group's unit has a zero second half
        for (int64_t i = 0; i < 32; ++i)
          ASSERT_EQ(panel[q4PanelScalesOffset(shape, groups - 1) + 32 + i], 0) << "row " << n;
      }
    }
  }
}

#if defined(__x86_64__)
// hsum8 (the AVX2 epilogue's 8 sums at once) against hsum, one vector at a
// time, on lanes of mixed magnitudes (where the order of the additions shows).
LLMC_Q4_AVX2 bool hsum8MatchesHsum(std::mt19937 &rng, std::string &why) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  alignas(32) float lanes[8][8];
  for (auto &vector : lanes)
    for (float &lane : vector)
      lane = std::ldexp(unit(rng), exponent(rng));
  __m256 v[8];
  for (int i = 0; i < 8; ++i)
    v[i] = _mm256_load_ps(lanes[i]);
  float got[8];
  detail::q4x86::hsum8(v, got);
  for (int i = 0; i < 8; ++i)
    if (bitsOf(got[i]) != bitsOf(detail::hsum(v[i]))) {
      why = "vector " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " +
            std::to_string(detail::hsum(v[i]));
      return false;
    }
  return true;
}

TEST(MatmulQ4Q8, Hsum8HasTheBitsOfHsum) {
  const std::vector<Isa> isas = supportedIsas();
  if (std::find(isas.begin(), isas.end(), Isa::Avx2) == isas.end())
    GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(61);
  for (int trial = 0; trial < 1000; ++trial) {
    std::string why;
    ASSERT_TRUE(hsum8MatchesHsum(rng, why)) << "trial " << trial << ", " << why;
  }
}
#endif

// With AVX-512 VNNI (vpdpbusd) the AVX2 kernel gives the bits of its
// vpmaddubsw path: decode and prefill, every group pattern, K with whole
// chunks, single pairs and a half pair, a token count across the tile and
// the 64-token panel, 1 and 2 threads. Skips where the CPU lacks VNNI.
TEST(MatmulQ4Q8, VnniGivesTheBitsOfMaddubs) {
  if (!x86VnniSupported())
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  ASSERT_TRUE(x86VnniActive()) << "VNNI is supported but not on by default";
  const Case cases[] = {
      {1, 37, 800, 32},   {70, 21, 768, 64}, {9, 19, 544, 32}, {13, 6, 1056, 96},
      {1, 17, 2080, 128}, {8, 5, 1312, 256}, {3, 9, 960, 192}, {1, 67, 4096, 32},
  };
  uint32_t seed = 1700;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (const Case &c : cases) {
      std::mt19937 rng(seed++);
      RandomQ4 w(rng, c.n, c.k, c.groupSize);
      const std::vector<float> x = randomX(rng, c.tokens * c.k);
      std::vector<float> vnni(c.tokens * c.n), maddubs(c.tokens * c.n);
      matmulQ4(pool, x.data(), c.tokens, w.matrix(), nullptr, 0.0f, vnni.data());
      ASSERT_TRUE(setX86VnniForTesting(false));
      EXPECT_FALSE(x86VnniActive());
      matmulQ4(pool, x.data(), c.tokens, w.matrix(), nullptr, 0.0f, maddubs.data());
      ASSERT_TRUE(setX86VnniForTesting(true));
      for (size_t i = 0; i < vnni.size(); ++i)
        ASSERT_EQ(bitsOf(vnni[i]), bitsOf(maddubs[i]))
            << "T=" << c.tokens << " N=" << c.n << " K=" << c.k << " G=" << c.groupSize
            << " output " << i << ": " << vnni[i] << " vs " << maddubs[i];
    }
  }
}

#if defined(__x86_64__)
using RowsKernel = void (*)(const detail::Q4Problem &, int64_t, int64_t);

// Each case's tokens 1..min(c.tokens, maxTokens) through `kernel` and
// matmulQ4RowsAvx2, rows split in two calls at n / 3 (a thread's share):
// the same bits, with bias and beta 1, and nothing written past the
// call's tokens. chunkScales goes to `kernel` when withChunks; with
// withPanels, the matrix's 16-row panels, and the split at a panel's start.
void expectAvx2Bits(RowsKernel kernel, bool withChunks, int64_t maxTokens, uint32_t seed,
                    bool withPanels = false) {
  const Case cases[] = {
      {13, 37, 800, 32},  {11, 21, 768, 64}, {7, 19, 544, 32},  {6, 6, 1056, 96},
      {5, 17, 2080, 128}, {9, 5, 1312, 256}, {4, 9, 960, 192},  {12, 33, 4096, 32},
      {3, 16, 32, 32},    {2, 1, 100, 32},   {10, 48, 288, 32}, {8, 3, 5, 32},
      {1, 64, 1024, 32},  {1, 70, 2048, 64},
  };
  for (const Case &c : cases) {
    std::mt19937 rng(seed++);
    RandomQ4 w(rng, c.n, c.k, c.groupSize);
    std::vector<float> x = randomX(rng, c.tokens * c.k);
    if (c.tokens > 2)
      x[2 * c.k + c.k / 2] = NAN; // token 2's outputs are all NaN, in both
    const std::vector<float> bias = test::randomFloats(rng, c.n);
    const std::vector<float> y0 = test::randomFloats(rng, c.tokens * c.n);
    // Calls from token 0, and from the NaN token 2.
    for (int64_t first : {int64_t{0}, int64_t{2}})
      for (int64_t tokens = 1; tokens <= std::min(c.tokens - first, maxTokens); ++tokens) {
        const float *xt = x.data() + first * c.k;
        Q8Buffers q(tokens, c.k, c.groupSize, 8);
        std::vector<float> chunks(tokens * detail::q8Chunks(c.k) * 8);
        detail::quantizeQ8Avx2(xt, c.k, c.groupSize, 8, 0, tokens, q.values.data(), q.scales.data(),
                               q.groupSums.data());
        detail::chunkQ8Scales(q.scales.data(), detail::q8Pairs(c.k), 0, tokens, chunks.data());
        std::vector<float> avx2 = y0, other = y0;
        detail::Q4Problem problem{xt,
                                  tokens,
                                  w.matrix(),
                                  bias.data(),
                                  1.0f,
                                  avx2.data(),
                                  {q.values.data(), q.scales.data(), q.groupSums.data(),
                                   detail::q8Pairs(c.k), 8, chunks.data()}};
        const int64_t split = withPanels ? c.n / 3 / kQ4PanelRows * kQ4PanelRows : c.n / 3;
        detail::matmulQ4RowsAvx2(problem, 0, split);
        detail::matmulQ4RowsAvx2(problem, split, c.n);
        problem.y = other.data();
        problem.w = w.matrix(withPanels);
        if (!withChunks)
          problem.xq.chunkScales = nullptr;
        kernel(problem, 0, split);
        kernel(problem, split, c.n);
        for (int64_t i = 0; i < tokens * c.n; ++i)
          ASSERT_EQ(bitsOf(other[i]), bitsOf(avx2[i]))
              << "T=" << tokens << " N=" << c.n << " K=" << c.k << " G=" << c.groupSize
              << " output " << i << ": " << other[i] << " vs " << avx2[i];
        for (int64_t i = tokens * c.n; i < c.tokens * c.n; ++i)
          ASSERT_EQ(bitsOf(other[i]), bitsOf(y0[i]));
      }
  }
}

// The AVX-512 VNNI panel kernel (lanes = rows, the call's rows unpacked
// into 16-row panels) gives the AVX2 kernel's bits for every token count,
// including those below kQ4PanelMinTokens that matmulQ4 does not give it:
// N off the 16-row panels, K with a half pair, every group pattern (and G
// past the last vector of 8 groups), NaN in x.
TEST(MatmulQ4Q8, PanelKernelGivesTheAvx2Bits) {
  if (!x86VnniSupported())
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  expectAvx2Bits(detail::matmulQ4RowsPanelAvx512, false, 64, 2100);
}

// The same, its panels unpacked from the loader's panels (q4_panels.h)
// instead of the row-major words.
TEST(MatmulQ4Q8, PanelKernelFromLoadedPanelsGivesTheAvx2Bits) {
  if (!x86VnniSupported())
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  expectAvx2Bits(detail::matmulQ4RowsPanelAvx512, false, 64, 2150, true);
}

// The kernel that reads the loader's panels and unpacks their nibbles in
// registers (decode and calls below kQ4PanelMinTokens) gives the AVX2
// kernel's bits, for every token count it tiles (3, 2, 1 at a time).
TEST(MatmulQ4Q8, PanelNibbleKernelGivesTheAvx2Bits) {
  if (!x86VnniSupported())
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  expectAvx2Bits(detail::matmulQ4RowsPanelNibblesAvx512, false, 12, 2170, true);
}

// The AVX-512 VNNI decode kernel (two rows per 512-bit vector) gives the
// AVX2 kernel's bits: rows in runs of 4 and the 0..3 left, K with tail
// pairs after the whole chunks and a half pair, every group pattern
// (Mixed goes to the AVX2 kernel), NaN in x; and it hands calls of more
// than one token to the AVX2 kernel.
TEST(MatmulQ4Q8, DecodeKernelGivesTheAvx2Bits) {
  if (!x86VnniSupported())
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  expectAvx2Bits(detail::matmulQ4RowsDecodeAvx512, true, 3, 2200);
}
#endif

// Scalar and forced AVX2 kernels never take VNNI, whatever the CPU has: a
// forced AVX2 runs what an AVX2 machine runs.
TEST(MatmulQ4Q8, IsasBelowAvx512TurnVnniOff) {
  {
    ScopedIsa scoped(Isa::Scalar);
    EXPECT_FALSE(x86VnniActive());
    EXPECT_EQ(activeKernelsName(), "scalar");
  }
  if (isaSupported(Isa::Avx2)) {
    ScopedIsa scoped(Isa::Avx2);
    EXPECT_FALSE(x86VnniActive());
    EXPECT_EQ(activeKernelsName(), "avx2");
  }
}

// llmrun's "running on" line names the VNNI kernel where it runs.
TEST(MatmulQ4Q8, KernelsNameSaysVnni) {
  if (!x86VnniSupported())
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  ScopedIsa scoped(Isa::Avx512);
  test::ScopedBf16Dot noBf16(false); // matmul_test checks " + bf16"
  EXPECT_EQ(activeKernelsName(), "avx512 + vnni");
  ASSERT_TRUE(setX86VnniForTesting(false));
  EXPECT_EQ(activeKernelsName(), "avx512");
  ASSERT_TRUE(setX86VnniForTesting(true));
}

TEST(MatmulQ4Q8, LargeLayersSplitOverThreads) {
  ThreadPool pool(4);
  for (Isa isa : supportedIsas()) {
    ScopedIsa scoped(isa);
    checkCase(pool, {1, 700, 768, 32}, true, 1.0f, 99);
    checkCase(pool, {37, 300, 800, 64}, false, 0.0f, 100);
  }
}

TEST(MatmulQ4Q8, NonFiniteInputsGiveNan) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  RandomQ4 w(rng, 9, 100, 32);
  for (Isa isa : supportedIsas()) {
    ScopedIsa scoped(isa);
    for (float bad : {NAN, INFINITY}) {
      std::vector<float> x = randomX(rng, 2 * 100), y(2 * 9);
      x[100 + 70] = bad; // token 1, block 2
      matmulQ4(pool, x.data(), 2, w.matrix(), nullptr, 0.0f, y.data());
      for (int64_t n = 0; n < 9; ++n) {
        EXPECT_TRUE(std::isfinite(y[n])) << isaName(isa) << " n=" << n;
        EXPECT_TRUE(std::isnan(y[9 + n])) << isaName(isa) << " n=" << n;
      }
    }
  }
}

// The test hook: f32 x, the plain W4A16 result.
TEST(MatmulQ4Q8, ExactActivationsHookTakesF32) {
  ThreadPool pool(2);
  std::mt19937 rng(6);
  RandomQ4 w(rng, 11, 172, 64);
  const std::vector<float> x = randomX(rng, 3 * 172);
  std::vector<float> y(3 * 11);
  setQ4ExactActivationsForTesting(true);
  matmulQ4(pool, x.data(), 3, w.matrix(), nullptr, 0.0f, y.data());
  setQ4ExactActivationsForTesting(false);
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t n = 0; n < 11; ++n) {
      double expected = 0;
      for (int64_t k = 0; k < 172; ++k)
        expected += (w.q(n, k) - w.zero(n, k)) * w.scale(n, k) * x[t * 172 + k];
      ASSERT_NEAR(y[t * 11 + n], expected, 1e-5 * (std::fabs(expected) + 1));
    }
}

} // namespace
} // namespace llmc::cpu
