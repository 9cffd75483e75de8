//===- LlmOps.h - llm dialect operations ------------------------*- C++ -*-===//
//
// Everything of the llm dialect: ops, the q4 type, the rope scaling attribute.
// Op definitions and their meaning: LlmOps.td and docs/ir.md.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_IR_LLMOPS_H
#define LLMC_IR_LLMOPS_H

#include "ir/LlmAttrs.h"
#include "ir/LlmDialect.h"
#include "ir/LlmTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace llmc::llm {

/// The model's paged KV cache. llm.attention reads and writes it, which keeps
/// attention ops from being erased (DCE) or merged (CSE).
struct KVCacheResource : public mlir::SideEffects::Resource::Base<KVCacheResource> {
  llvm::StringRef getName() override { return "llm.kv_cache"; }
};

/// How a linear weight is stored: the element type of a float matrix
/// ("bf16"), or "int4 in groups of G" for !llm.q4. Weights fused into one
/// llm.fused_linear must agree on it.
std::string weightStorage(mlir::Type type);

} // namespace llmc::llm

#define GET_OP_CLASSES
#include "ir/LlmOps.h.inc"

#endif // LLMC_IR_LLMOPS_H
