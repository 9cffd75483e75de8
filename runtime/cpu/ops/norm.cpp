// Norm: RMSNorm of each row (offset + gamma scaling, Gemma's 1 + w).
#include "cpu/kernels.h"
#include "cpu/ops/op_context.h"

namespace llmc::cpu {

void applyNorm(const OpContext &c, const fb::NormParams &norm, int gammaWeight, const float *x,
               int64_t rows, float *y) {
  rmsNorm(c.pool, x, rows, c.vector(gammaWeight), static_cast<float>(norm.eps()), y,
          static_cast<float>(norm.offset()));
}

// With group_width g (per-head q/k norms), a [T, W] row is W / g rows of g
// (the validator checked that g divides W and that the weight has g entries).
Status normStep(const OpContext &c) {
  const fb::NormParams &p = *c.step.params_as_NormParams();
  const int64_t rows = p.group_width() > 0 ? c.tokens() * (c.outWidth() / p.group_width())
                                           : c.tokens();
  applyNorm(c, p, 0, c.in(0), rows, c.out());
  return Status::ok();
}

} // namespace llmc::cpu
