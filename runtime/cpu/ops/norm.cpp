// Norm: RMSNorm of each row (offset + gamma scaling, Gemma's 1 + w).
#include "cpu/kernels.h"
#include "cpu/ops/op_context.h"

namespace llmc::cpu {

void applyNorm(const OpContext &c, const fb::NormParams &norm, int gammaWeight, const float *x,
               int64_t rows, float *y) {
  rmsNorm(c.pool, x, rows, c.vector(gammaWeight), static_cast<float>(norm.eps()), y,
          static_cast<float>(norm.offset()));
}

Status normStep(const OpContext &c) {
  applyNorm(c, *c.step.params_as_NormParams(), 0, c.in(0), c.tokens(), c.out());
  return Status::ok();
}

} // namespace llmc::cpu
