// Synthetic weights (--synthetic-weights plans): value i of a tensor is a pure
// function of (seed, i), so the CPU and CUDA backends generate the same
// numbers in any order and in parallel, and a plan stores no weight bytes.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

using u64 = unsigned long long;

// SplitMix64 finalizer: a strong 64-bit mix of a counter.
LLMC_HD inline u64 splitMix64(u64 x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1]: the top 24 bits of a mixed counter.
LLMC_HD inline float uniformOpen01(u64 bits) {
  return (static_cast<float>(bits >> 40) + 1.0f) * (1.0f / 16777216.0f);
}

// Standard normal sample i of stream `seed` (Box-Muller on two uniforms).
LLMC_HD inline float syntheticNormal(u64 seed, u64 index) {
  u64 bits = splitMix64(seed ^ splitMix64(index));
  float u1 = uniformOpen01(bits);
  float u2 = uniformOpen01(splitMix64(bits));
  return sqrtF(-2.0f * logF(u1)) * cosF(6.2831853071795864f * u2);
}

} // namespace llmc::hd
