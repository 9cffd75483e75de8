// The int4 layout helpers (pack/unpack round trip) and the int4 linear
// kernels against a plain dequantize-then-matmul reference in double (within
// the int8 rounding of x; tests/cpu/matmul_q4_test.cpp checks the exact W4A8
// numerics), on
// random packed weights with ragged last groups, for every ISA path this CPU
// supports, decode and prefill token counts, with and without bias/beta.
#include "cpu/isa.h"
#include "cpu/matmul_q4.h"
#include "kernels/common/q4_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace llmc::cpu {
namespace {

TEST(Q4Layout, PackUnpackRoundTrip) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> nibble(0, 15);
  for (int trial = 0; trial < 1000; ++trial) {
    hd::i32 values[8], unpacked[8];
    for (hd::i32 &v : values)
      v = nibble(rng);
    hd::u32 word = hd::int4Pack8(values);
    hd::int4Unpack8(word, unpacked);
    for (int i = 0; i < 8; ++i) {
      ASSERT_EQ(unpacked[i], values[i]);
      ASSERT_EQ(hd::q4At(&word, i), values[i]);
    }
  }
}

// The GPU GEMV's conversion-free dequantization: q - zero exactly, for every
// nibble position, value and zero point.
TEST(Q4Layout, MagicNumberUnpackIsExact) {
  for (int zero = 0; zero < 16; ++zero) {
    const float magic = hd::int4MagicZero(static_cast<float>(zero));
    for (int q = 0; q < 16; ++q)
      for (int i = 0; i < 8; ++i) {
        const hd::u32 word = (static_cast<hd::u32>(q) << (4 * i)) | (0x9u << (4 * ((i + 1) % 8)));
        ASSERT_EQ(hd::int4MinusMagicZero(word, i, magic), static_cast<float>(q - zero));
      }
  }
}

TEST(Q4Layout, RowGeometry) {
  EXPECT_EQ(hd::q4WordsPerRow(172), 24); // 6 loads of 32 columns
  EXPECT_EQ(hd::q4WordsPerRow(64), 8);
  EXPECT_EQ(hd::q4WordsPerRow(1), 4);
  EXPECT_EQ(hd::q4NumGroups(172, 32), 6);
  EXPECT_EQ(hd::q4NumGroups(172, 64), 3);
  EXPECT_EQ(hd::q4NumGroups(128, 128), 1);
  EXPECT_TRUE(hd::q4ValidGroupSize(96));
  EXPECT_FALSE(hd::q4ValidGroupSize(16));
  EXPECT_FALSE(hd::q4ValidGroupSize(0));
}

// A random int4 matrix in the plan layout. Pad nibbles get random values:
// the kernels must ignore them (the quantizer writes zero points there).
struct RandomQ4 {
  int64_t rows, cols, groupSize;
  std::vector<hd::u32> qweight;
  std::vector<uint16_t> scales, zeros;
  std::vector<uint8_t> packedZeros; // as the runtime loads them

  RandomQ4(std::mt19937 &rng, int64_t n, int64_t k, int64_t g) : rows(n), cols(k), groupSize(g) {
    std::uniform_int_distribution<int> nibble(0, 15);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    int64_t words = hd::q4WordsPerRow(k), groups = hd::q4NumGroups(k, g);
    qweight.resize(n * words);
    for (hd::u32 &w : qweight) {
      hd::i32 v[8];
      for (hd::i32 &x : v)
        x = nibble(rng);
      w = hd::int4Pack8(v);
    }
    for (int64_t i = 0; i < n * groups; ++i) {
      scales.push_back(hd::f32ToF16(scale(rng)));
      zeros.push_back(hd::f32ToF16(static_cast<float>(nibble(rng))));
    }
    packedZeros = *packQ4Zeros(zeros.data(), n, groups, "random");
  }
  Q4Matrix matrix() const {
    return {qweight.data(), scales.data(), packedZeros.data(), rows, cols, groupSize};
  }
  // The reference: every weight dequantized, in double.
  double weight(int64_t n, int64_t k) const {
    int64_t words = hd::q4WordsPerRow(cols), groups = hd::q4NumGroups(cols, groupSize);
    int64_t g = n * groups + k / groupSize;
    return (hd::q4At(qweight.data() + n * words, k) - double(hd::f16ToF32(zeros[g]))) *
           hd::f16ToF32(scales[g]);
  }
};

struct Case {
  int64_t tokens, n, k, groupSize;
};

void checkCase(ThreadPool &pool, const Case &c, bool withBias, float beta, uint32_t seed) {
  std::mt19937 rng(seed);
  RandomQ4 w(rng, c.n, c.k, c.groupSize);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(c.tokens * c.k), bias(c.n), y0(c.tokens * c.n);
  for (float &v : x)
    v = dist(rng);
  for (float &v : bias)
    v = dist(rng);
  for (float &v : y0)
    v = dist(rng);
  std::vector<float> y = y0;
  matmulQ4(pool, x.data(), c.tokens, w.matrix(), withBias ? bias.data() : nullptr, beta, y.data());
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t n = 0; n < c.n; ++n) {
      // x is quantized to int8 per 32 columns (matmul_q4.h): each x moves
      // by at most half a step, max|x| / 254 over its block.
      double expected = 0, magnitude = 0, rounding = 0;
      for (int64_t k = 0; k < c.k; ++k) {
        double term = x[t * c.k + k] * w.weight(n, k);
        expected += term;
        magnitude += std::fabs(term);
        double blockMax = 0;
        for (int64_t j = k / 32 * 32; j < std::min<int64_t>(c.k, k / 32 * 32 + 32); ++j)
          blockMax = std::max(blockMax, double(std::fabs(x[t * c.k + j])));
        rounding += std::fabs(w.weight(n, k)) * blockMax / 254 * 1.0001;
      }
      expected += (withBias ? bias[n] : 0.0) + (beta != 0.0f ? y0[t * c.n + n] : 0.0);
      ASSERT_NEAR(y[t * c.n + n], expected, rounding + 2e-5 * (magnitude + 1))
          << isaName(activeIsa()) << " T=" << c.tokens << " N=" << c.n << " K=" << c.k
          << " G=" << c.groupSize << " t=" << t << " n=" << n;
    }
}

std::vector<Isa> supportedIsas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isaSupported(isa))
      isas.push_back(isa);
  return isas;
}

TEST(MatmulQ4, MatchesDequantizeThenMatmul) {
  ThreadPool pool(3);
  // Ragged last groups (172 = 5 x 32 + 12 = 2 x 64 + 44), K not a multiple
  // of 8 or 64, one row, rows not a multiple of the tiles, decode (T <= 2)
  // and prefill token counts.
  const Case cases[] = {{1, 67, 172, 32}, {2, 67, 172, 64}, {3, 67, 172, 32},  {17, 33, 172, 64},
                        {1, 5, 100, 96},  {2, 9, 37, 32},   {5, 1, 1, 32},     {1, 130, 1000, 128},
                        {4, 64, 256, 64}, {1, 3, 96, 32},   {9, 18, 2048, 128}};
  uint32_t seed = 1;
  for (Isa isa : supportedIsas()) {
    ASSERT_TRUE(setIsaForTesting(isa));
    for (const Case &c : cases) {
      checkCase(pool, c, false, 0.0f, seed++);
      checkCase(pool, c, true, 0.0f, seed++);
      checkCase(pool, c, true, 1.0f, seed++);
    }
  }
  setIsaForTesting(supportedIsas().back());
}

TEST(MatmulQ4, LargeLayerSplitsOverThreads) {
  ThreadPool pool(4);
  for (Isa isa : supportedIsas()) {
    ASSERT_TRUE(setIsaForTesting(isa));
    checkCase(pool, {1, 700, 768, 64}, true, 1.0f, 99);
    checkCase(pool, {37, 300, 800, 32}, false, 0.0f, 100);
  }
  setIsaForTesting(supportedIsas().back());
}

TEST(MatmulQ4, CheckNamesTheTensorAndTheProblem) {
  std::vector<hd::u32> words(4);
  std::vector<uint16_t> halves(1);
  std::vector<uint8_t> nibbles(1);
  Q4Matrix ok{words.data(), halves.data(), nibbles.data(), 1, 32, 32};
  EXPECT_TRUE(checkWeight(ok, "w").isOk());
  Q4Matrix bad = ok;
  bad.groupSize = 48;
  Status status = checkWeight(bad, "model.layers.0.mlp.up_proj");
  EXPECT_NE(status.message().find("'model.layers.0.mlp.up_proj'"), std::string::npos);
  EXPECT_NE(status.message().find("group size 48"), std::string::npos);
  bad = ok;
  bad.zeros = nullptr;
  EXPECT_NE(checkWeight(bad, "w").message().find("no data"), std::string::npos);
}

} // namespace
} // namespace llmc::cpu
