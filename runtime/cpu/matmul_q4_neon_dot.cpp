// NEON int4 linear layer with SDOT (Armv8.2 dot product): this file alone is
// compiled with -march=armv8.2-a+dotprod (runtime/CMakeLists.txt), and
// matmulQ4RowsNeon calls it only where getauxval reports HWCAP_ASIMDDP
// (cpu/isa.h). It includes no more than the kernel needs, so that no inline
// library code compiled for Armv8.2 is shared with the rest of the binary.
#if defined(__aarch64__)

#include "cpu/matmul_q4_neon.h"

#if !defined(__ARM_FEATURE_DOTPROD)
#error "matmul_q4_neon_dot.cpp must be compiled with -march=armv8.2-a+dotprod"
#endif

namespace llmc::cpu::detail {
namespace {

struct SdotDot {
  static int32x4_t block(int8x16_t lo, int8x16_t hi, int8x16_t xe, int8x16_t xo) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, xe), hi, xo);
  }
};

} // namespace

void matmulQ4RowsNeonSdot(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  q4neon::rows<SdotDot>(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __aarch64__
