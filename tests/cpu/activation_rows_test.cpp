// The SiLU rows (cpu/activation_rows.h): the AVX2 lanes against the scalar
// definition bit for bit on ragged lengths (every tail of the masked last
// vector) and the edge values, the forced scalar ISA against the AVX2 path,
// the accuracy against a double-precision SiLU, and the other gate kinds
// left to hd::gated.
#include "cpu/activation_rows.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "kernels/common/activations.h"
#include "support/thread_pool.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace llmc::cpu {
namespace {

using test::bitsOf;

// Values over the whole range SiLU sees, with the edges mixed in.
std::vector<float> testValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f), narrow(-8.0f, 8.0f);
  const float edges[] = {0.0f,
                         -0.0f,
                         1.0f,
                         -1.0f,
                         88.7f,
                         -88.7f,
                         104.0f,
                         -104.0f,
                         1000.0f,
                         -1000.0f,
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::denorm_min(),
                         -std::numeric_limits<float>::min(),
                         std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = i % 7 == 3 ? edges[(i / 7) % std::size(edges)] : (i % 2 ? wide(rng) : narrow(rng));
  return v;
}

// Same bits, NaN equal to NaN.
void expectSameBits(const std::vector<float> &got, const std::vector<float> &want, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "i " << i;
      continue;
    }
    ASSERT_EQ(bitsOf(got[i]), bitsOf(want[i]))
        << "i " << i << " got " << got[i] << " want " << want[i];
  }
}

#if defined(__x86_64__)
TEST(ActivationRows, Avx2LanesGiveTheScalarBits) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
  for (int64_t n = 0; n <= 41; ++n) {
    const std::vector<float> x = testValues(n + 1, 7 + n), up = testValues(n + 1, 100 + n);
    std::vector<float> silu(n + 1, -7.0f), swiglu(n + 1, -7.0f), want(n + 1), wantGated(n + 1);
    for (int64_t i = 0; i < n; ++i) {
      want[i] = siluOfRow(x[i]);
      wantGated[i] = siluOfRow(x[i]) * up[i];
    }
    detail::siluRowAvx2(x.data(), silu.data(), n);
    detail::swigluRowAvx2(x.data(), up.data(), swiglu.data(), n);
    expectSameBits(silu, want, n);
    expectSameBits(swiglu, wantGated, n);
    ASSERT_EQ(silu[n], -7.0f) << "wrote past n = " << n; // the masked tail stays inside
    ASSERT_EQ(swiglu[n], -7.0f) << "wrote past n = " << n;
  }
}
#endif

TEST(ActivationRows, ScalarIsaGivesTheVectorBits) {
  const int64_t n = 1003;
  const std::vector<float> x = testValues(n, 3), up = testValues(n, 4);
  std::vector<float> best(n), bestGated(n), scalar(n), scalarGated(n);
  siluRow(x.data(), best.data(), n);
  gatedRow(hd::kGateSilu, x.data(), up.data(), bestGated.data(), n);
  const Isa was = activeIsa();
  ASSERT_TRUE(setIsaForTesting(Isa::Scalar));
  siluRow(x.data(), scalar.data(), n);
  gatedRow(hd::kGateSilu, x.data(), up.data(), scalarGated.data(), n);
  ASSERT_TRUE(setIsaForTesting(was));
  expectSameBits(best, scalar, n);
  expectSameBits(bestGated, scalarGated, n);
}

TEST(ActivationRows, CloseToTheDoublePrecisionSilu) {
  const int64_t n = 20000;
  const std::vector<float> x = testValues(n, 11);
  std::vector<float> y(n);
  siluRow(x.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]))
      continue;
    const double want = x[i] / (1.0 + std::exp(-static_cast<double>(x[i])));
    // exp within 1 ulp, then an add and a divide: a few ulp of the result;
    // below x = -88.72 exp(-x) overflows the float (as hd::silu's does) and
    // the result is -0 for a true value under 2.7e-37.
    ASSERT_NEAR(y[i], want, 4e-7 * std::fabs(want) + 2.7e-37) << "x " << x[i];
  }
}

TEST(ActivationRows, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float x[] = {0.0f, -1000.0f, 1000.0f, inf, -inf, std::nanf("")};
  float y[6];
  siluRow(x, y, 6);
  EXPECT_EQ(bitsOf(y[0]), bitsOf(0.0f));
  EXPECT_EQ(y[1], 0.0f); // -1000 / inf = -0
  EXPECT_EQ(y[2], 1000.0f);
  EXPECT_EQ(y[3], inf);
  EXPECT_TRUE(std::isnan(y[4])); // -inf / inf, as hd::silu gives
  EXPECT_TRUE(std::isnan(y[5]));
}

TEST(ActivationRows, OtherGateKindsKeepTheirFormula) {
  const int64_t n = 37;
  const std::vector<float> g = testValues(n, 21), u = testValues(n, 22);
  for (int kind : {hd::kGateGeluTanh, hd::kGateGeluErf, hd::kGateRelu}) {
    std::vector<float> y(n), want(n);
    gatedRow(kind, g.data(), u.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = hd::gated(kind, g[i], u[i]);
    expectSameBits(y, want, n);
  }
}

// The pool kernels (silu, swiglu, swigluFused) all take the rows' bits.
TEST(ActivationRows, ElementwiseKernelsUseTheRows) {
  ThreadPool pool(3);
  const int64_t tokens = 5, inter = 77, n = tokens * inter;
  const std::vector<float> gateUp = testValues(2 * n, 31);
  std::vector<float> gate(n), up(n), want(n), wantSilu(n), y(n);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < inter; ++i) {
      gate[t * inter + i] = gateUp[t * 2 * inter + i];
      up[t * inter + i] = gateUp[t * 2 * inter + inter + i];
    }
  for (int64_t i = 0; i < n; ++i) {
    want[i] = siluOfRow(gate[i]) * up[i];
    wantSilu[i] = siluOfRow(gate[i]);
  }
  silu(pool, gate.data(), y.data(), n);
  expectSameBits(y, wantSilu, n);
  swiglu(pool, gate.data(), up.data(), y.data(), n);
  expectSameBits(y, want, n);
  swigluFused(pool, gateUp.data(), tokens, inter, y.data());
  expectSameBits(y, want, n);
}

} // namespace
} // namespace llmc::cpu
