// The int8 quantizer (compiler/quantize/int8.h, W8A16): the stored layout
// (q in [-127, 127], zero padding, one scale per row or group), every weight
// within half a step of its value, f16 scales used as stored, zero and
// non-finite groups, bad options named; and the CPU kernel on quantized
// weights against the float matmul (relative output error < 1%).
#include "cpu/matmul.h"
#include "cpu/matmul_q8.h"
#include "quantize/int8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace llmc::quant {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float stddev = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng);
  return v;
}

TEST(Int8Quantize, EveryWeightIsWithinHalfAStep) {
  ThreadPool pool(2);
  for (int64_t group : {0, 32, 64})
    for (bool half : {false, true}) {
      const int64_t rows = 9, cols = 72; // ragged: 72 = 2 x 32 + 8
      std::vector<float> w = gaussian(rows * cols, 5);
      w[3] = 0.5f; // an outlier widens row 0's scale (or its group's)
      auto q = quantizeQ8(pool, w.data(), rows, cols, group, half, "w");
      ASSERT_TRUE(q.isOk()) << q.message();
      const int64_t rowBytes = hd::q8RowBytes(cols), groups = hd::q8NumGroups(cols, group);
      ASSERT_EQ(rowBytes, 96);
      ASSERT_EQ(q->qweight.size(), static_cast<size_t>(rows * rowBytes));
      ASSERT_EQ(half ? q->halfScaleBits.size() : q->scales.size(),
                static_cast<size_t>(rows * groups));
      std::vector<float> back = dequantizeQ8(*q);
      const int64_t width = hd::q8GroupColumns(cols, group);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = cols; c < rowBytes; ++c)
          ASSERT_EQ(q->qweight[r * rowBytes + c], 0) << "padding";
        for (int64_t g = 0; g < groups; ++g) {
          const float s = half ? hd::f16ToF32(q->halfScaleBits[r * groups + g])
                               : q->scales[r * groups + g];
          int peak = 0;
          for (int64_t c = g * width; c < std::min(cols, (g + 1) * width); ++c) {
            const int v = q->qweight[r * rowBytes + c];
            ASSERT_GE(v, -127);
            ASSERT_LE(v, 127);
            peak = std::max(peak, std::abs(v));
            ASSERT_EQ(back[r * cols + c], static_cast<float>(v) * s);
            ASSERT_LE(std::fabs(back[r * cols + c] - w[r * cols + c]), 0.5f * s * 1.0001f)
                << "G " << group << " row " << r << " col " << c;
          }
          // The largest magnitude takes (about) the top level: the range is used.
          ASSERT_GE(peak, half ? 126 : 127) << "G " << group << " row " << r << " group " << g;
        }
      }
    }
}

TEST(Int8Quantize, ZeroAndNonFiniteGroups) {
  ThreadPool pool(1);
  std::vector<float> w(2 * 64, 0.0f);
  w[64 + 5] = NAN;
  auto q = quantizeQ8(pool, w.data(), 2, 64, 32, false, "w");
  ASSERT_TRUE(q.isOk()) << q.message();
  EXPECT_EQ(q->scales[0], 0.0f); // all zeros: scale 0, q 0
  EXPECT_TRUE(std::isnan(q->scales[2])) << "row 1, group 0 holds a NaN";
  EXPECT_EQ(q->scales[3], 0.0f);
  for (int8_t v : q->qweight)
    ASSERT_EQ(v, 0);
}

TEST(Int8Quantize, BadOptionsAreNamed) {
  ThreadPool pool(1);
  std::vector<float> w(64, 1.0f);
  auto bad = quantizeQ8(pool, w.data(), 1, 64, 48, false, "model.q_proj.weight");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("int8 weight 'model.q_proj.weight': group size 48"),
            std::string::npos)
      << bad.message();
  std::vector<float> huge(64, 1e9f);
  auto overflow = quantizeQ8(pool, huge.data(), 1, 64, 0, true, "big");
  ASSERT_FALSE(overflow.isOk());
  EXPECT_NE(overflow.message().find("beyond f16's range; use f32 scales"), std::string::npos)
      << overflow.message();
  EXPECT_TRUE(quantizeQ8(pool, huge.data(), 1, 64, 0, false, "big").isOk());
}

// W8A16 on quantized Gaussian weights vs the float layer: the output's
// relative error is the weights' (rounding error step / sqrt(12), the step
// max|w| / 127 with max|w| about 2.9 sigma over 256 values: about 0.66%), under
// 1%; and matmulQ8 computes exactly the fake-quantized weights' product up
// to rounding.
TEST(Int8Quantize, KernelOnQuantizedWeightsIsNearTheFloatLayer) {
  ThreadPool pool(2);
  const int64_t rows = 96, cols = 256, tokens = 3;
  std::vector<float> w = gaussian(rows * cols, 7), x = gaussian(tokens * cols, 8, 1.0f);
  for (int64_t group : {0, 64}) {
    auto q = quantizeQ8(pool, w.data(), rows, cols, group, group > 0, "w");
    ASSERT_TRUE(q.isOk()) << q.message();
    cpu::Q8Matrix m{q->qweight.data(), q->scaleData(), q->halfScales, rows, cols, group};
    ASSERT_TRUE(cpu::checkWeight(m, "w").isOk());
    std::vector<float> got(tokens * rows), exact(tokens * rows), fake(tokens * rows);
    cpu::matmulQ8(pool, x.data(), tokens, m, nullptr, 0.0f, got.data());
    cpu::matmul(pool, x.data(), tokens, {w.data(), DType::F32, rows, cols}, nullptr, 0.0f,
                exact.data());
    std::vector<float> wq(w.size());
    ASSERT_TRUE(fakeQuantizeQ8(pool, w.data(), rows, cols, group, group > 0, wq.data(), "w").isOk());
    cpu::matmul(pool, x.data(), tokens, {wq.data(), DType::F32, rows, cols}, nullptr, 0.0f,
                fake.data());
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], fake[i], 1e-5f * (1.0f + std::fabs(fake[i]))) << "G " << group;
      err += (got[i] - exact[i]) * (got[i] - exact[i]);
      norm += exact[i] * exact[i];
    }
    EXPECT_LT(std::sqrt(err / norm), 0.01) << "G " << group;
  }
}

} // namespace
} // namespace llmc::quant
