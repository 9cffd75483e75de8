// LmHead: final norm + lm_head over the output rows only: the Argmax rows
// through the fused projection + argmax (no logits written), the other rows'
// logits compacted at the top of the logits buffer. Over int4/int8 weights
// (--quantize-lm-head) the argmax rows' logits go through scratch.
#include "cpu/fused.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/ops/op_context.h"
#include "ops/operands.h"

namespace llmc::cpu {

Status lmHeadStep(const OpContext &c) {
  const fb::LogitsParams &p = *c.step.params_as_LogitsParams();
  OpScratch &s = c.scratch;
  s.argmaxRows.clear();
  s.logitRows.clear();
  for (const OutputRequest &request : c.input.outputs)
    (request.kind == OutputKind::Argmax ? s.argmaxRows : s.logitRows).push_back(request.row);
  const int64_t hidden = c.inWidth(0), vocab = c.outWidth(0);
  const bool dense = p.weights() == fb::WeightFormat::Dense;
  // Normalizes `rows` of the step's input into scratch.norm.
  auto normalize = [&](const std::vector<int64_t> &rows) {
    const int64_t n = static_cast<int64_t>(rows.size());
    const float *x = c.selectRows(rows);
    if (static_cast<int64_t>(s.norm.size()) < n * hidden)
      s.norm.resize(n * hidden);
    applyNorm(c, *p.norm(), 0, x, n, s.norm.data());
  };
  if (!s.argmaxRows.empty()) {
    normalize(s.argmaxRows);
    const int64_t n = static_cast<int64_t>(s.argmaxRows.size());
    s.argmaxIds.resize(n);
    if (dense) {
      matmulArgmax(c.pool, s.norm.data(), n, c.matrix(ops::logitsMatrix(p)), s.argmaxIds.data());
    } else { // the int4/int8 GEMM writes [n, V] logits to scratch, then their argmax
      s.headLogits.resize(n * vocab);
      projectVocabulary(c, p, s.norm.data(), n, nullptr, s.headLogits.data());
      argmax(s.headLogits.data(), n, vocab, s.argmaxIds.data());
    }
  }
  float *logits = c.out(0);
  if (!s.logitRows.empty()) {
    normalize(s.logitRows);
    projectVocabulary(c, p, s.norm.data(), static_cast<int64_t>(s.logitRows.size()), nullptr,
                      logits);
    // Soft-capping is monotonic: the argmax rows above need none.
    if (p.softcap() > 0.0)
      softCap(c.pool, logits, static_cast<int64_t>(s.logitRows.size()) * vocab,
              static_cast<float>(p.softcap()));
  }
  int64_t nextArgmax = 0, nextLogits = 0;
  StepOutput &out = c.result;
  for (size_t r = 0; r < c.input.outputs.size(); ++r) {
    if (c.input.outputs[r].kind == OutputKind::Argmax) {
      out.filled[r] = OutputKind::Argmax;
      out.ids[r] = s.argmaxIds[nextArgmax++];
      out.logitIndex[r] = -1;
    } else {
      out.filled[r] = OutputKind::Logits;
      out.logitIndex[r] = nextLogits++;
    }
  }
  c.lastLogits = logits;
  return Status::ok();
}

} // namespace llmc::cpu
