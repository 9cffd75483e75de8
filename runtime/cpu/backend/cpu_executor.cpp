#include "cpu/backend/cpu_executor.h"

#include "cpu/kernels.h"

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
      cpu::ropeInvFreqs(config.rotaryDim, config.theta, config.scaling, invFreq.data());
      tables->configs.push_back(config);
      tables->tables.push_back(cpu::ropeTable(positions, config.rotaryDim, invFreq.data()));
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
  }
  return exec;
}

Status CpuExecutor::run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache,
                        StepOutput &out) {
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
  size_t arenaBytes = program_->arena_bytes_per_token() * tokens;
  if (arena_.size() < arenaBytes)
    arena_.resize(arenaBytes);
  auto buffer = [&](int index) {
    return arena_.data() + program_->buffers()->Get(index)->offset_per_token() * tokens;
  };
  std::memcpy(buffer(program_->token_buffer()), input.tokens, tokens * sizeof(int32_t));
  attentionSequences_.clear();
  for (const StepSequence &s : input.sequences)
    attentionSequences_.push_back({s.firstRow, s.numRows, s.blockTable});
  const float *lastLogits = nullptr;
  // A Logits step answers every row with logits, in order; LmHead overrides.
  for (size_t r = 0; r < input.outputs.size(); ++r) {
    out.filled[r] = OutputKind::Logits;
    out.logitIndex[r] = static_cast<int64_t>(r);
  }
  const auto &steps = *program_->steps();
  for (uint32_t s = 0; s < steps.size(); ++s) {
    const cpu::OpContext context{pool,          *program_,     *steps.Get(s),
                                 *weights_,     input,         cache,
                                 out,           arena_.data(), stepRopes_[s],
                                 attentionSequences_, outputRows_, scratch_,
                                 lastLogits};
    LLMC_RETURN_IF_ERROR(stepFunctions_[s](context));
  }
  out.logits = lastLogits != nullptr
                   ? lastLogits
                   : reinterpret_cast<const float *>(buffer(program_->logits_buffer()));
  return Status::ok();
}

} // namespace llmc
