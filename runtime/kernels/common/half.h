// f32 <-> bf16 and f32 <-> f16 conversions on raw 16-bit patterns, exact and
// integer-only (so fast-math or flush-to-zero device flags cannot change
// them). Rounding is round-to-nearest-even, as PyTorch and F16C do; NaNs stay
// NaN (quieted), infinities and f16 subnormals are handled.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

// bf16 is the top half of an f32: widening is a shift.
LLMC_HD inline float bf16ToF32(u16 h) { return bitsToFloat(static_cast<u32>(h) << 16); }

// Round to nearest even; every NaN becomes the canonical quiet NaN 0x7FC0
// (as c10::BFloat16 does).
LLMC_HD inline u16 f32ToBf16(float f) {
  u32 u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0;
  u32 roundingBias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<u16>((u + roundingBias) >> 16);
}

// f16 layout: 1 sign, 5 exponent (bias 15), 10 mantissa bits. On the GPU
// one conversion instruction (exact, as is the portable code below).
LLMC_HD inline float f16ToF32(u16 h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  u32 sign = static_cast<u32>(h & 0x8000u) << 16;
  u32 exponent = (h >> 10) & 0x1fu;
  u32 mantissa = h & 0x3ffu;
  if (exponent == 0x1f) // inf, or NaN with its payload kept and the quiet bit set
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u));
  if (exponent == 0) {
    if (mantissa == 0)
      return bitsToFloat(sign);
    // Subnormal mantissa * 2^-24: normalize so that bit 10 is the implicit one.
    u32 biased = 113; // f32 biased exponent of 2^-14
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --biased;
    }
    return bitsToFloat(sign | (biased << 23) | ((mantissa & 0x3ffu) << 13));
  }
  return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
#endif
}

// Rounds `value >> shift` to nearest even (shift in 1..31).
LLMC_HD inline u32 shiftRightRoundEven(u32 value, u32 shift) {
  u32 kept = value >> shift;
  u32 rest = value & ((1u << shift) - 1u);
  u32 half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

// Round to nearest even; overflow gives inf; NaN keeps the top of its
// payload with the quiet bit set (as F16C's vcvtps2ph does).
LLMC_HD inline u16 f32ToF16(float f) {
  u32 u = floatBits(f);
  u32 sign = (u >> 16) & 0x8000u;
  u32 magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return static_cast<u16>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x38800000u) { // >= 2^-14: normal in f16 unless it overflows
    // Rebias the exponent (127 -> 15); a mantissa carry rounds up into it.
    u32 h = shiftRightRoundEven(magnitude - 0x38000000u, 13);
    return static_cast<u16>(sign | (h >= 0x7c00u ? 0x7c00u : h));
  }
  u32 biased = magnitude >> 23;
  if (biased < 102) // below 2^-25: rounds to zero
    return static_cast<u16>(sign);
  // Subnormal: the 24-bit significand times 2^(biased - 126) units of 2^-24.
  u32 significand = (magnitude & 0x7fffffu) | 0x800000u;
  return static_cast<u16>(sign | shiftRightRoundEven(significand, 126 - biased));
}

} // namespace llmc::hd
