// The value of an Expected that a test helper needs: on an error it throws,
// which GoogleTest reports as a failure of the current test with the
// message, instead of reading an empty value (EXPECT_TRUE(x.isOk()) followed
// by x.value() crashes, or worse, when x failed).
#pragma once

#include "support/status.h"

#include <stdexcept>
#include <utility>

namespace llmc::test {

template <typename T> T valueOrThrow(Expected<T> &&expected) {
  if (!expected)
    throw std::runtime_error(expected.message());
  return std::move(expected).value();
}

} // namespace llmc::test
