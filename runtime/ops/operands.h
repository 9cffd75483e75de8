// What a step's parameter table implies about its operands: how many
// buffers and weights it reads and where each weight sits in Step.weights
// (engine.fbs, "Operand conventions"). The validator checks plans against
// these, the lowering writes them, the backends index by them.
#pragma once

#include "kernels/common/activations.h"
#include "schema/engine_generated.h"

#include <cstdint>

namespace llmc::ops {

// Weights of a norm: gamma (, beta with bias); 0 for none (null).
inline int normWeights(const fb::NormParams *norm) {
  return norm == nullptr ? 0 : (norm->bias() ? 2 : 1);
}

// Stored tensors of one linear matrix (a switch without default: a new
// WeightFormat fails to compile until it has its count).
constexpr int matrixParts(fb::WeightFormat format) {
  switch (format) {
  case fb::WeightFormat::Dense:
    return 1; // W [N', K]
  case fb::WeightFormat::Q4:
    return 3; // qweight, scales, zeros (kernels/common/q4_layout.h)
  case fb::WeightFormat::Q8:
    return 2; // qweight, scales (kernels/common/q8_layout.h)
  }
  return 0;
}

// Where a Linear step's weights sit: indices into Step.weights, -1 when absent.
struct LinearOperands {
  int normGamma = -1, normBeta = -1; // the prologue's
  int matrix = 0;                    // first part of the matrix
  int parts = 1;                     // matrixParts(weights)
  int bias = -1;
  int count = 1; // Step.weights' length
};

inline LinearOperands linearOperands(const fb::LinearParams &p) {
  LinearOperands o;
  const int norm = normWeights(p.prologue());
  if (norm > 0)
    o.normGamma = 0;
  if (norm > 1)
    o.normBeta = 1;
  o.matrix = norm;
  o.parts = matrixParts(p.weights());
  o.count = norm + o.parts;
  if (p.bias())
    o.bias = o.count++;
  return o;
}

// Logits and LmHead: the norm's weights (gamma, beta), the matrix, then the bias.
// The matrix takes matrixParts(p.weights()) tensors (int4, int8: --quantize-lm-head).
inline int logitsMatrix(const fb::LogitsParams &p) { return normWeights(p.norm()); }
inline int logitsBias(const fb::LogitsParams &p) {
  return p.bias() ? logitsMatrix(p) + matrixParts(p.weights()) : -1;
}

// The Step.weights index of the zero points of a step's int4 matrix (Linear,
// Logits, LmHead with Q4 weights), or -1: the CPU backend packs them.
inline int q4ZerosOperand(const fb::Step &step) {
  if (step.op() == fb::OpKind::Linear) {
    const fb::LinearParams *p = step.params_as_LinearParams();
    if (p != nullptr && p->weights() == fb::WeightFormat::Q4)
      return linearOperands(*p).matrix + 2;
  } else if (step.op() == fb::OpKind::Logits || step.op() == fb::OpKind::LmHead) {
    const fb::LogitsParams *p = step.params_as_LogitsParams();
    if (p != nullptr && p->weights() == fb::WeightFormat::Q4)
      return logitsMatrix(*p) + 2;
  }
  return -1;
}

// The buffers and weights a step with these params reads (the validator has
// checked that the params are the kind's member).
int expectedInputs(const fb::Step &step);
int expectedWeights(const fb::Step &step);

// The activation's gate kind as the shared kernels take it
// (kernels/common/activations.h); None maps to silu (never asked for).
constexpr hd::i32 gateKind(fb::ActivationKind activation) {
  switch (activation) {
  case fb::ActivationKind::None:
  case fb::ActivationKind::Silu:
    return hd::kGateSilu;
  case fb::ActivationKind::GeluTanh:
    return hd::kGateGeluTanh;
  case fb::ActivationKind::GeluErf:
    return hd::kGateGeluErf;
  case fb::ActivationKind::Relu:
    return hd::kGateRelu;
  }
  return hd::kGateSilu;
}

} // namespace llmc::ops
