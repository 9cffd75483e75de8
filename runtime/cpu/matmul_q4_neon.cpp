// NEON int4 linear layer (matmul_q4.h, matmul_q4_neon.h), base AArch64: the
// block dot products by widening multiplies (SMULL/SMLAL to 16 bits, at most
// 2 x 15 x 128 per lane, then pairwise SADALP to 32 bits), and the entry that
// takes SDOT instead where the CPU has it (matmul_q4_neon_dot.cpp).
#if defined(__aarch64__)

#include "cpu/isa.h"
#include "cpu/matmul_q4_neon.h"

namespace llmc::cpu::detail {
namespace {

struct WideningDot {
  static int32x4_t block(int8x16_t lo, int8x16_t hi, int8x16_t xe, int8x16_t xo) {
    int16x8_t first = vmull_s8(vget_low_s8(lo), vget_low_s8(xe));
    first = vmlal_s8(first, vget_low_s8(hi), vget_low_s8(xo));
    int16x8_t second = vmull_high_s8(lo, xe);
    second = vmlal_high_s8(second, hi, xo);
    return vpadalq_s16(vpaddlq_s16(first), second);
  }
};

} // namespace

void matmulQ4RowsNeonWidening(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  q4neon::rows<WideningDot>(p, rowBegin, rowEnd);
}

void matmulQ4RowsNeon(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  if (neonDotProdActive())
    return matmulQ4RowsNeonSdot(p, rowBegin, rowEnd);
  matmulQ4RowsNeonWidening(p, rowBegin, rowEnd);
}

} // namespace llmc::cpu::detail

#endif // __aarch64__
