// llm-opt: mlir-opt for the llm dialect. Parses, verifies, runs passes and
// prints IR; the lit tests drive it (tests/lit/).
//
//   llm-opt model.mlir --canonicalize --cse
//   llm-opt model.mlir --llm-prune=report=true   (llmc's passes: passes/Passes.td)
//   llm-opt invalid.mlir --split-input-file --verify-diagnostics
#include "ir/LlmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

int main(int argc, char **argv) {
  // Only the generic clean-up passes: llm IR never needs the rest of MLIR's.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  llmc::registerLlmcPasses();

  mlir::DialectRegistry registry;
  registry.insert<llmc::llm::LlmDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "llm-opt: llmc IR optimizer driver\n", registry));
}
