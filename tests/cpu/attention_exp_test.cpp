// The attention softmax's exp (cpu/attention_exp.h): its error against the
// correctly rounded exp, over a sweep of every float range the softmax sees
// (subnormal results, the underflow to +0, overflow to +inf, -inf, NaN, the
// neighbours of 0), and the AVX2 lanes against the scalar definition, bit
// for bit.
#include "cpu/attention_exp.h"
#include "cpu/attention_kernels.h"
#include "cpu/isa.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace llmc::cpu {
namespace {

using test::bitsOf;
using test::floatOf;

// Units in the last place between two non-NaN floats of the same sign (exp
// is never negative): their bit patterns are ordered like their values.
int64_t ulpDistance(float a, float b) {
  return std::llabs(static_cast<int64_t>(bitsOf(a)) - static_cast<int64_t>(bitsOf(b)));
}

// exp rounded to float from double: correctly rounded but for double-
// rounding ties, which are far below the bound tested.
float referenceExp(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

// Every 4099th float bit pattern (a stride prime to the mantissa, so every
// exponent and many mantissas), plus the listed edge values.
std::vector<float> sweep() {
  std::vector<float> xs;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
    const float x = floatOf(static_cast<uint32_t>(u));
    if (!std::isnan(x))
      xs.push_back(x);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, 88.72f, 88.7228f, 88.7229f, 89.0f, 100.0f, -87.33f,
                  -87.34f, -100.0f, -103.97f, -103.98f, -104.0f, -110.0f, -1000.0f,
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::min(),
                  0.34657359f, -0.34657359f, 1e-30f, -1e-30f})
    xs.push_back(x);
  // Around every multiple of ln(2) / 2 in the range, where n changes.
  for (int k = -320; k <= 260; ++k) {
    const float edge = static_cast<float>(k * 0.34657359027997264);
    uint32_t u = bitsOf(edge);
    for (int d = -3; d <= 3; ++d)
      if (!std::isnan(floatOf(u + d))) // below 0's pattern: NaN
        xs.push_back(floatOf(u + d));
  }
  return xs;
}

TEST(AttentionExp, WithinTheStatedUlpOfTheCorrectlyRoundedExp) {
  int64_t worst = 0;
  float worstX = 0.0f;
  for (float x : sweep()) {
    const float got = detail::attentionExp(x), want = referenceExp(x);
    ASSERT_FALSE(std::isnan(got)) << "exp(" << x << ") is NaN";
    const int64_t ulps = ulpDistance(got, want);
    if (ulps > worst) {
      worst = ulps;
      worstX = x;
    }
  }
  EXPECT_LE(worst, detail::kAttentionExpMaxUlp) << "at x = " << worstX;
  // The sweep does reach the bound (about 0.3% of all floats are 1 ulp off).
  EXPECT_EQ(worst, detail::kAttentionExpMaxUlp);
}

TEST(AttentionExp, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bitsOf(detail::attentionExp(0.0f)), bitsOf(1.0f));
  EXPECT_EQ(bitsOf(detail::attentionExp(-0.0f)), bitsOf(1.0f));
  EXPECT_EQ(bitsOf(detail::attentionExp(-inf)), bitsOf(0.0f));
  EXPECT_EQ(bitsOf(detail::attentionExp(-1000.0f)), bitsOf(0.0f));
  EXPECT_EQ(detail::attentionExp(inf), inf);
  EXPECT_EQ(detail::attentionExp(100.0f), inf);
  EXPECT_TRUE(std::isnan(detail::attentionExp(NAN)));
  // Results below 2^-126 are subnormals, not zero: exp(-100) = 3.7e-44.
  const float tiny = detail::attentionExp(-100.0f);
  EXPECT_GT(tiny, 0.0f);
  EXPECT_LT(tiny, std::numeric_limits<float>::min());
  EXPECT_LE(ulpDistance(tiny, referenceExp(-100.0f)), 1);
  // The largest float result.
  EXPECT_LT(detail::attentionExp(88.7f), inf);
}

#if defined(__x86_64__)
TEST(AttentionExp, Avx2LanesGiveTheScalarBits) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> xs = sweep();
  xs.push_back(NAN);
  xs.push_back(-NAN);
  // Odd lengths: the masked last vector.
  for (size_t n : {xs.size(), size_t{1}, size_t{5}, size_t{13}}) {
    std::vector<float> got(n, -1.0f);
    detail::attentionExpAvx2(xs.data(), static_cast<int64_t>(n), got.data());
    for (size_t i = 0; i < n; ++i) {
      const float want = detail::attentionExp(xs[i]);
      if (std::isnan(want))
        ASSERT_TRUE(std::isnan(got[i])) << "x = " << xs[i];
      else
        ASSERT_EQ(bitsOf(got[i]), bitsOf(want)) << "x = " << xs[i] << " lane " << i % 8;
    }
  }
}
#endif

} // namespace
} // namespace llmc::cpu
