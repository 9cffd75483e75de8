//===- LlmDialect.h - the llm dialect ---------------------------*- C++ -*-===//
//
// Register with `registry.insert<llmc::llm::LlmDialect>()`; include
// "ir/LlmOps.h" for the ops, types and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_IR_LLMDIALECT_H
#define LLMC_IR_LLMDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ir/LlmDialect.h.inc"

#endif // LLMC_IR_LLMDIALECT_H
