//===- LlmAttrs.h - llm dialect attributes ----------------------*- C++ -*-===//
//
// RopeScalingKind and #llm.rope_scaling<...> (see LlmAttrs.td).
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_IR_LLMATTRS_H
#define LLMC_IR_LLMATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"

#include "ir/LlmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/LlmAttrs.h.inc"

#endif // LLMC_IR_LLMATTRS_H
