#include "ops/rope.h"

namespace llmc::ops {
namespace {

// A switch without default: a new plan scaling kind fails to compile here
// until the kernels have it.
hd::RopeScalingKind scalingKind(fb::RopeScalingKind kind) {
  switch (kind) {
  case fb::RopeScalingKind::None:
    return hd::RopeScalingKind::None;
  case fb::RopeScalingKind::Linear:
    return hd::RopeScalingKind::Linear;
  case fb::RopeScalingKind::Llama3:
    return hd::RopeScalingKind::Llama3;
  case fb::RopeScalingKind::Dynamic:
  case fb::RopeScalingKind::Yarn:
  case fb::RopeScalingKind::LongRope:
    break; // refused by the plan validator (not run by this runtime yet)
  }
  return hd::RopeScalingKind::None;
}

} // namespace

bool RopeConfig::operator==(const RopeConfig &o) const {
  return theta == o.theta && rotaryDim == o.rotaryDim && interleaved == o.interleaved &&
         scaling.kind == o.scaling.kind && scaling.factor == o.scaling.factor &&
         scaling.lowFreqFactor == o.scaling.lowFreqFactor &&
         scaling.highFreqFactor == o.scaling.highFreqFactor &&
         scaling.originalMaxPositions == o.scaling.originalMaxPositions;
}

RopeConfig ropeConfig(const fb::RopeParams &rope) {
  fb::RopeParamsT unpacked;
  rope.UnPackTo(&unpacked);
  return ropeConfig(unpacked);
}

RopeConfig ropeConfig(const fb::RopeParamsT &rope) {
  RopeConfig c;
  c.theta = static_cast<float>(rope.theta);
  c.rotaryDim = static_cast<int>(rope.rotary_dim);
  c.interleaved = rope.interleaved;
  if (const fb::RopeScalingT *s = rope.scaling.get()) {
    c.scaling.kind = scalingKind(s->kind);
    c.scaling.factor = static_cast<float>(s->factor);
    c.scaling.lowFreqFactor = static_cast<float>(s->low_freq_factor);
    c.scaling.highFreqFactor = static_cast<float>(s->high_freq_factor);
    c.scaling.originalMaxPositions = static_cast<float>(s->original_max_positions);
  }
  return c;
}

const fb::RopeParams *stepRope(const fb::Step &step) {
  if (const fb::RopeStepParams *r = step.params_as_RopeStepParams())
    return r->rope();
  if (const fb::AttentionParams *a = step.params_as_AttentionParams())
    return a->rope();
  return nullptr;
}

ProgramRopes programRopes(const fb::Program &program) {
  ProgramRopes ropes;
  for (const fb::Step *step : *program.steps()) {
    const fb::RopeParams *rope = stepRope(*step);
    int index = -1;
    if (rope != nullptr) {
      const RopeConfig config = ropeConfig(*rope);
      for (size_t i = 0; i < ropes.configs.size() && index < 0; ++i)
        if (ropes.configs[i] == config)
          index = static_cast<int>(i);
      if (index < 0) {
        index = static_cast<int>(ropes.configs.size());
        ropes.configs.push_back(config);
      }
    }
    ropes.stepConfig.push_back(index);
  }
  return ropes;
}

} // namespace llmc::ops
