// The int8 linear layer (cpu/matmul_q8.h, W8A16) on every ISA this machine
// runs, against a double-precision reference of its numerics: per output
// channel and grouped (ragged last group), f32 and f16 scales, decode and
// prefill token counts, bias and the accumulate epilogue; x past K never read.
#include "cpu/matmul_q8.h"
#include "kernels/common/q8_layout.h"
#include "test_util.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace llmc::cpu {
namespace {

using test::bitsOf;

// A random int8 [rows, cols] matrix in the plan layout (zero padding).
struct TestQ8 {
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<uint16_t> halfScales;
  Q8Matrix m;
};

TestQ8 randomQ8(std::mt19937 &rng, int64_t rows, int64_t cols, int64_t group, bool half) {
  TestQ8 t;
  const int64_t rowBytes = hd::q8RowBytes(cols), groups = hd::q8NumGroups(cols, group);
  t.q.assign(rows * rowBytes, 0);
  std::uniform_int_distribution<int> level(-127, 127);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t.q[r * rowBytes + c] = static_cast<int8_t>(level(rng));
  t.scales = test::randomFloats(rng, rows * groups, 0.001f, 0.02f);
  if (half)
    for (float s : t.scales)
      t.halfScales.push_back(hd::f32ToF16(s));
  t.m = {t.q.data(),
         half ? static_cast<const void *>(t.halfScales.data())
              : static_cast<const void *>(t.scales.data()),
         half, rows, cols, group};
  return t;
}

// dequant(W)[n, c], as hd::q8Dequant gives it.
double weightAt(const Q8Matrix &w, int64_t n, int64_t c) {
  const int64_t rowBytes = hd::q8RowBytes(w.cols), groups = hd::q8NumGroups(w.cols, w.groupSize);
  const auto *row = reinterpret_cast<const signed char *>(w.qweight + n * rowBytes);
  const void *scales =
      w.halfScales ? static_cast<const void *>(static_cast<const uint16_t *>(w.scales) + n * groups)
                   : static_cast<const void *>(static_cast<const float *>(w.scales) + n * groups);
  return hd::q8Dequant(row, scales, w.halfScales, c, w.groupSize);
}

// y = x . dequant(W)^T (+ bias) (+ y0) in double.
std::vector<float> reference(const float *x, int64_t tokens, const Q8Matrix &w, const float *bias,
                             const std::vector<float> &y0, bool accumulate) {
  std::vector<float> y(tokens * w.rows);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t n = 0; n < w.rows; ++n) {
      double s = 0.0;
      for (int64_t c = 0; c < w.cols; ++c)
        s += weightAt(w, n, c) * x[t * w.cols + c];
      s += bias ? bias[n] : 0.0f;
      y[t * w.rows + n] = static_cast<float>(s + (accumulate ? y0[t * w.rows + n] : 0.0));
    }
  return y;
}

TEST(MatmulQ8, MatchesTheReferenceOnEveryIsa) {
  ThreadPool pool(3);
  std::mt19937 rng(81);
  struct Shape {
    int64_t rows, cols, group;
  } shapes[] = {{37, 64, 0}, {20, 72, 32}, {9, 200, 64}, {33, 256, 128}, {6, 13, 0}};
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (const Shape &s : shapes)
      for (bool half : {false, true})
        for (int64_t tokens : {1, 2, 3, 5, 9})
          for (bool bias : {false, true}) {
            TestQ8 w = randomQ8(rng, s.rows, s.cols, s.group, half);
            // NaN right after the last row of x: a read past K would poison y.
            std::vector<float> x = test::randomFloats(rng, tokens * s.cols + 16, -2.0f, 2.0f);
            std::fill(x.begin() + tokens * s.cols, x.end(), std::numeric_limits<float>::quiet_NaN());
            std::vector<float> b = test::randomFloats(rng, s.rows);
            std::vector<float> y0 = test::randomFloats(rng, tokens * s.rows);
            const bool accumulate = bias; // both epilogues in one case
            std::vector<float> y = y0;
            matmulQ8(pool, x.data(), tokens, w.m, bias ? b.data() : nullptr,
                     accumulate ? 1.0f : 0.0f, y.data());
            std::vector<float> want =
                reference(x.data(), tokens, w.m, bias ? b.data() : nullptr, y0, accumulate);
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_NEAR(y[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
                  << isaName(isa) << " [" << s.rows << ", " << s.cols << "] G " << s.group
                  << (half ? " f16" : " f32") << " scales, T " << tokens << ", element " << i;
          }
  }
}

// sum_c |x[t, c] * dequant(W)[n, c]| per output: what a change of the f32
// summation order (each ISA has its own) can move an output by, times a few
// ulps.
std::vector<double> termMagnitudes(const float *x, int64_t tokens, const Q8Matrix &w) {
  std::vector<double> magnitude(tokens * w.rows);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t n = 0; n < w.rows; ++n)
      for (int64_t c = 0; c < w.cols; ++c)
        magnitude[t * w.rows + n] += std::fabs(weightAt(w, n, c) * x[t * w.cols + c]);
  return magnitude;
}

// Each ISA sums in its own order, so they agree to the rounding of a sum of
// K terms: a bound relative to the terms' magnitude, not to the output's
// (an output near 0 of terms near 1 moves by ~1e-5 with the order; a wrong
// scale or block moves it by a whole term).
TEST(MatmulQ8, IsasAgreeToRounding) {
  ThreadPool pool(2);
  std::mt19937 rng(82);
  TestQ8 w = randomQ8(rng, 70, 4096 + 32, 128, true);
  const int64_t tokens = 4;
  std::vector<float> x = test::randomFloats(rng, tokens * w.m.cols);
  std::vector<float> scalar(tokens * w.m.rows);
  {
    test::ScopedIsa scoped(Isa::Scalar);
    matmulQ8(pool, x.data(), tokens, w.m, nullptr, 0.0f, scalar.data());
  }
  const std::vector<double> magnitude = termMagnitudes(x.data(), tokens, w.m);
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    std::vector<float> y(scalar.size());
    matmulQ8(pool, x.data(), tokens, w.m, nullptr, 0.0f, y.data());
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], scalar[i], 1e-6 * (1.0 + magnitude[i]))
          << isaName(isa) << " element " << i << ", terms' magnitude " << magnitude[i];
  }
}

// A row's outputs do not depend on the other tokens of the call (decode
// tiles, prefill tiles, the last odd token) nor on the row's place among the
// tiles: T = 7 gives each token the bits of a T = 1 call, and a slice of
// rows the bits of the whole matrix, on ragged shapes, per channel and
// grouped (AVX2's per-group scale and decode prefetch paths).
TEST(MatmulQ8, TokensAndRowSlicesGiveTheSameBits) {
  ThreadPool pool(1);
  std::mt19937 rng(83);
  struct Shape {
    int64_t rows, cols, group;
  } shapes[] = {{37, 200, 0}, {22, 768, 0}, {13, 72, 32}, {9, 256, 128}, {11, 13, 0}};
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (const Shape &s : shapes) {
      TestQ8 w = randomQ8(rng, s.rows, s.cols, s.group, s.group > 0);
      const int64_t tokens = 7;
      std::vector<float> x = test::randomFloats(rng, tokens * s.cols, -2.0f, 2.0f);
      std::vector<float> all(tokens * s.rows);
      matmulQ8(pool, x.data(), tokens, w.m, nullptr, 0.0f, all.data());
      for (int64_t t = 0; t < tokens; ++t) {
        std::vector<float> one(s.rows);
        matmulQ8(pool, x.data() + t * s.cols, 1, w.m, nullptr, 0.0f, one.data());
        for (int64_t n = 0; n < s.rows; ++n)
          ASSERT_EQ(bitsOf(one[n]), bitsOf(all[t * s.rows + n]))
              << isaName(isa) << " [" << s.rows << ", " << s.cols << "] G " << s.group
              << ", token " << t << ", row " << n;
      }
      // Rows 3 .. rows - 1 alone: other tile boundaries than in the whole.
      Q8Matrix slice = w.m;
      const int64_t first = 3, rowBytes = hd::q8RowBytes(s.cols);
      const int64_t groups = hd::q8NumGroups(s.cols, s.group);
      slice.qweight += first * rowBytes;
      slice.scales = s.group > 0
                         ? static_cast<const void *>(w.halfScales.data() + first * groups)
                         : static_cast<const void *>(w.scales.data() + first * groups);
      slice.rows -= first;
      std::vector<float> part(tokens * slice.rows);
      matmulQ8(pool, x.data(), tokens, slice, nullptr, 0.0f, part.data());
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t n = 0; n < slice.rows; ++n)
          ASSERT_EQ(bitsOf(part[t * slice.rows + n]),
                    bitsOf(all[t * s.rows + first + n]))
              << isaName(isa) << " [" << s.rows << ", " << s.cols << "] row " << first + n;
    }
  }
}

// The AVX2 and NEON kernels' order of an output's sum, in scalar code: per
// group, lane j (of 8) fma's q[c] * x[c] over the group's columns c = j mod 8
// in column order; the lanes' total is the scale times group 0's lanes, then
// fma(scale, lanes, total) for each next group; hsum's tree adds the lanes
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); then the epilogue.
float groupOrderDot(const TestQ8 &w, const float *x, int64_t n) {
  const Q8Matrix &m = w.m;
  const int64_t rowBytes = hd::q8RowBytes(m.cols), width = hd::q8GroupColumns(m.cols, m.groupSize);
  const int64_t groups = hd::q8NumGroups(m.cols, m.groupSize);
  float total[8] = {};
  for (int64_t g = 0; g < groups; ++g) {
    float lanes[8] = {};
    for (int64_t c = g * width; c < std::min(m.cols, (g + 1) * width); ++c)
      lanes[c % 8] = std::fma(static_cast<float>(w.q[n * rowBytes + c]), x[c], lanes[c % 8]);
    const float scale = m.halfScales ? hd::f16ToF32(w.halfScales[n * groups + g]) : w.scales[n * groups + g];
    for (int j = 0; j < 8; ++j)
      total[j] = g == 0 ? scale * lanes[j] : std::fma(scale, lanes[j], total[j]);
  }
  return ((total[0] + total[4]) + (total[2] + total[6])) +
         ((total[1] + total[5]) + (total[3] + total[7]));
}

// AVX2 and NEON give each output the bits of groupOrderDot (so the same bits
// as each other), whatever the tokens, rows, threads and group pattern: per
// channel, grouped, ragged K, f32 and f16 scales, bias and accumulate.
TEST(MatmulQ8, Avx2AndNeonSumInTheGroupOrder) {
  std::mt19937 rng(84);
  struct Shape {
    int64_t rows, cols, group;
  } shapes[] = {{37, 200, 0}, {70, 768, 0}, {13, 72, 32}, {9, 256, 128}, {11, 13, 0}, {21, 100, 64}};
  bool ran = false;
  for (Isa isa : test::supportedIsas()) {
    if (isa != Isa::Avx2 && isa != Isa::Neon)
      continue; // scalar and AVX-512 dequantize per weight (IsasAgreeToRounding)
    ran = true;
    test::ScopedIsa scoped(isa);
    for (int threads : {1, 2})
      for (const Shape &s : shapes)
        for (int64_t tokens : {1, 2, 3})
          for (bool bias : {false, true}) {
            ThreadPool pool(threads);
            TestQ8 w = randomQ8(rng, s.rows, s.cols, s.group, s.group == 64);
            std::vector<float> x = test::randomFloats(rng, tokens * s.cols, -2.0f, 2.0f);
            std::vector<float> b = test::randomFloats(rng, s.rows);
            std::vector<float> y = test::randomFloats(rng, tokens * s.rows);
            std::vector<float> want = y;
            for (int64_t t = 0; t < tokens; ++t)
              for (int64_t n = 0; n < s.rows; ++n) {
                const float value = groupOrderDot(w, x.data() + t * s.cols, n) + (bias ? b[n] : 0.0f);
                float &out = want[t * s.rows + n];
                out = bias ? out + value : value; // bias cases also accumulate
              }
            matmulQ8(pool, x.data(), tokens, w.m, bias ? b.data() : nullptr, bias ? 1.0f : 0.0f,
                     y.data());
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_EQ(bitsOf(y[i]), bitsOf(want[i]))
                  << isaName(isa) << " [" << s.rows << ", " << s.cols << "] G " << s.group << ", T "
                  << tokens << ", " << threads << " threads, element " << i << ": " << y[i]
                  << " vs " << want[i];
          }
  }
  if (!ran)
    GTEST_SKIP() << "no AVX2 or NEON on this CPU";
}

TEST(MatmulQ8, CheckWeightNamesTheProblem) {
  int8_t q[32] = {};
  float s[1] = {1.0f};
  EXPECT_NE(checkWeight(Q8Matrix{nullptr, s, false, 1, 32, 0}, "w").message().find(
                "int8 weight 'w': no data"),
            std::string::npos);
  EXPECT_NE(checkWeight(Q8Matrix{q, s, false, 0, 32, 0}, "w").message().find("positive"),
            std::string::npos);
  EXPECT_NE(checkWeight(Q8Matrix{q, s, false, 1, 32, 48}, "w").message().find("group size 48"),
            std::string::npos);
  EXPECT_TRUE(checkWeight(Q8Matrix{q, s, false, 1, 32, 0}, "w").isOk());
}

} // namespace
} // namespace llmc::cpu
