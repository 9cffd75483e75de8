// Portability layer for the math that the CPU and CUDA backends share.
//
// Headers in kernels/common/ are compiled three ways: by the host C++
// compiler (CPU backend and tests), by nvcc, and by NVRTC when codegen builds
// a kernel. NVRTC has no C++ standard library, so these headers include
// nothing from it, use only the fixed-width aliases below, and call math
// functions through the llmc::hd wrappers.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LLMC_HD __host__ __device__
#else
#define LLMC_HD
#include <math.h>
#endif

namespace llmc::hd {

// NVRTC has no <cstdint>; these widths hold on every target we build for.
using u16 = unsigned short;
using u32 = unsigned int;
using i32 = int;
#if !defined(__CUDACC_RTC__)
static_assert(sizeof(u16) == 2 && sizeof(u32) == 4, "unexpected integer widths");
#endif

// Reinterprets the bits of a float as u32 and back (no aliasing UB).
LLMC_HD inline u32 floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  u32 u;
  __builtin_memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

LLMC_HD inline float bitsToFloat(u32 u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

LLMC_HD inline float infinity() { return bitsToFloat(0x7f800000u); }

// Math wrappers: the CUDA math library under nvcc/NVRTC, libm on the host.
LLMC_HD inline float expF(float x) { return ::expf(x); }
LLMC_HD inline float logF(float x) { return ::logf(x); }
LLMC_HD inline float powF(float x, float y) { return ::powf(x, y); }
LLMC_HD inline double powD(double x, double y) { return ::pow(x, y); }
LLMC_HD inline float cosF(float x) { return ::cosf(x); }
LLMC_HD inline float sinF(float x) { return ::sinf(x); }
LLMC_HD inline float sqrtF(float x) { return ::sqrtf(x); }
LLMC_HD inline float maxF(float a, float b) { return a > b ? a : b; }
// Round to the nearest integer, ties to even (the default rounding mode).
LLMC_HD inline float rintF(float x) { return ::rintf(x); }

} // namespace llmc::hd
