// matmul against a double-precision reference, for every weight dtype and
// every ISA path this CPU supports, on odd sizes that exercise the row,
// token and K tails of the tiles.
#include "cpu/matmul.h"
#include "test_util.h"

#include <cmath>

namespace llmc::cpu {
namespace {

using test::kWeightDTypes;

struct MatmulCase {
  int64_t tokens, n, k;
};

// Checks y against sum_k x*w (+ bias) (+ y0) with a tolerance scaled by sum |x*w|.
void checkMatmul(ThreadPool &pool, DType dtype, MatmulCase c, bool withBias, float beta,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  test::TestWeights w = test::makeWeights(rng, dtype, c.n * c.k);
  std::vector<float> x = test::randomFloats(rng, c.tokens * c.k);
  std::vector<float> bias = test::randomFloats(rng, c.n);
  std::vector<float> y0 = test::randomFloats(rng, c.tokens * c.n);
  std::vector<float> y = y0;
  matmul(pool, x.data(), c.tokens, w.matrix(c.n, c.k), withBias ? bias.data() : nullptr, beta,
         y.data());
  x = test::kernelInputs(dtype, x); // what the reference multiplies
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t n = 0; n < c.n; ++n) {
      double expected = 0, magnitude = 0;
      for (int64_t k = 0; k < c.k; ++k) {
        double term = static_cast<double>(x[t * c.k + k]) * w.values[n * c.k + k];
        expected += term;
        magnitude += std::fabs(term);
      }
      if (withBias)
        expected += bias[n];
      if (beta != 0.0f)
        expected += y0[t * c.n + n];
      ASSERT_NEAR(y[t * c.n + n], expected, 1e-5 * (magnitude + 1))
          << isaName(activeIsa()) << " " << dtypeName(dtype) << " T=" << c.tokens << " N=" << c.n
          << " K=" << c.k << " t=" << t << " n=" << n;
    }
}

TEST(Matmul, MatchesReferenceForEveryIsaAndDtype) {
  ThreadPool pool(3);
  const MatmulCase cases[] = {{1, 67, 172}, {3, 67, 172}, {17, 67, 172}, {5, 64, 256},
                              {2, 9, 5},    {1, 1, 1},    {8, 33, 31},   {4, 130, 1000}};
  uint32_t seed = 1;
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (DType dtype : kWeightDTypes)
      for (const MatmulCase &c : cases) {
        checkMatmul(pool, dtype, c, false, 0.0f, seed++);
        checkMatmul(pool, dtype, c, true, 0.0f, seed++);
        checkMatmul(pool, dtype, c, true, 1.0f, seed++);
      }
  }
}

TEST(Matmul, LargePrefillTilesOverL2Blocks) {
  // Enough rows that a thread's chunk spans several L2 blocks.
  ThreadPool pool(2);
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    checkMatmul(pool, DType::BF16, {37, 300, 1100}, true, 1.0f, 99);
  }
}

// llmrun's "running on" line names the bf16 dot-product kernels where bf16
// weights take them, and only there.
TEST(Matmul, KernelsNameSaysBf16WhereBf16WeightsTakeVdpbf16ps) {
  if (!x86Bf16Supported())
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  test::ScopedIsa avx512(Isa::Avx512);
  const std::string name = activeKernelsName();
  EXPECT_EQ(name.substr(name.size() - 7), " + bf16");
  {
    test::ScopedBf16Dot off(false);
    EXPECT_EQ(activeKernelsName().find("bf16"), std::string::npos);
  }
  test::ScopedIsa avx2(Isa::Avx2);
  EXPECT_FALSE(x86Bf16Active());
  EXPECT_EQ(activeKernelsName(), "avx2");
}

TEST(Matmul, ZeroTokensWritesNothing) {
  ThreadPool pool(2);
  std::vector<float> w(12, 1.0f), y(4, 7.0f);
  matmul(pool, nullptr, 0, {w.data(), DType::F32, 4, 3}, nullptr, 0.0f, y.data());
  for (float v : y)
    EXPECT_EQ(v, 7.0f);
}

TEST(Weights, CheckNamesTheTensorAndTheProblem) {
  float data[4] = {};
  EXPECT_TRUE(checkWeight(WeightMatrix{data, DType::BF16, 2, 1}, "w").isOk());
  Status bad = checkWeight(WeightMatrix{data, DType::I8, 2, 2}, "model.layers.0.mlp.up_proj");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.message(), "weight 'model.layers.0.mlp.up_proj': dtype I8 is not supported by "
                           "the CPU kernels (expected F32, F16 or BF16)");
  EXPECT_NE(checkWeight(WeightMatrix{nullptr, DType::F32, 2, 2}, "w").message().find("no data"),
            std::string::npos);
  EXPECT_NE(checkWeight(WeightMatrix{data, DType::F32, 0, 2}, "w").message().find("[0, 2]"),
            std::string::npos);
  EXPECT_NE(checkWeight(WeightVector{data, DType::F32, 0}, "norm").message().find("'norm'"),
            std::string::npos);
}

} // namespace
} // namespace llmc::cpu
