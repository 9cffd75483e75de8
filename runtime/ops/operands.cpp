#include "ops/operands.h"

#include "ops/op_table.h"

namespace llmc::ops {

int expectedInputs(const fb::Step &step) {
  switch (step.op()) {
  case fb::OpKind::Activation:
    return step.params_as_ActivationParams()->gated() ? 2 : 1;
  case fb::OpKind::Embedding:
  case fb::OpKind::Norm:
  case fb::OpKind::Linear:
  case fb::OpKind::Rope:
  case fb::OpKind::Attention:
  case fb::OpKind::Elementwise:
  case fb::OpKind::Logits:
  case fb::OpKind::LmHead:
    return opInfo(step.op()).minInputs;
  }
  return -1;
}

int expectedWeights(const fb::Step &step) {
  switch (step.op()) {
  case fb::OpKind::Norm:
    return normWeights(step.params_as_NormParams());
  case fb::OpKind::Linear:
    return linearOperands(*step.params_as_LinearParams()).count;
  case fb::OpKind::Logits:
  case fb::OpKind::LmHead:
    return logitsMatrix(*step.params_as_LogitsParams()) + 1 +
           (step.params_as_LogitsParams()->bias() ? 1 : 0);
  case fb::OpKind::Embedding:
  case fb::OpKind::Rope:
  case fb::OpKind::Attention:
  case fb::OpKind::Elementwise:
  case fb::OpKind::Activation:
    return opInfo(step.op()).minWeights;
  }
  return -1;
}

} // namespace llmc::ops
