// The AArch64 path's own promises (cpu/isa.h, simd_neon.cpp,
// matmul_q4_neon*.cpp, matmul_q8_neon.cpp), next to the shared kernel tests
// that run every ISA against the references: ISA detection on both
// architectures; the float decode tiles and the int8 kernel summing in the
// AVX2 order bit for bit; the int4 kernel's SDOT and widening paths giving
// the same bits, and its outputs independent of the token count, the row
// split and the threads. Off AArch64 only the detection test is built.
#include "cpu/isa.h"
#include "cpu/matmul.h"
#include "cpu/matmul_q4.h"
#include "cpu/matmul_q8.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/q8_layout.h"
#include "../cpu/test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace llmc::cpu {
namespace {

constexpr bool kAarch64 =
#if defined(__aarch64__)
    true;
#else
    false;
#endif

TEST(NeonIsa, DetectionMatchesTheArchitecture) {
  EXPECT_STREQ(isaName(Isa::Neon), "neon");
  EXPECT_TRUE(isaSupported(Isa::Scalar));
  EXPECT_EQ(isaSupported(Isa::Neon), kAarch64);
  if (kAarch64) {
    EXPECT_EQ(activeIsa(), Isa::Neon);
    EXPECT_FALSE(isaSupported(Isa::Avx2));
    EXPECT_FALSE(isaSupported(Isa::Avx512));
    EXPECT_FALSE(setIsaForTesting(Isa::Avx2));
    EXPECT_EQ(activeIsa(), Isa::Neon);
    EXPECT_EQ(neonDotProdActive(), neonDotProdSupported());
  } else {
    EXPECT_FALSE(setIsaForTesting(Isa::Neon));
    EXPECT_NE(activeIsa(), Isa::Neon);
    EXPECT_FALSE(neonDotProdSupported());
  }
  // The hook never turns SDOT on where the CPU lacks it.
  if (!neonDotProdSupported()) {
    EXPECT_FALSE(setNeonDotProdForTesting(true));
  }
  EXPECT_TRUE(setNeonDotProdForTesting(false));
  EXPECT_FALSE(neonDotProdActive());
  setNeonDotProdForTesting(neonDotProdSupported());
  // scripts/test-neon.sh reads this line to check that each qemu CPU model ran the path it meant.
  std::printf("isa: %s, neon dotprod: %s\n", isaName(activeIsa()),
              neonDotProdSupported() ? "yes" : "no");
}

// The kernel tests below exist on AArch64 only (elsewhere they would only
// skip, and a skip would hide the detection test's result).
#if defined(__aarch64__)

// y[t, n] in the AVX2 order (simd_neon.cpp): 8 lanes of fma, the hsum tree,
// the K % 8 tail by fma, then bias.
float avx2Order(const float *x, const float *w, int64_t k, float bias) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j)
      lane[j] = std::fma(x[i + j], w[i + j], lane[j]);
  float acc = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (; i < k; ++i)
    acc = std::fma(x[i], w[i], acc);
  return acc + bias;
}

// The decode and small-batch tiles (1-31 tokens: 4 x 2 and 2 x 4); the
// packed GEMM from 32 tokens on is cpu_gemm_test's.
TEST(NeonFloat, DecodeTilesSumInTheAvx2OrderBitForBit) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (DType dtype : test::kWeightDTypes)
    for (int64_t tokens : {1, 2, 3, 5, 31})
      for (int64_t n : {1, 7, 13})
        for (int64_t k : {1, 8, 29, 300}) {
          std::mt19937 rng(seed++);
          test::TestWeights w = test::makeWeights(rng, dtype, n * k);
          const std::vector<float> x = test::randomFloats(rng, tokens * k);
          const std::vector<float> bias = test::randomFloats(rng, n);
          std::vector<float> y(tokens * n);
          matmul(pool, x.data(), tokens, w.matrix(n, k), bias.data(), 0.0f, y.data());
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 0; r < n; ++r)
              ASSERT_EQ(y[t * n + r],
                        avx2Order(x.data() + t * k, w.values.data() + r * k, k, bias[r]))
                  << dtypeName(dtype) << " T=" << tokens << " N=" << n << " K=" << k
                  << " t=" << t << " n=" << r;
        }
}

// matmul_q8_neon.cpp against the AVX2 kernel's order: per group 8 lanes of
// fma of float(q) and x, columns past K (zero padding) against zero x; the
// lanes' total = scale * lanes for group 0, then fma(scale, lanes, total);
// hsum tree.
TEST(NeonQ8, SumsInTheAvx2OrderBitForBit) {
  ThreadPool pool(2);
  struct Case {
    int64_t tokens, rows, cols, group;
  };
  const Case cases[] = {{1, 9, 100, 0}, {2, 5, 256, 32}, {3, 6, 77, 64}, {5, 4, 200, 96}};
  uint32_t seed = 40;
  for (const Case &c : cases) {
    std::mt19937 rng(seed++);
    const int64_t rowBytes = hd::q8RowBytes(c.cols), groups = hd::q8NumGroups(c.cols, c.group);
    const int64_t width = hd::q8GroupColumns(c.cols, c.group);
    std::vector<int8_t> q(c.rows * rowBytes, 0);
    std::uniform_int_distribution<int> level(-127, 127);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t k = 0; k < c.cols; ++k)
        q[r * rowBytes + k] = static_cast<int8_t>(level(rng));
    const std::vector<float> scales = test::randomFloats(rng, c.rows * groups, 0.001f, 0.02f);
    const std::vector<float> x = test::randomFloats(rng, c.tokens * c.cols);
    const Q8Matrix w{q.data(), scales.data(), false, c.rows, c.cols, c.group};
    std::vector<float> y(c.tokens * c.rows);
    matmulQ8(pool, x.data(), c.tokens, w, nullptr, 0.0f, y.data());
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t r = 0; r < c.rows; ++r) {
        float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t g = 0; g < groups; ++g) {
          const float scale = scales[r * groups + g];
          float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          for (int64_t k = g * width; k < std::min(c.cols, (g + 1) * width); k += 8)
            for (int j = 0; j < 8; ++j) {
              const float xv = k + j < c.cols ? x[t * c.cols + k + j] : 0.0f;
              sums[j] = std::fma(static_cast<float>(q[r * rowBytes + k + j]), xv, sums[j]);
            }
          for (int j = 0; j < 8; ++j)
            lane[j] = g == 0 ? scale * sums[j] : std::fma(scale, sums[j], lane[j]);
        }
        const float expected = ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
                               ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        ASSERT_EQ(y[t * c.rows + r], expected)
            << "T=" << c.tokens << " N=" << c.rows << " K=" << c.cols << " G=" << c.group
            << " t=" << t << " n=" << r;
      }
  }
}

// A random int4 matrix in the plan layout (random pad nibbles).
struct Q4Data {
  std::vector<hd::u32> qweight;
  std::vector<uint16_t> scales, zeros;
  std::vector<uint8_t> packedZeros; // as the runtime loads them
  Q4Matrix m;
};

Q4Data randomQ4(std::mt19937 &rng, int64_t rows, int64_t cols, int64_t group) {
  Q4Data d;
  std::uniform_int_distribution<hd::u32> word;
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::uniform_int_distribution<int> nibble(0, 15);
  d.qweight.resize(rows * hd::q4WordsPerRow(cols));
  for (hd::u32 &v : d.qweight)
    v = word(rng);
  for (int64_t i = 0; i < rows * hd::q4NumGroups(cols, group); ++i) {
    d.scales.push_back(hd::f32ToF16(scale(rng)));
    d.zeros.push_back(hd::f32ToF16(static_cast<float>(nibble(rng))));
  }
  d.packedZeros = *packQ4Zeros(d.zeros.data(), rows, hd::q4NumGroups(cols, group), "random");
  d.m = {d.qweight.data(), d.scales.data(), d.packedZeros.data(), rows, cols, group};
  return d;
}

struct Q4Case {
  int64_t tokens, rows, cols, group;
};

// Ragged shapes: K off 32 and 64 (an odd block count, a half pair), rows off
// the 4-row tile and the 16-row block, tokens off the 4-token tile, group
// sizes whose groups start inside pairs (96, 160).
const Q4Case kQ4Cases[] = {{1, 67, 172, 32}, {2, 9, 37, 32},    {3, 17, 800, 160},
                           {5, 33, 224, 96}, {9, 18, 2048, 128}, {13, 3, 5, 32},
                           {4, 64, 256, 64}, {1, 130, 1000, 128}};

std::vector<float> runQ4(ThreadPool &pool, const Q4Data &w, const std::vector<float> &x,
                         int64_t tokens, const std::vector<float> &bias) {
  std::vector<float> y(tokens * w.m.rows);
  matmulQ4(pool, x.data(), tokens, w.m, bias.data(), 0.0f, y.data());
  return y;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(NeonQ4, SdotAndWideningMultipliesGiveTheSameBits) {
  if (!neonDotProdSupported())
    GTEST_SKIP() << "this CPU has no dotprod: only the widening path runs (scripts/test-neon.sh "
                    "runs both CPU models)";
  ThreadPool pool(2);
  uint32_t seed = 70;
  for (const Q4Case &c : kQ4Cases) {
    std::mt19937 rng(seed++);
    const Q4Data w = randomQ4(rng, c.rows, c.cols, c.group);
    const std::vector<float> x = test::randomFloats(rng, c.tokens * c.cols, -2.0f, 2.0f);
    const std::vector<float> bias = test::randomFloats(rng, c.rows);
    ASSERT_TRUE(setNeonDotProdForTesting(true));
    const std::vector<float> sdot = runQ4(pool, w, x, c.tokens, bias);
    ASSERT_TRUE(setNeonDotProdForTesting(false));
    const std::vector<float> widening = runQ4(pool, w, x, c.tokens, bias);
    setNeonDotProdForTesting(true);
    ASSERT_TRUE(sameBits(sdot, widening))
        << "T=" << c.tokens << " N=" << c.rows << " K=" << c.cols << " G=" << c.group;
  }
}

// A prompt prefilled whole, token by token or in chunks, on 1 or 3 threads:
// every output the same bits (the tile and the lane a row takes do not matter).
TEST(NeonQ4, OutputsDoNotDependOnTokenCountRowSplitOrThreads) {
  uint32_t seed = 90;
  for (const Q4Case &c : kQ4Cases) {
    std::mt19937 rng(seed++);
    const Q4Data w = randomQ4(rng, c.rows, c.cols, c.group);
    const int64_t tokens = c.tokens + 6;
    const std::vector<float> x = test::randomFloats(rng, tokens * c.cols, -2.0f, 2.0f);
    const std::vector<float> bias = test::randomFloats(rng, c.rows);
    ThreadPool one(1);
    const std::vector<float> whole = runQ4(one, w, x, tokens, bias);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      for (int64_t chunk : {1, 2, 3, 5}) {
        std::vector<float> parts;
        for (int64_t t = 0; t < tokens; t += chunk) {
          const int64_t count = std::min(chunk, tokens - t);
          const std::vector<float> xs(x.begin() + t * c.cols, x.begin() + (t + count) * c.cols);
          const std::vector<float> y = runQ4(pool, w, xs, count, bias);
          parts.insert(parts.end(), y.begin(), y.end());
        }
        ASSERT_TRUE(sameBits(parts, whole))
            << "chunks of " << chunk << ", " << threads << " threads, N=" << c.rows
            << " K=" << c.cols << " G=" << c.group;
      }
    }
  }
}

#endif // __aarch64__

} // namespace
} // namespace llmc::cpu
