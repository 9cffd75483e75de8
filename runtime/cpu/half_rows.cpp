#include "cpu/half_rows.h"

#include "cpu/isa.h"
#include "kernels/common/half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LLMC_F16C __attribute__((target("avx2,f16c")))
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace llmc::cpu {
namespace {

void f32ToF16Scalar(const float *in, uint16_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = hd::f32ToF16(in[i]);
}

void f16ToF32Scalar(const uint16_t *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = hd::f16ToF32(in[i]);
}

#if defined(__x86_64__)
// Every ISA above Scalar requires F16C (isa.cpp).
bool hasF16cKernels() { return activeIsa() != Isa::Scalar; }

LLMC_F16C void f32ToF16F16c(const float *in, uint16_t *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  f32ToF16Scalar(in + i, out + i, n - i);
}

LLMC_F16C void f16ToF32F16c(const uint16_t *in, float *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i))));
  f16ToF32Scalar(in + i, out + i, n - i);
}
#endif

} // namespace

void f32ToF16Row(const float *in, uint16_t *out, int64_t n) {
#if defined(__x86_64__)
  if (hasF16cKernels())
    return f32ToF16F16c(in, out, n);
#elif defined(__aarch64__)
  if (activeIsa() == Isa::Neon) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(in + i))));
    return f32ToF16Scalar(in + i, out + i, n - i);
  }
#endif
  f32ToF16Scalar(in, out, n);
}

void f16ToF32Row(const uint16_t *in, float *out, int64_t n) {
#if defined(__x86_64__)
  if (hasF16cKernels())
    return f16ToF32F16c(in, out, n);
#elif defined(__aarch64__)
  if (activeIsa() == Isa::Neon) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(in + i))));
    return f16ToF32Scalar(in + i, out + i, n - i);
  }
#endif
  f16ToF32Scalar(in, out, n);
}

} // namespace llmc::cpu
