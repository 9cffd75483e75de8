// The activations and value shaping that the CPU kernels (cpu/kernels.cpp,
// cpu/fused.cpp) and the CUDA kernels (llmc/elementwise.cuh, gemm.cuh,
// gemv.cuh) share, so that both backends compute one formula:
//   silu(x)      = x / (1 + exp(-x))
//   geluTanh(x)  = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (HF "gelu_pytorch_tanh")
//   geluErf(x)   = x/2 (1 + erf(x / sqrt(2)))                       (HF "gelu")
//   relu(x)      = max(x, 0)
//   gated(act, g, u) = act(g) * u                                   (SwiGLU, GeGLU)
// Soft-capping (cap * tanh(x / cap)) is softCap in attention_scores.h.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

// An activation function as the kernels take it (the plan's
// ActivationKind maps to it: runtime/ops/operands.h gateKind). Append only.
enum GateKind : i32 { kGateSilu = 0, kGateGeluTanh = 1, kGateGeluErf = 2, kGateRelu = 3 };
constexpr i32 kNumGateKinds = 4;

LLMC_HD inline float silu(float x) { return x / (1.0f + expF(-x)); }

LLMC_HD inline float geluTanh(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + ::tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

LLMC_HD inline float relu(float x) { return x > 0.0f ? x : 0.0f; }

LLMC_HD inline float geluErf(float x) {
  const float kInvSqrt2 = 0.7071067811865476f;
  return 0.5f * x * (1.0f + ::erff(x * kInvSqrt2));
}

// act(x) for a GateKind (silu for an unknown one, as below).
LLMC_HD inline float activate(i32 kind, float x) {
  switch (kind) {
  case kGateGeluTanh:
    return geluTanh(x);
  case kGateGeluErf:
    return geluErf(x);
  case kGateRelu:
    return relu(x);
  default:
    return silu(x);
  }
}

// act(gate) * up for a GateKind (silu for an unknown one: the plan validator
// refuses those before a kernel runs).
LLMC_HD inline float gated(i32 kind, float gate, float up) {
  switch (kind) {
  case kGateGeluTanh:
    return geluTanh(gate) * up;
  case kGateGeluErf:
    return geluErf(gate) * up;
  case kGateRelu:
    return relu(gate) * up;
  default:
    return silu(gate) * up;
  }
}

} // namespace llmc::hd
