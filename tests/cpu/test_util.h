// Helpers shared by the CPU kernel tests.
#pragma once

#include "cpu/isa.h"
#include "cpu/weights.h"
#include "kernels/common/half.h"

#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// The settings of the bf16 dot-product kernels this CPU can run: off, and
// on where it has AVX512-BF16 (cpu::x86Bf16Supported).
inline std::vector<bool> bf16DotSettings() {
  return cpu::x86Bf16Supported() ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

// Turns the bf16 dot-product kernels on or off for one scope, then back to
// their default (on where supported).
class ScopedBf16Dot {
public:
  explicit ScopedBf16Dot(bool use) { EXPECT_TRUE(cpu::setX86Bf16ForTesting(use)); }
  ~ScopedBf16Dot() { cpu::setX86Bf16ForTesting(cpu::x86Bf16Supported()); }
};

// Whether the matmul kernels run weights of `dtype` on x rounded to bf16
// (bf16 weights where cpu::x86Bf16Active()).
inline bool roundsInputsToBf16(DType dtype) { return dtype == DType::BF16 && cpu::x86Bf16Active(); }

// x as the matmul kernels multiply it with weights of `dtype`: rounded to
// bf16 (round to nearest even) where roundsInputsToBf16, else as it is. A
// double-precision reference over these inputs holds the kernels to f32
// accumulation error.
inline std::vector<float> kernelInputs(DType dtype, std::vector<float> x) {
  if (roundsInputsToBf16(dtype))
    for (float &v : x)
      v = hd::bf16ToF32(hd::f32ToBf16(v));
  return x;
}

// 16 lanes added in _mm512_reduce_add_ps's tree: the halves, the quarters, the pairs.
inline float reduceAddTree16(const float (&lane)[16]) {
  float half[8], quarter[4];
  for (int j = 0; j < 8; ++j)
    half[j] = lane[j] + lane[j + 8];
  for (int j = 0; j < 4; ++j)
    quarter[j] = half[j] + half[j + 4];
  return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

#if defined(__x86_64__)
// The bf16 dot-product kernels' sum of one output (cpu/matmul_bf16_avx512.cpp,
// "Numerics"), independently of their tiling: x rounded to bf16 by
// hd::f32ToBf16, 16 lanes, lane j taking vdpbf16ps of elements 2j and 2j + 1
// of each 32-column step (zeros past k), then _mm512_reduce_add_ps's tree.
// Each lane's step is the instruction itself, on one lane of a 128-bit
// vector, so the reference holds for any CPU's rounding inside it.
__attribute__((target("avx512f,avx512vl,avx512bf16"))) inline float
bf16DotLaneSum(const float *x, const float *w, int64_t k) {
  float lane[16] = {};
  for (int64_t i = 0; i < k; i += 32)
    for (int j = 0; j < 16; ++j) {
      uint16_t xs[8] = {}, ws[8] = {};
      for (int e = 0; e < 2; ++e) {
        const int64_t column = i + 2 * j + e;
        xs[e] = column < k ? hd::f32ToBf16(x[column]) : 0;
        ws[e] = column < k ? hd::f32ToBf16(w[column]) : 0; // exact: w holds bf16 values
      }
      __m128i xv, wv;
      std::memcpy(&xv, xs, sizeof xv);
      std::memcpy(&wv, ws, sizeof wv);
      const __m128 sum = _mm_dpbf16_ps(_mm_set_ss(lane[j]), reinterpret_cast<__m128bh>(wv),
                                       reinterpret_cast<__m128bh>(xv));
      lane[j] = _mm_cvtss_f32(sum);
    }
  return reduceAddTree16(lane);
}
#endif

} // namespace llmc::test
