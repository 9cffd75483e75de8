//===- FuseHead.cpp - llm-fuse-head: final norm + lm_head + argmax --------===//
//
// The last three things a step computes, as one llm.lm_head whose ids result
// lets a greedy decode step skip writing [T, V] logits (llama-sized
// vocabularies make them the largest activation of a decode step). The
// function returns the ids next to the logits. Passes.td has the
// before/after IR; tests/lit/passes/fuse_head.mlir the cases.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace llmc {

#define GEN_PASS_DEF_LLMFUSEHEAD
#include "passes/Passes.h.inc"

namespace {

/// Fuses `return (llm.logits (llm.rms_norm x), W)` of a single-block
/// function returning only the logits; false when the pattern is not there.
bool fuseHead(mlir::func::FuncOp func) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return false;
  auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(func.getBody().front().getTerminator());
  if (!ret || ret.getNumOperands() != 1)
    return false;
  auto logits = ret.getOperand(0).getDefiningOp<llm::LogitsOp>();
  // llm.lm_head has no bias and no scale: such logits stay unfused.
  if (!logits || !logits->hasOneUse() || !logits.isPlainProjection() ||
      !fusion::storedWeight(logits.getWeight()) ||
      !mlir::getElementTypeOrSelf(logits.getType()).isF32())
    return false;
  auto norm = logits.getX().getDefiningOp<llm::RmsNormOp>();
  if (!norm || !norm->hasOneUse() || !fusion::storedWeight(norm.getWeight()) ||
      norm.getGroup() != 0)
    return false;
  mlir::OpBuilder builder(logits);
  auto head = builder.create<llm::LmHeadOp>(logits.getLoc(), norm.getX(), norm.getWeight(),
                                            logits.getWeight(), norm.getEps().convertToDouble(),
                                            norm.getOffset().convertToDouble(),
                                            logits.getSoftcap().convertToDouble());
  ret->setOperands({head.getLogits(), head.getIds()});
  func.setType(builder.getFunctionType(func.getArgumentTypes(), ret.getOperandTypes()));
  logits.erase();
  norm.erase();
  return true;
}

class LlmFuseHeadPass : public fusion::FusionPass<impl::LlmFuseHeadBase<LlmFuseHeadPass>> {
public:
  using FusionPass::FusionPass;

  void runOnOperation() override {
    int64_t fused = 0;
    for (auto func : getOperation().getOps<mlir::func::FuncOp>())
      fused += fuseHead(func);
    std::string summary;
    if (fused > 0)
      summary =
          "final norm + logits + argmax -> llm.lm_head (" + fusion::plural(fused, "function") + ")";
    finish(std::move(summary));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createLlmFuseHead(std::string *summary) {
  return std::make_unique<LlmFuseHeadPass>(summary);
}

} // namespace llmc
