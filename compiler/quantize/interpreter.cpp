#include "quantize/interpreter.h"

#include "cpu/attention.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "ir/LlmOps.h"
#include "kv/kv_cache.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <cstring>

namespace llmc::quant {
namespace {

using llvm::dyn_cast;
using llvm::isa;

int64_t widthOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getDimSize(1);
}

std::string weightName(mlir::Value value) {
  return value.getDefiningOp<llm::WeightOp>().getName().str();
}

hd::RopeScaling ropeScaling(llm::RopeOp rope) {
  hd::RopeScaling s;
  llm::RopeScalingAttr attr = rope.getScalingAttr();
  if (!attr)
    return s;
  switch (attr.getKind()) {
  case llm::RopeScalingKind::None:
    s.kind = hd::RopeScalingKind::None;
    break;
  case llm::RopeScalingKind::Linear:
    s.kind = hd::RopeScalingKind::Linear;
    break;
  case llm::RopeScalingKind::Llama3:
    s.kind = hd::RopeScalingKind::Llama3;
    break;
  case llm::RopeScalingKind::Dynamic:
  case llm::RopeScalingKind::Yarn:
  case llm::RopeScalingKind::LongRope:
    break; // no graph builder emits these into plans of this format
  }
  s.factor = static_cast<float>(attr.getFactor().convertToDouble());
  s.lowFreqFactor = static_cast<float>(attr.getLowFreqFactor().convertToDouble());
  s.highFreqFactor = static_cast<float>(attr.getHighFreqFactor().convertToDouble());
  s.originalMaxPositions = static_cast<float>(attr.getOriginalMaxPositionEmbeddings());
  return s;
}

} // namespace

struct ForwardInterpreter::State {
  mlir::func::FuncOp forward;
  const WeightTable &weights;
  ThreadPool &pool;
  int64_t maxTokens = 0;
  std::vector<mlir::Operation *> ops;          // in order, without weights and the return
  mlir::Value result;                          // the returned logits
  llvm::DenseMap<mlir::Value, size_t> lastUse; // index into ops of a value's last reader
  llvm::DenseMap<mlir::Operation *, std::vector<float>> ropeTables; // per llm.rope: cos/sin
  llvm::DenseMap<mlir::Operation *, std::vector<float>> bias;       // per llm.linear, as f32
  std::unique_ptr<kv::KvCache> cache;
  std::vector<int32_t> blockTable; // blocks 1 .. numBlocks - 1 (0 is the null block)

  // Per run.
  llvm::DenseMap<mlir::Value, std::vector<float>> values;
  const int32_t *tokens = nullptr;
  std::vector<int32_t> positions;
  std::vector<cpu::AttentionSequence> sequences;
  const WeightOverrides *overrides = nullptr;

  State(mlir::func::FuncOp f, const WeightTable &w, ThreadPool &p)
      : forward(f), weights(w), pool(p) {}

  Status prepare();
  Status prepareOp(mlir::Operation *op, kv::KvCacheShape &kv);
  Status runOp(mlir::Operation *op, std::vector<float> &out, int64_t rows);
  Status setSequences(const std::vector<int64_t> &lengths);
  const float *in(mlir::Value v) const { return values.find(v)->second.data(); }
  Expected<cpu::WeightMatrix> matrix(mlir::Value weight) const {
    std::string name = weightName(weight);
    if (overrides != nullptr) {
      auto it = overrides->find(name);
      if (it != overrides->end())
        return it->second;
    }
    return weights.matrix(name);
  }
};

// Positions restart at 0 in each sequence; sequence s takes the next
// ceil(length / blockSize) blocks of the cache.
Status ForwardInterpreter::State::setSequences(const std::vector<int64_t> &lengths) {
  positions.clear();
  sequences.clear();
  size_t block = 0;
  const int64_t blockSize = cache ? cache->shape().blockSize : 1;
  for (int64_t length : lengths) {
    size_t blocks = static_cast<size_t>((length + blockSize - 1) / blockSize);
    if (cache && block + blocks > blockTable.size())
      return Status::error("internal: calibration sequences need more KV blocks than sized");
    sequences.push_back(
        {static_cast<int64_t>(positions.size()), length, blockTable.data() + block});
    block += blocks;
    for (int64_t t = 0; t < length; ++t)
      positions.push_back(static_cast<int32_t>(t));
  }
  return Status::ok();
}

Status ForwardInterpreter::State::prepareOp(mlir::Operation *op, kv::KvCacheShape &kv) {
  std::string name = op->getName().getStringRef().str();
  // Gemma-style attributes (docs/ir.md) the calibration kernels do not apply:
  // refused rather than calibrated on a different function.
  auto embedding = dyn_cast<llm::EmbeddingOp>(op);
  auto norm = dyn_cast<llm::RmsNormOp>(op);
  auto logits = dyn_cast<llm::LogitsOp>(op);
  auto attn = dyn_cast<llm::AttentionOp>(op);
  auto linearOp = dyn_cast<llm::LinearOp>(op);
  if ((embedding && embedding.getScale().convertToDouble() != 1.0) ||
      (linearOp && linearOp.getScale().convertToDouble() != 1.0) ||
      (norm && (norm.getOffset().convertToDouble() != 0.0 || norm.getGroup() != 0)) ||
      (logits && (logits.getSoftcap().convertToDouble() != 0.0 || !logits.isPlainProjection())) ||
      (attn && (attn.getSoftcap().convertToDouble() != 0.0 || attn.getWindowAttr().getInt() != 0)))
    return Status::error("calibration cannot run '" + name +
                         "' with a scale, offset, softcap or window (Gemma-style attributes)");
  if (auto linear = dyn_cast<llm::LinearOp>(op)) {
    if (!isa<mlir::RankedTensorType>(linear.getWeight().getType()))
      return Status::error("calibration runs float weights only; '" + name + "' reads " +
                           weightName(linear.getWeight()) + " as int4");
    if (linear.getBias()) {
      LLMC_ASSIGN_OR_RETURN(bias[op], weights.toF32(weightName(linear.getBias())));
    }
  } else if (auto rope = dyn_cast<llm::RopeOp>(op)) {
    const int dim = static_cast<int>(rope.getHeadDim());
    std::vector<float> freqs(dim / 2);
    cpu::ropeInvFreqs(dim, static_cast<float>(rope.getTheta().convertToDouble()), ropeScaling(rope),
                      freqs.data());
    ropeTables[op] = cpu::ropeTable(maxTokens, dim, freqs.data());
  } else if (auto attention = dyn_cast<llm::AttentionOp>(op)) {
    int32_t kvHeads = static_cast<int32_t>(attention.getNumKvHeads());
    int32_t headDim = static_cast<int32_t>(attention.getHeadDim());
    if (kv.kvHeads != 0 && (kv.kvHeads != kvHeads || kv.headDim != headDim))
      return Status::error("calibration needs one KV geometry for every attention layer");
    kv.kvHeads = kvHeads;
    kv.headDim = headDim;
    kv.numLayers = std::max(kv.numLayers, static_cast<int32_t>(attention.getLayer()) + 1);
  } else if (!isa<llm::EmbeddingOp, llm::RmsNormOp, llm::AddOp, llm::MulOp, llm::SiluOp,
                  llm::LogitsOp>(op)) {
    return Status::error("calibration cannot run '" + name +
                         "' (it runs embedding, rms_norm, linear, rope, attention, add, mul, "
                         "silu and logits)");
  }
  return Status::ok();
}

Status ForwardInterpreter::State::prepare() {
  if (forward.getNumArguments() != 2)
    return Status::error("@forward must take (tokens, positions)");
  kv::KvCacheShape kv;
  for (mlir::Operation &op : forward.getBody().front()) {
    if (auto weight = dyn_cast<llm::WeightOp>(op)) {
      LLMC_RETURN_IF_ERROR(weights.get(weight.getName().str()).status());
      continue;
    }
    if (auto ret = dyn_cast<mlir::func::ReturnOp>(op)) {
      if (ret.getNumOperands() != 1)
        return Status::error("@forward must return the logits");
      result = ret.getOperand(0);
      continue;
    }
    LLMC_RETURN_IF_ERROR(prepareOp(&op, kv));
    for (mlir::Value operand : op.getOperands())
      lastUse[operand] = ops.size();
    ops.push_back(&op);
  }
  lastUse[result] = ops.size(); // kept to the end
  if (kv.numLayers > 0) {
    kv.blockSize = 16;
    // Room for maxTokens rows split into up to 64 sequences, plus the null block.
    kv.numBlocks = static_cast<int32_t>((maxTokens + kv.blockSize - 1) / kv.blockSize + 65);
    LLMC_ASSIGN_OR_RETURN(kv::KvCache created, kv::KvCache::create(kv));
    cache = std::make_unique<kv::KvCache>(std::move(created));
    for (int32_t b = 1; b < kv.numBlocks; ++b) // block 0 is the null block
      blockTable.push_back(b);
  }
  return Status::ok();
}

Status ForwardInterpreter::State::runOp(mlir::Operation *op, std::vector<float> &out,
                                        int64_t rows) {
  const int64_t n = static_cast<int64_t>(out.size());
  if (auto e = dyn_cast<llm::EmbeddingOp>(op)) {
    LLMC_ASSIGN_OR_RETURN(cpu::WeightMatrix table, weights.matrix(weightName(e.getTable())));
    return cpu::embedding(pool, table, tokens, rows, out.data());
  }
  if (auto norm = dyn_cast<llm::RmsNormOp>(op)) {
    LLMC_ASSIGN_OR_RETURN(cpu::WeightVector w, weights.vector(weightName(norm.getWeight())));
    cpu::rmsNorm(pool, in(norm.getX()), rows, w,
                 static_cast<float>(norm.getEps().convertToDouble()), out.data());
  } else if (auto linear = dyn_cast<llm::LinearOp>(op)) {
    LLMC_ASSIGN_OR_RETURN(cpu::WeightMatrix w, matrix(linear.getWeight()));
    auto b = bias.find(op);
    cpu::matmul(pool, in(linear.getX()), rows, w, b == bias.end() ? nullptr : b->second.data(),
                0.0f, out.data());
  } else if (auto logits = dyn_cast<llm::LogitsOp>(op)) {
    LLMC_ASSIGN_OR_RETURN(cpu::WeightMatrix w, weights.matrix(weightName(logits.getWeight())));
    cpu::matmul(pool, in(logits.getX()), rows, w, nullptr, 0.0f, out.data());
  } else if (auto rope = dyn_cast<llm::RopeOp>(op)) {
    std::memcpy(out.data(), in(rope.getX()), n * sizeof(float));
    int64_t heads = rope.getNumHeads(), dim = rope.getHeadDim();
    cpu::rope(pool, out.data(), rows, heads * dim, {heads, dim, dim}, positions.data(),
              ropeTables[op].data());
  } else if (auto a = dyn_cast<llm::AttentionOp>(op)) {
    cpu::AttentionBatch batch{};
    batch.q = in(a.getQ());
    batch.ldq = widthOf(a.getQ());
    batch.k = in(a.getK());
    batch.ldk = widthOf(a.getK());
    batch.v = in(a.getV());
    batch.ldv = widthOf(a.getV());
    batch.out = out.data();
    batch.ldo = widthOf(a.getResult());
    batch.positions = positions.data();
    batch.sequences = sequences.data();
    batch.numSequences = static_cast<int64_t>(sequences.size());
    batch.heads = static_cast<int64_t>(a.getNumHeads());
    batch.scale = static_cast<float>(a.getScale().convertToDouble());
    cpu::pagedAttention(pool, batch, cache->layer(static_cast<int32_t>(a.getLayer())));
  } else if (isa<llm::AddOp>(op)) {
    cpu::add(pool, in(op->getOperand(0)), in(op->getOperand(1)), out.data(), n);
  } else if (isa<llm::MulOp>(op)) {
    cpu::mul(pool, in(op->getOperand(0)), in(op->getOperand(1)), out.data(), n);
  } else if (isa<llm::SiluOp>(op)) {
    cpu::silu(pool, in(op->getOperand(0)), out.data(), n);
  }
  return Status::ok();
}

ForwardInterpreter::ForwardInterpreter(std::unique_ptr<State> state) : state_(std::move(state)) {}
ForwardInterpreter::~ForwardInterpreter() = default;

Expected<std::unique_ptr<ForwardInterpreter>> ForwardInterpreter::create(mlir::func::FuncOp forward,
                                                                         const WeightTable &weights,
                                                                         ThreadPool &pool,
                                                                         int64_t maxTokens) {
  auto state = std::make_unique<State>(forward, weights, pool);
  state->maxTokens = maxTokens;
  LLMC_RETURN_IF_ERROR(state->prepare());
  return std::unique_ptr<ForwardInterpreter>(new ForwardInterpreter(std::move(state)));
}

Expected<std::vector<float>> ForwardInterpreter::run(const std::vector<int32_t> &tokens,
                                                     const Observer &observe) {
  State &s = *state_;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  if (rows <= 0 || rows > s.maxTokens)
    return Status::error("calibration window of " + std::to_string(rows) + " tokens (at most " +
                         std::to_string(s.maxTokens) + ")");
  s.tokens = tokens.data();
  s.overrides = nullptr;
  LLMC_RETURN_IF_ERROR(s.setSequences({rows}));
  s.values.clear();
  for (size_t i = 0; i < s.ops.size(); ++i) {
    mlir::Operation *op = s.ops[i];
    mlir::Value result = op->getResult(0);
    std::vector<float> out(rows * widthOf(result));
    LLMC_RETURN_IF_ERROR(s.runOp(op, out, rows));
    if (observe)
      observe(result, out.data(), rows, widthOf(result));
    s.values[result] = std::move(out);
    for (mlir::Value operand : op->getOperands()) {
      auto it = s.lastUse.find(operand);
      if (it != s.lastUse.end() && it->second == i)
        s.values.erase(operand);
    }
  }
  auto logits = s.values.find(s.result);
  if (logits == s.values.end())
    return Status::error("@forward returns a value no op produced");
  return std::move(logits->second);
}

} // namespace llmc::quant

namespace llmc::quant {

Expected<std::vector<float>> ForwardInterpreter::runSlice(mlir::Value input, const float *x,
                                                          int64_t rows,
                                                          const std::vector<int64_t> &lengths,
                                                          mlir::Value target,
                                                          const WeightOverrides &overrides) {
  State &s = *state_;
  if (rows <= 0 || rows > s.maxTokens)
    return Status::error("internal: a slice of " + std::to_string(rows) + " rows (at most " +
                         std::to_string(s.maxTokens) + ")");
  s.overrides = &overrides;
  LLMC_RETURN_IF_ERROR(s.setSequences(lengths));
  s.values.clear();
  s.values[input].assign(x, x + rows * widthOf(input));
  auto available = [&](mlir::Value v) {
    return s.values.count(v) || v.getDefiningOp<llm::WeightOp>() ||
           v == s.forward.getArgument(1); // positions
  };
  for (mlir::Operation *op : s.ops) {
    if (s.values.count(target))
      break;
    if (llvm::none_of(op->getOperands(), [&](mlir::Value v) { return s.values.count(v) > 0; }))
      continue;
    if (!llvm::all_of(op->getOperands(), available))
      return Status::error("internal: '" + op->getName().getStringRef().str() +
                           "' between a group's input and its block output reads other values");
    mlir::Value result = op->getResult(0);
    std::vector<float> out(rows * widthOf(result));
    LLMC_RETURN_IF_ERROR(s.runOp(op, out, rows));
    s.values[result] = std::move(out);
  }
  s.overrides = nullptr;
  auto it = s.values.find(target);
  if (it == s.values.end())
    return Status::error("internal: the block output does not follow the group's input");
  return std::move(it->second);
}

} // namespace llmc::quant
