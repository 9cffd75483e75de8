//===- FuseQkv.cpp - llm-fuse-qkv: q/k/v projections as one GEMM ----------===//
//
// An attention's q, k and v projections read the same normalized input: one
// llm.fused_linear over their row-concatenated weights reads that input once
// and runs one GEMM instead of three. Passes.td has the before/after IR;
// tests/lit/passes/fuse_qkv.mlir the cases.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include <array>

namespace llmc {

#define GEN_PASS_DEF_LLMFUSEQKV
#include "passes/Passes.h.inc"

namespace {

/// The llm.linear behind an attention operand, directly or through the
/// llm.rope that rotates it; null unless each has no other use.
llm::LinearOp projectionOf(mlir::Value operand) {
  mlir::Value value = operand;
  if (auto rope = value.getDefiningOp<llm::RopeOp>()) {
    if (!rope->hasOneUse())
      return {};
    value = rope.getX();
  }
  auto linear = value.getDefiningOp<llm::LinearOp>();
  if (!linear || !linear->hasOneUse())
    return {};
  return linear;
}

/// Three distinct projections of one input, with weights stored alike (float
/// of one dtype, or int4 of one group size) and biases on all or none: what
/// one concatenated plan tensor (or set of int4 parts) can hold.
bool fusible(std::array<llm::LinearOp, 3> qkv) {
  if (qkv[0] == qkv[1] || qkv[0] == qkv[2] || qkv[1] == qkv[2])
    return false;
  bool biased = static_cast<bool>(qkv[0].getBias());
  const std::string storage = llm::weightStorage(qkv[0].getWeight().getType());
  for (llm::LinearOp linear : qkv) {
    if (linear.getX() != qkv[0].getX() || !fusion::storedMatrix(linear.getWeight()) ||
        llm::weightStorage(linear.getWeight().getType()) != storage ||
        static_cast<bool>(linear.getBias()) != biased || !linear.getScale().isExactlyValue(1.0))
      return false;
    if (biased && (!fusion::storedWeight(linear.getBias()) ||
                   linear.getBias().getType().cast<mlir::ShapedType>().getElementType() !=
                       qkv[0].getBias().getType().cast<mlir::ShapedType>().getElementType()))
      return false;
  }
  return true;
}

void fuse(std::array<llm::LinearOp, 3> qkv) {
  llvm::SmallVector<mlir::Operation *, 3> ops;
  llvm::SmallVector<mlir::Value, 3> weights, biases;
  for (llm::LinearOp linear : qkv) {
    ops.push_back(linear);
    weights.push_back(linear.getWeight());
    if (linear.getBias())
      biases.push_back(linear.getBias());
  }
  mlir::Operation *first = fusion::firstInBlock(ops);
  fusion::hoistWeightsBefore(first, weights);
  fusion::hoistWeightsBefore(first, biases);
  mlir::OpBuilder builder(first);
  auto fused = builder.create<llm::FusedLinearOp>(first->getLoc(), qkv[0].getX(), weights, biases,
                                                  mlir::Value(), 0.0, mlir::Value(),
                                                  llm::GatedActivation::None);
  for (auto [i, linear] : llvm::enumerate(qkv)) {
    linear.getResult().replaceAllUsesWith(fused.getResult(i));
    linear.erase();
  }
}

class LlmFuseQkvPass : public fusion::FusionPass<impl::LlmFuseQkvBase<LlmFuseQkvPass>> {
public:
  using FusionPass::FusionPass;

  void runOnOperation() override {
    llvm::SmallVector<std::array<llm::LinearOp, 3>> groups;
    getOperation().walk([&](mlir::Operation *op) {
      if (!llvm::isa<llm::AttentionOp, llm::RopeAttentionOp>(op))
        return;
      std::array<llm::LinearOp, 3> qkv;
      for (int i = 0; i < 3; ++i)
        if (!(qkv[i] = projectionOf(op->getOperand(i))))
          return;
      if (fusible(qkv))
        groups.push_back(qkv);
    });
    for (const auto &qkv : groups)
      fuse(qkv);
    std::string summary;
    if (!groups.empty())
      summary = fusion::plural(groups.size(), "q/k/v group") + " -> llm.fused_linear (" +
                std::to_string(3 * groups.size()) + " llm.linear merged)";
    finish(std::move(summary));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createLlmFuseQkv(std::string *summary) {
  return std::make_unique<LlmFuseQkvPass>(summary);
}

} // namespace llmc
