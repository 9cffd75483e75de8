//===- FusionUtils.h - helpers shared by the fusion passes ------*- C++ -*-===//
//
// What the llm-fuse-* passes (passes/Fuse*.cpp) have in common: which weights
// a fused op can take, moving weight refs so that a fused op can take the
// place of the first op it replaces, and reporting.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES_FUSIONUTILS_H
#define LLMC_PASSES_FUSIONUTILS_H

#include "ir/LlmOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <utility>

namespace llmc::fusion {

/// The llm.weight defining `value` when it is a float tensor: what the plan
/// can store (concatenated with others) as a bias, norm or head weight. Null
/// for anything else (an int4 weight, a computed value).
llm::WeightOp storedWeight(mlir::Value value);

/// The llm.weight defining a GEMM's matrix that llm.fused_linear accepts: a
/// float tensor or an int4 (!llm.q4) weight. Null for a computed value.
llm::WeightOp storedMatrix(mlir::Value value);

/// Whether `value` is an int4 (!llm.q4) matrix.
bool isInt4(mlir::Value value);

/// The first of `ops` (all in one block) in block order.
mlir::Operation *firstInBlock(llvm::ArrayRef<mlir::Operation *> ops);

/// Moves the llm.weight ops that define `values` and come after `anchor` in
/// its block to just before it. They have no operands, so this is always
/// legal; it lets a fused op take the place of the first op it replaces.
void hoistWeightsBefore(mlir::Operation *anchor, mlir::ValueRange values);

/// "1 group", "3 groups".
std::string plural(uint64_t n, const char *what);

/// Ends a fusion pass: `summary` ("nothing to fuse" when empty) goes into
/// `*sink` when given, and into a remark on the module when `report` is set.
void finishFusion(mlir::ModuleOp module, llvm::StringRef pass, std::string summary, bool report,
                  std::string *sink);

/// What the llm-fuse-* passes share: `Base` is the pass's generated base
/// (impl::LlmFuseXBase<Pass>); the summary goes to `*summary` (null when the
/// pass runs from llm-opt), and finish() ends a run.
template <class Base> class FusionPass : public Base {
public:
  using Base::Base;
  explicit FusionPass(std::string *summary) : summary_(summary) {}

protected:
  /// `summary` is empty when nothing was fused: then every analysis stays valid.
  void finish(std::string summary) {
    if (summary.empty())
      this->markAllAnalysesPreserved();
    finishFusion(this->getOperation(), this->getArgument(), std::move(summary), this->report,
                 summary_);
  }

private:
  std::string *summary_ = nullptr; // not owned
};

} // namespace llmc::fusion

#endif // LLMC_PASSES_FUSIONUTILS_H
