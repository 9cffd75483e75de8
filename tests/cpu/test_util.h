// Helpers shared by the CPU kernel tests.
#pragma once

#include "cpu/isa.h"
#include "cpu/weights.h"
#include "kernels/common/half.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace llmc::test {

// A float's bit pattern and back: the kernels' tests compare outputs bit for bit.
inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The ISAs this machine can run, scalar first.
inline std::vector<cpu::Isa> supportedIsas() {
  std::vector<cpu::Isa> isas;
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512, cpu::Isa::Neon})
    if (cpu::isaSupported(isa))
      isas.push_back(isa);
  return isas;
}

// Forces an ISA for one scope and restores the previous one.
class ScopedIsa {
public:
  explicit ScopedIsa(cpu::Isa isa) : previous_(cpu::activeIsa()) {
    EXPECT_TRUE(cpu::setIsaForTesting(isa));
  }
  ~ScopedIsa() { cpu::setIsaForTesting(previous_); }

private:
  cpu::Isa previous_;
};

inline std::vector<float> randomFloats(std::mt19937 &rng, size_t n, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

// Weights in one of the float dtypes, and the exact f32 values they hold.
struct TestWeights {
  DType dtype;
  std::vector<float> f32;     // used when dtype is F32
  std::vector<uint16_t> bits; // used for F16 / BF16
  std::vector<float> values;  // what the kernel should see

  const void *data() const {
    return dtype == DType::F32 ? static_cast<const void *>(f32.data())
                               : static_cast<const void *>(bits.data());
  }
  cpu::WeightMatrix matrix(int64_t rows, int64_t cols) const { return {data(), dtype, rows, cols}; }
  cpu::WeightVector vector() const { return {data(), dtype, static_cast<int64_t>(values.size())}; }
};

inline TestWeights makeWeights(std::mt19937 &rng, DType dtype, size_t n, float lo = -1.0f,
                               float hi = 1.0f) {
  TestWeights w{dtype, {}, {}, randomFloats(rng, n, lo, hi)};
  if (dtype == DType::F32) {
    w.f32 = w.values;
    return w;
  }
  w.bits.resize(n);
  for (size_t i = 0; i < n; ++i) {
    w.bits[i] = dtype == DType::F16 ? hd::f32ToF16(w.values[i]) : hd::f32ToBf16(w.values[i]);
    w.values[i] = dtype == DType::F16 ? hd::f16ToF32(w.bits[i]) : hd::bf16ToF32(w.bits[i]);
  }
  return w;
}

constexpr DType kWeightDTypes[] = {DType::F32, DType::F16, DType::BF16};

} // namespace llmc::test
