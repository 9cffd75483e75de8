// The one table of plan op kinds (engine.fbs OpKind): each kind's name, its
// parameter table (the Step.params union member), and the operand counts it
// may have. The plan validator, the CPU and CUDA backends, the lowering and
// `llmrun inspect` all read it, so a new kind is added here first:
//   1. engine.fbs: the OpKind value and, if it needs one, its parameter table
//      in the StepParams union;
//   2. kOps below (a static_assert counts the entries; opTableIndex's switch
//      has no default, so the build names the kind it lacks);
//   3. the switches without default that then fail to compile: the
//      validator (plan/plan.cpp), the CPU registry (cpu/ops/registry.cpp),
//      the CUDA code generator (codegen/cuda/ops/).
// docs/adding-an-architecture.md walks through it.
#pragma once

#include "schema/engine_generated.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmc::ops {

struct OpInfo {
  fb::OpKind kind;
  const char *name;           // == fb::EnumNameOpKind(kind)
  fb::StepParams params;      // the union member its steps carry
  int minInputs, maxInputs;   // buffers read (the exact count follows from the params)
  int outputs;                // buffers written
  int minWeights, maxWeights; // tensors read (the exact count follows from the params)
  bool inPlace;               // writes its input 0's buffer (outputs[0] == inputs[0])
};

// Indexed by OpKind value. Weights of Linear: 2 prologue (gamma, beta) + 3
// matrix parts (Q4) + 1 bias; of LmHead: 2 norm + 3 matrix parts (Q4) + 1 bias.
inline constexpr OpInfo kOps[] = {
    {fb::OpKind::Embedding, "Embedding", fb::StepParams::EmbeddingParams, 1, 1, 1, 1, 1, false},
    {fb::OpKind::Norm, "Norm", fb::StepParams::NormParams, 1, 1, 1, 1, 2, false},
    {fb::OpKind::Linear, "Linear", fb::StepParams::LinearParams, 1, 1, 1, 1, 6, false},
    {fb::OpKind::Rope, "Rope", fb::StepParams::RopeStepParams, 1, 1, 1, 0, 0, true},
    {fb::OpKind::Attention, "Attention", fb::StepParams::AttentionParams, 3, 3, 1, 0, 0, false},
    {fb::OpKind::Elementwise, "Elementwise", fb::StepParams::ElementwiseParams, 2, 2, 1, 0, 0,
     false},
    {fb::OpKind::Activation, "Activation", fb::StepParams::ActivationParams, 1, 2, 1, 0, 0, false},
    {fb::OpKind::Logits, "Logits", fb::StepParams::LogitsParams, 1, 1, 1, 1, 4, false},
    {fb::OpKind::LmHead, "LmHead", fb::StepParams::LogitsParams, 1, 1, 2, 2, 6, false},
};
inline constexpr size_t kNumOps = sizeof(kOps) / sizeof(kOps[0]);
static_assert(kNumOps == static_cast<size_t>(fb::OpKind::MAX) + 1,
              "every OpKind of engine.fbs needs its entry in ops::kOps");

// The entry of `kind` (a switch without default: a new OpKind fails to
// compile here until it has one).
constexpr size_t opTableIndex(fb::OpKind kind) {
  switch (kind) {
  case fb::OpKind::Embedding:
    return 0;
  case fb::OpKind::Norm:
    return 1;
  case fb::OpKind::Linear:
    return 2;
  case fb::OpKind::Rope:
    return 3;
  case fb::OpKind::Attention:
    return 4;
  case fb::OpKind::Elementwise:
    return 5;
  case fb::OpKind::Activation:
    return 6;
  case fb::OpKind::Logits:
    return 7;
  case fb::OpKind::LmHead:
    return 8;
  }
  return kNumOps; // not a kind (a corrupt plan): the validator refuses it first
}

constexpr bool tableInOrder() {
  for (size_t i = 0; i < kNumOps; ++i)
    if (static_cast<size_t>(kOps[i].kind) != i || opTableIndex(kOps[i].kind) != i)
      return false;
  return true;
}
static_assert(tableInOrder(), "ops::kOps must list the kinds in OpKind order");

// Whether `kind` is a known kind (a plan may hold any 16-bit value).
constexpr bool validOp(fb::OpKind kind) { return opTableIndex(kind) < kNumOps; }

// The entry of a valid kind.
constexpr const OpInfo &opInfo(fb::OpKind kind) { return kOps[opTableIndex(kind)]; }

constexpr const char *opName(fb::OpKind kind) {
  return validOp(kind) ? opInfo(kind).name : "unknown";
}

// The name of a parameter table (the union member), for messages.
inline const char *paramsName(fb::StepParams params) { return fb::EnumNameStepParams(params); }

// The kind and its flags, for inspection and kernel counts, e.g. "Linear",
// "Linear[norm,gated-silu,q4]", "Attention[rope,window]", "Rope".
std::string stepVariant(const fb::Step &step);

} // namespace llmc::ops
