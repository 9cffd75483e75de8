// Logits: x [T, H] . W^T [V, H] (+ bias, Phi), times scale (Cohere), soft-capped;
// only the rows the run asks for when it asks for fewer than T (decode needs
// one row per sequence).
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/matmul_q4.h"
#include "cpu/matmul_q8.h"
#include "cpu/ops/op_context.h"
#include "kernels/common/q8_layout.h"
#include "ops/operands.h"

namespace llmc::cpu {

void projectVocabulary(const OpContext &c, const fb::LogitsParams &p, const float *x,
                       int64_t rows, const float *bias, float *y) {
  const int first = ops::logitsMatrix(p);
  const int64_t vocab = c.outWidth(0), hidden = c.inWidth(0);
  auto data = [&](int i) { return c.weights.data(c.weight(first + i)); };
  switch (p.weights()) {
  case fb::WeightFormat::Dense:
    matmul(c.pool, x, rows, c.matrix(first), bias, 0.0f, y);
    return;
  case fb::WeightFormat::Q4:
    matmulQ4(c.pool, x, rows,
             Q4Matrix{static_cast<const uint32_t *>(data(0)),
                      static_cast<const uint16_t *>(data(1)), static_cast<const uint8_t *>(data(2)),
                      vocab, hidden, p.group_size(), c.weights.q4Panels(c.weight(first))},
             bias, 0.0f, y);
    return;
  case fb::WeightFormat::Q8:
    matmulQ8(c.pool, x, rows,
             Q8Matrix{static_cast<const int8_t *>(data(0)), data(1),
                      c.weights.dtype(c.weight(first + 1)) == DType::F16, vocab, hidden,
                      p.group_size()},
             bias, 0.0f, y);
    return;
  }
}

namespace {

// logits [rows, V] = softcap((x . W^T + bias) * scale).
void projectRows(const OpContext &c, const fb::LogitsParams &p, const float *x, int64_t rows,
                 float *logits) {
  const int64_t vocab = c.outWidth(0);
  const float *bias = p.bias() ? c.f32(ops::logitsBias(p)) : nullptr;
  projectVocabulary(c, p, x, rows, bias, logits);
  if (p.scale() != 1.0)
    scale(c.pool, logits, rows * vocab, static_cast<float>(p.scale()));
  if (const float cap = static_cast<float>(p.softcap()); cap > 0.0f)
    softCap(c.pool, logits, rows * vocab, cap);
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
  c.scratch.logits.resize(rows * c.outWidth(0));
  projectRows(c, p, x, rows, c.scratch.logits.data());
  c.lastLogits = c.scratch.logits.data();
  return Status::ok();
}

} // namespace llmc::cpu
