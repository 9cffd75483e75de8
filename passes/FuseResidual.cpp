//===- FuseResidual.cpp - llm-fuse-residual: add in the GEMM epilogue -----===//
//
// h + x W^T as one GEMM that accumulates into h's buffer: the projection's
// output is never written on its own and the residual stream of the whole
// model stays in one buffer. Passes.td has the before/after IR;
// tests/lit/passes/fuse_residual.mlir the cases.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace llmc {

#define GEN_PASS_DEF_LLMFUSERESIDUAL
#include "passes/Passes.h.inc"

namespace {

/// A GEMM whose only use is the add: an llm.linear with a stored (float or
/// int4) weight, or a
/// single-result llm.fused_linear without a residual yet (nor a SwiGLU
/// epilogue: the plan's SwiGLU GEMMs do not accumulate).
mlir::Operation *gemmOf(mlir::Value value) {
  mlir::Operation *op = value.getDefiningOp();
  if (!op || !op->hasOneUse())
    return nullptr;
  if (auto linear = llvm::dyn_cast<llm::LinearOp>(op))
    return fusion::storedMatrix(linear.getWeight()) &&
                   (!linear.getBias() || fusion::storedWeight(linear.getBias()))
               ? op
               : nullptr;
  if (auto fused = llvm::dyn_cast<llm::FusedLinearOp>(op))
    return fused->getNumResults() == 1 && !fused.getResidual() && !fused.isGated() ? op : nullptr;
  return nullptr;
}

/// The residual is updated in place where the add was: it must be a whole
/// buffer (the single result of an op), not the GEMM's input, and nothing
/// may read it after the add.
bool canAccumulateInto(mlir::Value residual, mlir::Operation *gemm, llm::AddOp add) {
  mlir::Operation *producer = residual.getDefiningOp();
  if (!producer || producer->getNumResults() != 1 || llvm::isa<llm::WeightOp>(producer) ||
      producer->getBlock() != add->getBlock() || gemm->getOperand(0) == residual)
    return false;
  return llvm::all_of(residual.getUsers(), [&](mlir::Operation *user) {
    return user == add || (user->getBlock() == add->getBlock() && user->isBeforeInBlock(add));
  });
}

void fuse(llm::AddOp add, mlir::Operation *gemm, mlir::Value residual) {
  mlir::OpBuilder builder(add);
  llm::FusedLinearOp fused;
  if (auto linear = llvm::dyn_cast<llm::LinearOp>(gemm)) {
    mlir::Value weight = linear.getWeight(), bias = linear.getBias();
    fused = builder.create<llm::FusedLinearOp>(add.getLoc(), linear.getX(), weight,
                                               bias ? mlir::ValueRange(bias) : mlir::ValueRange(),
                                               mlir::Value(), 0.0, residual,
                                               llm::GatedActivation::None, 0.0,
                                               linear.getScale().convertToDouble());
  } else {
    auto old = llvm::cast<llm::FusedLinearOp>(gemm);
    double eps = old.getEpsAttr() ? old.getEpsAttr().getValueAsDouble() : 0.0;
    fused = builder.create<llm::FusedLinearOp>(add.getLoc(), old.getX(), old.getWeights(),
                                               old.getBiases(), old.getNorm(), eps, residual,
                                               old.getActivation(),
                                               old.getNormOffset().convertToDouble(),
                                               old.getScale().convertToDouble());
  }
  add.getResult().replaceAllUsesWith(fused.getResult(0));
  add.erase();
  gemm->erase();
}

class LlmFuseResidualPass
    : public fusion::FusionPass<impl::LlmFuseResidualBase<LlmFuseResidualPass>> {
public:
  using FusionPass::FusionPass;

  void runOnOperation() override {
    llvm::SmallVector<llm::AddOp> adds;
    getOperation().walk([&](llm::AddOp add) { adds.push_back(add); });
    int64_t fused = 0;
    for (llm::AddOp add : adds) {
      // Prefer the rhs as the GEMM: `h + proj` is how builders write it.
      for (auto [residual, product] :
           {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
        mlir::Operation *gemm = gemmOf(product);
        if (gemm && canAccumulateInto(residual, gemm, add)) {
          fuse(add, gemm, residual);
          ++fused;
          break;
        }
      }
    }
    std::string summary;
    if (fused > 0)
      summary = fusion::plural(fused, "residual add") + " -> GEMM epilogue (accumulate in place)";
    finish(std::move(summary));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createLlmFuseResidual(std::string *summary) {
  return std::make_unique<LlmFuseResidualPass>(summary);
}

} // namespace llmc
