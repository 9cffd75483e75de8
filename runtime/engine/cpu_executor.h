// Runs a plan's CPU program for one batch step: the new tokens of several
// sequences (prefill chunks and decode tokens alike) flattened into T rows.
#pragma once

#include "cpu/attention.h"
#include "engine/step.h"
#include "engine/weights.h"
#include "kv/kv_cache.h"
#include "plan/plan.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace llmc {

class CpuExecutor {
public:
  // `ropeTable` (ropeTableFor(plan)) may be shared by the executors of one
  // plan; null builds the executor's own.
  static Expected<CpuExecutor>
  create(const Plan &plan, const LoadedWeights &weights, fb::Phase phase,
         std::shared_ptr<const std::vector<float>> ropeTable = nullptr);

  // The model's RoPE cos/sin table, [max_seq_len, head_dim] (cpu::ropeTable
  // with its theta and scaling), built once at load.
  static std::shared_ptr<const std::vector<float>> ropeTableFor(const Plan &plan);

  // Runs the program and fills `out` (engine/step.h; out.reset() first):
  // a program ending in the fused LmHead step writes the ids of the Argmax
  // rows without their logits and the logits of the other rows; a program
  // ending in a Logits step returns logits for every output row. Logits are
  // valid until the next run().
  Status run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache, StepOutput &out);

private:
  Status runStep(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                 kv::KvCache &cache, StepOutput &out);
  float *buffer(int index, int64_t tokens);

  Status runFusedStep(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                      kv::KvCache &cache);
  Status runLmHead(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                   StepOutput &out);
  // LinearQ4 and the fused int4 kinds (plan.h int4Linear).
  Status runInt4Linear(ThreadPool &pool, const fb::Step &step, int64_t tokens);
  // The rows `rows` of buffer `index` ([rows.size(), width], gathered into
  // logitInput_), or the whole buffer when `rows` is empty.
  const float *selectRows(int index, int64_t tokens, const std::vector<int64_t> &rows);

  const Plan *plan_ = nullptr;
  const LoadedWeights *weights_ = nullptr;
  const fb::Program *program_ = nullptr;
  // RoPE cos/sin [max_seq_len, head_dim], shared by the executors of a plan.
  std::shared_ptr<const std::vector<float>> ropeTable_;
  std::vector<uint8_t> arena_;       // activations: arena_bytes_per_token * T
  std::vector<float> logitInput_;    // gathered rows for a selective Logits or LmHead step
  std::vector<float> logits_;        // [R, V] when rows are selected
  std::vector<float> normScratch_;   // normalized rows of a GEMM's norm prologue
  std::vector<float> swigluScratch_; // gate and up products of an int4 SwiGLU GEMM
  std::vector<cpu::AttentionSequence> attentionSequences_;
  std::vector<int64_t> outputRows_; // the rows of input.outputs, empty when they are 0 .. T-1
  std::vector<int64_t> argmaxRows_, logitRows_; // LmHead: rows taking ids, rows taking logits
  std::vector<int32_t> argmaxIds_;
  const float *lastLogits_ = nullptr;
};

} // namespace llmc
