//===- Prune.cpp - llm-prune: dead weight and value elimination -----------===//
//
// Merges duplicate llm.weight ops, erases side-effect-free ops whose results
// are unused (weights included), and reports the weights the plan no longer
// needs. Passes.td has the before/after IR; tests/lit/passes/prune.mlir the
// cases.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/LlmOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/raw_ostream.h"

#include <utility>

namespace llmc {

#define GEN_PASS_DEF_LLMPRUNE
#include "passes/Passes.h.inc"

uint64_t weightByteSize(mlir::Type type) {
  if (auto q4 = type.dyn_cast<llm::Q4Type>()) {
    uint64_t rows = q4.getRows();
    uint64_t nibbles = rows * ((q4.getCols() + 1) / 2);
    uint64_t scalesAndZeros = rows * q4.getNumGroups() * 2 * sizeof(uint16_t);
    return nibbles + scalesAndZeros;
  }
  auto tensor = type.dyn_cast<mlir::RankedTensorType>();
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  uint64_t bits = tensor.getElementTypeBitWidth();
  return static_cast<uint64_t>(tensor.getNumElements()) * bits / 8;
}

uint64_t PruneReport::droppedBytes() const {
  uint64_t total = 0;
  for (const DroppedWeight &w : droppedWeights)
    total += w.bytes;
  return total;
}

namespace {

std::string plural(uint64_t n, const char *what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string typeString(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return os.str();
}

// Weight name -> type of every llm.weight under `root`, in program order.
llvm::MapVector<mlir::StringAttr, mlir::Type> referencedWeights(mlir::Operation *root) {
  llvm::MapVector<mlir::StringAttr, mlir::Type> names;
  root->walk([&](llm::WeightOp op) { names.insert({op.getNameAttr(), op.getType()}); });
  return names;
}

// Replaces every llm.weight by the first one of the same name and type in its
// block (the first dominates the rest). The same name with another type
// anywhere in the module is an error: the plan stores one tensor per name.
mlir::LogicalResult mergeDuplicateWeights(mlir::ModuleOp module, PruneReport &report) {
  llvm::DenseMap<mlir::StringAttr, llm::WeightOp> firstByName;
  llvm::DenseMap<std::pair<mlir::Block *, mlir::StringAttr>, llm::WeightOp> firstInBlock;
  llvm::SmallVector<llm::WeightOp> weights;
  module.walk([&](llm::WeightOp op) { weights.push_back(op); });
  for (llm::WeightOp op : weights) {
    auto [first, inserted] = firstByName.try_emplace(op.getNameAttr(), op);
    if (!inserted && first->second.getType() != op.getType()) {
      mlir::InFlightDiagnostic diag =
          op.emitOpError() << "refers to weight '" << op.getName() << "' as " << op.getType()
                           << " but an earlier llm.weight has type " << first->second.getType();
      diag.attachNote(first->second.getLoc()) << "the earlier llm.weight";
      return mlir::failure();
    }
    auto [kept, isFirst] = firstInBlock.try_emplace({op->getBlock(), op.getNameAttr()}, op);
    if (isFirst)
      continue;
    op.getResult().replaceAllUsesWith(kept->second.getResult());
    op.erase();
    ++report.mergedWeightOps;
  }
  return mlir::success();
}

// Erases region-free ops that have results, no side effects and no uses, then
// the producers that this leaves unused, until none is left.
void eraseDeadOps(mlir::ModuleOp module, PruneReport &report) {
  auto isDead = [](mlir::Operation *op) {
    return op->getNumResults() > 0 && op->getNumRegions() == 0 && mlir::isOpTriviallyDead(op);
  };
  llvm::SmallVector<mlir::Operation *> worklist;
  module.walk([&](mlir::Operation *op) {
    if (isDead(op))
      worklist.push_back(op);
  });
  while (!worklist.empty()) {
    mlir::Operation *op = worklist.pop_back_val();
    llvm::SmallPtrSet<mlir::Operation *, 4> producers;
    for (mlir::Value operand : op->getOperands())
      if (mlir::Operation *producer = operand.getDefiningOp())
        producers.insert(producer);
    ++(mlir::isa<llm::WeightOp>(op) ? report.erasedWeightOps : report.erasedOps);
    op->erase();
    // A producer becomes dead only once its last user is gone, so each is
    // queued at most once.
    for (mlir::Operation *producer : producers)
      if (isDead(producer))
        worklist.push_back(producer);
  }
}

// One remark for `llm-opt --llm-prune=report=true`: the summary, then the
// weights that are no longer needed.
void emitReport(mlir::ModuleOp module, const PruneReport &report) {
  mlir::InFlightDiagnostic remark = module.emitRemark() << "llm-prune: " << report.summary();
  for (const PruneReport::DroppedWeight &w : report.droppedWeights)
    remark << "; " << w.name << " " << w.type << " " << w.bytes << " B";
}

class LlmPrunePass : public impl::LlmPruneBase<LlmPrunePass> {
public:
  using LlmPruneBase::LlmPruneBase;
  explicit LlmPrunePass(PruneReport *sink) : sink_(sink) {}

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    PruneReport result;
    auto before = referencedWeights(module);
    if (mlir::failed(mergeDuplicateWeights(module, result)))
      return signalPassFailure();
    eraseDeadOps(module, result);
    auto after = referencedWeights(module);
    for (const auto &[name, type] : before)
      if (!after.count(name))
        result.droppedWeights.push_back({name.str(), typeString(type), weightByteSize(type)});

    if (report)
      emitReport(module, result);
    if (!result.changed())
      markAllAnalysesPreserved();
    if (sink_ != nullptr)
      *sink_ = std::move(result);
  }

private:
  PruneReport *sink_ = nullptr; // not owned; null when run from llm-opt
};

} // namespace

std::string PruneReport::summary() const {
  if (!changed())
    return "nothing to do";
  std::string text = "merged " + plural(mergedWeightOps, "duplicate weight op") + ", erased " +
                     plural(erasedOps, "unused op") + " and " +
                     plural(erasedWeightOps, "unused weight op") + "; " +
                     plural(droppedWeights.size(), "weight") + " no longer needed (" +
                     std::to_string(droppedBytes()) + " B)";
  return text;
}

std::unique_ptr<mlir::Pass> createLlmPrune(PruneReport *report) {
  return std::make_unique<LlmPrunePass>(report);
}

} // namespace llmc
