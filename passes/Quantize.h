//===- Quantize.h - llm-quantize: int4 weights and AWQ scale folding -*- C++ -*-===//
//
// What the quantize pass and the driver's quantizer (compiler/quantize/)
// share: the groups of linear layers that read one input, the op each
// group's AWQ scales fold into, and the names the pass gives the weights it
// rewrites. The pass only changes types and names (the IR holds no weight
// data); the driver computes the data behind the new names from the same
// groups, so both always agree. Passes.td has the pass description.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES_QUANTIZE_H
#define LLMC_PASSES_QUANTIZE_H

#include "ir/LlmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

// Where the per-input-channel scales s of a group fold: x * diag(1/s) must be
// what the producer of x computes after the fold, so that
// (x / s) . (W * s)^T == x . W^T leaves the function unchanged.
enum class ScaleSink {
  None,    // no producer can absorb them: the group is only rounded (RTN)
  RmsNorm, // x = rms_norm(h, g) without an offset: g / s (q/k/v, gate/up)
  Linear,  // x = mul(a, linear(...)) or attention(.., .., linear(...)): that
           // linear's rows (and bias) / s (up_proj -> down_proj, v_proj -> o_proj)
  LayerNorm, // x = layer_norm(h, w (, b)) over whole rows: w / s and b / s, since
             // ((h - mu) / sigma * w + b) / s is the same norm with them (StableLM,
             // Starcoder2, Cohere, Phi, GPT-NeoX: q/k/v, fc1, gate/up)
};

// The sinks that are norm weights (their groups' scales are searched only
// with QuantizeSettings::normScales, see compiler/quantize/awq.h).
inline bool isNormSink(ScaleSink sink) {
  return sink == ScaleSink::RmsNorm || sink == ScaleSink::LayerNorm;
}

// The float llm.linear ops that read one input value, in program order.
struct LinearGroup {
  mlir::Value input; // [T, K]
  llvm::SmallVector<llm::LinearOp, 3> linears;
  int64_t cols = 0; // K
  ScaleSink sink = ScaleSink::None;
  mlir::Operation *sinkOp = nullptr; // the llm.rms_norm, llm.layer_norm or llm.linear
  // Scales live on the sink's channels. For an attention sink (o_proj), the
  // query heads sharing a kv head share v's channels, so input column
  // c = h * headDim + d maps to sink channel (h / headsPerKvHead) * headDim + d
  // (GQA: the scales are tied across those heads); otherwise c maps to c.
  int64_t sinkChannels = 0;
  int64_t headsPerKvHead = 1;
  int64_t headDim = 0; // 0: identity map

  bool scalable() const { return sink != ScaleSink::None; }
  int64_t sinkChannel(int64_t column) const {
    if (headDim == 0)
      return column;
    return (column / headDim / headsPerKvHead) * headDim + column % headDim;
  }
  // "model.layers.0.self_attn.{q_proj,k_proj,v_proj}".
  std::string label() const;
};

// The groups of `forward`, in program order of their first linear. A group
// is scalable only when every user of its input is one of its linears, each
// linear's weight has no other use, and the producer is a sink (for a Linear
// sink: its result, weight and bias have no other use).
std::vector<LinearGroup> findLinearGroups(mlir::func::FuncOp forward);

// Whether a linear's result becomes attention queries or keys (directly or
// through llm.rope). AWQ's clipping search skips those: the error that
// matters there is in q.k scores, not in the projection's output.
bool feedsAttentionScores(llm::LinearOp linear);

// "model.layers.0.self_attn.q_proj.weight" -> "model.layers.0.self_attn.q_proj"
// (a name without ".weight" is kept as is).
std::string q4WeightName(llvm::StringRef floatWeightName);
// The name of a float weight whose values the pass rescaled: "<name>.awq_scaled".
std::string awqScaledName(llvm::StringRef name);

// Gptq rewrites the IR as Rtn does (int4 weights, nothing renamed); only the
// driver's rounding differs.
enum class QuantizeMethod { Rtn, Awq, Gptq };

// "rtn", "awq", "gptq".
const char *quantizeMethodName(QuantizeMethod method);

struct QuantizeConfig {
  QuantizeMethod method = QuantizeMethod::Rtn;
  int64_t groupSize = 128;
  // AWQ scales folded, weights left in float (the test that folding keeps
  // the function): no !llm.q4, scaled weights renamed instead.
  bool scalesOnly = false;
  // Float weight names of linears the pass leaves in float: a mixed plan's
  // int8 and float linears (compiler/quantize/mixed.h; int8 comes after
  // lowering).
  std::vector<std::string> floatWeights;
};

// llm-quantize with `config`, writing a one-line summary into `*summary`.
std::unique_ptr<mlir::Pass> createLlmQuantize(const QuantizeConfig &config, std::string *summary);

} // namespace llmc

#endif // LLMC_PASSES_QUANTIZE_H
