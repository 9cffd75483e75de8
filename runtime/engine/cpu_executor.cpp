#include "engine/cpu_executor.h"

#include "cpu/fused.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/matmul_q4.h"

#include <cmath>
#include <cstring>

namespace llmc {
namespace {

// A step's sliding window and soft-capping (the plan validator checked their ranges).
hd::AttentionScores attentionScores(const StepExtras &extras) {
  hd::AttentionScores scores;
  scores.window = static_cast<hd::i32>(extras.window);
  scores.softcap = static_cast<float>(extras.softcap);
  return scores;
}

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

std::shared_ptr<const std::vector<float>> CpuExecutor::ropeTableFor(const Plan &plan) {
  const fb::ModelInfo &m = *plan.meta().model();
  std::vector<float> invFreq(m.head_dim() / 2);
  cpu::ropeInvFreqs(static_cast<int>(m.head_dim()), static_cast<float>(m.rope_theta()),
                    ropeScaling(m), invFreq.data());
  return std::make_shared<const std::vector<float>>(
      cpu::ropeTable(m.max_seq_len(), static_cast<int>(m.head_dim()), invFreq.data()));
}

Expected<CpuExecutor> CpuExecutor::create(const Plan &plan, const LoadedWeights &weights,
                                          fb::Phase phase,
                                          std::shared_ptr<const std::vector<float>> ropeTable) {
  CpuExecutor exec;
  exec.plan_ = &plan;
  exec.weights_ = &weights;
  exec.program_ = plan.program(fb::Target::Cpu, phase);
  if (exec.program_ == nullptr)
    return Status::error(plan.path() + ": the plan has no CPU program for the " +
                         fb::EnumNamePhase(phase) + " phase (rebuild with --target cpu)");
  exec.ropeTable_ = ropeTable ? std::move(ropeTable) : ropeTableFor(plan);
  return exec;
}

float *CpuExecutor::buffer(int index, int64_t tokens) {
  const fb::Buffer &b = *program_->buffers()->Get(index);
  return reinterpret_cast<float *>(arena_.data() + b.offset_per_token() * tokens);
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
  std::memcpy(buffer(program_->token_buffer(), tokens), input.tokens, tokens * sizeof(int32_t));
  attentionSequences_.clear();
  for (const StepSequence &s : input.sequences)
    attentionSequences_.push_back({s.firstRow, s.numRows, s.blockTable});
  lastLogits_ = nullptr;
  // A Logits step answers every row with logits, in order; LmHead overrides.
  for (size_t r = 0; r < input.outputs.size(); ++r) {
    out.filled[r] = OutputKind::Logits;
    out.logitIndex[r] = static_cast<int64_t>(r);
  }
  for (const fb::Step *step : *program_->steps())
    LLMC_RETURN_IF_ERROR(runStep(pool, *step, input, cache, out));
  out.logits = lastLogits_ != nullptr ? lastLogits_ : buffer(program_->logits_buffer(), tokens);
  return Status::ok();
}

Status CpuExecutor::runStep(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                            kv::KvCache &cache, StepOutput &stepOut) {
  int64_t T = input.numTokens;
  auto in = [&](int i) { return buffer(step.inputs()->Get(i), T); };
  auto width = [&](int i) { return program_->buffers()->Get(step.inputs()->Get(i))->width(); };
  float *out = buffer(step.outputs()->Get(0), T);
  int64_t outWidth = program_->buffers()->Get(step.outputs()->Get(0))->width();
  auto weightIndex = [&](int i) { return static_cast<uint32_t>(step.weights()->Get(i)); };
  const StepExtras extras = stepExtras(step);
  switch (step.op()) {
  case fb::OpKind::Embedding: {
    LLMC_RETURN_IF_ERROR(cpu::embedding(pool, weights_->matrix(weightIndex(0)),
                                        reinterpret_cast<const int32_t *>(in(0)), T, out));
    if (extras.embeddingScale != 1.0)
      cpu::scale(pool, out, T * outWidth, static_cast<float>(extras.embeddingScale));
    return Status::ok();
  }
  case fb::OpKind::RmsNorm:
    cpu::rmsNorm(pool, in(0), T, weights_->vector(weightIndex(0)),
                 static_cast<float>(step.float_params()->Get(0)), out,
                 static_cast<float>(extras.normOffset));
    return Status::ok();
  case fb::OpKind::Linear: {
    const float *bias = nullptr;
    if (step.weights()->size() == 2)
      bias = static_cast<const float *>(weights_->data(weightIndex(1)));
    cpu::matmul(pool, in(0), T, weights_->matrix(weightIndex(0)), bias,
                static_cast<float>(step.int_params()->Get(0)), out);
    return Status::ok();
  }
  case fb::OpKind::LinearQ4:
  case fb::OpKind::RmsNormLinearQ4:
  case fb::OpKind::LinearSwiGluQ4:
  case fb::OpKind::RmsNormLinearSwiGluQ4:
    return runInt4Linear(pool, step, T);
  case fb::OpKind::Rope: {
    int64_t heads = step.int_params()->Get(0), dim = step.int_params()->Get(1);
    cpu::rope(pool, out, T, heads * dim, {heads, dim, dim}, input.positions, ropeTable_->data());
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
    batch.scores = attentionScores(extras);
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
  case fb::OpKind::Gelu:
    cpu::gelu(pool, in(0), out, T * outWidth, step.int_params()->Get(0) == 1);
    return Status::ok();
  case fb::OpKind::SwiGlu:
    cpu::swiglu(pool, in(0), in(1), out, T * outWidth);
    return Status::ok();
  case fb::OpKind::Logits: {
    cpu::WeightMatrix w = weights_->matrix(weightIndex(0));
    const float cap = static_cast<float>(extras.softcap);
    if (outputRows_.empty()) {
      cpu::matmul(pool, in(0), T, w, nullptr, 0.0f, out);
      if (cap > 0.0f)
        cpu::softCap(pool, out, T * w.rows, cap);
      return Status::ok();
    }
    // Only the requested rows: decode needs one row per sequence, not T.
    int64_t rows = static_cast<int64_t>(outputRows_.size());
    const float *x = selectRows(step.inputs()->Get(0), T, outputRows_);
    logits_.resize(rows * w.rows);
    cpu::matmul(pool, x, rows, w, nullptr, 0.0f, logits_.data());
    if (cap > 0.0f)
      cpu::softCap(pool, logits_.data(), rows * w.rows, cap);
    lastLogits_ = logits_.data();
    return Status::ok();
  }
  case fb::OpKind::RmsNormLinear:
  case fb::OpKind::LinearSwiGlu:
  case fb::OpKind::RmsNormLinearSwiGlu:
  case fb::OpKind::RopeAttention:
  case fb::OpKind::RopeColumns:
    return runFusedStep(pool, step, input, cache);
  case fb::OpKind::LmHead:
    return runLmHead(pool, step, input, stepOut);
  }
  return Status::error("unknown op kind");
}

Status CpuExecutor::runInt4Linear(ThreadPool &pool, const fb::Step &step, int64_t T) {
  const Int4Linear form = int4Linear(step.op());
  const StepExtras extras = stepExtras(step);
  auto data = [&](int i) { return weights_->data(static_cast<uint32_t>(step.weights()->Get(i))); };
  const int64_t k = program_->buffers()->Get(step.inputs()->Get(0))->width();
  const int64_t n = program_->buffers()->Get(step.outputs()->Get(0))->width();
  const float *x = buffer(step.inputs()->Get(0), T);
  float *out = buffer(step.outputs()->Get(0), T);
  // Weights: (gamma,) qweight, scales, zeros (, bias); the plan validator checked their shapes.
  const int q = form.norm ? 1 : 0;
  const cpu::Q4Matrix w{static_cast<const uint32_t *>(data(q)),
                        static_cast<const uint16_t *>(data(q + 1)),
                        static_cast<const uint16_t *>(data(q + 2)),
                        form.swiglu ? 2 * n : n,
                        k,
                        step.int_params()->Get(form.swiglu ? 0 : 1)};
  if (form.norm) { // the normalized rows feed the int4 GEMM
    if (static_cast<int64_t>(normScratch_.size()) < T * k)
      normScratch_.resize(T * k);
    cpu::rmsNorm(pool, x, T, weights_->vector(static_cast<uint32_t>(step.weights()->Get(0))),
                 static_cast<float>(step.float_params()->Get(0)), normScratch_.data(),
                 static_cast<float>(extras.normOffset));
    x = normScratch_.data();
  }
  if (form.swiglu) {
    cpu::matmulSwigluQ4(pool, x, T, w, out, swigluScratch_, static_cast<int>(extras.gate));
    return Status::ok();
  }
  const float *bias = static_cast<int>(step.weights()->size()) == q + 4
                          ? static_cast<const float *>(data(q + 3))
                          : nullptr;
  cpu::matmulQ4(pool, x, T, w, bias, static_cast<float>(step.int_params()->Get(0)), out);
  return Status::ok();
}

const float *CpuExecutor::selectRows(int index, int64_t tokens, const std::vector<int64_t> &rows) {
  const float *x = buffer(index, tokens);
  if (rows.empty())
    return x;
  int64_t width = program_->buffers()->Get(index)->width();
  logitInput_.resize(rows.size() * width);
  for (size_t r = 0; r < rows.size(); ++r)
    std::memcpy(&logitInput_[r * width], x + rows[r] * width, width * sizeof(float));
  return logitInput_.data();
}

Status CpuExecutor::runFusedStep(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                                 kv::KvCache &cache) {
  int64_t T = input.numTokens;
  auto in = [&](int i) { return buffer(step.inputs()->Get(i), T); };
  auto width = [&](int i) { return program_->buffers()->Get(step.inputs()->Get(i))->width(); };
  auto ints = [&](int i) { return step.int_params()->Get(i); };
  auto weightIndex = [&](int i) { return static_cast<uint32_t>(step.weights()->Get(i)); };
  float *out = buffer(step.outputs()->Get(0), T);
  const StepExtras extras = stepExtras(step);
  const float normOffset = static_cast<float>(extras.normOffset);
  const int gate = static_cast<int>(extras.gate);
  switch (step.op()) {
  case fb::OpKind::RmsNormLinear: {
    const float *bias = step.weights()->size() == 3
                            ? static_cast<const float *>(weights_->data(weightIndex(2)))
                            : nullptr;
    cpu::rmsNormMatmul(pool, in(0), T, weights_->vector(weightIndex(0)),
                       static_cast<float>(step.float_params()->Get(0)),
                       weights_->matrix(weightIndex(1)), bias, static_cast<float>(ints(0)), out,
                       normScratch_, normOffset);
    return Status::ok();
  }
  case fb::OpKind::LinearSwiGlu:
    cpu::matmulSwiglu(pool, in(0), T, weights_->matrix(weightIndex(0)), out, gate);
    return Status::ok();
  case fb::OpKind::RmsNormLinearSwiGlu:
    cpu::rmsNormMatmulSwiglu(pool, in(0), T, weights_->vector(weightIndex(0)),
                             static_cast<float>(step.float_params()->Get(0)),
                             weights_->matrix(weightIndex(1)), out, normScratch_, normOffset,
                             gate);
    return Status::ok();
  case fb::OpKind::RopeColumns: {
    int64_t heads = ints(0), dim = ints(1);
    cpu::rope(pool, out + ints(2), T, width(0), {heads, dim, dim}, input.positions,
              ropeTable_->data());
    return Status::ok();
  }
  case fb::OpKind::RopeAttention: {
    // q, k and v may be column ranges of one packed qkv buffer.
    cpu::AttentionBatch batch;
    batch.q = in(0) + ints(4);
    batch.ldq = width(0);
    batch.k = in(1) + ints(5);
    batch.ldk = width(1);
    batch.v = in(2) + ints(6);
    batch.ldv = width(2);
    batch.out = out;
    batch.ldo = program_->buffers()->Get(step.outputs()->Get(0))->width();
    batch.positions = input.positions;
    batch.sequences = attentionSequences_.data();
    batch.numSequences = static_cast<int64_t>(attentionSequences_.size());
    batch.heads = ints(1);
    batch.scale = static_cast<float>(step.float_params()->Get(0));
    batch.ropeTable = ints(7) != 0 ? ropeTable_->data() : nullptr;
    batch.scores = attentionScores(extras);
    cpu::pagedAttention(pool, batch, cache.layer(static_cast<int32_t>(ints(0))));
    return Status::ok();
  }
  default:
    return Status::error(std::string("internal: not a fused op kind: ") +
                         fb::EnumNameOpKind(step.op()));
  }
}

// Final norm + lm_head over the output rows only: the Argmax rows through
// the fused projection + argmax (no logits written), the other rows'
// logits compacted at the top of the logits buffer.
Status CpuExecutor::runLmHead(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                              StepOutput &out) {
  int64_t T = input.numTokens;
  argmaxRows_.clear();
  logitRows_.clear();
  for (const OutputRequest &request : input.outputs)
    (request.kind == OutputKind::Argmax ? argmaxRows_ : logitRows_).push_back(request.row);
  int64_t hidden = program_->buffers()->Get(step.inputs()->Get(0))->width();
  auto weightIndex = [&](int i) { return static_cast<uint32_t>(step.weights()->Get(i)); };
  cpu::WeightMatrix w = weights_->matrix(weightIndex(1));
  const StepExtras extras = stepExtras(step);
  // Normalizes `rows` of the step's input into normScratch_.
  auto normalize = [&](const std::vector<int64_t> &rows) {
    const int64_t n = static_cast<int64_t>(rows.size());
    const float *x = selectRows(step.inputs()->Get(0), T, rows);
    if (static_cast<int64_t>(normScratch_.size()) < n * hidden)
      normScratch_.resize(n * hidden);
    cpu::rmsNorm(pool, x, n, weights_->vector(weightIndex(0)),
                 static_cast<float>(step.float_params()->Get(0)), normScratch_.data(),
                 static_cast<float>(extras.normOffset));
  };
  if (!argmaxRows_.empty()) {
    normalize(argmaxRows_);
    argmaxIds_.resize(argmaxRows_.size());
    cpu::matmulArgmax(pool, normScratch_.data(), static_cast<int64_t>(argmaxRows_.size()), w,
                      argmaxIds_.data());
  }
  float *logits = buffer(step.outputs()->Get(0), T);
  if (!logitRows_.empty()) {
    normalize(logitRows_);
    cpu::matmul(pool, normScratch_.data(), static_cast<int64_t>(logitRows_.size()), w, nullptr,
                0.0f, logits);
    // Soft-capping is monotonic: the argmax rows above need none.
    if (extras.softcap > 0.0)
      cpu::softCap(pool, logits, static_cast<int64_t>(logitRows_.size()) * w.rows,
                   static_cast<float>(extras.softcap));
  }
  int64_t nextArgmax = 0, nextLogits = 0;
  for (size_t r = 0; r < input.outputs.size(); ++r) {
    if (input.outputs[r].kind == OutputKind::Argmax) {
      out.filled[r] = OutputKind::Argmax;
      out.ids[r] = argmaxIds_[nextArgmax++];
      out.logitIndex[r] = -1;
    } else {
      out.filled[r] = OutputKind::Logits;
      out.logitIndex[r] = nextLogits++;
    }
  }
  lastLogits_ = logits;
  return Status::ok();
}

} // namespace llmc
