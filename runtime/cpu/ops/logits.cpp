// Logits: x [T, H] . W^T [V, H] (+ bias, Phi), times scale (Cohere), soft-capped;
// only the rows the run asks for when it asks for fewer than T (decode needs
// one row per sequence).
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/ops/op_context.h"
#include "ops/operands.h"

namespace llmc::cpu {

namespace {

// logits [rows, V] = softcap((x . W^T + bias) * scale).
void projectRows(const OpContext &c, const fb::LogitsParams &p, const float *x, int64_t rows,
                 float *logits) {
  const WeightMatrix w = c.matrix(ops::logitsMatrix(p));
  const float *bias = p.bias() ? c.f32(ops::logitsBias(p)) : nullptr;
  matmul(c.pool, x, rows, w, bias, 0.0f, logits);
  if (p.scale() != 1.0)
    scale(c.pool, logits, rows * w.rows, static_cast<float>(p.scale()));
  if (const float cap = static_cast<float>(p.softcap()); cap > 0.0f)
    softCap(c.pool, logits, rows * w.rows, cap);
}

} // namespace

Status logitsStep(const OpContext &c) {
  const fb::LogitsParams &p = *c.step.params_as_LogitsParams();
  if (c.outputRows.empty()) {
    projectRows(c, p, c.in(0), c.tokens(), c.out());
    return Status::ok();
  }
  const int64_t rows = static_cast<int64_t>(c.outputRows.size());
  const float *x = c.selectRows(c.outputRows);
  c.scratch.logits.resize(rows * c.matrix(ops::logitsMatrix(p)).rows);
  projectRows(c, p, x, rows, c.scratch.logits.data());
  c.lastLogits = c.scratch.logits.data();
  return Status::ok();
}

} // namespace llmc::cpu
