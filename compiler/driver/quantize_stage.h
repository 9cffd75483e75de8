// The `quantize` stage of `llmc build` (--quantize rtn|awq): computes the
// int4 weights, and for AWQ the calibration statistics, scales and folded
// weights (compiler/quantize/), for the IR that llm-quantize is about to
// rewrite (passes/Quantize.h). The driver then runs the pass and lowers the
// plan with weightResolver(), which serves the new tensors by name.
#pragma once

#include "driver/build.h"
#include "frontend/safetensors.h"
#include "lower_to_plan.h"
#include "passes/Quantize.h"
#include "quantize/awq.h"
#include "quantize/mixed.h"
#include "quantize/weight_table.h"
#include "tokenizer/tokenizer.h"

#include <mlir/IR/BuiltinOps.h>

#include <memory>
#include <string>
#include <vector>

namespace llmc {

struct QuantizeOutcome {
  QuantizeConfig config; // for createLlmQuantize
  std::string detail;    // for the stage line: errors, calibration size
  std::vector<quant::GroupReport> groups;
  // --mixed: the recipe and, in program order, each float linear's weight
  // name and format (int8 and float ones stay float in the IR).
  quant::MixedRecipe mixed;
  std::vector<std::pair<std::string, quant::LinearFormat>> linearFormats;
  uint64_t parameters = 0; // elements of the IR's weights before quantization
  // The float weights the IR names (checkpoint views, or synthetic weights
  // materialized) and the tensors the stage derived from them.
  std::unique_ptr<quant::WeightTable> source, derived;

  // Serves derived tensors first, then the source ones.
  WeightResolver weightResolver() const;
};

// Fails on inconsistent options (--calib without awq, a group size that is
// not a multiple of 32, ...). `weights` is null for --synthetic-weights.
Expected<QuantizeOutcome> prepareQuantization(mlir::ModuleOp module, const WeightSet *weights,
                                              const Tokenizer &tokenizer, int64_t maxSeqLen,
                                              const BuildOptions &options,
                                              const BuildReporter &reporter);

// The -v lines: one per group (alpha, output and weight errors) and the totals.
std::vector<std::string> describeQuantization(const QuantizeOutcome &outcome);

// --mixed, after lowering: the matrices the recipe names int8 become int8
// (quantize/int8.h, per output channel); a fused matrix whose parts differ
// (q_proj int8, k_proj float) is an error naming them. Returns the info
// line: the count of linears per format.
Expected<std::string> quantizeMixedInt8(const QuantizeOutcome &outcome, PlanContents &plan,
                                        std::vector<std::vector<uint8_t>> &storage);

} // namespace llmc
