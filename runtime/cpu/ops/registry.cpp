#include "cpu/ops/op_context.h"

#include <cstring>

namespace llmc::cpu {

OpFunction opFunction(fb::OpKind kind) {
  // No default: a new OpKind fails to compile until it has a CPU function.
  switch (kind) {
  case fb::OpKind::Embedding:
    return embeddingStep;
  case fb::OpKind::Norm:
    return normStep;
  case fb::OpKind::Linear:
    return linearStep;
  case fb::OpKind::Rope:
    return ropeStep;
  case fb::OpKind::Attention:
    return attentionStep;
  case fb::OpKind::Elementwise:
    return elementwiseStep;
  case fb::OpKind::Activation:
    return activationStep;
  case fb::OpKind::Logits:
    return logitsStep;
  case fb::OpKind::LmHead:
    return lmHeadStep;
  }
  return nullptr; // not a kind: the plan validator refuses it first
}

const float *OpContext::selectRows(const std::vector<int64_t> &rows) const {
  const float *x = in(0);
  if (rows.empty())
    return x;
  const int64_t w = inWidth(0);
  scratch.rows.resize(rows.size() * w);
  for (size_t r = 0; r < rows.size(); ++r)
    std::memcpy(&scratch.rows[r * w], x + rows[r] * w, w * sizeof(float));
  return scratch.rows.data();
}

} // namespace llmc::cpu
