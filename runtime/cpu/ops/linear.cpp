// Linear: out (+)= epilogue(prologue(x) . W^T (+ bias)) over dense or int4
// weights (engine.fbs LinearParams). Each combination runs the kernel it
// always ran (cpu/fused.h, cpu/matmul*.h), so fused plans stay bit-identical
// to the unfused ones where they were before.
#include "cpu/fused.h"
#include "cpu/matmul.h"
#include "cpu/matmul_q4.h"
#include "cpu/ops/op_context.h"
#include "ops/operands.h"

namespace llmc::cpu {
namespace {

Status denseLinear(const OpContext &c, const fb::LinearParams &p, const ops::LinearOperands &o) {
  const int64_t T = c.tokens();
  const float *x = c.in(0);
  float *out = c.out();
  const float *bias = o.bias >= 0 ? c.f32(o.bias) : nullptr;
  const float beta = p.accumulate() ? 1.0f : 0.0f;
  const int gate = ops::gateKind(p.activation());
  const fb::NormParams *norm = p.prologue();
  if (norm == nullptr && !p.gated())
    matmul(c.pool, x, T, c.matrix(o.matrix), bias, beta, out);
  else if (norm == nullptr)
    matmulSwiglu(c.pool, x, T, c.matrix(o.matrix), out, gate);
  else if (!p.gated())
    rmsNormMatmul(c.pool, x, T, c.vector(o.normGamma), static_cast<float>(norm->eps()),
                  c.matrix(o.matrix), bias, beta, out, c.scratch.norm,
                  static_cast<float>(norm->offset()));
  else
    rmsNormMatmulSwiglu(c.pool, x, T, c.vector(o.normGamma), static_cast<float>(norm->eps()),
                        c.matrix(o.matrix), out, c.scratch.norm,
                        static_cast<float>(norm->offset()), gate);
  return Status::ok();
}

// Weights: qweight, scales, zeros of [N', K] (kernels/common/q4_layout.h).
Status q4Linear(const OpContext &c, const fb::LinearParams &p, const ops::LinearOperands &o) {
  const int64_t T = c.tokens(), k = c.inWidth(0), n = c.outWidth();
  auto data = [&](int i) { return c.weights.data(c.weight(i)); };
  const Q4Matrix w{static_cast<const uint32_t *>(data(o.matrix)),
                   static_cast<const uint16_t *>(data(o.matrix + 1)),
                   static_cast<const uint16_t *>(data(o.matrix + 2)),
                   p.gated() ? 2 * n : n,
                   k,
                   p.group_size()};
  const float *x = c.in(0);
  if (p.prologue() != nullptr) { // the normalized rows feed the int4 GEMM
    if (static_cast<int64_t>(c.scratch.norm.size()) < T * k)
      c.scratch.norm.resize(T * k);
    applyNorm(c, *p.prologue(), o.normGamma, x, T, c.scratch.norm.data());
    x = c.scratch.norm.data();
  }
  if (p.gated()) {
    matmulSwigluQ4(c.pool, x, T, w, c.out(), c.scratch.products, ops::gateKind(p.activation()));
    return Status::ok();
  }
  const float *bias = o.bias >= 0 ? c.f32(o.bias) : nullptr;
  matmulQ4(c.pool, x, T, w, bias, p.accumulate() ? 1.0f : 0.0f, c.out());
  return Status::ok();
}

} // namespace

Status linearStep(const OpContext &c) {
  const fb::LinearParams &p = *c.step.params_as_LinearParams();
  const ops::LinearOperands o = ops::linearOperands(p);
  switch (p.weights()) {
  case fb::WeightFormat::Dense:
    return denseLinear(c, p, o);
  case fb::WeightFormat::Q4:
    return q4Linear(c, p, o);
  }
  return Status::error("internal: unknown weight format");
}

} // namespace llmc::cpu
