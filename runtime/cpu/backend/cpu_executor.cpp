#include "cpu/backend/cpu_executor.h"

#include "cpu/kernels.h"

#include <algorithm>
#include <cstring>

namespace llmc {

std::shared_ptr<const CpuRopeTables> CpuRopeTables::build(const Plan &plan) {
  auto tables = std::make_shared<CpuRopeTables>();
  const int64_t positions = plan.meta().model()->max_seq_len();
  for (const fb::Program *program : *plan.meta().programs()) {
    if (program->target() != fb::Target::Cpu)
      continue;
    for (const ops::RopeConfig &config : ops::programRopes(*program).configs) {
      if (tables->find(config) != nullptr)
        continue;
      std::vector<float> invFreq(config.rotaryDim / 2);
      cpu::ropeInvFreqs(config.rotaryDim, config.theta, config.kernelScaling(), invFreq.data());
      tables->configs.push_back(config);
      tables->tables.push_back(cpu::ropeTable(positions, config.rotaryDim, invFreq.data(),
                                              config.scaling.attentionFactor));
    }
  }
  return tables;
}

const float *CpuRopeTables::find(const ops::RopeConfig &config) const {
  for (size_t i = 0; i < configs.size(); ++i)
    if (configs[i] == config)
      return tables[i].data();
  return nullptr;
}

Expected<CpuExecutor> CpuExecutor::create(const Plan &plan, const LoadedWeights &weights,
                                          fb::Phase phase,
                                          std::shared_ptr<const CpuRopeTables> ropeTables) {
  CpuExecutor exec;
  exec.plan_ = &plan;
  exec.weights_ = &weights;
  exec.program_ = plan.program(fb::Target::Cpu, phase);
  if (exec.program_ == nullptr)
    return Status::error(plan.path() + ": the plan has no CPU program for the " +
                         fb::EnumNamePhase(phase) + " phase (rebuild with --target cpu)");
  exec.ropeTables_ = ropeTables ? std::move(ropeTables) : CpuRopeTables::build(plan);
  const ops::ProgramRopes ropes = ops::programRopes(*exec.program_);
  for (uint32_t s = 0; s < exec.program_->steps()->size(); ++s) {
    const fb::Step &step = *exec.program_->steps()->Get(s);
    exec.stepFunctions_.push_back(cpu::opFunction(step.op()));
    const int rope = ropes.stepConfig[s];
    exec.stepRopes_.push_back(rope < 0 ? nullptr : exec.ropeTables_->find(ropes.configs[rope]));
    if (rope >= 0 && exec.stepRopes_.back() == nullptr)
      return Status::error("internal: no RoPE table for step " + std::to_string(s));
    int lengthRope = -1;
    if (rope >= 0 && ropes.configs[rope].dependsOnLength()) {
      for (size_t i = 0; i < exec.lengthRopes_.size() && lengthRope < 0; ++i)
        if (exec.lengthRopes_[i] == ropes.configs[rope])
          lengthRope = static_cast<int>(i);
      if (lengthRope < 0) {
        lengthRope = static_cast<int>(exec.lengthRopes_.size());
        exec.lengthRopes_.push_back(ropes.configs[rope]);
      }
    }
    exec.stepLengthRope_.push_back(lengthRope);
  }
  exec.runTables_.resize(exec.lengthRopes_.size());
  return exec;
}

// transformers picks dynamic/longrope frequencies per forward pass from its
// largest position + 1; here each sequence of the run is such a pass, and
// row t of a run table holds the cos/sin of row t's position.
void CpuExecutor::buildRunTables(const StepInput &input) {
  const int64_t tokens = input.numTokens;
  rowIndex_.resize(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    rowIndex_[t] = static_cast<int32_t>(t);
  for (size_t c = 0; c < lengthRopes_.size(); ++c) {
    const ops::RopeConfig &config = lengthRopes_[c];
    const hd::RopeScaling scaling = config.kernelScaling();
    const int half = config.rotaryDim / 2;
    std::vector<float> &table = runTables_[c];
    table.assign(tokens * config.rotaryDim, 0.0f);
    std::vector<float> invFreq(half);
    for (const StepSequence &s : input.sequences) {
      int32_t last = 0;
      for (int64_t r = s.firstRow; r < s.firstRow + s.numRows; ++r)
        last = std::max(last, input.positions[r]);
      for (int i = 0; i < half; ++i)
        invFreq[i] = hd::ropeInvFreqAt(i, config.rotaryDim, config.theta, scaling, last + 1);
      for (int64_t r = s.firstRow; r < s.firstRow + s.numRows; ++r) {
        float *row = table.data() + r * config.rotaryDim;
        for (int i = 0; i < half; ++i)
          hd::ropeCosSin(input.positions[r], invFreq[i], scaling.attentionFactor, row[i],
                         row[half + i]);
      }
    }
  }
}

Status CpuExecutor::run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache,
                        StepOutput &out) {
  return run(pool, input, cache, out, nullptr);
}

Status CpuExecutor::checkHooks(const CpuRunHooks &hooks) const {
  const int64_t steps = program_->steps()->size();
  const int64_t end = hooks.endStep < 0 ? steps : hooks.endStep;
  if (hooks.firstStep < 0 || hooks.firstStep > end || end > steps)
    return Status::error("internal: step range [" + std::to_string(hooks.firstStep) + ", " +
                         std::to_string(end) + ") of a program of " + std::to_string(steps) +
                         " steps");
  for (const CpuRunHooks::Seed &seed : hooks.seeds)
    if (seed.buffer < 0 || seed.buffer >= static_cast<int>(program_->buffers()->size()) ||
        program_->buffers()->Get(seed.buffer)->dtype() != fb::DType::F32 || seed.rows == nullptr)
      return Status::error("internal: seed for buffer " + std::to_string(seed.buffer) +
                           ", which is no F32 buffer of the program");
  for (const CpuRunHooks::WeightOverride &o : hooks.overrides) {
    const int index = plan_->findTensor(o.tensor);
    if (index < 0)
      return Status::error("internal: weight override for '" + o.tensor +
                           "', which the plan does not hold");
    const std::vector<int64_t> &shape = weights_->shape(index);
    if (shape.size() != 2 || shape[0] != o.matrix.rows || shape[1] != o.matrix.cols)
      return Status::error("internal: weight override for '" + o.tensor + "' is [" +
                           std::to_string(o.matrix.rows) + ", " + std::to_string(o.matrix.cols) +
                           "], not the tensor's shape");
    LLMC_RETURN_IF_ERROR(cpu::checkWeight(o.matrix, o.tensor));
  }
  return Status::ok();
}

void CpuExecutor::observeInputs(const CpuRunHooks &hooks, uint32_t step, int64_t tokens) {
  const fb::Step &s = *program_->steps()->Get(step);
  for (uint32_t i = 0; i < s.inputs()->size(); ++i) {
    const int b = s.inputs()->Get(i);
    const fb::Buffer &buffer = *program_->buffers()->Get(b);
    if (buffer.dtype() != fb::DType::F32)
      continue;
    hooks.observe(step, static_cast<int>(i), b, this->buffer(b), tokens, buffer.width());
  }
}

const float *CpuExecutor::buffer(int index) const {
  return reinterpret_cast<const float *>(
      arena_.data() + program_->buffers()->Get(index)->offset_per_token() * lastTokens_);
}

Status CpuExecutor::run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache,
                        StepOutput &out, const CpuRunHooks *hooks) {
  int64_t tokens = input.numTokens;
  if (tokens <= 0)
    return Status::error("a step needs at least one token");
  if (input.outputs.empty())
    return Status::error("a step needs at least one output row");
  // Every row in order needs no gather.
  outputRows_.clear();
  bool identity = static_cast<int64_t>(input.outputs.size()) == tokens;
  for (size_t r = 0; r < input.outputs.size(); ++r) {
    if (input.outputs[r].row < 0 || input.outputs[r].row >= tokens)
      return Status::error("output row " + std::to_string(input.outputs[r].row) +
                           " is outside the step's " + std::to_string(tokens) + " rows");
    identity &= input.outputs[r].row == static_cast<int64_t>(r);
    outputRows_.push_back(input.outputs[r].row);
  }
  if (identity)
    outputRows_.clear();
  if (hooks != nullptr)
    LLMC_RETURN_IF_ERROR(checkHooks(*hooks));
  size_t arenaBytes = program_->arena_bytes_per_token() * tokens;
  if (arena_.size() < arenaBytes)
    arena_.resize(arenaBytes);
  lastTokens_ = tokens;
  auto buffer = [&](int index) {
    return arena_.data() + program_->buffers()->Get(index)->offset_per_token() * tokens;
  };
  std::memcpy(buffer(program_->token_buffer()), input.tokens, tokens * sizeof(int32_t));
  // The hooks' range, seeds and weights; without hooks the whole program.
  const auto &steps = *program_->steps();
  uint32_t firstStep = 0, endStep = steps.size();
  const LoadedWeights *weights = weights_;
  LoadedWeights replacedWeights;
  const bool observe = hooks != nullptr && hooks->observe != nullptr;
  if (hooks != nullptr) {
    firstStep = static_cast<uint32_t>(hooks->firstStep);
    if (hooks->endStep >= 0)
      endStep = static_cast<uint32_t>(hooks->endStep);
    for (const CpuRunHooks::Seed &seed : hooks->seeds)
      std::memcpy(buffer(seed.buffer), seed.rows,
                  tokens * program_->buffers()->Get(seed.buffer)->width() * sizeof(float));
    if (!hooks->overrides.empty()) {
      std::vector<LoadedWeights::Replacement> replacements;
      for (const CpuRunHooks::WeightOverride &o : hooks->overrides)
        replacements.push_back(
            {static_cast<uint32_t>(plan_->findTensor(o.tensor)), o.matrix});
      replacedWeights = weights_->replaced(replacements);
      weights = &replacedWeights;
    }
  }
  attentionSequences_.clear();
  for (const StepSequence &s : input.sequences)
    attentionSequences_.push_back({s.firstRow, s.numRows, s.blockTable});
  const float *lastLogits = nullptr;
  // A Logits step answers every row with logits, in order; LmHead overrides.
  for (size_t r = 0; r < input.outputs.size(); ++r) {
    out.filled[r] = OutputKind::Logits;
    out.logitIndex[r] = static_cast<int64_t>(r);
  }
  if (!lengthRopes_.empty())
    buildRunTables(input);
  for (uint32_t s = firstStep; s < endStep; ++s) {
    if (observe)
      observeInputs(*hooks, s, tokens);
    const bool perRun = stepLengthRope_[s] >= 0;
    const float *ropeTable = perRun ? runTables_[stepLengthRope_[s]].data() : stepRopes_[s];
    const int32_t *ropeRows = perRun ? rowIndex_.data() : input.positions;
    const cpu::OpContext context{pool,          *program_,     *steps.Get(s),
                                 *weights,      input,         cache,
                                 out,           arena_.data(), ropeTable,
                                 ropeRows,      attentionSequences_, outputRows_,
                                 scratch_,      lastLogits};
    LLMC_RETURN_IF_ERROR(stepFunctions_[s](context));
  }
  out.logits = lastLogits != nullptr
                   ? lastLogits
                   : reinterpret_cast<const float *>(buffer(program_->logits_buffer()));
  return Status::ok();
}

} // namespace llmc
