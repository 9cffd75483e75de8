// Elementwise: a op b of two [T, W] buffers.
#include "cpu/kernels.h"
#include "cpu/ops/op_context.h"

namespace llmc::cpu {

Status elementwiseStep(const OpContext &c) {
  const int64_t n = c.tokens() * c.outWidth();
  switch (c.step.params_as_ElementwiseParams()->op()) {
  case fb::ElementwiseOp::Add:
    add(c.pool, c.in(0), c.in(1), c.out(), n);
    return Status::ok();
  case fb::ElementwiseOp::Mul:
    mul(c.pool, c.in(0), c.in(1), c.out(), n);
    return Status::ok();
  }
  return Status::error("internal: unknown elementwise op");
}

} // namespace llmc::cpu
