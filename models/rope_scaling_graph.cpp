// The IR's rope scaling attribute from a config's RoPE scaling, for every
// family's graph builder (one place, so that a new scaling kind reaches all).
#include "models/rope_scaling_graph.h"

namespace llmc {

llm::RopeScalingAttr ropeScalingAttr(mlir::MLIRContext *context, const RopeScaling &s) {
  switch (s.kind) {
  case RopeScaling::Kind::None:
    return {};
  case RopeScaling::Kind::Linear:
    return llm::RopeScalingAttr::get(context, llm::RopeScalingKind::Linear, s.factor);
  case RopeScaling::Kind::Llama3:
    return llm::RopeScalingAttr::get(context, llm::RopeScalingKind::Llama3, s.factor,
                                     s.lowFreqFactor, s.highFreqFactor,
                                     s.originalMaxPositionEmbeddings);
  case RopeScaling::Kind::Dynamic:
    return llm::RopeScalingAttr::get(context, llm::RopeScalingKind::Dynamic, s.factor,
                                     1.0, 1.0, s.originalMaxPositionEmbeddings);
  case RopeScaling::Kind::Yarn:
    return llm::RopeScalingAttr::get(context, llm::RopeScalingKind::Yarn, s.factor, 1.0,
                                     1.0, s.originalMaxPositionEmbeddings, s.betaFast,
                                     s.betaSlow, s.truncate, s.attentionFactor);
  case RopeScaling::Kind::LongRope:
    return llm::RopeScalingAttr::get(context, llm::RopeScalingKind::LongRope, s.factor,
                                     1.0, 1.0, s.originalMaxPositionEmbeddings, 32.0, 1.0, true,
                                     s.attentionFactor, s.shortFactor, s.longFactor);
  }
  return {};
}

} // namespace llmc
