// Activation: act(x), or act(gate) * up when gated (kernels/common/activations.h).
#include "cpu/kernels.h"
#include "cpu/ops/op_context.h"
#include "kernels/common/activations.h"
#include "ops/operands.h"

namespace llmc::cpu {

Status activationStep(const OpContext &c) {
  const fb::ActivationParams &p = *c.step.params_as_ActivationParams();
  const int64_t n = c.tokens() * c.outWidth();
  const float *x = c.in(0);
  float *y = c.out();
  if (p.gated()) {
    swiglu(c.pool, x, c.in(1), y, n, ops::gateKind(p.activation()));
    return Status::ok();
  }
  switch (p.activation()) {
  case fb::ActivationKind::Silu:
    silu(c.pool, x, y, n);
    return Status::ok();
  case fb::ActivationKind::GeluTanh:
  case fb::ActivationKind::GeluErf:
    gelu(c.pool, x, y, n, p.activation() == fb::ActivationKind::GeluTanh);
    return Status::ok();
  case fb::ActivationKind::Relu:
    c.pool.parallelFor(
        n,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i)
            y[i] = hd::relu(x[i]);
        },
        4096);
    return Status::ok();
  case fb::ActivationKind::None:
    break; // refused by the plan validator
  }
  return Status::error("internal: an Activation step without an activation");
}

} // namespace llmc::cpu
