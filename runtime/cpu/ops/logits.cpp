// Logits: x [T, H] . W^T [V, H], soft-capped; only the rows the run asks for
// when it asks for fewer than T (decode needs one row per sequence).
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/ops/op_context.h"
#include "ops/operands.h"

namespace llmc::cpu {

Status logitsStep(const OpContext &c) {
  const fb::LogitsParams &p = *c.step.params_as_LogitsParams();
  const WeightMatrix w = c.matrix(ops::logitsMatrix(p));
  const float cap = static_cast<float>(p.softcap());
  const int64_t T = c.tokens();
  if (c.outputRows.empty()) {
    matmul(c.pool, c.in(0), T, w, nullptr, 0.0f, c.out());
    if (cap > 0.0f)
      softCap(c.pool, c.out(), T * w.rows, cap);
    return Status::ok();
  }
  const int64_t rows = static_cast<int64_t>(c.outputRows.size());
  const float *x = c.selectRows(c.outputRows);
  c.scratch.logits.resize(rows * w.rows);
  matmul(c.pool, x, rows, w, nullptr, 0.0f, c.scratch.logits.data());
  if (cap > 0.0f)
    softCap(c.pool, c.scratch.logits.data(), rows * w.rows, cap);
  c.lastLogits = c.scratch.logits.data();
  return Status::ok();
}

} // namespace llmc::cpu
