// Runs a plan's CPU program for one batch step: the new tokens of several
// sequences (prefill chunks and decode tokens alike) flattened into T rows.
#pragma once

#include "cpu/attention.h"
#include "engine/weights.h"
#include "kv/kv_cache.h"
#include "plan/plan.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace llmc {

// One sequence's part of a step.
struct StepSequence {
  int64_t firstRow = 0;                // first of its rows among the step's T tokens
  int64_t numRows = 0;                 // its new tokens this step
  const int32_t *blockTable = nullptr; // covers all its positions up to the last new one
};

// Top-k sampling candidates, computed next to the logits by a backend that
// can (the CUDA top-k kernel) so that only they travel back: per logit row r,
// counts[r] tokens score >= the k-th largest, and when counts[r] <=
// kTopKCapacity their scores and ids are in scores/ids [R, kTopKCapacity]
// (sampling::topKCandidates). A backend that fills them sets `filled`.
struct TopKRequest {
  int32_t k = 0; // 1 .. kTopKMaxK
  float temperature = 1.0f;
  float *scores = nullptr;
  int32_t *ids = nullptr;
  int32_t *counts = nullptr;
  bool filled = false;
};

struct StepInput {
  const int32_t *tokens = nullptr;    // [T]
  const int32_t *positions = nullptr; // [T] position of each token in its sequence
  int64_t numTokens = 0;              // T
  std::vector<StepSequence> sequences;
  // Rows whose logits are wanted, in order (e.g. the last row of each
  // sequence); empty means every row.
  std::vector<int64_t> logitRows;
  // Greedy decoding: [R] receives the argmax id of each of those rows (the
  // first largest logit) when the program computes ids itself (its last step
  // is LmHead): then no logits are written and run() sets *logits to null.
  // Otherwise run() returns the logits as usual and the caller takes the
  // argmax.
  int32_t *greedyIds = nullptr;
  // Sampling: when set, a backend that computes top-k candidates fills them
  // and returns logits only when a row's ties overflow the capacity (null
  // *logits otherwise); other backends return the logits as usual.
  TopKRequest *topK = nullptr;
};

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

  // Runs the program. On success *logits points to [R, V] f32 logits (R =
  // logitRows.size(), or T when empty), valid until the next run(), or is
  // null when the program wrote input.greedyIds instead.
  Status run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache, const float **logits);

private:
  Status runStep(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                 kv::KvCache &cache);
  float *buffer(int index, int64_t tokens);

  Status runFusedStep(ThreadPool &pool, const fb::Step &step, const StepInput &input,
                      kv::KvCache &cache);
  Status runLmHead(ThreadPool &pool, const fb::Step &step, const StepInput &input);
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
  const float *lastLogits_ = nullptr;
  bool wroteIds_ = false; // an LmHead step wrote input.greedyIds
};

} // namespace llmc
