// Lowers the `llm` IR of a model (func.func @forward) to the contents of an
// engine plan: the tensor table, one program per (target, phase) with its
// memory plan, the model config, tokenizer, KV-cache geometry and provenance.
#pragma once

#include "models/model_config.h"
#include "plan_writer.h"

#include <mlir/IR/BuiltinOps.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace llmc {

// Resolves a weight name to the bytes the plan stores; returns an error when
// the checkpoint lacks it.
using WeightResolver = std::function<Expected<WeightSource>(const std::string &name)>;

struct LoweringOptions {
  const ModelConfig *config = nullptr;
  int64_t maxSeqLen = 0;
  std::string tokenizerJson;
  // Exactly one of: a resolver for real weights, or a synthetic seed.
  WeightResolver resolveWeight;
  std::optional<uint64_t> syntheticSeed;
  int64_t kvBlockSize = 16;
  // Provenance.
  std::string llmcVersion;
  std::string sourceModel;
  std::string sourceHash;
  std::string buildOptions;
};

Expected<PlanContents> lowerToPlan(mlir::ModuleOp module, const LoweringOptions &options);

// The plan tensors of an int4 weight named `weight` in the IR (!llm.q4; the
// layout is runtime/kernels/common/q4_layout.h): "<weight>.qweight" (I32),
// "<weight>.scales" and "<weight>.zeros" (F16). A LinearQ4 step names them in
// this order.
enum class Q4Part { Weight, Scales, Zeros };
std::string q4TensorName(const std::string &weight, Q4Part part);

// The SyntheticInit rule for a weight: ones for norm scales, zeros for
// biases, normal(0, 0.02) for matrices; the stream seed mixes the plan seed
// with the tensor name, so a tensor's values do not depend on its position.
fb::SyntheticInitT syntheticInitFor(const std::string &name, int64_t rank, uint64_t seed);

// The rule for one stored part of an int4 weight `name` ([rows, cols] in
// groups of groupSize) of a synthetic plan: the RTN coding of the values
// syntheticInitFor(name + ".weight", 2, seed) gives the float weight.
fb::SyntheticInitT syntheticQ4InitFor(const std::string &name, Q4Part part, int64_t cols,
                                      int64_t groupSize, uint64_t seed);

} // namespace llmc
