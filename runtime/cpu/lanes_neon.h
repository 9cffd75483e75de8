// The AVX2-order accumulator the NEON kernels share (simd_neon.cpp,
// matmul_q8_neon.cpp): "8 lanes" are two 4-lane registers, and hsum adds
// them in the AVX2 hsum's tree (lanes_avx2.h), so NEON outputs have the
// AVX2 kernels' bits.
#pragma once
#if defined(__aarch64__)

#include <arm_neon.h>

namespace llmc::cpu::detail {

struct Lanes8 {
  float32x4_t lo, hi; // lanes 0..3, 4..7
};

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as the AVX2 hsum.
inline float hsum(Lanes8 v) {
  const float32x4_t s = vaddq_f32(v.lo, v.hi);
  const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
  return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}

} // namespace llmc::cpu::detail

#endif
