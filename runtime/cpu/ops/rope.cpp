// Rope: rotates heads [0, heads) of each row from `column` on, in place.
#include "cpu/kernels.h"
#include "cpu/ops/op_context.h"

namespace llmc::cpu {

Status ropeStep(const OpContext &c) {
  const fb::RopeStepParams &p = *c.step.params_as_RopeStepParams();
  rope(c.pool, c.out() + p.column(), c.tokens(), c.outWidth(),
       {p.heads(), p.head_dim(), p.rope()->rotary_dim()}, c.input.positions, c.ropeTable);
  return Status::ok();
}

} // namespace llmc::cpu
