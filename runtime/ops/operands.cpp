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
    return logitsMatrix(*step.params_as_LogitsParams()) +
           matrixParts(step.params_as_LogitsParams()->weights()) +
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

namespace llmc::ops {

std::string stepVariant(const fb::Step &step) {
  std::string flags;
  auto flag = [&](bool on, const std::string &name) {
    if (on)
      flags += (flags.empty() ? "" : ",") + name;
  };
  auto lower = [](const char *name) {
    std::string s(name);
    for (char &ch : s)
      ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    return s;
  };
  if (const fb::LinearParams *p = step.params_as_LinearParams()) {
    flag(p->prologue() != nullptr, "norm");
    flag(p->activation() != fb::ActivationKind::None,
         (p->gated() ? "gated-" : "") + lower(fb::EnumNameActivationKind(p->activation())));
    flag(p->weights() != fb::WeightFormat::Dense, lower(fb::EnumNameWeightFormat(p->weights())));
    flag(p->bias(), "bias");
    flag(p->accumulate(), "accumulate");
  } else if (const fb::AttentionParams *p = step.params_as_AttentionParams()) {
    flag(p->rope() != nullptr, "rope");
    flag(p->window() != 0, "window");
    flag(p->softcap() != 0.0, "softcap");
  } else if (const fb::ActivationParams *p = step.params_as_ActivationParams()) {
    flag(true, (p->gated() ? "gated-" : "") + lower(fb::EnumNameActivationKind(p->activation())));
  } else if (const fb::ElementwiseParams *p = step.params_as_ElementwiseParams()) {
    flag(true, lower(fb::EnumNameElementwiseOp(p->op())));
  } else if (const fb::LogitsParams *p = step.params_as_LogitsParams()) {
    flag(p->weights() != fb::WeightFormat::Dense, lower(fb::EnumNameWeightFormat(p->weights())));
  } else if (const fb::NormParams *p = step.params_as_NormParams()) {
    flag(true, lower(fb::EnumNameNormKind(p->kind())));
  }
  const std::string name = validOp(step.op()) ? opName(step.op()) : "unknown";
  return flags.empty() ? name : name + "[" + flags + "]";
}

} // namespace llmc::ops
