//===- FusionUtils.cpp - helpers shared by the fusion passes --------------===//

#include "passes/FusionUtils.h"

#include "passes/Passes.h"

namespace llmc {
namespace fusion {

llm::WeightOp storedWeight(mlir::Value value) {
  auto weight = value.getDefiningOp<llm::WeightOp>();
  if (!weight || !weight.getType().isa<mlir::RankedTensorType>())
    return {};
  return weight;
}

llm::WeightOp storedMatrix(mlir::Value value) {
  auto weight = value.getDefiningOp<llm::WeightOp>();
  if (!weight || !weight.getType().isa<mlir::RankedTensorType, llm::Q4Type>())
    return {};
  return weight;
}

bool isInt4(mlir::Value value) { return value.getType().isa<llm::Q4Type>(); }

mlir::Operation *firstInBlock(llvm::ArrayRef<mlir::Operation *> ops) {
  mlir::Operation *first = ops.front();
  for (mlir::Operation *op : ops.drop_front())
    if (op->isBeforeInBlock(first))
      first = op;
  return first;
}

void hoistWeightsBefore(mlir::Operation *anchor, mlir::ValueRange values) {
  for (mlir::Value value : values) {
    auto weight = value.getDefiningOp<llm::WeightOp>();
    if (weight && weight->getBlock() == anchor->getBlock() && anchor->isBeforeInBlock(weight))
      weight->moveBefore(anchor);
  }
}

std::string plural(uint64_t n, const char *what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

void finishFusion(mlir::ModuleOp module, llvm::StringRef pass, std::string summary, bool report,
                  std::string *sink) {
  if (summary.empty())
    summary = "nothing to fuse";
  if (report)
    module.emitRemark() << pass << ": " << summary;
  if (sink != nullptr)
    *sink = std::move(summary);
}

} // namespace fusion

const std::vector<FusionPass> &fusionPasses() {
  // Order matters: q/k/v and gate/up merge before the norm moves into their
  // (now fused) GEMMs; the head takes the final norm before llm-fuse-norm
  // would look at it.
  static const std::vector<FusionPass> passes = {
      {"qkv", "llm-fuse-qkv", createLlmFuseQkv},
      {"swiglu", "llm-fuse-swiglu", createLlmFuseSwiglu},
      {"head", "llm-fuse-head", createLlmFuseHead},
      {"norm", "llm-fuse-norm", createLlmFuseNorm},
      {"residual", "llm-fuse-residual", createLlmFuseResidual},
      {"rope", "llm-fuse-rope", createLlmFuseRope},
  };
  return passes;
}

} // namespace llmc
