#include "lower_to_plan.h"

#include "ir/LlmOps.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/synthetic.h"
#include "memory_planner.h"
#include "plan/plan.h"
#include "plan/plan_format.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>

#include <ctime>
#include <map>

namespace llmc {
namespace {

using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;

Expected<fb::DType> toPlanDType(mlir::Type type, const std::string &what) {
  if (type.isF32())
    return fb::DType::F32;
  if (type.isF16())
    return fb::DType::F16;
  if (type.isBF16())
    return fb::DType::BF16;
  if (type.isInteger(32))
    return fb::DType::I32;
  std::string printed;
  llvm::raw_string_ostream os(printed);
  type.print(os);
  return Status::error(what + ": element type " + os.str() + " has no plan dtype");
}

// The plan's activation of a fused linear's gate.
fb::ActivationKind gateActivation(llm::GatedActivation activation) {
  switch (activation) {
  case llm::GatedActivation::None:
    return fb::ActivationKind::None;
  case llm::GatedActivation::SwiGlu:
    return fb::ActivationKind::Silu;
  case llm::GatedActivation::GeGluTanh:
    return fb::ActivationKind::GeluTanh;
  case llm::GatedActivation::GeGluErf:
    return fb::ActivationKind::GeluErf;
  }
  return fb::ActivationKind::None;
}

std::unique_ptr<fb::NormParamsT> rmsNorm(double eps, double offset, int64_t groupWidth = 0) {
  auto n = std::make_unique<fb::NormParamsT>();
  n->kind = fb::NormKind::Rms;
  n->eps = eps;
  n->offset = offset;
  n->group_width = groupWidth;
  return n;
}

// The step's RoPE from an op's rope attributes (theta, scaling): the IR's
// values reach the plan here, once; every backend builds its tables from them.
// `rotaryDim` 0 means the whole head.
std::unique_ptr<fb::RopeParamsT> ropeParams(double theta, int64_t headDim,
                                            llm::RopeScalingAttr scaling, int64_t rotaryDim = 0,
                                            bool interleaved = false) {
  auto r = std::make_unique<fb::RopeParamsT>();
  r->theta = theta;
  r->rotary_dim = rotaryDim == 0 ? headDim : rotaryDim;
  r->interleaved = interleaved;
  if (!scaling || scaling.getKind() == llm::RopeScalingKind::None)
    return r;
  r->scaling = std::make_unique<fb::RopeScalingT>();
  fb::RopeScalingT &s = *r->scaling;
  switch (scaling.getKind()) {
  case llm::RopeScalingKind::None:
    break;
  case llm::RopeScalingKind::Linear:
    s.kind = fb::RopeScalingKind::Linear;
    break;
  case llm::RopeScalingKind::Llama3:
    s.kind = fb::RopeScalingKind::Llama3;
    break;
  case llm::RopeScalingKind::Dynamic:
    s.kind = fb::RopeScalingKind::Dynamic;
    break;
  case llm::RopeScalingKind::Yarn:
    s.kind = fb::RopeScalingKind::Yarn;
    break;
  case llm::RopeScalingKind::LongRope:
    s.kind = fb::RopeScalingKind::LongRope;
    break;
  }
  s.factor = scaling.getFactor().convertToDouble();
  s.low_freq_factor = scaling.getLowFreqFactor().convertToDouble();
  s.high_freq_factor = scaling.getHighFreqFactor().convertToDouble();
  s.original_max_positions = scaling.getOriginalMaxPositionEmbeddings();
  if (s.kind == fb::RopeScalingKind::Yarn) {
    s.beta_fast = scaling.getBetaFast().convertToDouble();
    s.beta_slow = scaling.getBetaSlow().convertToDouble();
    s.truncate = scaling.getTruncate();
  }
  if (s.kind == fb::RopeScalingKind::Yarn || s.kind == fb::RopeScalingKind::LongRope)
    s.attention_factor = scaling.getAttentionFactor().convertToDouble();
  if (s.kind == fb::RopeScalingKind::LongRope) {
    auto shortFactor = scaling.getShortFactor().asArrayRef();
    auto longFactor = scaling.getLongFactor().asArrayRef();
    s.short_factor.assign(shortFactor.begin(), shortFactor.end());
    s.long_factor.assign(longFactor.begin(), longFactor.end());
  }
  return r;
}

template <typename T> void setParams(fb::StepT &step, fb::OpKind kind, T params) {
  step.op = kind;
  step.params.Set(std::move(params));
}

// Builds the tensor table and the value -> buffer map, then the steps.
class Lowering {
public:
  Lowering(mlir::func::FuncOp forward, const LoweringOptions &options, PlanContents &plan)
      : forward_(forward), options_(options), plan_(plan) {}

  Status run() {
    LLMC_RETURN_IF_ERROR(collectWeights());
    LLMC_ASSIGN_OR_RETURN(std::unique_ptr<fb::ProgramT> prefill, buildProgram());
    auto decode = std::make_unique<fb::ProgramT>(*prefill);
    prefill->phase = fb::Phase::Prefill;
    decode->phase = fb::Phase::Decode;
    plan_.meta.programs.push_back(std::move(prefill));
    plan_.meta.programs.push_back(std::move(decode));
    return Status::ok();
  }

private:
  Status collectWeights() {
    Status status = Status::ok();
    forward_.walk([&](llm::WeightOp op) {
      std::string name = op.getName().str();
      if (!status || tensorIndex_.count(name) || onlyConcatenated(op))
        return;
      if (isa<llm::Q4Type>(op.getType())) {
        status = addQ4Tensors(name, {op}).status();
        return;
      }
      auto type = cast<mlir::RankedTensorType>(op.getType());
      auto dtype = toPlanDType(type.getElementType(), "weight '" + name + "'");
      if (!dtype) {
        status = dtype.status();
        return;
      }
      auto tensor = std::make_unique<fb::TensorT>();
      tensor->name = name;
      tensor->dtype = *dtype;
      tensor->shape.assign(type.getShape().begin(), type.getShape().end());
      uint64_t elements = 1;
      for (int64_t d : type.getShape())
        elements *= static_cast<uint64_t>(d);
      WeightSource source;
      source.elements = elements;
      if (options_.syntheticSeed) {
        tensor->synthetic = std::make_unique<fb::SyntheticInitT>(
            syntheticInitFor(name, type.getRank(), *options_.syntheticSeed));
      } else {
        auto resolved = options_.resolveWeight(name);
        if (!resolved) {
          status = resolved.status();
          return;
        }
        source = *resolved;
        if (source.elements != elements) {
          status = Status::error("weight '" + name + "': checkpoint has " +
                                 std::to_string(source.elements) + " elements, IR expects " +
                                 std::to_string(elements));
          return;
        }
      }
      if (type.getRank() == 2)
        plan_.meta.weight_dtype = *dtype;
      tensorIndex_[name] = static_cast<int>(plan_.meta.tensors.size());
      plan_.meta.tensors.push_back(std::move(tensor));
      plan_.sources.push_back(source);
    });
    return status;
  }

  // An int4 weight `name`: three stored tensors in the layout of
  // kernels/common/q4_layout.h, from the resolver (the row-concatenation of
  // `weights`' parts when there are several: fused q/k/v or gate/up), or in a
  // synthetic plan generated at load as the RTN coding of a synthetic float
  // weight. Returns the index of the first (qweight); scales and zeros follow.
  Expected<int> addQ4Tensors(const std::string &name, llvm::SmallVector<llm::WeightOp> weights) {
    auto type = cast<llm::Q4Type>(weights.front().getType());
    const int64_t cols = type.getCols(), group = type.getGroupSize();
    int64_t rows = 0;
    for (llm::WeightOp w : weights)
      rows += cast<llm::Q4Type>(w.getType()).getRows();
    if (!hd::q4ValidGroupSize(group))
      return Status::error("weight '" + name + "': int4 group size " + std::to_string(group) +
                           " is not a positive multiple of 32");
    if (!options_.resolveWeight && !options_.syntheticSeed)
      return Status::error("weight '" + name + "': int4 weights need stored values");
    const int64_t groups = hd::q4NumGroups(cols, group);
    const int first = static_cast<int>(plan_.meta.tensors.size());
    tensorIndex_[name] = first;
    const std::pair<Q4Part, fb::DType> parts[] = {{Q4Part::Weight, fb::DType::I32},
                                                  {Q4Part::Scales, fb::DType::F16},
                                                  {Q4Part::Zeros, fb::DType::F16}};
    for (auto [part, dtype] : parts) {
      auto tensor = std::make_unique<fb::TensorT>();
      tensor->name = q4TensorName(name, part);
      tensor->dtype = dtype;
      tensor->shape = {rows, part == Q4Part::Weight ? hd::q4WordsPerRow(cols) : groups};
      uint64_t elements = static_cast<uint64_t>(tensor->shape[0] * tensor->shape[1]);
      if (options_.syntheticSeed) {
        tensor->synthetic = std::make_unique<fb::SyntheticInitT>(
            syntheticQ4InitFor(name, part, cols, group, *options_.syntheticSeed));
        WeightSource source;
        source.elements = elements;
        plan_.meta.tensors.push_back(std::move(tensor));
        plan_.sources.push_back(source);
        continue;
      }
      WeightSource source;
      for (llm::WeightOp w : weights) {
        const std::string partName = q4TensorName(w.getName().str(), part);
        LLMC_ASSIGN_OR_RETURN(WeightSource stored, options_.resolveWeight(partName));
        const int64_t partRows = cast<llm::Q4Type>(w.getType()).getRows();
        const uint64_t partElements = static_cast<uint64_t>(partRows * tensor->shape[1]);
        if (stored.elements != partElements || stored.dtype != static_cast<DType>(dtype))
          return Status::error("weight '" + partName + "': has " + std::to_string(stored.elements) +
                               " " + std::string(dtypeName(stored.dtype)) + " elements, the int4 " +
                               "layout expects " + std::to_string(partElements) + " " +
                               fb::EnumNameDType(dtype));
        source.parts.push_back(stored);
      }
      if (source.parts.size() == 1) {
        source = source.parts.front();
      } else {
        source.dtype = static_cast<DType>(dtype);
        source.elements = elements;
      }
      plan_.meta.tensors.push_back(std::move(tensor));
      plan_.sources.push_back(std::move(source));
    }
    return first;
  }

  // Buffer of an SSA value, created on first sight.
  Expected<int> bufferOf(mlir::Value value, int step) {
    auto it = bufferIndex_.find(value.getAsOpaquePointer());
    if (it != bufferIndex_.end()) {
      lifetimes_[it->second].lastStep = std::max(lifetimes_[it->second].lastStep, step);
      return it->second;
    }
    auto type = dyn_cast<mlir::RankedTensorType>(value.getType());
    if (!type || type.getRank() < 1 || type.getRank() > 2)
      return Status::error("activation of unsupported type (expected [T] or [T, W] tensors)");
    LLMC_ASSIGN_OR_RETURN(fb::DType dtype, toPlanDType(type.getElementType(), "activation"));
    int64_t width = type.getRank() == 2 ? type.getDimSize(1) : 1;
    if (dtype != fb::DType::I32)
      dtype = fb::DType::F32; // the CPU backend computes activations in f32
    auto buffer = std::make_unique<fb::BufferT>();
    buffer->dtype = dtype;
    buffer->width = width;
    buffer->name = "v" + std::to_string(buffers_.size());
    int index = static_cast<int>(buffers_.size());
    buffers_.push_back(std::move(buffer));
    lifetimes_.push_back({static_cast<uint64_t>(width) * 4, step, step});
    bufferIndex_[value.getAsOpaquePointer()] = index;
    return index;
  }

  // An op result that reuses its input's buffer (RoPE works in place).
  void aliasBuffer(mlir::Value result, int buffer, int step) {
    bufferIndex_[result.getAsOpaquePointer()] = buffer;
    lifetimes_[buffer].lastStep = std::max(lifetimes_[buffer].lastStep, step);
  }

  int weight(mlir::Value value) {
    auto op = value.getDefiningOp<llm::WeightOp>();
    return tensorIndex_.at(op.getName().str());
  }

  Expected<std::unique_ptr<fb::StepT>> lowerOp(mlir::Operation *op, int step) {
    if (isa<llm::FusedLinearOp, llm::RopeAttentionOp, llm::LmHeadOp>(op) || readsColumns(op))
      return lowerFused(op, step);
    auto s = std::make_unique<fb::StepT>();
    auto input = [&](mlir::Value v) -> Status {
      LLMC_ASSIGN_OR_RETURN(int b, bufferOf(v, step));
      s->inputs.push_back(b);
      return Status::ok();
    };
    auto output = [&](mlir::Value v) -> Status {
      LLMC_ASSIGN_OR_RETURN(int b, bufferOf(v, step));
      s->outputs.push_back(b);
      return Status::ok();
    };
    if (auto e = dyn_cast<llm::EmbeddingOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(e.getTokens()));
      s->weights.push_back(weight(e.getTable()));
      fb::EmbeddingParamsT p;
      p.scale = e.getScale().convertToDouble();
      setParams(*s, fb::OpKind::Embedding, std::move(p));
    } else if (auto n = dyn_cast<llm::RmsNormOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(n.getX()));
      s->weights.push_back(weight(n.getWeight()));
      setParams(*s, fb::OpKind::Norm,
                std::move(*rmsNorm(n.getEps().convertToDouble(), n.getOffset().convertToDouble(),
                                   n.getGroup())));
    } else if (auto n = dyn_cast<llm::LayerNormOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(n.getX()));
      s->weights.push_back(weight(n.getWeight()));
      fb::NormParamsT p;
      p.kind = fb::NormKind::Layer;
      p.eps = n.getEps().convertToDouble();
      p.group_width = n.getGroupAttr().getInt();
      if (n.getBias()) {
        p.bias = true;
        s->weights.push_back(weight(n.getBias()));
      }
      setParams(*s, fb::OpKind::Norm, std::move(p));
    } else if (auto l = dyn_cast<llm::LinearOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(l.getX()));
      s->weights.push_back(weight(l.getWeight()));
      fb::LinearParamsT p;
      if (auto q4 = dyn_cast<llm::Q4Type>(l.getWeight().getType())) {
        // qweight, scales, zeros (consecutive tensors), then the bias.
        p.weights = fb::WeightFormat::Q4;
        p.group_size = q4.getGroupSize();
        s->weights.push_back(s->weights.back() + 1);
        s->weights.push_back(s->weights.back() + 1);
      }
      if (l.getBias()) {
        p.bias = true;
        s->weights.push_back(weight(l.getBias()));
      }
      p.output_scale = static_cast<float>(l.getScale().convertToDouble());
      setParams(*s, fb::OpKind::Linear, std::move(p));
    } else if (auto r = dyn_cast<llm::RopeOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(r.getX()));
      if (!r.getX().hasOneUse())
        return Status::error("llm.rope works in place: its input must have no other use");
      aliasBuffer(r.getResult(), s->inputs[0], step);
      s->outputs.push_back(s->inputs[0]);
      fb::RopeStepParamsT p;
      p.heads = static_cast<int64_t>(r.getNumHeads());
      p.head_dim = static_cast<int64_t>(r.getHeadDim());
      p.rope = ropeParams(r.getTheta().convertToDouble(), p.head_dim, r.getScalingAttr(),
                          r.getRotaryDim(), r.getInterleaved());
      setParams(*s, fb::OpKind::Rope, std::move(p));
      return s;
    } else if (auto a = dyn_cast<llm::AttentionOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(a.getQ()));
      LLMC_RETURN_IF_ERROR(input(a.getK()));
      LLMC_RETURN_IF_ERROR(input(a.getV()));
      fb::AttentionParamsT p;
      p.layer = static_cast<int64_t>(a.getLayer());
      p.heads = static_cast<int64_t>(a.getNumHeads());
      p.kv_heads = static_cast<int64_t>(a.getNumKvHeads());
      p.head_dim = static_cast<int64_t>(a.getHeadDim());
      p.scale = a.getScale().convertToDouble();
      p.softcap = a.getSoftcap().convertToDouble();
      p.window = a.getWindowAttr().getInt();
      setParams(*s, fb::OpKind::Attention, std::move(p));
    } else if (isa<llm::AddOp, llm::MulOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(op->getOperand(0)));
      LLMC_RETURN_IF_ERROR(input(op->getOperand(1)));
      fb::ElementwiseParamsT p;
      p.op = isa<llm::AddOp>(op) ? fb::ElementwiseOp::Add : fb::ElementwiseOp::Mul;
      setParams(*s, fb::OpKind::Elementwise, std::move(p));
    } else if (auto si = dyn_cast<llm::SiluOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(si.getX()));
      fb::ActivationParamsT p;
      p.activation = fb::ActivationKind::Silu;
      setParams(*s, fb::OpKind::Activation, std::move(p));
    } else if (auto ge = dyn_cast<llm::GeluOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(ge.getX()));
      fb::ActivationParamsT p;
      p.activation = ge.getTanh() ? fb::ActivationKind::GeluTanh : fb::ActivationKind::GeluErf;
      setParams(*s, fb::OpKind::Activation, std::move(p));
    } else if (auto lo = dyn_cast<llm::LogitsOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(lo.getX()));
      s->weights.push_back(weight(lo.getWeight()));
      fb::LogitsParamsT p;
      p.softcap = lo.getSoftcap().convertToDouble();
      p.scale = lo.getScale().convertToDouble();
      if (lo.getBias()) {
        p.bias = true;
        s->weights.push_back(weight(lo.getBias()));
      }
      setParams(*s, fb::OpKind::Logits, std::move(p));
    } else {
      return Status::error("no kernel for '" + op->getName().getStringRef().str() +
                           "' yet (supported: embedding, rms_norm, layer_norm, linear, rope, " +
                           "attention, add, mul, silu, gelu, logits)");
    }
    LLMC_RETURN_IF_ERROR(output(op->getResult(0)));
    return s;
  }

  // --- Fused ops (passes/Fuse*.cpp) and the column slices they produce. ---

  // A weight read only as one of several weights or biases of
  // llm.fused_linear ops: the plan stores it inside their concatenation.
  static bool onlyConcatenated(llm::WeightOp op) {
    return !op->use_empty() && llvm::all_of(op->getUses(), [](mlir::OpOperand &use) {
      auto fused = dyn_cast<llm::FusedLinearOp>(use.getOwner());
      if (!fused || fused.getWeights().size() < 2)
        return false;
      // Operands: x, the weights, the biases, then norm and residual.
      unsigned index = use.getOperandNumber();
      return index >= 1 && index < 1 + fused.getWeights().size() + fused.getBiases().size();
    });
  }

  // The plan tensor of `values` (llm.weight results) stored as one: the
  // weight itself when there is one, else their row-concatenation, made on
  // first use and named "<name>+<name>+...".
  // For int4 weights: the index of the concatenation's qweight (scales and
  // zeros follow it).
  Expected<int> concatTensor(mlir::ValueRange values) {
    if (values.size() == 1)
      return weight(values[0]);
    std::string name;
    llvm::SmallVector<llm::WeightOp> parts;
    for (mlir::Value v : values) {
      parts.push_back(v.getDefiningOp<llm::WeightOp>());
      name += (name.empty() ? "" : "+") + parts.back().getName().str();
    }
    if (auto it = tensorIndex_.find(name); it != tensorIndex_.end())
      return it->second;
    if (isa<llm::Q4Type>(parts[0].getType()))
      return addQ4Tensors(name, parts);
    auto first = cast<mlir::RankedTensorType>(parts[0].getType());
    LLMC_ASSIGN_OR_RETURN(fb::DType dtype,
                          toPlanDType(first.getElementType(), "weight '" + name + "'"));
    auto tensor = std::make_unique<fb::TensorT>();
    tensor->name = name;
    tensor->dtype = dtype;
    tensor->shape.assign(first.getShape().begin(), first.getShape().end());
    tensor->shape[0] = 0;
    WeightSource source;
    for (llm::WeightOp part : parts) {
      auto type = cast<mlir::RankedTensorType>(part.getType());
      tensor->shape[0] += type.getDimSize(0);
      uint64_t elements = static_cast<uint64_t>(type.getNumElements());
      source.elements += elements;
      if (options_.syntheticSeed)
        continue;
      std::string partName = part.getName().str();
      LLMC_ASSIGN_OR_RETURN(WeightSource stored, options_.resolveWeight(partName));
      if (stored.elements != elements)
        return Status::error("weight '" + partName + "': checkpoint has " +
                             std::to_string(stored.elements) + " elements, IR expects " +
                             std::to_string(elements));
      source.parts.push_back(stored);
    }
    if (options_.syntheticSeed)
      tensor->synthetic = std::make_unique<fb::SyntheticInitT>(
          syntheticInitFor(name, first.getRank(), *options_.syntheticSeed));
    if (first.getRank() == 2)
      plan_.meta.weight_dtype = dtype;
    int index = static_cast<int>(plan_.meta.tensors.size());
    tensorIndex_[name] = index;
    plan_.meta.tensors.push_back(std::move(tensor));
    plan_.sources.push_back(std::move(source));
    return index;
  }

  // A result of a multi-result llm.fused_linear is a column slice of its
  // op's one output buffer: the column where it starts (0 for other values).
  int64_t columnOf(mlir::Value value) const {
    auto it = columns_.find(value.getAsOpaquePointer());
    return it == columns_.end() ? 0 : it->second;
  }

  // Ops the unfused lowering handles, reading a column slice: rope and
  // attention after llm-fuse-qkv without llm-fuse-rope.
  bool readsColumns(mlir::Operation *op) const {
    return llvm::any_of(op->getOperands(),
                        [&](mlir::Value v) { return columns_.count(v.getAsOpaquePointer()) > 0; });
  }

  // A new buffer of `width` floats per token, first written at `step`.
  int newBuffer(int64_t width, int step) {
    auto buffer = std::make_unique<fb::BufferT>();
    buffer->dtype = fb::DType::F32;
    buffer->width = width;
    buffer->name = "v" + std::to_string(buffers_.size());
    buffers_.push_back(std::move(buffer));
    lifetimes_.push_back({static_cast<uint64_t>(width) * 4, step, step});
    return static_cast<int>(buffers_.size()) - 1;
  }

  // Whether `value` is read by no op after `op` (it is about to be updated in place).
  static bool deadAfter(mlir::Value value, mlir::Operation *op) {
    return llvm::all_of(value.getUsers(), [&](mlir::Operation *user) {
      return user == op || user->isBeforeInBlock(op);
    });
  }

  Expected<std::unique_ptr<fb::StepT>> lowerFused(mlir::Operation *op, int step) {
    auto s = std::make_unique<fb::StepT>();
    auto input = [&](mlir::Value v) -> Status {
      LLMC_ASSIGN_OR_RETURN(int b, bufferOf(v, step));
      s->inputs.push_back(b);
      return Status::ok();
    };
    if (auto f = dyn_cast<llm::FusedLinearOp>(op)) {
      LLMC_RETURN_IF_ERROR(lowerFusedLinear(f, step, *s));
      return s;
    }
    if (auto h = dyn_cast<llm::LmHeadOp>(op)) {
      LLMC_RETURN_IF_ERROR(input(h.getX()));
      s->weights = {weight(h.getNorm()), weight(h.getWeight())};
      fb::LogitsParamsT p;
      p.norm = rmsNorm(h.getEps().convertToDouble(), h.getOffset().convertToDouble());
      p.softcap = h.getSoftcap().convertToDouble();
      setParams(*s, fb::OpKind::LmHead, std::move(p));
      for (mlir::Value result : h->getResults()) {
        LLMC_ASSIGN_OR_RETURN(int b, bufferOf(result, step));
        s->outputs.push_back(b);
      }
      return s;
    }
    if (auto r = dyn_cast<llm::RopeOp>(op)) {
      // A q or k slice of a packed qkv buffer, rotated in place.
      if (!r.getX().hasOneUse())
        return Status::error("llm.rope works in place: its input must have no other use");
      LLMC_RETURN_IF_ERROR(input(r.getX()));
      s->outputs = s->inputs;
      fb::RopeStepParamsT p;
      p.heads = static_cast<int64_t>(r.getNumHeads());
      p.head_dim = static_cast<int64_t>(r.getHeadDim());
      p.column = columnOf(r.getX());
      p.rope = ropeParams(r.getTheta().convertToDouble(), p.head_dim, r.getScalingAttr(),
                          r.getRotaryDim(), r.getInterleaved());
      setParams(*s, fb::OpKind::Rope, std::move(p));
      aliasBuffer(r.getResult(), s->inputs[0], step);
      columns_[r.getResult().getAsOpaquePointer()] = columnOf(r.getX());
      return s;
    }
    // llm.rope_attention, or llm.attention reading slices: one RopeAttention.
    auto ra = dyn_cast<llm::RopeAttentionOp>(op);
    auto a = dyn_cast<llm::AttentionOp>(op);
    if (!ra && !a)
      return Status::error("no kernel for '" + op->getName().getStringRef().str() +
                           "' reading a column slice of a fused q/k/v product");
    for (int i = 0; i < 3; ++i)
      LLMC_RETURN_IF_ERROR(input(op->getOperand(i)));
    fb::AttentionParamsT p;
    p.layer = ra ? ra.getLayer() : a.getLayer();
    p.heads = ra ? ra.getNumHeads() : a.getNumHeads();
    p.kv_heads = ra ? ra.getNumKvHeads() : a.getNumKvHeads();
    p.head_dim = ra ? ra.getHeadDim() : a.getHeadDim();
    p.q_column = columnOf(op->getOperand(0));
    p.k_column = columnOf(op->getOperand(1));
    p.v_column = columnOf(op->getOperand(2));
    if (ra)
      p.rope = ropeParams(ra.getTheta().convertToDouble(), p.head_dim, ra.getScalingAttr(),
                          ra.getRotaryDim(), ra.getInterleaved());
    p.scale = (ra ? ra.getScale() : a.getScale()).convertToDouble();
    p.softcap = (ra ? ra.getSoftcap() : a.getSoftcap()).convertToDouble();
    p.window = (ra ? ra.getWindowAttr() : a.getWindowAttr()).getInt();
    setParams(*s, fb::OpKind::Attention, std::move(p));
    LLMC_ASSIGN_OR_RETURN(int out, bufferOf(op->getResult(0), step));
    s->outputs.push_back(out);
    return s;
  }

  // One Linear step over the concatenated weights; its LinearParams say
  // which prologue (norm) and epilogue (gated activation) it has. With a
  // residual the GEMM accumulates into the residual's buffer
  // (read-modify-write), so the result is that buffer, live from the
  // residual's definition on. int4 weights: the matrix as qweight, scales,
  // zeros.
  Status lowerFusedLinear(llm::FusedLinearOp f, int step, fb::StepT &s) {
    bool norm = static_cast<bool>(f.getNorm()), swiglu = f.isGated();
    auto q4 = dyn_cast<llm::Q4Type>(f.getWeights()[0].getType());
    fb::LinearParamsT p;
    if (q4) {
      p.weights = fb::WeightFormat::Q4;
      p.group_size = q4.getGroupSize();
    }
    p.gated = swiglu;
    p.activation = gateActivation(f.getActivation());
    if (columns_.count(f.getX().getAsOpaquePointer()))
      return Status::error("llm.fused_linear cannot read a column slice");
    LLMC_ASSIGN_OR_RETURN(int x, bufferOf(f.getX(), step));
    s.inputs.push_back(x);
    if (norm) {
      s.weights.push_back(weight(f.getNorm()));
      p.prologue = rmsNorm(f.getEpsAttr().getValueAsDouble(), f.getNormOffset().convertToDouble());
    }
    LLMC_ASSIGN_OR_RETURN(int w, concatTensor(f.getWeights()));
    s.weights.push_back(w);
    if (q4) { // scales, zeros
      s.weights.push_back(w + 1);
      s.weights.push_back(w + 2);
    }
    if (!f.getBiases().empty()) {
      LLMC_ASSIGN_OR_RETURN(int b, concatTensor(f.getBiases()));
      s.weights.push_back(b);
      p.bias = true;
    }
    mlir::Value residual = f.getResidual();
    if (swiglu && (residual || !f.getBiases().empty()))
      return Status::error("a SwiGLU GEMM has no residual or bias epilogue in the plan");
    p.accumulate = static_cast<bool>(residual);
    p.output_scale = static_cast<float>(f.getScale().convertToDouble());
    setParams(s, fb::OpKind::Linear, std::move(p));
    if (residual) {
      if (columns_.count(residual.getAsOpaquePointer()) || !deadAfter(residual, f))
        return Status::error("llm.fused_linear: its residual is updated in place, so it must "
                             "be a whole buffer that nothing reads afterwards");
      LLMC_ASSIGN_OR_RETURN(int out, bufferOf(residual, step));
      aliasBuffer(f.getResult(0), out, step);
      s.outputs.push_back(out);
      return Status::ok();
    }
    int64_t width = 0;
    for (mlir::Value r : f.getResults())
      width += cast<mlir::RankedTensorType>(r.getType()).getDimSize(1);
    int out = newBuffer(width, step);
    int64_t column = 0;
    for (mlir::Value r : f.getResults()) {
      aliasBuffer(r, out, step);
      if (f.getNumResults() > 1)
        columns_[r.getAsOpaquePointer()] = column;
      column += cast<mlir::RankedTensorType>(r.getType()).getDimSize(1);
    }
    s.outputs.push_back(out);
    return Status::ok();
  }

  Expected<std::unique_ptr<fb::ProgramT>> buildProgram() {
    auto program = std::make_unique<fb::ProgramT>();
    program->target = fb::Target::Cpu;
    if (forward_.getNumArguments() != 2)
      return Status::error("@forward must take (tokens, positions)");
    LLMC_ASSIGN_OR_RETURN(program->token_buffer, bufferOf(forward_.getArgument(0), -1));
    int step = 0;
    for (mlir::Operation &op : forward_.getBody().front()) {
      if (isa<llm::WeightOp>(op))
        continue;
      if (auto ret = dyn_cast<mlir::func::ReturnOp>(op)) {
        // The logits, and after llm-fuse-head the greedy ids of the same lm_head.
        mlir::Value logits = ret.getNumOperands() > 0 ? ret.getOperand(0) : mlir::Value();
        auto head = logits ? logits.getDefiningOp<llm::LmHeadOp>() : llm::LmHeadOp();
        if (ret.getNumOperands() != (head ? 2u : 1u) ||
            (head && ret.getOperand(1) != head.getIds()))
          return Status::error("@forward must return the logits (and after llm-fuse-head, the "
                               "ids of the same llm.lm_head)");
        LLMC_ASSIGN_OR_RETURN(program->logits_buffer, bufferOf(logits, step));
        continue;
      }
      LLMC_ASSIGN_OR_RETURN(std::unique_ptr<fb::StepT> s, lowerOp(&op, step));
      program->steps.push_back(std::move(s));
      ++step;
    }
    MemoryPlan memory = planMemory(lifetimes_);
    for (size_t i = 0; i < buffers_.size(); ++i)
      buffers_[i]->offset_per_token = memory.offsetPerToken[i];
    program->arena_bytes_per_token = memory.arenaBytesPerToken;
    program->buffers = std::move(buffers_);
    return program;
  }

  mlir::func::FuncOp forward_;
  const LoweringOptions &options_;
  PlanContents &plan_;
  std::map<std::string, int> tensorIndex_;
  std::map<const void *, int> bufferIndex_;
  std::map<const void *, int64_t> columns_; // column slices of a packed buffer, by value
  std::vector<std::unique_ptr<fb::BufferT>> buffers_;
  std::vector<BufferLifetime> lifetimes_;
};

std::unique_ptr<fb::ModelInfoT> modelInfo(const ModelConfig &c, int64_t maxSeqLen) {
  auto m = std::make_unique<fb::ModelInfoT>();
  m->architecture = c.architecture;
  m->hidden_size = c.hiddenSize;
  m->intermediate_size = c.intermediateSize;
  m->num_layers = c.numLayers;
  m->num_heads = c.numHeads;
  m->num_kv_heads = c.numKvHeads;
  m->head_dim = c.headDim;
  m->vocab_size = c.vocabSize;
  m->max_seq_len = maxSeqLen;
  m->rms_norm_eps = c.rmsNormEps;
  m->tie_word_embeddings = c.tieWordEmbeddings;
  m->bos_token_ids = c.bosTokenIds;
  m->eos_token_ids = c.eosTokenIds;
  return m;
}

} // namespace

std::string q4TensorName(const std::string &weight, Q4Part part) {
  switch (part) {
  case Q4Part::Weight:
    return weight + ".qweight";
  case Q4Part::Scales:
    return weight + ".scales";
  case Q4Part::Zeros:
    return weight + ".zeros";
  }
  return weight;
}

fb::SyntheticInitT syntheticInitFor(const std::string &name, int64_t rank, uint64_t seed) {
  fb::SyntheticInitT init;
  auto endsWith = [&](const std::string &suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (rank == 1 && endsWith(".bias")) {
    init.kind = fb::SyntheticKind::Zeros;
  } else if (rank == 1) {
    init.kind = fb::SyntheticKind::Ones;
  } else {
    init.kind = fb::SyntheticKind::Normal;
    init.std = 0.02f;
  }
  init.seed =
      hd::splitMix64(seed ^ fnv1a64(reinterpret_cast<const uint8_t *>(name.data()), name.size()));
  return init;
}

fb::SyntheticInitT syntheticQ4InitFor(const std::string &name, Q4Part part, int64_t cols,
                                      int64_t groupSize, uint64_t seed) {
  // The float weight's stream: the quantize pass named the int4 weight after
  // "<name>.weight" (q4WeightName), the checkpoint name of Llama-family linears.
  fb::SyntheticInitT init = syntheticInitFor(name + ".weight", 2, seed);
  init.kind = part == Q4Part::Weight   ? fb::SyntheticKind::Q4Weight
              : part == Q4Part::Scales ? fb::SyntheticKind::Q4Scales
                                       : fb::SyntheticKind::Q4Zeros;
  init.cols = cols;
  init.group_size = groupSize;
  return init;
}

Expected<PlanContents> lowerToPlan(mlir::ModuleOp module, const LoweringOptions &options) {
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    return Status::error("the module has no func.func @forward");
  if (options.config == nullptr)
    return Status::error("internal: lowering needs the model config");
  PlanContents plan;
  plan.meta.weight_dtype = fb::DType::F32; // the float matrices' dtype, set by the lowering
  LLMC_RETURN_IF_ERROR(Lowering(forward, options, plan).run());
  const ModelConfig &c = *options.config;
  plan.meta.model = modelInfo(c, options.maxSeqLen);
  plan.meta.tokenizer = std::make_unique<fb::TokenizerInfoT>();
  plan.meta.tokenizer->tokenizer_json = options.tokenizerJson;
  plan.meta.kv_cache = std::make_unique<fb::KvCacheInfoT>();
  plan.meta.kv_cache->num_layers = c.numLayers;
  plan.meta.kv_cache->num_kv_heads = c.numKvHeads;
  plan.meta.kv_cache->head_dim = c.headDim;
  plan.meta.kv_cache->block_size = options.kvBlockSize;
  plan.meta.provenance = std::make_unique<fb::ProvenanceT>();
  plan.meta.provenance->llmc_version = options.llmcVersion;
  plan.meta.provenance->source_model = options.sourceModel;
  plan.meta.provenance->source_hash = options.sourceHash;
  plan.meta.provenance->options = options.buildOptions;
  plan.meta.provenance->created_unix = static_cast<int64_t>(std::time(nullptr));
  plan.meta.synthetic = options.syntheticSeed.has_value();
  plan.meta.synthetic_seed = options.syntheticSeed.value_or(0);
  return plan;
}

} // namespace llmc
