// llm-opt: mlir-opt for the llm dialect. Parses, verifies, runs passes and
// prints IR; the lit tests drive it (tests/lit/).
//
//   llm-opt model.mlir --canonicalize --cse
//   llm-opt model.mlir --llm-prune=report=true   (llmc's passes: passes/Passes.td)
//   llm-opt invalid.mlir --split-input-file --verify-diagnostics
#include "ir/LlmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace {

// --help: the options an llmc user needs and the registered passes, not the
// hundreds of LLVM options every LLVM tool links (those stay under
// --help-hidden).
void printHelp() {
  std::printf(
      "llm-opt: llmc IR optimizer driver (mlir-opt for the llm dialect)\n\n"
      "usage: llm-opt [options] [input.mlir]   (stdin when no input)\n\n"
      "options:\n"
      "  -o FILE                   write the output IR to FILE (default: stdout)\n"
      "  --split-input-file        treat '// -----' separated chunks as separate inputs\n"
      "  --verify-diagnostics      check expected-error/-warning comments in the input\n"
      "  --pass-pipeline=PIPELINE  run a textual pass pipeline, e.g. "
      "'builtin.module(llm-prune)'\n"
      "  --mlir-print-ir-after-all print the IR after every pass\n"
      "  --allow-unregistered-dialect\n"
      "  --help-hidden             every LLVM and MLIR option\n\n"
      "passes (--NAME, options as --NAME=opt=value; --help-hidden lists the options):\n");
  std::vector<std::unique_ptr<mlir::Pass>> passes;
  passes.push_back(mlir::createCanonicalizerPass());
  passes.push_back(mlir::createCSEPass());
  passes.push_back(llmc::createLlmPrune(nullptr));
  for (const llmc::FusionPass &fusion : llmc::fusionPasses())
    passes.push_back(fusion.create(nullptr));
  passes.push_back(llmc::createLlmQuantize());
  for (const auto &pass : passes)
    std::printf("  --%-26s %s\n", pass->getArgument().str().c_str(),
                pass->getDescription().str().c_str());
}

} // namespace

int main(int argc, char **argv) {
  // Only the generic clean-up passes: llm IR never needs the rest of MLIR's.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  llmc::registerLlmcPasses();
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-help") == 0 ||
        std::strcmp(argv[i], "-h") == 0) {
      printHelp();
      return 0;
    }

  mlir::DialectRegistry registry;
  registry.insert<llmc::llm::LlmDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "llm-opt: llmc IR optimizer driver\n", registry));
}
