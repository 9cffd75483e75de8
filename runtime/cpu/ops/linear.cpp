// Linear: out (+)= output_scale * epilogue(prologue(x) . W^T (+ bias)) over
// dense, int8 or int4 weights (engine.fbs LinearParams). Each combination runs the kernel it
// always ran (cpu/fused.h, cpu/matmul*.h), so fused plans stay bit-identical
// to the unfused ones where they were before.
#include "cpu/fused.h"
#include "cpu/matmul.h"
#include "cpu/matmul_q4.h"
#include "cpu/kernels.h"
#include "cpu/matmul_q8.h"
#include "cpu/ops/op_context.h"
#include "kernels/common/q8_layout.h"
#include "ops/operands.h"

namespace llmc::cpu {
namespace {

// Each writes (accumulate: adds) the unscaled product into `out` [T, N].
Status denseLinear(const OpContext &c, const fb::LinearParams &p, const ops::LinearOperands &o,
                   float *out, bool accumulate) {
  const int64_t T = c.tokens();
  const float *x = c.in(0);
  const float *bias = o.bias >= 0 ? c.f32(o.bias) : nullptr;
  const float beta = accumulate ? 1.0f : 0.0f;
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

// Weights: qweight, scales, zeros of [N', K] (kernels/common/q4_layout.h),
// the zeros packed to nibbles at load (cpu/matmul_q4.h, LoadedWeights).
Status q4Linear(const OpContext &c, const fb::LinearParams &p, const ops::LinearOperands &o,
                float *out, bool accumulate) {
  const int64_t T = c.tokens(), k = c.inWidth(0), n = c.outWidth();
  auto data = [&](int i) { return c.weights.data(c.weight(i)); };
  const Q4Matrix w{static_cast<const uint32_t *>(data(o.matrix)),
                   static_cast<const uint16_t *>(data(o.matrix + 1)),
                   static_cast<const uint8_t *>(data(o.matrix + 2)),
                   p.gated() ? 2 * n : n,
                   k,
                   p.group_size(),
                   c.weights.q4Panels(c.weight(o.matrix))};
  const float *x = c.in(0);
  if (p.prologue() != nullptr) { // the normalized rows feed the int4 GEMM
    if (static_cast<int64_t>(c.scratch.norm.size()) < T * k)
      c.scratch.norm.resize(T * k);
    applyNorm(c, *p.prologue(), o.normGamma, x, T, c.scratch.norm.data());
    x = c.scratch.norm.data();
  }
  if (p.gated()) {
    matmulSwigluQ4(c.pool, x, T, w, out, c.scratch.products, ops::gateKind(p.activation()));
    return Status::ok();
  }
  const float *bias = o.bias >= 0 ? c.f32(o.bias) : nullptr;
  matmulQ4(c.pool, x, T, w, bias, accumulate ? 1.0f : 0.0f, out);
  return Status::ok();
}

// Weights: qweight, scales of [N', K] (kernels/common/q8_layout.h); the
// prologue and the gated epilogue as for int4, around matmulQ8.
Status q8Linear(const OpContext &c, const fb::LinearParams &p, const ops::LinearOperands &o,
                float *out, bool accumulate) {
  const int64_t T = c.tokens(), k = c.inWidth(0), n = c.outWidth();
  const bool halfScales = c.weights.dtype(c.weight(o.matrix + 1)) == DType::F16;
  const auto *q = static_cast<const int8_t *>(c.weights.data(c.weight(o.matrix)));
  const auto *scales = static_cast<const uint8_t *>(c.weights.data(c.weight(o.matrix + 1)));
  // Rows [first, first + rows) of the stored matrix as a matrix of their own.
  auto rowsOf = [&](int64_t first, int64_t rows) {
    const int64_t scaleBytes = hd::q8NumGroups(k, p.group_size()) * (halfScales ? 2 : 4);
    return Q8Matrix{q + first * hd::q8RowBytes(k), scales + first * scaleBytes, halfScales, rows,
                    k, p.group_size()};
  };
  const float *x = c.in(0);
  if (p.prologue() != nullptr) {
    if (static_cast<int64_t>(c.scratch.norm.size()) < T * k)
      c.scratch.norm.resize(T * k);
    applyNorm(c, *p.prologue(), o.normGamma, x, T, c.scratch.norm.data());
    x = c.scratch.norm.data();
  }
  if (p.gated()) { // gate rows [0, N), up rows [N, 2N): [2, T, N] products, then act(gate) * up
    if (static_cast<int64_t>(c.scratch.products.size()) < 2 * T * n)
      c.scratch.products.resize(2 * T * n);
    float *gate = c.scratch.products.data(), *up = gate + T * n;
    matmulQ8(c.pool, x, T, rowsOf(0, n), nullptr, 0.0f, gate);
    matmulQ8(c.pool, x, T, rowsOf(n, n), nullptr, 0.0f, up);
    swiglu(c.pool, gate, up, out, T * n, ops::gateKind(p.activation()));
    return Status::ok();
  }
  const float *bias = o.bias >= 0 ? c.f32(o.bias) : nullptr;
  matmulQ8(c.pool, x, T, rowsOf(0, n), bias, accumulate ? 1.0f : 0.0f, out);
  return Status::ok();
}

Status product(const OpContext &c, const fb::LinearParams &p, const ops::LinearOperands &o,
               float *out, bool accumulate) {
  switch (p.weights()) {
  case fb::WeightFormat::Dense:
    return denseLinear(c, p, o, out, accumulate);
  case fb::WeightFormat::Q4:
    return q4Linear(c, p, o, out, accumulate);
  case fb::WeightFormat::Q8:
    return q8Linear(c, p, o, out, accumulate);
  }
  return Status::error("internal: unknown weight format");
}

// out (+)= s * product (Granite's residual_multiplier): the product is
// rounded to f32, then scaled and rounded, then added, as transformers does
// `residual + hidden * s`; the separate statements keep the compiler from
// contracting them into one fused multiply-add.
Status scaledProduct(const OpContext &c, const fb::LinearParams &p,
                     const ops::LinearOperands &o) {
  const int64_t count = c.tokens() * c.outWidth();
  std::vector<float> &scaled = c.scratch.scaled;
  if (static_cast<int64_t>(scaled.size()) < count)
    scaled.resize(count);
  LLMC_RETURN_IF_ERROR(product(c, p, o, scaled.data(), /*accumulate=*/false));
  const float s = p.output_scale();
  float *out = c.out();
  for (int64_t i = 0; i < count; ++i) {
    const float term = scaled[i] * s;
    out[i] = p.accumulate() ? out[i] + term : term;
  }
  return Status::ok();
}

} // namespace

Status linearStep(const OpContext &c) {
  const fb::LinearParams &p = *c.step.params_as_LinearParams();
  const ops::LinearOperands o = ops::linearOperands(p);
  if (p.output_scale() != 1.0f)
    return scaledProduct(c, p, o);
  return product(c, p, o, c.out(), p.accumulate());
}

} // namespace llmc::cpu
