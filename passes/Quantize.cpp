//===- Quantize.cpp - llm-quantize: int4 linear weights, AWQ scale folding -===//
//
// Finds the groups of linears that share an input and the op their scales
// fold into (Quantize.h), then rewrites weight types and names. Passes.td has
// the before/after IR; tests/lit/passes/quantize.mlir the cases.
//
//===----------------------------------------------------------------------===//

#include "passes/Quantize.h"

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace llmc {

#define GEN_PASS_DEF_LLMQUANTIZE
#include "passes/Passes.h.inc"

namespace {

using llvm::cast;
using llvm::dyn_cast;
using llvm::dyn_cast_or_null;
using llvm::isa;

bool hasFloatWeight(llm::LinearOp linear) {
  return isa<mlir::RankedTensorType>(linear.getWeight().getType());
}

std::string weightName(mlir::Value weight) {
  auto op = weight.getDefiningOp<llm::WeightOp>();
  return op ? op.getName().str() : std::string();
}

// A linear whose rows can absorb 1/s: float weight, and its result, weight
// and bias used by nothing else (scaling them must not reach other ops).
bool isRowScalable(llm::LinearOp linear) {
  return linear && hasFloatWeight(linear) && linear.getResult().hasOneUse() &&
         linear.getWeight().hasOneUse() && (!linear.getBias() || linear.getBias().hasOneUse());
}

// Finds the group's sink from the producer of its input.
void findSink(LinearGroup &group) {
  for (mlir::Operation *user : group.input.getUsers()) {
    auto linear = dyn_cast<llm::LinearOp>(user);
    if (!linear || !llvm::is_contained(group.linears, linear))
      return;
  }
  for (llm::LinearOp linear : group.linears)
    if (!linear.getWeight().hasOneUse())
      return;
  mlir::Operation *producer = group.input.getDefiningOp();
  // A (offset + w) norm (Gemma) does not scale with w: (offset + w) / s is
  // no (offset + w / s), so such a norm is no sink. A whole-row LayerNorm
  // is one: its weight and bias (one per feature, used by it alone) both
  // divide by s.
  if (auto norm = dyn_cast_or_null<llm::RmsNormOp>(producer);
      norm && norm.getGroup() == 0 && norm.getOffset().convertToDouble() == 0.0) {
    group.sink = ScaleSink::RmsNorm;
    group.sinkOp = norm;
    group.sinkChannels = group.cols;
  } else if (auto layer = dyn_cast_or_null<llm::LayerNormOp>(producer);
             layer && layer.getGroup() == 0 && layer.getWeight().hasOneUse() &&
             (!layer.getBias() || layer.getBias().hasOneUse())) {
    group.sink = ScaleSink::LayerNorm;
    group.sinkOp = layer;
    group.sinkChannels = group.cols;
  } else if (auto mul = dyn_cast_or_null<llm::MulOp>(producer)) {
    if (mul.getLhs() == mul.getRhs())
      return;
    for (mlir::Value operand : {mul.getRhs(), mul.getLhs()}) {
      auto linear = operand.getDefiningOp<llm::LinearOp>();
      if (!isRowScalable(linear))
        continue;
      group.sink = ScaleSink::Linear;
      group.sinkOp = linear;
      group.sinkChannels = group.cols;
      return;
    }
  } else if (auto attention = dyn_cast_or_null<llm::AttentionOp>(producer)) {
    auto linear = attention.getV().getDefiningOp<llm::LinearOp>();
    if (!isRowScalable(linear))
      return;
    int64_t heads = attention.getNumHeads(), kvHeads = attention.getNumKvHeads();
    group.sink = ScaleSink::Linear;
    group.sinkOp = linear;
    group.headDim = attention.getHeadDim();
    group.headsPerKvHead = heads / kvHeads;
    group.sinkChannels = kvHeads * group.headDim;
  }
}

// The weight op to use in place of `old` for one operand: a new llm.weight
// with `name` and `type`, created once per (old op, name) next to the old one.
class WeightRewriter {
public:
  mlir::Value get(mlir::Value old, const std::string &name, mlir::Type type) {
    auto oldOp = old.getDefiningOp<llm::WeightOp>();
    auto key = std::make_pair(oldOp.getOperation(), name);
    auto it = created_.find(key);
    if (it != created_.end())
      return it->second;
    mlir::OpBuilder b(oldOp);
    mlir::Value value = b.create<llm::WeightOp>(oldOp.getLoc(), type, b.getStringAttr(name));
    created_[key] = value;
    replaced_.insert(oldOp);
    return value;
  }
  mlir::Value rename(mlir::Value old) {
    return get(old, awqScaledName(weightName(old)), old.getType());
  }
  // Erases the old weight ops nothing uses any more.
  void eraseUnused() {
    for (mlir::Operation *op : replaced_)
      if (op->use_empty())
        op->erase();
  }

private:
  std::map<std::pair<mlir::Operation *, std::string>, mlir::Value> created_;
  llvm::SetVector<mlir::Operation *> replaced_;
};

struct Counts {
  int64_t quantized = 0, groups = 0, scaledGroups = 0, renamed = 0, keptFloat = 0;
  uint64_t floatBytes = 0, q4Bytes = 0;
};

// AWQ: renames what the scales change. Returns the linears whose weights the
// scales change (column scales of their group, or row scales as a sink).
llvm::DenseSet<mlir::Operation *> foldScales(const std::vector<LinearGroup> &groups,
                                             WeightRewriter &rewriter, bool scalesOnly,
                                             Counts &counts) {
  llvm::DenseSet<mlir::Operation *> scaledLinears;
  for (const LinearGroup &group : groups) {
    if (!group.scalable())
      continue;
    ++counts.scaledGroups;
    for (llm::LinearOp linear : group.linears)
      scaledLinears.insert(linear);
    if (auto norm = dyn_cast<llm::RmsNormOp>(group.sinkOp)) {
      norm.getWeightMutable().assign(rewriter.rename(norm.getWeight()));
      ++counts.renamed;
      continue;
    }
    if (auto layer = dyn_cast<llm::LayerNormOp>(group.sinkOp)) {
      layer.getWeightMutable().assign(rewriter.rename(layer.getWeight()));
      ++counts.renamed;
      if (layer.getBias()) {
        layer.getBiasMutable().assign(rewriter.rename(layer.getBias()));
        ++counts.renamed;
      }
      continue;
    }
    auto sink = cast<llm::LinearOp>(group.sinkOp);
    scaledLinears.insert(sink);
    if (sink.getBias()) {
      sink.getBiasMutable().assign(rewriter.rename(sink.getBias()));
      ++counts.renamed;
    }
  }
  if (scalesOnly)
    for (mlir::Operation *op : scaledLinears) {
      auto linear = cast<llm::LinearOp>(op);
      linear.getWeightMutable().assign(rewriter.rename(linear.getWeight()));
      ++counts.renamed;
    }
  return scaledLinears;
}

void quantizeLinears(mlir::func::FuncOp func, int64_t groupSize,
                     const std::vector<std::string> &floatWeights, WeightRewriter &rewriter,
                     Counts &counts) {
  func.walk([&](llm::LinearOp linear) {
    if (!hasFloatWeight(linear))
      return;
    if (llvm::is_contained(floatWeights, weightName(linear.getWeight()))) {
      ++counts.keptFloat;
      return;
    }
    auto type = cast<mlir::RankedTensorType>(linear.getWeight().getType());
    auto q4 =
        llm::Q4Type::get(linear.getContext(), type.getDimSize(0), type.getDimSize(1), groupSize);
    counts.floatBytes += weightByteSize(type);
    counts.q4Bytes += weightByteSize(q4);
    ++counts.quantized;
    linear.getWeightMutable().assign(
        rewriter.get(linear.getWeight(), q4WeightName(weightName(linear.getWeight())), q4));
  });
}

std::string summarize(const QuantizeConfig &config, const Counts &c) {
  std::string text = quantizeMethodName(config.method);
  text += " group " + std::to_string(config.groupSize) + ": ";
  if (!config.scalesOnly)
    text += std::to_string(c.quantized) + " linear weights -> int4 (" +
            std::to_string(c.floatBytes) + " B -> " + std::to_string(c.q4Bytes) + " B)";
  else
    text += "weights kept in float (scales only)";
  if (c.keptFloat > 0)
    text += ", " + std::to_string(c.keptFloat) + " kept in float for --mixed";
  if (config.method == QuantizeMethod::Awq)
    text += "; " + std::to_string(c.scaledGroups) + " of " + std::to_string(c.groups) +
            " linear groups scaled, " + std::to_string(c.renamed) + " weights renamed";
  return text;
}

class LlmQuantizePass : public impl::LlmQuantizeBase<LlmQuantizePass> {
public:
  using LlmQuantizeBase::LlmQuantizeBase;
  LlmQuantizePass(const QuantizeConfig &config, std::string *summary) : summary_(summary) {
    method = quantizeMethodName(config.method);
    groupSize = config.groupSize;
    scalesOnly = config.scalesOnly;
    floatWeights_ = config.floatWeights;
  }

  void runOnOperation() override {
    QuantizeConfig config;
    if (method != "rtn" && method != "awq" && method != "gptq") {
      getOperation().emitError() << "llm-quantize: method '" << method
                                 << "' is not one of rtn, awq, gptq";
      return signalPassFailure();
    }
    config.method = method == "awq"    ? QuantizeMethod::Awq
                    : method == "gptq" ? QuantizeMethod::Gptq
                                       : QuantizeMethod::Rtn;
    if (groupSize <= 0) {
      getOperation().emitError() << "llm-quantize: group-size must be positive, got "
                                 << static_cast<int64_t>(groupSize);
      return signalPassFailure();
    }
    config.groupSize = groupSize;
    config.scalesOnly = scalesOnly;
    config.floatWeights = floatWeights_;
    if (config.scalesOnly && config.method != QuantizeMethod::Awq) {
      getOperation().emitError() << "llm-quantize: scales-only needs method=awq";
      return signalPassFailure();
    }
    Counts counts;
    WeightRewriter rewriter;
    getOperation().walk([&](mlir::func::FuncOp func) {
      std::vector<LinearGroup> groups = findLinearGroups(func);
      counts.groups += static_cast<int64_t>(groups.size());
      if (config.method == QuantizeMethod::Awq)
        foldScales(groups, rewriter, config.scalesOnly, counts);
      if (!config.scalesOnly)
        quantizeLinears(func, config.groupSize, config.floatWeights, rewriter, counts);
    });
    rewriter.eraseUnused();
    std::string text = summarize(config, counts);
    if (report)
      getOperation().emitRemark() << "llm-quantize: " << text;
    if (summary_ != nullptr)
      *summary_ = text;
  }

private:
  std::string *summary_ = nullptr; // not owned; null when run from llm-opt
  std::vector<std::string> floatWeights_; // QuantizeConfig::floatWeights (none from llm-opt)
};

} // namespace

const char *quantizeMethodName(QuantizeMethod method) {
  switch (method) {
  case QuantizeMethod::Rtn:
    return "rtn";
  case QuantizeMethod::Awq:
    return "awq";
  case QuantizeMethod::Gptq:
    return "gptq";
  }
  return "rtn";
}

std::string LinearGroup::label() const {
  std::vector<std::string> names;
  for (llm::LinearOp linear : linears)
    names.push_back(q4WeightName(weightName(linear.getWeight())));
  if (names.size() == 1)
    return names.front();
  // The longest common prefix that ends with '.', then the differing parts.
  size_t prefix = 0;
  for (size_t i = 0; i < names.front().size(); ++i) {
    char c = names.front()[i];
    bool shared = true;
    for (const std::string &n : names)
      shared = shared && i < n.size() && n[i] == c;
    if (!shared)
      break;
    if (c == '.')
      prefix = i + 1;
  }
  std::string text = names.front().substr(0, prefix) + "{";
  for (size_t i = 0; i < names.size(); ++i)
    text += (i ? "," : "") + names[i].substr(prefix);
  return text + "}";
}

std::vector<LinearGroup> findLinearGroups(mlir::func::FuncOp forward) {
  llvm::MapVector<mlir::Value, LinearGroup> byInput;
  forward.walk([&](llm::LinearOp linear) {
    if (!hasFloatWeight(linear))
      return;
    LinearGroup &group = byInput[linear.getX()];
    group.input = linear.getX();
    group.cols = cast<mlir::RankedTensorType>(linear.getX().getType()).getDimSize(1);
    group.linears.push_back(linear);
  });
  std::vector<LinearGroup> groups;
  for (auto &entry : byInput) {
    findSink(entry.second);
    groups.push_back(std::move(entry.second));
  }
  return groups;
}

bool feedsAttentionScores(llm::LinearOp linear) {
  for (mlir::OpOperand &use : linear.getResult().getUses()) {
    mlir::Operation *user = use.getOwner();
    if (auto rope = dyn_cast<llm::RopeOp>(user)) {
      for (mlir::OpOperand &ropeUse : rope.getResult().getUses())
        if (auto attention = dyn_cast<llm::AttentionOp>(ropeUse.getOwner()))
          if (ropeUse.getOperandNumber() < 2) // q or k
            return true;
    } else if (isa<llm::AttentionOp>(user) && use.getOperandNumber() < 2) {
      return true;
    }
  }
  return false;
}

std::string q4WeightName(llvm::StringRef floatWeightName) {
  llvm::StringRef name = floatWeightName;
  name.consume_back(".weight");
  return name.str();
}

std::string awqScaledName(llvm::StringRef name) { return name.str() + ".awq_scaled"; }

std::unique_ptr<mlir::Pass> createLlmQuantize(const QuantizeConfig &config, std::string *summary) {
  return std::make_unique<LlmQuantizePass>(config, summary);
}

} // namespace llmc
