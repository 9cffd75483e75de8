#include "engine/cpu_executor.h"

#include "cpu/kernels.h"
#include "cpu/matmul.h"

#include <cmath>
#include <cstring>

namespace llmc {
namespace {

hd::RopeScaling ropeScaling(const fb::ModelInfo &m) {
  hd::RopeScaling s;
  switch (m.rope_scaling()) {
  case fb::RopeScalingKind::None:
    s.kind = hd::RopeScalingKind::None;
    break;
  case fb::RopeScalingKind::Linear:
    s.kind = hd::RopeScalingKind::Linear;
    break;
  case fb::RopeScalingKind::Llama3:
    s.kind = hd::RopeScalingKind::Llama3;
    break;
  }
  s.factor = static_cast<float>(m.rope_factor());
  s.lowFreqFactor = static_cast<float>(m.rope_low_freq_factor());
  s.highFreqFactor = static_cast<float>(m.rope_high_freq_factor());
  s.originalMaxPositions = static_cast<float>(m.rope_original_max_positions());
  return s;
}

} // namespace

Expected<CpuExecutor> CpuExecutor::create(const Plan &plan, const LoadedWeights &weights,
                                          fb::Phase phase) {
  CpuExecutor exec;
  exec.plan_ = &plan;
  exec.weights_ = &weights;
  exec.program_ = plan.program(fb::Target::Cpu, phase);
  if (exec.program_ == nullptr)
    return Status::error(plan.path() + ": the plan has no CPU program for the " +
                         fb::EnumNamePhase(phase) + " phase (rebuild with --target cpu)");
  const fb::ModelInfo &m = *plan.meta().model();
  exec.invFreq_.resize(m.head_dim() / 2);
  cpu::ropeInvFreqs(static_cast<int>(m.head_dim()), static_cast<float>(m.rope_theta()),
                    ropeScaling(m), exec.invFreq_.data());
  return exec;
}

float *CpuExecutor::buffer(int index, int64_t tokens) {
  const fb::Buffer &b = *program_->buffers()->Get(index);
  return reinterpret_cast<float *>(arena_.data() + b.offset_per_token() * tokens);
}

Status CpuExecutor::run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache,
                        const float **logits) {
  int64_t tokens = input.numTokens;
  if (tokens <= 0)
    return Status::error("a step needs at least one token");
  size_t arenaBytes = program_->arena_bytes_per_token() * tokens;
  if (arena_.size() < arenaBytes)
    arena_.resize(arenaBytes);
  std::memcpy(buffer(program_->token_buffer(), tokens), input.tokens, tokens * sizeof(int32_t));
  attentionSequences_.clear();
  for (const StepSequence &s : input.sequences)
    attentionSequences_.push_back({s.firstRow, s.numRows, s.blockTable});
  lastLogits_ = nullptr;
  for (const fb::Step *step : *program_->steps())
    LLMC_RETURN_IF_ERROR(runStep(pool, *step, input, cache));
  *logits = lastLogits_ != nullptr ? lastLogits_ : buffer(program_->logits_buffer(), tokens);
  return Status::ok();
}

Status CpuExecutor::runStep(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                            kv::KvCache &cache) {
  int64_t T = input.numTokens;
  auto in = [&](int i) { return buffer(step.inputs()->Get(i), T); };
  auto width = [&](int i) { return program_->buffers()->Get(step.inputs()->Get(i))->width(); };
  float *out = buffer(step.outputs()->Get(0), T);
  int64_t outWidth = program_->buffers()->Get(step.outputs()->Get(0))->width();
  auto weightIndex = [&](int i) { return static_cast<uint32_t>(step.weights()->Get(i)); };
  switch (step.op()) {
  case fb::OpKind::Embedding:
    return cpu::embedding(pool, weights_->matrix(weightIndex(0)),
                          reinterpret_cast<const int32_t *>(in(0)), T, out);
  case fb::OpKind::RmsNorm:
    cpu::rmsNorm(pool, in(0), T, weights_->vector(weightIndex(0)),
                 static_cast<float>(step.float_params()->Get(0)), out);
    return Status::ok();
  case fb::OpKind::Linear: {
    const float *bias = nullptr;
    if (step.weights()->size() == 2)
      bias = static_cast<const float *>(weights_->data(weightIndex(1)));
    cpu::matmul(pool, in(0), T, weights_->matrix(weightIndex(0)), bias,
                static_cast<float>(step.int_params()->Get(0)), out);
    return Status::ok();
  }
  case fb::OpKind::Rope: {
    int64_t heads = step.int_params()->Get(0), dim = step.int_params()->Get(1);
    cpu::rope(pool, out, T, heads * dim, {heads, dim, dim}, input.positions, invFreq_.data());
    return Status::ok();
  }
  case fb::OpKind::Attention: {
    int32_t layer = static_cast<int32_t>(step.int_params()->Get(0));
    cpu::AttentionBatch batch;
    batch.q = in(0);
    batch.ldq = width(0);
    batch.k = in(1);
    batch.ldk = width(1);
    batch.v = in(2);
    batch.ldv = width(2);
    batch.out = out;
    batch.ldo = outWidth;
    batch.positions = input.positions;
    batch.sequences = attentionSequences_.data();
    batch.numSequences = static_cast<int64_t>(attentionSequences_.size());
    batch.heads = step.int_params()->Get(1);
    batch.scale = static_cast<float>(step.float_params()->Get(0));
    cpu::pagedAttention(pool, batch, cache.layer(layer));
    return Status::ok();
  }
  case fb::OpKind::Add:
    cpu::add(pool, in(0), in(1), out, T * outWidth);
    return Status::ok();
  case fb::OpKind::Mul:
    cpu::mul(pool, in(0), in(1), out, T * outWidth);
    return Status::ok();
  case fb::OpKind::Silu:
    cpu::silu(pool, in(0), out, T * outWidth);
    return Status::ok();
  case fb::OpKind::SwiGlu:
    cpu::swiglu(pool, in(0), in(1), out, T * outWidth);
    return Status::ok();
  case fb::OpKind::Logits: {
    cpu::WeightMatrix w = weights_->matrix(weightIndex(0));
    if (input.logitRows.empty()) {
      cpu::matmul(pool, in(0), T, w, nullptr, 0.0f, out);
      return Status::ok();
    }
    // Only the requested rows: decode needs one row per sequence, not T.
    int64_t hidden = width(0), rows = static_cast<int64_t>(input.logitRows.size());
    logitInput_.resize(rows * hidden);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(&logitInput_[r * hidden], in(0) + input.logitRows[r] * hidden,
                  hidden * sizeof(float));
    logits_.resize(rows * w.rows);
    cpu::matmul(pool, logitInput_.data(), rows, w, nullptr, 0.0f, logits_.data());
    lastLogits_ = logits_.data();
    return Status::ok();
  }
  }
  return Status::error("unknown op kind");
}

} // namespace llmc
