//===- FuseNorm.cpp - llm-fuse-norm: RMSNorm as a GEMM prologue -----------===//
//
// An RMSNorm whose only consumers are GEMMs is recomputed by each of them on
// the rows they load (a [T, H] normalization is cheap next to a [N, H]
// GEMM), so the normalized activation is never written. Passes.td has the
// before/after IR; tests/lit/passes/fuse_norm.mlir the cases.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace llmc {

#define GEN_PASS_DEF_LLMFUSENORM
#include "passes/Passes.h.inc"

namespace {

/// Whether `use` is the input of a GEMM that can take a norm prologue (float
/// or int4 weights, with or without a stored bias).
bool absorbs(mlir::OpOperand &use) {
  mlir::Operation *user = use.getOwner();
  if (auto linear = llvm::dyn_cast<llm::LinearOp>(user))
    return use.getOperandNumber() == 0 && fusion::storedMatrix(linear.getWeight()) &&
           (!linear.getBias() || fusion::storedWeight(linear.getBias()));
  if (auto fused = llvm::dyn_cast<llm::FusedLinearOp>(user))
    return use.get() == fused.getX() && !fused.getNorm() && fused.getResidual() != use.get() &&
           !llvm::is_contained(fused.getBiases(), use.get());
  return false;
}

/// The GEMM that replaces `user`: the same, reading `norm`'s input through a
/// norm prologue.
void absorb(mlir::Operation *user, llm::RmsNormOp norm) {
  mlir::OpBuilder builder(user);
  double eps = norm.getEps().convertToDouble(), offset = norm.getOffset().convertToDouble();
  mlir::Operation *fused;
  if (auto linear = llvm::dyn_cast<llm::LinearOp>(user)) {
    mlir::Value weight = linear.getWeight(), bias = linear.getBias();
    fused = builder.create<llm::FusedLinearOp>(
        user->getLoc(), norm.getX(), weight, bias ? mlir::ValueRange(bias) : mlir::ValueRange(),
        norm.getWeight(), eps, mlir::Value(), llm::GatedActivation::None, offset,
        linear.getScale().convertToDouble());
  } else {
    auto old = llvm::cast<llm::FusedLinearOp>(user);
    fused = builder.create<llm::FusedLinearOp>(user->getLoc(), norm.getX(), old.getWeights(),
                                               old.getBiases(), norm.getWeight(), eps,
                                               old.getResidual(), old.getActivation(), offset,
                                               old.getScale().convertToDouble());
  }
  user->replaceAllUsesWith(fused->getResults());
  user->erase();
}

class LlmFuseNormPass : public fusion::FusionPass<impl::LlmFuseNormBase<LlmFuseNormPass>> {
public:
  using FusionPass::FusionPass;

  void runOnOperation() override {
    llvm::SmallVector<llm::RmsNormOp> norms;
    getOperation().walk([&](llm::RmsNormOp norm) {
      // A per-head (grouped) norm is not a GEMM prologue.
      if (!norm->use_empty() && norm.getGroup() == 0 && fusion::storedWeight(norm.getWeight()) &&
          llvm::all_of(norm->getUses(), absorbs))
        norms.push_back(norm);
    });
    int64_t gemms = 0;
    for (llm::RmsNormOp norm : norms) {
      llvm::SmallVector<mlir::Operation *> users(norm->getUsers());
      llvm::sort(users);
      users.erase(std::unique(users.begin(), users.end()), users.end());
      for (mlir::Operation *user : users)
        absorb(user, norm);
      gemms += static_cast<int64_t>(users.size());
      norm.erase();
    }
    std::string summary;
    if (!norms.empty())
      summary = fusion::plural(norms.size(), "RMSNorm") + " -> prologue of " +
                fusion::plural(gemms, "GEMM");
    finish(std::move(summary));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createLlmFuseNorm(std::string *summary) {
  return std::make_unique<LlmFuseNormPass>(summary);
}

} // namespace llmc
