#include "quantize/calibration_model.h"

#include "cpu/backend/cpu_executor.h"
#include "cpu/backend/loaded_weights.h"
#include "ir/LlmOps.h"
#include "kv/kv_cache.h"
#include "lower_to_plan.h"
#include "plan/plan.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <cstring>

namespace llmc::quant {
namespace {

using llvm::dyn_cast;
using llvm::isa;

constexpr int32_t kBlockSize = 16;
constexpr int64_t kMaxSequences = 64;

int64_t widthOf(mlir::Value value) {
  auto type = llvm::dyn_cast<mlir::RankedTensorType>(value.getType());
  return type && type.getRank() == 2 ? type.getDimSize(1) : 0;
}

// The model info the lowering records, read off the IR (the plan only
// needs it consistent: calibration reads no config).
Expected<ModelConfig> configOf(mlir::func::FuncOp forward) {
  ModelConfig c;
  c.architecture = "calibration";
  for (mlir::Operation &op : forward.getBody().front()) {
    if (auto e = dyn_cast<llm::EmbeddingOp>(op))
      c.hiddenSize = std::max(c.hiddenSize, widthOf(e.getResult()));
    if (auto a = dyn_cast<llm::AttentionOp>(op)) {
      const int64_t kvHeads = a.getNumKvHeads(), headDim = a.getHeadDim();
      if (c.numLayers > 0 && (c.numKvHeads != kvHeads || c.headDim != headDim))
        return Status::error("calibration needs one KV geometry for every attention layer");
      c.numHeads = a.getNumHeads();
      c.numKvHeads = kvHeads;
      c.headDim = headDim;
      c.numLayers = std::max<int64_t>(c.numLayers, a.getLayer() + 1);
    }
    if (auto ret = dyn_cast<mlir::func::ReturnOp>(op))
      if (ret.getNumOperands() > 0)
        c.vocabSize = widthOf(ret.getOperand(0));
  }
  if (c.numLayers == 0) { // no attention: any valid geometry
    c.numLayers = 1;
    c.numHeads = c.numKvHeads = 1;
    c.headDim = 2;
  }
  c.intermediateSize = std::max<int64_t>(1, c.hiddenSize);
  return c;
}

// The tensor bytes of a lowered plan: the source in place where its dtype is
// the tensor's, or any float matrix (the kernels read F32, F16 and BF16, so
// the tensor takes the source's dtype); otherwise (a vector in another
// dtype, such as a bf16 bias the ops read as f32, or a tensor of several
// parts) converted into `owned`.
Expected<const void *> tensorBytes(fb::TensorT &tensor, const WeightSource &source,
                                   std::vector<std::vector<uint8_t>> &owned,
                                   const std::function<void(const void *)> &fill) {
  const DType want = static_cast<DType>(tensor.dtype);
  const bool floatSource =
      source.dtype == DType::F32 || source.dtype == DType::F16 || source.dtype == DType::BF16;
  if (source.parts.empty() && source.data != nullptr &&
      (source.dtype == want || (tensor.shape.size() == 2 && floatSource))) {
    tensor.dtype = static_cast<fb::DType>(source.dtype);
    tensor.size = source.elements * dtypeSize(source.dtype);
    return static_cast<const void *>(source.data);
  }
  tensor.size = source.elements * dtypeSize(want);
  std::vector<uint8_t> bytes(tensor.size);
  uint8_t *out = bytes.data();
  const std::vector<WeightSource> single{source};
  for (const WeightSource &part : source.parts.empty() ? single : source.parts) {
    if (part.data == nullptr)
      return Status::error("internal: calibration weight '" + tensor.name + "' has no data");
    fill(part.data); // the values are read now
    LLMC_RETURN_IF_ERROR(convertElements(part.data, part.dtype, out, want, part.elements));
    out += part.elements * dtypeSize(want);
  }
  owned.push_back(std::move(bytes));
  return static_cast<const void *>(owned.back().data());
}

} // namespace

struct CalibrationModel::State {
  mlir::func::FuncOp forward;
  ThreadPool &pool;
  int64_t maxTokens = 0;
  std::vector<std::vector<uint8_t>> ownedTensors; // converted tensors
  std::unique_ptr<Plan> plan;
  std::unique_ptr<LoadedWeights> weights;
  std::unique_ptr<CpuExecutor> exec;
  std::unique_ptr<kv::KvCache> cache;
  std::vector<int32_t> blockTable; // blocks 1 .. numBlocks - 1 (0 is the null block)
  llvm::DenseMap<mlir::Operation *, int64_t> stepOf;
  llvm::DenseMap<mlir::Value, int> bufferOf; // op results and the tokens
  // Per step, the values first read there (operand index, value): the
  // observer reports each value once, as its first reader sees it.
  std::vector<std::vector<std::pair<int, mlir::Value>>> firstReads;
  mlir::Value result; // the returned logits

  // Per run.
  std::vector<int32_t> tokens, positions;
  StepInput input;
  StepOutput out;

  State(mlir::func::FuncOp f, ThreadPool &p) : forward(f), pool(p) {}

  Status lower(const WeightTable &table);
  Status mapValues();
  Status setSequences(const std::vector<int64_t> &lengths, int64_t rows);
  // A window of 1 .. maxTokens ids inside the vocabulary.
  Status checkWindow(const std::vector<int32_t> &ids) const;
  Status runProgram(const CpuRunHooks *hooks);
};

Status CalibrationModel::State::checkWindow(const std::vector<int32_t> &ids) const {
  const int64_t rows = static_cast<int64_t>(ids.size());
  if (rows <= 0 || rows > maxTokens)
    return Status::error("calibration window of " + std::to_string(rows) + " tokens (at most " +
                         std::to_string(maxTokens) + ")");
  const int64_t vocab = plan->meta().model()->vocab_size();
  for (int32_t t : ids)
    if (t < 0 || t >= vocab)
      return Status::error("calibration token id " + std::to_string(t) +
                           " is outside the vocabulary of " + std::to_string(vocab));
  return Status::ok();
}

Status CalibrationModel::State::lower(const WeightTable &table) {
  auto module = forward->getParentOfType<mlir::ModuleOp>();
  if (!module || module.lookupSymbol<mlir::func::FuncOp>("forward") != forward)
    return Status::error("internal: calibration needs @forward inside its module");
  LLMC_ASSIGN_OR_RETURN(ModelConfig config, configOf(forward));
  LoweringOptions options;
  options.config = &config;
  options.maxSeqLen = maxTokens;
  options.tokenizerJson = "{}";
  options.kvBlockSize = kBlockSize;
  options.llmcVersion = "calibration";
  // The entries as they are: a generated tensor is written only when a
  // segment that reads it runs (WeightTable::acquire), or here when it has to
  // be converted.
  std::map<const void *, std::string> nameOf;
  options.resolveWeight = [&table,
                           &nameOf](const std::string &name) -> Expected<WeightSource> {
    const WeightEntry *e = table.peek(name);
    if (e == nullptr)
      return Status::error("weight '" + name + "' is not in the checkpoint");
    nameOf[e->data] = name;
    return WeightSource{static_cast<const uint8_t *>(e->data), e->dtype, e->elements(), {}};
  };
  auto fill = [&table, &nameOf](const void *data) {
    auto it = nameOf.find(data);
    if (it != nameOf.end())
      table.acquire({it->second});
  };
  auto lowered = lowerToPlan(module, options);
  if (!lowered)
    return lowered.status().withContext("calibration (the -O0 lowering of @forward)");
  PlanContents &contents = *lowered;
  std::vector<const void *> views;
  for (size_t i = 0; i < contents.meta.tensors.size(); ++i) {
    LLMC_ASSIGN_OR_RETURN(const void *bytes,
                          tensorBytes(*contents.meta.tensors[i], contents.sources[i],
                                      ownedTensors, fill));
    views.push_back(bytes);
  }
  // One CPU program is all calibration runs.
  std::vector<std::unique_ptr<fb::ProgramT>> programs;
  for (auto &program : contents.meta.programs)
    if (program->target == fb::Target::Cpu && program->phase == fb::Phase::Prefill)
      programs.push_back(std::move(program));
  contents.meta.programs = std::move(programs);
  flatbuffers::FlatBufferBuilder builder(1 << 16);
  builder.Finish(fb::Plan::Pack(builder, &contents.meta), fb::PlanIdentifier());
  auto opened =
      Plan::fromMetadata(builder.GetBufferPointer(), builder.GetSize(), "calibration plan");
  if (!opened)
    return opened.status();
  plan = std::make_unique<Plan>(std::move(*opened));
  LLMC_ASSIGN_OR_RETURN(LoadedWeights loaded, LoadedWeights::fromViews(*plan, std::move(views)));
  weights = std::make_unique<LoadedWeights>(std::move(loaded));
  LLMC_ASSIGN_OR_RETURN(CpuExecutor created,
                        CpuExecutor::create(*plan, *weights, fb::Phase::Prefill));
  exec = std::make_unique<CpuExecutor>(std::move(created));
  const fb::KvCacheInfo &kv = *plan->meta().kv_cache();
  kv::KvCacheShape shape;
  shape.numLayers = kv.num_layers();
  shape.blockSize = kBlockSize;
  shape.kvHeads = kv.num_kv_heads();
  shape.headDim = kv.head_dim();
  // Room for maxTokens rows split into up to 64 sequences, plus the null block.
  shape.numBlocks = static_cast<int32_t>((maxTokens + kBlockSize - 1) / kBlockSize +
                                         kMaxSequences + 1);
  LLMC_ASSIGN_OR_RETURN(kv::KvCache createdCache, kv::KvCache::create(shape));
  cache = std::make_unique<kv::KvCache>(std::move(createdCache));
  for (int32_t b = 1; b < shape.numBlocks; ++b)
    blockTable.push_back(b);
  return Status::ok();
}

// -O0 lowers each op but the weights and the return to one step, in order,
// whose output 0 holds the op's result.
Status CalibrationModel::State::mapValues() {
  const fb::Program &program = exec->program();
  const auto &steps = *program.steps();
  bufferOf[forward.getArgument(0)] = program.token_buffer();
  int64_t step = 0;
  for (mlir::Operation &op : forward.getBody().front()) {
    if (isa<llm::WeightOp>(op))
      continue;
    if (auto ret = dyn_cast<mlir::func::ReturnOp>(op)) {
      result = ret.getOperand(0);
      continue;
    }
    if (step >= static_cast<int64_t>(steps.size()) || op.getNumResults() != 1)
      return Status::error("internal: the -O0 lowering does not give '" +
                           op.getName().getStringRef().str() + "' a step of its own");
    const int buffer = steps.Get(step)->outputs()->Get(0);
    if (program.buffers()->Get(buffer)->width() != widthOf(op.getResult(0)))
      return Status::error("internal: the -O0 lowering stores '" +
                           op.getName().getStringRef().str() + "' in a buffer of another width");
    stepOf[&op] = step++;
    bufferOf[op.getResult(0)] = buffer;
  }
  if (step != static_cast<int64_t>(steps.size()))
    return Status::error("internal: the -O0 lowering has more steps than @forward has ops");
  firstReads.resize(steps.size());
  for (auto &[value, buffer] : bufferOf) {
    int64_t first = -1;
    for (mlir::Operation *user : value.getUsers()) {
      auto it = stepOf.find(user);
      if (it != stepOf.end() && (first < 0 || it->second < first))
        first = it->second;
    }
    if (first < 0 || program.buffers()->Get(buffer)->dtype() != fb::DType::F32)
      continue;
    const auto &inputs = *steps.Get(first)->inputs();
    for (uint32_t i = 0; i < inputs.size(); ++i)
      if (inputs.Get(i) == buffer) {
        firstReads[first].push_back({static_cast<int>(i), value});
        break;
      }
  }
  return Status::ok();
}

// Positions restart at 0 in each sequence; sequence s takes the next
// ceil(length / blockSize) blocks of the cache.
Status CalibrationModel::State::setSequences(const std::vector<int64_t> &lengths, int64_t rows) {
  positions.clear();
  input.sequences.clear();
  size_t block = 0;
  for (int64_t length : lengths) {
    const size_t blocks = static_cast<size_t>((length + kBlockSize - 1) / kBlockSize);
    if (length <= 0 || block + blocks > blockTable.size())
      return Status::error("internal: calibration sequences need more KV blocks than sized");
    input.sequences.push_back(
        {static_cast<int64_t>(positions.size()), length, blockTable.data() + block});
    block += blocks;
    for (int64_t t = 0; t < length; ++t)
      positions.push_back(static_cast<int32_t>(t));
  }
  if (static_cast<int64_t>(positions.size()) != rows)
    return Status::error("internal: sequence lengths add up to " +
                         std::to_string(positions.size()) + " rows, not " + std::to_string(rows));
  input.positions = positions.data();
  input.numTokens = rows;
  return Status::ok();
}

Status CalibrationModel::State::runProgram(const CpuRunHooks *hooks) {
  if (tokens.size() < static_cast<size_t>(input.numTokens))
    tokens.resize(input.numTokens, 0); // a slice reads no tokens
  input.tokens = tokens.data();
  input.outputs.clear();
  for (int64_t r = 0; r < input.numTokens; ++r)
    input.outputs.push_back({r, OutputKind::Logits});
  out.reset(input.outputs.size());
  out.vocab = plan->meta().model()->vocab_size();
  return exec->run(pool, input, *cache, out, hooks);
}

CalibrationModel::CalibrationModel(std::unique_ptr<State> state) : state_(std::move(state)) {}
CalibrationModel::~CalibrationModel() = default;

int64_t CalibrationModel::numSteps() const { return state_->exec->program().steps()->size(); }

int64_t CalibrationModel::stepOf(mlir::Operation *op) const {
  auto it = state_->stepOf.find(op);
  return it == state_->stepOf.end() ? -1 : it->second;
}

// A value is live across the boundary before step b when its producer runs
// before b (the tokens: before step 0) and a reader at or after b (the
// return: after every step). A boundary with one live F32 value is a cut.
std::vector<CalibrationModel::Cut> CalibrationModel::cuts() const {
  const State &s = *state_;
  const int64_t steps = numSteps();
  std::vector<int64_t> live(steps + 1, 0);
  std::vector<std::pair<int64_t, int64_t>> spans; // per value: (first boundary, last boundary]
  std::vector<mlir::Value> values;
  for (const auto &[value, buffer] : s.bufferOf) {
    mlir::Operation *producer = value.getDefiningOp();
    const int64_t defined = producer == nullptr ? -1 : stepOf(producer);
    int64_t lastRead = defined;
    for (mlir::Operation *user : value.getUsers()) {
      const int64_t step = stepOf(user);
      lastRead = std::max(lastRead, step < 0 ? steps : step);
    }
    // Live across boundaries defined + 1 .. lastRead.
    for (int64_t b = defined + 1; b <= std::min(lastRead, steps); ++b)
      ++live[b];
    spans.push_back({defined, lastRead});
    values.push_back(value);
  }
  std::vector<Cut> result;
  const auto &buffers = *s.exec->program().buffers();
  for (int64_t b = 1; b < steps; ++b) {
    if (live[b] != 1)
      continue;
    for (size_t v = 0; v < values.size(); ++v)
      if (spans[v].first < b && b <= spans[v].second) {
        if (buffers.Get(s.bufferOf.lookup(values[v]))->dtype() == fb::DType::F32)
          result.push_back({b, values[v]});
        break;
      }
  }
  return result;
}

std::vector<std::string> CalibrationModel::weightsOf(const Segment &segment) const {
  std::vector<std::string> names;
  for (mlir::Operation &op : state_->forward.getBody().front()) {
    const int64_t step = stepOf(&op);
    if (step < segment.firstStep || step >= segment.endStep)
      continue;
    for (mlir::Value operand : op.getOperands())
      if (auto weight = operand.getDefiningOp<llm::WeightOp>()) {
        std::string name = weight.getName().str();
        if (std::find(names.begin(), names.end(), name) == names.end())
          names.push_back(std::move(name));
      }
  }
  return names;
}

Expected<std::vector<float>>
CalibrationModel::runSegment(const Segment &segment, const std::vector<int32_t> &tokens,
                             const float *inputRows, const std::vector<mlir::Value> &values,
                             const Observer &observe, const WeightOverrides &overrides) {
  State &s = *state_;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  LLMC_RETURN_IF_ERROR(s.checkWindow(tokens));
  if (segment.firstStep < 0 || segment.endStep <= segment.firstStep ||
      segment.endStep > numSteps() || (segment.firstStep > 0) != static_cast<bool>(segment.input) ||
      (segment.input && inputRows == nullptr))
    return Status::error("internal: calibration segment [" + std::to_string(segment.firstStep) +
                         ", " + std::to_string(segment.endStep) + ") without its input");
  s.tokens = tokens;
  LLMC_RETURN_IF_ERROR(s.setSequences({rows}, rows));
  llvm::DenseSet<mlir::Value> wanted(values.begin(), values.end());
  CpuRunHooks hooks;
  hooks.firstStep = segment.firstStep;
  hooks.endStep = segment.endStep;
  if (segment.input)
    hooks.seeds.push_back({s.bufferOf.lookup(segment.input), inputRows});
  if (!wanted.empty())
    hooks.observe = [&](uint32_t step, int input, int, const float *data, int64_t n,
                        int64_t width) {
      for (const auto &[operand, value] : s.firstReads[step])
        if (operand == input && wanted.count(value))
          observe(value, data, n, width);
    };
  for (const auto &[name, matrix] : overrides)
    hooks.overrides.push_back({name, matrix});
  LLMC_RETURN_IF_ERROR(s.runProgram(&hooks));
  if (!segment.output)
    return std::vector<float>();
  auto buffer = s.bufferOf.find(segment.output);
  if (buffer == s.bufferOf.end())
    return Status::error("internal: a segment output the program does not compute");
  const float *y = s.exec->buffer(buffer->second);
  return std::vector<float>(y, y + rows * widthOf(segment.output));
}

Expected<std::unique_ptr<CalibrationModel>> CalibrationModel::create(mlir::func::FuncOp forward,
                                                                     const WeightTable &weights,
                                                                     ThreadPool &pool,
                                                                     int64_t maxTokens) {
  if (forward.getNumArguments() != 2)
    return Status::error("@forward must take (tokens, positions)");
  if (maxTokens <= 0)
    return Status::error("internal: calibration for " + std::to_string(maxTokens) + " tokens");
  auto state = std::make_unique<State>(forward, pool);
  state->maxTokens = maxTokens;
  LLMC_RETURN_IF_ERROR(state->lower(weights));
  LLMC_RETURN_IF_ERROR(state->mapValues());
  return std::unique_ptr<CalibrationModel>(new CalibrationModel(std::move(state)));
}

Expected<std::vector<float>> CalibrationModel::run(const std::vector<int32_t> &tokens,
                                                   const Observer &observe) {
  State &s = *state_;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  LLMC_RETURN_IF_ERROR(s.checkWindow(tokens));
  s.tokens = tokens;
  LLMC_RETURN_IF_ERROR(s.setSequences({rows}, rows));
  CpuRunHooks hooks;
  if (observe)
    hooks.observe = [&](uint32_t step, int input, int, const float *data, int64_t n,
                        int64_t width) {
      for (const auto &[operand, value] : s.firstReads[step])
        if (operand == input)
          observe(value, data, n, width);
    };
  LLMC_RETURN_IF_ERROR(s.runProgram(observe ? &hooks : nullptr));
  const int64_t vocab = s.out.vocab;
  std::vector<float> logits(s.out.logits, s.out.logits + rows * vocab);
  if (observe)
    observe(s.result, logits.data(), rows, vocab);
  return logits;
}

Status CalibrationModel::observe(const std::vector<int32_t> &tokens,
                                 const std::vector<mlir::Value> &values,
                                 const Observer &observe) {
  State &s = *state_;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  LLMC_RETURN_IF_ERROR(s.checkWindow(tokens));
  // Each value's first reader, the last of which ends the range.
  llvm::DenseSet<mlir::Value> wanted(values.begin(), values.end());
  int64_t end = 0;
  for (size_t step = 0; step < s.firstReads.size(); ++step)
    for (const auto &read : s.firstReads[step])
      if (wanted.count(read.second))
        end = static_cast<int64_t>(step) + 1;
  s.tokens = tokens;
  LLMC_RETURN_IF_ERROR(s.setSequences({rows}, rows));
  CpuRunHooks hooks;
  hooks.endStep = end;
  hooks.observe = [&](uint32_t step, int input, int, const float *data, int64_t n,
                      int64_t width) {
    for (const auto &[operand, value] : s.firstReads[step])
      if (operand == input && wanted.count(value))
        observe(value, data, n, width);
  };
  return s.runProgram(&hooks);
}

Expected<std::vector<float>> CalibrationModel::runSlice(mlir::Value input, const float *x,
                                                        int64_t rows,
                                                        const std::vector<int64_t> &lengths,
                                                        mlir::Value target,
                                                        const WeightOverrides &overrides) {
  State &s = *state_;
  if (rows <= 0 || rows > s.maxTokens)
    return Status::error("internal: a slice of " + std::to_string(rows) + " rows (at most " +
                         std::to_string(s.maxTokens) + ")");
  auto inputBuffer = s.bufferOf.find(input);
  mlir::Operation *producer = target.getDefiningOp();
  if (inputBuffer == s.bufferOf.end() || producer == nullptr || !s.stepOf.count(producer))
    return Status::error("internal: a slice between values the program does not compute");
  // The ops from the first reader of `input` to `target`'s producer: those
  // that read a value computed from `input` must read only such values,
  // weights and the positions (the others run on stale rows, unread).
  int64_t first = -1;
  for (mlir::Operation *user : input.getUsers())
    if (s.stepOf.count(user) && (first < 0 || s.stepOf[user] < first))
      first = s.stepOf[user];
  const int64_t end = s.stepOf[producer] + 1;
  llvm::DenseSet<mlir::Value> computed{input};
  auto available = [&](mlir::Value v) {
    return computed.count(v) || v.getDefiningOp<llm::WeightOp>() ||
           v == s.forward.getArgument(1); // positions
  };
  for (mlir::Operation &op : s.forward.getBody().front()) {
    auto step = s.stepOf.find(&op);
    if (step == s.stepOf.end() || step->second < first || step->second >= end)
      continue;
    if (llvm::none_of(op.getOperands(), [&](mlir::Value v) { return computed.count(v) > 0; }))
      continue;
    if (!llvm::all_of(op.getOperands(), available))
      return Status::error("internal: '" + op.getName().getStringRef().str() +
                           "' between a group's input and its block output reads other values");
    computed.insert(op.getResult(0));
  }
  if (first < 0 || !computed.count(target))
    return Status::error("internal: the block output does not follow the group's input");
  LLMC_RETURN_IF_ERROR(s.setSequences(lengths, rows));
  CpuRunHooks hooks;
  hooks.firstStep = first;
  hooks.endStep = end;
  hooks.seeds.push_back({inputBuffer->second, x});
  for (const auto &[name, matrix] : overrides)
    hooks.overrides.push_back({name, matrix});
  LLMC_RETURN_IF_ERROR(s.runProgram(&hooks));
  const float *y = s.exec->buffer(s.bufferOf[target]);
  return std::vector<float>(y, y + rows * widthOf(target));
}

} // namespace llmc::quant
