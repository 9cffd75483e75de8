// Shared by the quantize tests: the tiny Qwen2 of tests/data/hf (2 layers,
// GQA, q/k/v biases) as the quantizer sees it (its @forward graph and its
// safetensors), its build options, and a small calibration text.
#pragma once

#include "common/test_paths.h"
#include "driver/build.h"
#include "frontend/model_spec.h"
#include "frontend/weight_check.h"
#include "ir/LlmOps.h"
#include "models/llama_graph.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/MLIRContext.h>

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>

namespace llmc::test {

// The f32 @forward of hf/qwen2 and its opened weights; a failure is a test
// failure and leaves `module` null.
struct TinyQwen2Graph {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<WeightSet> weights;
  const std::string dir = testDataPath("hf/qwen2");

  TinyQwen2Graph() {
    auto spec = loadModelSpec(dir);
    EXPECT_TRUE(spec.isOk()) << spec.message();
    auto opened = openModelWeights(*spec);
    EXPECT_TRUE(opened.isOk()) << opened.message();
    if (!spec.isOk() || !opened.isOk())
      return;
    weights = std::move(*opened);
    context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>();
    auto built =
        buildLlamaGraph(context, spec->config, GraphOptions{mlir::Float32Type::get(&context)});
    EXPECT_TRUE(built.isOk()) << built.message();
    if (built.isOk())
      module = std::move(*built);
  }
  mlir::func::FuncOp forward() { return module->lookupSymbol<mlir::func::FuncOp>("forward"); }
};

// A CPU f32 build of hf/qwen2 into scratch folder `<prefix>-<plan>`.
inline BuildOptions tinyQwen2Build(const std::string &prefix, const std::string &plan) {
  BuildOptions options;
  options.input = testDataPath("hf/qwen2");
  options.output = scratchDir(prefix + "-" + plan) + "/" + plan + ".plan";
  options.dtype = "f32";
  options.targets = "cpu";
  return options;
}

// A calibration text of 40 short sentences, written once per scratch folder.
inline std::string calibrationTextFile(const std::string &folder) {
  const std::string path = scratchDir(folder) + "/calib.txt";
  std::ofstream out(path);
  for (int i = 0; i < 40; ++i)
    out << "The quick brown fox " << i << " jumps over the lazy dog; a cat naps in the sun. ";
  return path;
}

} // namespace llmc::test
