//===- LlmTypes.h - llm dialect types ---------------------------*- C++ -*-===//
//
// !llm.q4<rows x cols, group = g>: an AWQ int4 weight matrix (see LlmTypes.td).
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_IR_LLMTYPES_H
#define LLMC_IR_LLMTYPES_H

#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "ir/LlmTypes.h.inc"

#endif // LLMC_IR_LLMTYPES_H
