//===- Passes.h - llmc passes over the llm dialect --------------*- C++ -*-===//
//
// The passes of passes/Passes.td: `createLlmPrune()` etc. (generated), the
// registration llm-opt calls (`registerLlmcPasses()`), and what the driver
// needs to report what a pass changed. Link `llmc_passes`.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES_PASSES_H
#define LLMC_PASSES_PASSES_H

#include "mlir/IR/Types.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

// Bytes a weight of this `llm.weight` result type occupies: elements x dtype
// size for tensors; for !llm.q4<NxK, group = G>, N * ceil(K / 2) bytes of
// nibbles plus an f16 scale and an f16 zero per (row, group).
uint64_t weightByteSize(mlir::Type type);

// What llm-prune changed, for `llmc build -v`.
struct PruneReport {
  struct DroppedWeight {
    std::string name; // checkpoint name
    std::string type; // e.g. "tensor<64xf32>"
    uint64_t bytes;   // weightByteSize(type)
  };
  uint64_t mergedWeightOps = 0;              // duplicate llm.weight ops replaced by the first
  uint64_t erasedWeightOps = 0;              // llm.weight ops without uses
  uint64_t erasedOps = 0;                    // other side-effect-free ops whose results were unused
  std::vector<DroppedWeight> droppedWeights; // names no op refers to any more

  uint64_t droppedBytes() const;
  bool changed() const { return mergedWeightOps + erasedWeightOps + erasedOps > 0; }
  // "merged 1 duplicate weight op, erased 2 unused ops and 1 unused weight op;
  //  1 weight no longer needed (256 B)", or "nothing to do".
  std::string summary() const;
};

// llm-prune that also writes what it changed into `*report`.
std::unique_ptr<mlir::Pass> createLlmPrune(PruneReport *report);

// The fusion passes, each also writing a one-line summary of what it fused
// into `*summary` (e.g. "5 q/k/v groups -> llm.fused_linear (15 llm.linear
// merged)", or "nothing to fuse").
std::unique_ptr<mlir::Pass> createLlmFuseQkv(std::string *summary);
std::unique_ptr<mlir::Pass> createLlmFuseSwiglu(std::string *summary);
std::unique_ptr<mlir::Pass> createLlmFuseHead(std::string *summary);
std::unique_ptr<mlir::Pass> createLlmFuseNorm(std::string *summary);
std::unique_ptr<mlir::Pass> createLlmFuseResidual(std::string *summary);
std::unique_ptr<mlir::Pass> createLlmFuseRope(std::string *summary);

// The fusion passes in the order the driver's fuse stage runs them, with the
// names `llmc build --no-fuse=` takes.
struct FusionPass {
  const char *name;     // "qkv", "swiglu", "head", "norm", "residual", "rope"
  const char *argument; // "llm-fuse-qkv", ...
  std::unique_ptr<mlir::Pass> (*create)(std::string *summary);
};
const std::vector<FusionPass> &fusionPasses();

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace llmc

#endif // LLMC_PASSES_PASSES_H
