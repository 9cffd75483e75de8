// NaN-aware comparison of float arrays for tests. `std::max(acc, |a - b|)`
// drops a NaN difference (max(0, NaN) is 0), so all-NaN logits used to pass
// with "max diff 0". Here any NaN, and any infinity the other side does not
// match exactly, is a mismatch: maxAbs becomes +inf, which fails every
// `EXPECT_LT(maxAbs, tol)` and survives every later std::max.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace llmc::test {

struct Difference {
  double maxAbs = 0.0;     // largest |a[i] - b[i]|; +inf after a non-finite mismatch
  int64_t index = -1;      // where: the first non-finite mismatch, else the largest difference
  bool nonFinite = false;  // a NaN, or an infinity the other side lacks, at `index`
  double a = 0.0, b = 0.0; // the values at `index`

  // Folds another comparison in (e.g. one row of many); `offset` is added to
  // its index. The first non-finite mismatch wins, then the largest.
  void merge(const Difference &other, int64_t offset = 0) {
    if (other.index < 0 || nonFinite)
      return;
    if (other.nonFinite || other.maxAbs > maxAbs || index < 0) {
      *this = other;
      index = other.index + offset;
    }
  }

  std::string describe() const {
    std::ostringstream os;
    if (index < 0)
      return "no elements compared";
    if (nonFinite)
      os << "non-finite mismatch at index " << index;
    else
      os << "max |a - b| = " << maxAbs << " at index " << index;
    os << " (a = " << a << ", b = " << b << ")";
    return os.str();
  }
};

// |a - b| element by element; see Difference for NaN and infinities.
template <typename A, typename B> Difference maxAbsDiff(const A *a, const B *b, size_t n) {
  Difference d;
  for (size_t i = 0; i < n; ++i) {
    double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    bool bothFinite = std::isfinite(x) && std::isfinite(y);
    if (!bothFinite && !(std::isinf(x) && x == y)) { // NaN anywhere, or unequal infinities
      d.maxAbs = std::numeric_limits<double>::infinity();
      d.index = static_cast<int64_t>(i);
      d.nonFinite = true;
      d.a = x;
      d.b = y;
      return d;
    }
    double diff = bothFinite ? std::fabs(x - y) : 0.0;
    if (d.index < 0 || diff > d.maxAbs) {
      d.maxAbs = diff;
      d.index = static_cast<int64_t>(i);
      d.a = x;
      d.b = y;
    }
  }
  return d;
}

template <typename A, typename B>
Difference maxAbsDiff(const std::vector<A> &a, const std::vector<B> &b) {
  if (a.size() != b.size()) { // a size mismatch is a mismatch, never "0"
    Difference d;
    d.maxAbs = std::numeric_limits<double>::infinity();
    d.index = static_cast<int64_t>(std::min(a.size(), b.size()));
    d.nonFinite = true;
    d.a = static_cast<double>(a.size());
    d.b = static_cast<double>(b.size());
    return d;
  }
  return maxAbsDiff(a.data(), b.data(), a.size());
}

// For EXPECT_TRUE / ASSERT_TRUE: every |a[i] - b[i]| <= tolerance, no NaN,
// no unmatched infinity; the failure names the first bad index and values.
template <typename A, typename B>
::testing::AssertionResult allClose(const A *a, const B *b, size_t n, double tolerance) {
  Difference d = maxAbsDiff(a, b, n);
  if (!d.nonFinite && d.maxAbs <= tolerance)
    return ::testing::AssertionSuccess() << d.describe();
  return ::testing::AssertionFailure() << d.describe() << ", tolerance " << tolerance;
}

template <typename A, typename B>
::testing::AssertionResult allClose(const std::vector<A> &a, const std::vector<B> &b,
                                    double tolerance) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure()
           << "sizes differ: " << a.size() << " and " << b.size() << " elements";
  return allClose(a.data(), b.data(), a.size(), tolerance);
}

// Every value finite (reference data guards: a NaN in a golden file would
// otherwise pass a "must differ" check).
template <typename T>::testing::AssertionResult allFinite(const T *values, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(static_cast<double>(values[i])))
      return ::testing::AssertionFailure()
             << "value " << static_cast<double>(values[i]) << " at index " << i;
  return ::testing::AssertionSuccess();
}

} // namespace llmc::test
