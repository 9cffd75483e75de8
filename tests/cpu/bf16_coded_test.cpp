// bf16 rows in 12 bits (cpu/bf16_coded.h): the layout holds every word
// exactly, and the decode kernels give the plain bf16 kernels' bits from it.
#include "cpu/bf16_coded.h"
#include "cpu/fused.h"
#include "cpu/matmul.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>

namespace llmc::cpu {
namespace {

// A bf16 matrix and its coded rows (64-byte aligned).
struct Coded {
  Coded(ThreadPool &pool, const std::vector<uint16_t> &w, int64_t rows, int64_t cols)
      : matrix{w.data(), DType::BF16, rows, cols}, layout(planCodedBf16(pool, matrix)),
        bytes(static_cast<uint8_t *>(std::aligned_alloc(64, layout.bytes))) {
    matrix.coded = buildCodedBf16(pool, matrix, layout, bytes.get());
  }
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  WeightMatrix matrix;
  CodedBf16Layout layout;
  std::unique_ptr<uint8_t, Free> bytes;
};

// Normal weights (std 0.02, as a head's), bf16, with what the table cannot
// code planted: tiny values, a huge one, inf and NaN, and a whole row of
// exceptions.
std::vector<uint16_t> headLikeWeights(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint16_t> w(static_cast<size_t>(rows * cols));
  for (uint16_t &v : w)
    v = hd::f32ToBf16(normal(rng));
  auto at = [&](int64_t r, int64_t c) -> uint16_t & { return w[r * cols + c]; };
  at(1, 0) = hd::f32ToBf16(3e-30f);
  at(1, cols - 1) = hd::f32ToBf16(-1e-25f);
  at(2, cols / 2) = hd::f32ToBf16(1e20f);
  at(3, 5) = hd::f32ToBf16(std::numeric_limits<float>::infinity());
  at(3, 37 % cols) = hd::f32ToBf16(std::numeric_limits<float>::quiet_NaN());
  for (int64_t c = 0; c < cols; ++c) // every exponent, each a few times at most
    at(rows - 1, c) = hd::f32ToBf16(std::ldexp((c & 1) ? -1.5f : 1.25f, (c * 7) % 250 - 125));
  return w;
}

std::unique_ptr<Coded> coded(ThreadPool &pool, const std::vector<uint16_t> &w, int64_t rows,
                             int64_t cols) {
  return std::make_unique<Coded>(pool, w, rows, cols);
}

TEST(CodedBf16, HoldsEveryWordExactly) {
  ThreadPool pool(3);
  for (int64_t cols : {32, 45, 96, 768, 1000}) {
    const int64_t rows = 300;
    const std::vector<uint16_t> w = headLikeWeights(rows, cols, static_cast<uint32_t>(cols));
    auto c = coded(pool, w, rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t col = 0; col < cols; ++col)
        ASSERT_EQ(codedBf16Word(c->matrix.coded, cols, r, col), w[r * cols + col])
            << "row " << r << " col " << col << " of " << cols;
    // The planted values are exceptions; the last row is all exceptions.
    const auto &begin = c->layout.exceptionBegin;
    EXPECT_EQ(begin[2] - begin[1], cols > 32 ? 2u : 1u);
    EXPECT_EQ(begin[rows] - begin[rows - 1], static_cast<uint32_t>(codedBf16Steps(cols)));
    // Normal rows: the table holds all but the tiniest (about 1e-4 of them).
    EXPECT_LE(begin[rows - 1] - begin[4], static_cast<uint32_t>(rows * codedBf16Steps(cols) / 100))
        << "cols " << cols;
  }
}

TEST(CodedBf16, ATableOfFewerThan16BytesStillCodesEveryWord) {
  ThreadPool pool(1);
  std::vector<uint16_t> w(3 * 40);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = hd::f32ToBf16(i % 3 == 0 ? 0.5f : -0.75f); // two high bytes
  auto c = coded(pool, w, 3, 40);
  EXPECT_EQ(c->layout.exceptions(), 0u);
  for (int64_t i = 0; i < 3 * 40; ++i)
    ASSERT_EQ(codedBf16Word(c->matrix.coded, 40, i / 40, i % 40), w[i]);
}

TEST(CodedBf16, PaysOnlyWithFewExceptions) {
  ThreadPool pool(2);
  const std::vector<uint16_t> head = headLikeWeights(64, 256, 7);
  EXPECT_TRUE(
      codedBf16Pays({head.data(), DType::BF16, 64, 256}, coded(pool, head, 64, 256)->layout));
  // Uniform bit patterns: most steps are exceptions.
  std::mt19937 rng(3);
  std::vector<uint16_t> noise(64 * 256);
  for (uint16_t &v : noise)
    v = static_cast<uint16_t>(rng());
  EXPECT_FALSE(
      codedBf16Pays({noise.data(), DType::BF16, 64, 256}, coded(pool, noise, 64, 256)->layout));
}

// The kernels over coded rows against the plain rows: same bits, for every
// token count the decode path takes, the prefill GEMM's (32 tokens on; K =
// 2100 in three depth chunks, exceptions on both sides of each chunk's
// start), and through the fused argmax's row blocks.
TEST(CodedBf16, KernelsGiveThePlainRowsBits) {
  if (!codedBf16Used())
    GTEST_SKIP() << "the coded bf16 kernels need AVX512-BF16 and AVX512-VBMI; this CPU lacks one";
  ThreadPool pool(3);
  std::mt19937 rng(11);
  for (int64_t cols : {64, 45, 768, 1000, 2100}) {
    const int64_t rows = 1037;
    const std::vector<uint16_t> w = headLikeWeights(rows, cols, static_cast<uint32_t>(cols + 1));
    auto c = coded(pool, w, rows, cols);
    const WeightMatrix plain{w.data(), DType::BF16, rows, cols};
    // Plain rows of zeros beside the coded rows: only the coded kernels give the sums.
    const std::vector<uint16_t> zeros(w.size());
    WeightMatrix codedOnly = c->matrix;
    codedOnly.data = zeros.data();
    for (int64_t tokens : {1, 2, 3, 5, 31, 32, 64, 100}) {
      const std::vector<float> x = test::randomFloats(rng, static_cast<size_t>(tokens * cols));
      std::vector<float> want(tokens * rows), got(tokens * rows);
      matmul(pool, x.data(), tokens, plain, nullptr, 0.0f, want.data());
      matmul(pool, x.data(), tokens, codedOnly, nullptr, 0.0f, got.data());
      for (int64_t i = 0; i < tokens * rows; ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << i;
          continue;
        }
        ASSERT_EQ(test::bitsOf(got[i]), test::bitsOf(want[i]))
            << "cols " << cols << " tokens " << tokens << " output " << i;
      }
    }
    const std::vector<float> x = test::randomFloats(rng, static_cast<size_t>(2 * cols));
    int32_t wantIds[2], gotIds[2];
    matmulArgmax(pool, x.data(), 2, plain, wantIds);
    matmulArgmax(pool, x.data(), 2, codedOnly, gotIds);
    EXPECT_EQ(gotIds[0], wantIds[0]);
    EXPECT_EQ(gotIds[1], wantIds[1]);
  }
}

// A coded matrix changes nothing where the coded kernels do not run.
TEST(CodedBf16, OtherKernelsReadThePlainRows) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  const int64_t rows = 200, cols = 96;
  const std::vector<uint16_t> w = headLikeWeights(rows, cols, 9);
  auto c = coded(pool, w, rows, cols);
  const WeightMatrix plain{w.data(), DType::BF16, rows, cols};
  for (cpu::Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    const std::vector<float> x = test::randomFloats(rng, static_cast<size_t>(cols));
    std::vector<float> want(rows), got(rows);
    matmul(pool, x.data(), 1, plain, nullptr, 0.0f, want.data());
    matmul(pool, x.data(), 1, c->matrix, nullptr, 0.0f, got.data());
    for (int64_t i = 0; i < rows; ++i)
      if (!std::isnan(want[i]))
        ASSERT_EQ(test::bitsOf(got[i]), test::bitsOf(want[i])) << cpu::isaName(isa) << " " << i;
  }
}

} // namespace
} // namespace llmc::cpu
