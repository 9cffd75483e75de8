// The IR's rope scaling attribute (#llm.rope_scaling) of a config's RoPE
// scaling: null for none; every kind with the fields it reads.
#pragma once

#include "ir/LlmAttrs.h"
#include "models/model_config.h"

#include <mlir/IR/MLIRContext.h>

namespace llmc {

llm::RopeScalingAttr ropeScalingAttr(mlir::MLIRContext *context, const RopeScaling &scaling);

} // namespace llmc
