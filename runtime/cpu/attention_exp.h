// Internal: the exp of the CPU attention's softmax weights, written once as
// scalar C++ (this file) and once as 8 AVX2 lanes (attention_avx2.cpp
// expAvx2) that give the same bits lane for lane. The AVX2 attention path
// exponentiates every score and every running-max rescale with it, in
// decode and prefill alike; the portable path keeps hd::expF.
//
// exp(x) = 2^n * e^r with n = nearest(x * log2(e)) and r = x - n * ln 2
// (two fused steps, ln 2 split in a high and a low float), e^r by a degree-6
// polynomial fitted to the relative error on |r| <= ln(2) / 2 (coefficients
// from a Lawson-weighted least-squares fit, 1.7e-8 at most before rounding).
// 2^n is applied as 2^(n/2) * 2^(n - n/2), so results below 2^-126 round
// once into the subnormals instead of flushing to zero. x is clamped to
// [-110, 89] first: -inf and anything below -104 give +0, above 88.73 give
// +inf, NaN stays NaN, exp(0) is exactly 1.
//
// Error against the correctly rounded exp: at most kAttentionExpMaxUlp (1)
// unit in the last place, checked once over all 2^32 inputs of expAvx2
// (0.34% of them 1 ulp off, the rest exact); tests/cpu/attention_exp_test.cpp
// checks a sweep of 1M of them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace llmc::cpu::detail {

constexpr int kAttentionExpMaxUlp = 1;

namespace attention_exp {
constexpr float kLowest = -110.0f, kHighest = 89.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2High = 0x1.62e430p-1f;   // float(ln 2)
constexpr float kLn2Low = -0x1.05c610p-29f;  // ln 2 - kLn2High
// e^r ~ 1 + r * (c1 + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))))
constexpr float kC1 = 1.0f, kC2 = 0x1.fffffcp-2f, kC3 = 0x1.55541ap-3f, kC4 = 0x1.555822p-5f,
                kC5 = 0x1.12677ep-7f, kC6 = 0x1.6ae712p-10f;

// 2^e as a float, for -126 <= e <= 127.
inline float powerOfTwo(int32_t e) {
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
} // namespace attention_exp

// The scalar definition of expAvx2's lanes (std::fma: one rounding per step,
// as vfmadd does).
inline float attentionExp(float x) {
  using namespace attention_exp;
  if (std::isnan(x))
    return x;
  x = x < kLowest ? kLowest : (x > kHighest ? kHighest : x);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2High, x);
  r = std::fma(n, -kLn2Low, r);
  float p = std::fma(kC6, r, kC5);
  p = std::fma(p, r, kC4);
  p = std::fma(p, r, kC3);
  p = std::fma(p, r, kC2);
  p = std::fma(p, r, kC1);
  p = std::fma(p, r, 1.0f);
  const int32_t e = static_cast<int32_t>(n), half = e >> 1; // arithmetic shift: floor(e / 2)
  return p * powerOfTwo(half) * powerOfTwo(e - half);
}

} // namespace llmc::cpu::detail
