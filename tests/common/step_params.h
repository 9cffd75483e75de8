// Parameter tables of plan steps (runtime/schema/engine.fbs, format 3) as
// the lowering writes them, for tests that build steps by hand: the plan
// fixtures (tests/plan/plan_fixture.h) and the CUDA kernel tests.
#pragma once

#include "schema/engine_generated.h"

#include <cstdint>
#include <memory>

namespace llmc::test {

// --- Parameter tables (engine.fbs), as the lowering writes them. ---

template <typename T> fb::StepParamsUnion params(T table) {
  fb::StepParamsUnion u;
  u.Set(std::move(table));
  return u;
}

inline fb::StepParamsUnion embeddingParams(double scale = 1.0) {
  fb::EmbeddingParamsT p;
  p.scale = scale;
  return params(std::move(p));
}

inline fb::NormParamsT rms(double eps = 1e-5, double offset = 0.0) {
  fb::NormParamsT n;
  n.eps = eps;
  n.offset = offset;
  return n;
}

inline fb::StepParamsUnion normParams(double eps = 1e-5, double offset = 0.0) {
  return params(rms(eps, offset));
}

struct LinearFlags {
  bool norm = false;                                   // an RMSNorm prologue (eps 1e-5)
  fb::ActivationKind gate = fb::ActivationKind::None;  // gated with this activation
  bool q4 = false;
  int64_t groupSize = 0;
  bool bias = false;
  bool accumulate = false;
  double normOffset = 0.0;
};

inline fb::StepParamsUnion linearParams(const LinearFlags &f = {}) {
  fb::LinearParamsT p;
  if (f.norm)
    p.prologue = std::make_unique<fb::NormParamsT>(rms(1e-5, f.normOffset));
  p.gated = f.gate != fb::ActivationKind::None;
  p.activation = f.gate;
  p.weights = f.q4 ? fb::WeightFormat::Q4 : fb::WeightFormat::Dense;
  p.group_size = f.groupSize;
  p.bias = f.bias;
  p.accumulate = f.accumulate;
  return params(std::move(p));
}

inline std::unique_ptr<fb::RopeParamsT> ropeOf(int64_t headDim, double theta = 10000.0) {
  auto r = std::make_unique<fb::RopeParamsT>();
  r->theta = theta;
  r->rotary_dim = headDim;
  return r;
}

inline fb::StepParamsUnion ropeParams(int64_t heads, int64_t headDim, int64_t column = 0) {
  fb::RopeStepParamsT p;
  p.heads = heads;
  p.head_dim = headDim;
  p.column = column;
  p.rope = ropeOf(headDim);
  return params(std::move(p));
}

struct AttentionShape {
  int64_t layer = 0, heads = 2, kvHeads = 1, headDim = 4;
  int64_t qColumn = 0, kColumn = 0, vColumn = 0;
  bool rope = false;
  double scale = 0.5, softcap = 0.0;
  int64_t window = 0;
};

inline fb::StepParamsUnion attentionParams(const AttentionShape &a = {}) {
  fb::AttentionParamsT p;
  p.layer = a.layer;
  p.heads = a.heads;
  p.kv_heads = a.kvHeads;
  p.head_dim = a.headDim;
  p.q_column = a.qColumn;
  p.k_column = a.kColumn;
  p.v_column = a.vColumn;
  if (a.rope)
    p.rope = ropeOf(a.headDim);
  p.scale = a.scale;
  p.softcap = a.softcap;
  p.window = a.window;
  return params(std::move(p));
}

inline fb::StepParamsUnion elementwiseParams(fb::ElementwiseOp op) {
  fb::ElementwiseParamsT p;
  p.op = op;
  return params(std::move(p));
}

inline fb::StepParamsUnion activationParams(fb::ActivationKind activation, bool gated = false) {
  fb::ActivationParamsT p;
  p.activation = activation;
  p.gated = gated;
  return params(std::move(p));
}

// Logits (no norm) or LmHead (with `norm`).
inline fb::StepParamsUnion logitsParams(bool norm = false, double softcap = 0.0,
                                        double normOffset = 0.0) {
  fb::LogitsParamsT p;
  if (norm)
    p.norm = std::make_unique<fb::NormParamsT>(rms(1e-5, normOffset));
  p.softcap = softcap;
  return params(std::move(p));
}

} // namespace llmc::test
