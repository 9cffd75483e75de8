// GPTQ (compiler/quantize/gptq.h) on small random layers: the inverse
// Hessian factor, the output error against round to nearest (in order and
// act-order, ragged groups and row tiles), what act-order keeps of RTN's
// codings, always-zero inputs and a Hessian that cannot be factored.
#include "kernels/common/half.h"
#include "kernels/common/q4_layout.h"
#include "quantize/gptq.h"
#include "quantize/q4_quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace llmc {
namespace {

// A layer's inputs X [tokens, cols] with correlated channels and a few
// channels of large magnitude, as trained models have: X = Z A, Z normal.
std::vector<float> correlatedInputs(int64_t tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> mix(cols * cols);
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mix[i * cols + j] = (i == j ? 1.0f : 0.0f) + 0.3f * normal(rng) / std::sqrt(float(cols));
  std::vector<float> z(tokens * cols), x(tokens * cols, 0.0f);
  for (float &v : z)
    v = normal(rng);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < cols; ++i) {
      const float zi = z[t * cols + i] * (i % 17 == 3 ? 8.0f : 1.0f);
      for (int64_t j = 0; j < cols; ++j)
        x[t * cols + j] += zi * mix[i * cols + j];
    }
  return x;
}

std::vector<float> gram(const std::vector<float> &x, int64_t tokens, int64_t cols) {
  std::vector<float> h(cols * cols, 0.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j)
        h[i * cols + j] += x[t * cols + i] * x[t * cols + j];
  return h;
}

std::vector<float> randomWeights(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(n);
  for (float &v : w)
    v = normal(rng);
  return w;
}

// ||X W^T - X V^T||^2 for W, V [rows, cols].
double outputError(const std::vector<float> &x, int64_t tokens, const std::vector<float> &w,
                   const std::vector<float> &v, int64_t rows, int64_t cols) {
  double err = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t n = 0; n < rows; ++n) {
      double d = 0;
      for (int64_t k = 0; k < cols; ++k)
        d += double(x[t * cols + k]) * (double(w[n * cols + k]) - v[n * cols + k]);
      err += d * d;
    }
  return err;
}

TEST(Gptq, InverseHessianFactorIsTheUpperCholeskyOfTheInverse) {
  ThreadPool pool(2);
  const int64_t n = 37, tokens = 200;
  std::vector<float> x = correlatedInputs(tokens, n, 1);
  std::vector<float> h = gram(x, tokens, n);
  std::vector<double> hd(h.begin(), h.end());
  auto u = quant::inverseHessianFactor(pool, hd, n, 0.01);
  ASSERT_TRUE(u.isOk()) << u.message();
  double mean = 0;
  for (int64_t i = 0; i < n; ++i)
    mean += hd[i * n + i] / n;
  for (int64_t i = 0; i < n; ++i)
    hd[i * n + i] += 0.01 * mean;
  // (U^T U) (H + damp I) == I, U upper triangular.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j)
      ASSERT_EQ((*u)[i * n + j], 0.0) << i << ", " << j;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        double inv = 0; // (U^T U)[i][k]
        for (int64_t m = 0; m < n; ++m)
          inv += (*u)[m * n + i] * (*u)[m * n + k];
        sum += inv * hd[k * n + j];
      }
      ASSERT_NEAR(sum, i == j ? 1.0 : 0.0, 1e-9) << i << ", " << j;
    }
}

TEST(Gptq, BeatsRoundToNearestOnTheLayerOutput) {
  ThreadPool pool(2);
  // 45 rows: a ragged tile of rows; 160 columns: a ragged last group at 64.
  const int64_t rows = 45, cols = 160, tokens = 600;
  std::vector<float> x = correlatedInputs(tokens, cols, 7);
  std::vector<float> h = gram(x, tokens, cols);
  std::vector<float> w = randomWeights(rows * cols, 11);
  for (int64_t group : {32, 64, 128})
    for (bool actOrder : {false, true})
      for (bool rangeSearch : {false, true}) {
        quant::GptqOptions options;
        options.groupSize = group;
        options.actOrder = actOrder;
        options.rangeSearch = rangeSearch;
        options.refitScales = rangeSearch; // without both: the codings checked below
        const std::string what = "group " + std::to_string(group) +
                                 (actOrder ? " act-order" : "") +
                                 (rangeSearch ? " range search" : "");
        auto q = quant::gptqQuantize(pool, w.data(), rows, cols, h, options);
        ASSERT_TRUE(q.isOk()) << q.message();
        const int64_t groups = hd::q4NumGroups(cols, group);
        ASSERT_EQ(static_cast<int64_t>(q->qweight.size()), rows * hd::q4WordsPerRow(cols));
        ASSERT_EQ(static_cast<int64_t>(q->scales.size()), rows * groups);
        quant::Q4Tensor rtn = quant::quantizeQ4(pool, w.data(), rows, cols, group);
        const double gptqErr = outputError(x, tokens, w, quant::dequantizeQ4(*q), rows, cols);
        const double rtnErr = outputError(x, tokens, w, quant::dequantizeQ4(rtn), rows, cols);
        ASSERT_TRUE(std::isfinite(gptqErr));
        std::printf("%s: output error GPTQ %.4e, RTN %.4e\n", what.c_str(), gptqErr, rtnErr);
        EXPECT_LT(gptqErr, 0.8 * rtnErr) << what;
        EXPECT_NE(q->qweight, rtn.qweight) << what;
        if (rangeSearch)
          continue;
        if (actOrder) { // static groups: the codings are RTN's, only the values move
          EXPECT_EQ(q->scales, rtn.scales) << what;
          EXPECT_EQ(q->zeros, rtn.zeros) << what;
        } else { // the first group of a row sees no compensation yet
          for (int64_t n = 0; n < rows; ++n)
            ASSERT_EQ(q->scales[n * groups], rtn.scales[n * groups]) << what;
        }
      }
}

// The scale refit keeps every stored value and zero point, changes some
// scales, and never raises the row errors (w - d)^T (H + damp I) (w - d) it
// minimizes (in order and act-order, ragged last group at 64 and 128).
TEST(Gptq, ScaleRefitLowersTheDampenedErrorAndKeepsTheCodes) {
  ThreadPool pool(2);
  const int64_t rows = 21, cols = 160, tokens = 400;
  std::vector<float> x = correlatedInputs(tokens, cols, 17);
  std::vector<float> h = gram(x, tokens, cols);
  std::vector<float> w = randomWeights(rows * cols, 19);
  double mean = 0;
  for (int64_t k = 0; k < cols; ++k)
    mean += h[k * cols + k] / cols;
  for (int64_t group : {32, 64, 128})
    for (bool actOrder : {false, true}) {
      const std::string what = "group " + std::to_string(group) + (actOrder ? " act-order" : "");
      quant::GptqOptions options;
      options.groupSize = group;
      options.actOrder = actOrder;
      options.refitScales = false;
      auto plain = quant::gptqQuantize(pool, w.data(), rows, cols, h, options);
      options.refitScales = true;
      auto refit = quant::gptqQuantize(pool, w.data(), rows, cols, h, options);
      ASSERT_TRUE(plain.isOk()) << plain.message();
      ASSERT_TRUE(refit.isOk()) << refit.message();
      EXPECT_EQ(plain->qweight, refit->qweight) << what;
      EXPECT_EQ(plain->zeros, refit->zeros) << what;
      EXPECT_NE(plain->scales, refit->scales) << what;
      const std::vector<float> a = quant::dequantizeQ4(*plain), b = quant::dequantizeQ4(*refit);
      for (int64_t n = 0; n < rows; ++n) {
        auto dampenedError = [&](const std::vector<float> &d) {
          double sum = 0;
          for (int64_t i = 0; i < cols; ++i)
            for (int64_t j = 0; j < cols; ++j)
              sum += (double(w[n * cols + i]) - d[n * cols + i]) *
                     (double(h[i * cols + j]) + (i == j ? options.dampening * mean : 0.0)) *
                     (double(w[n * cols + j]) - d[n * cols + j]);
          return sum;
        };
        const double before = dampenedError(a), after = dampenedError(b);
        ASSERT_TRUE(std::isfinite(after)) << what;
        EXPECT_LE(after, before * (1 + 1e-6)) << what << ", row " << n;
      }
      const double plainErr = outputError(x, tokens, w, a, rows, cols);
      const double refitErr = outputError(x, tokens, w, b, rows, cols);
      std::printf("%s: output error without refit %.4e, with %.4e\n", what.c_str(), plainErr,
                  refitErr);
      EXPECT_LT(refitErr, plainErr) << what;
    }
}

TEST(Gptq, InputsThatWereAlwaysZeroQuantizeToZero) {
  ThreadPool pool(1);
  const int64_t rows = 9, cols = 64, tokens = 300;
  std::vector<float> x = correlatedInputs(tokens, cols, 3);
  for (int64_t t = 0; t < tokens; ++t)
    x[t * cols + 5] = 0.0f;
  std::vector<float> h = gram(x, tokens, cols), w = randomWeights(rows * cols, 5);
  quant::GptqOptions options;
  options.groupSize = 32;
  auto q = quant::gptqQuantize(pool, w.data(), rows, cols, h, options);
  ASSERT_TRUE(q.isOk()) << q.message();
  std::vector<float> back = quant::dequantizeQ4(*q);
  for (int64_t n = 0; n < rows; ++n)
    EXPECT_EQ(back[n * cols + 5], 0.0f) << "row " << n;
}

TEST(Gptq, AHessianThatCannotBeFactoredIsAnError) {
  ThreadPool pool(1);
  const int64_t rows = 4, cols = 32;
  std::vector<float> w = randomWeights(rows * cols, 2), h(cols * cols, 0.0f);
  for (int64_t i = 0; i < cols; ++i)
    h[i * cols + i] = 1.0f;
  h[3 * cols + 4] = h[4 * cols + 3] = std::numeric_limits<float>::quiet_NaN();
  quant::GptqOptions options;
  options.groupSize = 32;
  auto q = quant::gptqQuantize(pool, w.data(), rows, cols, h, options);
  ASSERT_FALSE(q.isOk());
  EXPECT_NE(q.message().find("GPTQ"), std::string::npos) << q.message();
  std::vector<float> wrongSize(10, 1.0f);
  auto bad = quant::gptqQuantize(pool, w.data(), rows, cols, wrongSize, options);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("Hessian of 10 values"), std::string::npos) << bad.message();
}

} // namespace
} // namespace llmc
