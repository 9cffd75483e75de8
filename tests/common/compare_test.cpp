// Tests that the NaN-aware comparison helper fails on NaN and on unmatched
// infinities, names the first bad index, and passes equal arrays.
#include "common/compare.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace llmc::test {
namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(MaxAbsDiff, IsTheLargestDifferenceAndItsIndex) {
  std::vector<float> a = {1.0f, 2.0f, 3.0f}, b = {1.0f, 2.5f, 2.75f};
  Difference d = maxAbsDiff(a, b);
  EXPECT_EQ(d.maxAbs, 0.5);
  EXPECT_EQ(d.index, 1);
  EXPECT_FALSE(d.nonFinite);
  EXPECT_TRUE(allClose(a, b, 0.5));
  EXPECT_FALSE(allClose(a, b, 0.49));
}

// The bug this helper exists for: max(0, NaN) == 0, so all-NaN logits
// compared as "max diff 0".
TEST(MaxAbsDiff, NanOnEitherSideIsAnInfiniteDifferenceAtItsIndex) {
  std::vector<float> good = {0.0f, 1.0f, 2.0f, 3.0f}, bad = {0.0f, 1.0f, kNan, kNan};
  for (const Difference &d : {maxAbsDiff(good, bad), maxAbsDiff(bad, good), maxAbsDiff(bad, bad)}) {
    EXPECT_TRUE(d.nonFinite);
    EXPECT_EQ(d.index, 2);
    EXPECT_TRUE(std::isinf(d.maxAbs));
    EXPECT_FALSE(d.maxAbs < 1e-4); // what `EXPECT_LT(maxAbs, tol)` checks
  }
  std::vector<float> allNan(4, kNan);
  EXPECT_FALSE(allClose(allNan, allNan, 1e9));
  EXPECT_NE(std::string(allClose(good, bad, 1.0).message()).find("index 2"), std::string::npos)
      << allClose(good, bad, 1.0).message();
}

TEST(MaxAbsDiff, UnmatchedInfinitiesFailAndEqualOnesMatch) {
  std::vector<float> a = {kInf, -kInf, 1.0f}, same = {kInf, -kInf, 1.0f};
  EXPECT_TRUE(allClose(a, same, 0.0));
  EXPECT_FALSE(allClose(a, std::vector<float>{kInf, kInf, 1.0f}, 1e9));
  EXPECT_FALSE(allClose(a, std::vector<float>{1e30f, -kInf, 1.0f}, 1e9));
  EXPECT_EQ(maxAbsDiff(a, std::vector<float>{kInf, 3.0f, 1.0f}).index, 1);
}

TEST(MaxAbsDiff, DifferentSizesNeverCompareEqual) {
  EXPECT_FALSE(allClose(std::vector<float>{1.0f}, std::vector<float>{1.0f, 2.0f}, 1.0));
  EXPECT_TRUE(maxAbsDiff(std::vector<float>{}, std::vector<float>{1.0f}).nonFinite);
}

// Accumulating rows keeps a NaN row's failure however large later rows are.
TEST(MaxAbsDiff, MergeKeepsTheFirstNonFiniteRow) {
  Difference total;
  std::vector<float> zero(3, 0.0f), nanRow = {0.0f, kNan, 0.0f}, big = {100.0f, 0.0f, 0.0f};
  total.merge(maxAbsDiff(zero, big), 0);
  EXPECT_EQ(total.maxAbs, 100.0);
  total.merge(maxAbsDiff(zero, nanRow), 3);
  total.merge(maxAbsDiff(zero, big), 6);
  EXPECT_TRUE(total.nonFinite);
  EXPECT_EQ(total.index, 4);
}

// The EXPECT form reports a failure (rather than passing) on NaN input.
TEST(AllClose, ExpectTrueOnNanReportsAFailure) {
  std::vector<float> nan(8, kNan), zeros(8, 0.0f);
  EXPECT_NONFATAL_FAILURE(EXPECT_TRUE(allClose(nan, zeros, 1e-4)),
                          "non-finite mismatch at index 0");
  EXPECT_NONFATAL_FAILURE(EXPECT_TRUE(allFinite(nan.data(), nan.size())), "index 0");
  EXPECT_TRUE(allFinite(zeros.data(), zeros.size()));
}

} // namespace
} // namespace llmc::test
