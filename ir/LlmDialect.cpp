//===- LlmDialect.cpp - the llm dialect -----------------------------------===//

#include "ir/LlmDialect.h"

#include "ir/LlmOps.h"

#include "ir/LlmDialect.cpp.inc"

namespace llmc::llm {

void LlmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/LlmOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
}

} // namespace llmc::llm
