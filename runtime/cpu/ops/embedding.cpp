// Embedding: rows of the table [V, H] for the step's token ids, times the scale.
#include "cpu/kernels.h"
#include "cpu/ops/op_context.h"

namespace llmc::cpu {

Status embeddingStep(const OpContext &c) {
  const int64_t T = c.tokens();
  float *out = c.out();
  LLMC_RETURN_IF_ERROR(
      embedding(c.pool, c.matrix(0), reinterpret_cast<const int32_t *>(c.in(0)), T, out));
  const double scale = c.step.params_as_EmbeddingParams()->scale();
  if (scale != 1.0)
    cpu::scale(c.pool, out, T * c.outWidth(), static_cast<float>(scale));
  return Status::ok();
}

} // namespace llmc::cpu
