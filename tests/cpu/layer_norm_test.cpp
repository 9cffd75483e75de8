// cpu::layerNorm against a double-precision reference of HF's nn.LayerNorm:
// whole rows and per-head groups, per-feature and shared weights, with and
// without bias, F32/F16/BF16 weights, every ISA this machine runs, in place,
// and rows whose mean dwarfs their spread (where E[x^2] - E[x]^2 would fail).
#include "cpu/layer_norm.h"
#include "test_util.h"

#include <cmath>

namespace llmc {
namespace {

struct Case {
  int64_t tokens, width, group;
  bool shared, bias;
  float offset;
};

// y in double: (x - mean) / sqrt(var + eps) * (offset + gamma) + beta.
std::vector<double> reference(const std::vector<float> &x, const Case &c,
                              const std::vector<float> &gamma, const std::vector<float> &beta,
                              float eps) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t g = 0; g < c.width; g += c.group) {
      const float *in = x.data() + t * c.width + g;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < c.group; ++i)
        mean += in[i];
      mean /= static_cast<double>(c.group);
      for (int64_t i = 0; i < c.group; ++i)
        var += (in[i] - mean) * (in[i] - mean);
      var /= static_cast<double>(c.group);
      for (int64_t i = 0; i < c.group; ++i) {
        const int64_t w = c.shared ? i : g + i;
        const double shift = beta.empty() ? 0.0 : beta[w];
        y[t * c.width + g + i] =
            (in[i] - mean) / std::sqrt(var + eps) * (c.offset + gamma[w]) + shift;
      }
    }
  return y;
}

void expectNear(const std::vector<float> &got, const std::vector<double> &want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    if (!(err <= worst)) { // NaN-aware: a NaN becomes the worst error
      worst = err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << "at " << at << ": got " << got[at] << ", want " << want[at];
}

void runCase(const Case &c, DType dtype, float xMean, std::mt19937 &rng, ThreadPool &pool) {
  const int64_t weights = c.shared ? c.group : c.width;
  std::vector<float> x = test::randomFloats(rng, c.tokens * c.width, xMean - 2.0f, xMean + 2.0f);
  test::TestWeights gamma = test::makeWeights(rng, dtype, weights, 0.5f, 1.5f);
  test::TestWeights beta = test::makeWeights(rng, dtype, weights, -0.5f, 0.5f);
  const float eps = 1e-5f;
  std::vector<double> want =
      reference(x, c, gamma.values, c.bias ? beta.values : std::vector<float>{}, eps);
  const cpu::WeightVector noBias{nullptr, dtype, 0};
  const cpu::LayerNormShape shape{c.width, c.group};
  std::vector<float> y(x.size(), std::nanf(""));
  cpu::layerNorm(pool, x.data(), c.tokens, shape, gamma.vector(), c.bias ? beta.vector() : noBias,
                 eps, y.data(), c.offset);
  expectNear(y, want, 2e-5 * (1.0 + std::abs(xMean)));
  // In place: y aliases x.
  cpu::layerNorm(pool, x.data(), c.tokens, shape, gamma.vector(), c.bias ? beta.vector() : noBias,
                 eps, x.data(), c.offset);
  EXPECT_EQ(x, y);
}

TEST(LayerNorm, MatchesReferenceOnEveryIsa) {
  const Case cases[] = {
      {5, 64, 64, false, true, 0.0f},    // whole rows with bias (StableLM, Phi, NeoX)
      {3, 67, 67, false, false, 0.0f},   // odd width, no bias (Cohere)
      {2, 2560, 2560, false, true, 0.0f}, // a real width, several SIMD blocks
      {4, 64, 16, false, false, 0.0f},   // per-head, each head its own weights (Cohere qk)
      {4, 96, 32, true, true, 0.0f},     // per-head, shared weights and bias (Phi qk)
      {2, 64, 64, false, true, 1.0f},    // offset + gamma
  };
  std::mt19937 rng(7);
  ThreadPool pool(3);
  for (cpu::Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (const Case &c : cases)
      for (DType dtype : test::kWeightDTypes) {
        SCOPED_TRACE(std::string(cpu::isaName(isa)) + " width " + std::to_string(c.width) +
                     " group " + std::to_string(c.group) + " dtype " +
                     std::to_string(static_cast<int>(dtype)));
        runCase(c, dtype, 0.0f, rng, pool);
      }
  }
}

// Rows around 1000 with a spread of 2: the centered two-pass variance keeps
// its accuracy where the one-pass E[x^2] - E[x]^2 loses every digit in f32.
TEST(LayerNorm, LargeMeanKeepsTheVariance) {
  std::mt19937 rng(11);
  ThreadPool pool(1);
  for (cpu::Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    runCase({3, 512, 512, false, true, 0.0f}, DType::F32, 1000.0f, rng, pool);
  }
}

TEST(LayerNorm, ConstantRowIsBeta) {
  ThreadPool pool(1);
  std::vector<float> x(32, 3.5f), y(32, 0.0f), gamma(32, 2.0f), beta(32);
  for (int i = 0; i < 32; ++i)
    beta[i] = 0.25f * static_cast<float>(i);
  cpu::layerNorm(pool, x.data(), 1, {32, 32}, {gamma.data(), DType::F32, 32},
                 {beta.data(), DType::F32, 32}, 1e-5f, y.data());
  EXPECT_EQ(y, beta);
}

} // namespace
} // namespace llmc
