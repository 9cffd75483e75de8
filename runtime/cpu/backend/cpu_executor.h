// Runs a plan's CPU program for one batch step: the new tokens of several
// sequences (prefill chunks and decode tokens alike) flattened into T rows.
// Each step runs the function of its op kind (cpu/ops/, looked up once at
// load).
#pragma once

#include "cpu/attention.h"
#include "cpu/backend/loaded_weights.h"
#include "cpu/ops/op_context.h"
#include "engine/step.h"
#include "kv/kv_cache.h"
#include "ops/rope.h"
#include "plan/plan.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace llmc {

// The RoPE cos/sin tables of a plan's CPU programs: one [max_seq_len,
// rotary_dim] table (cpu::ropeTable) per distinct RopeParams of their steps
// (ops/rope.h), built once at load and shared by the executors of the plan.
struct CpuRopeTables {
  std::vector<ops::RopeConfig> configs;
  std::vector<std::vector<float>> tables; // [configs]

  static std::shared_ptr<const CpuRopeTables> build(const Plan &plan);
  // The table of `config`, or null when the plan has none for it.
  const float *find(const ops::RopeConfig &config) const;
};

class CpuExecutor {
public:
  // `ropeTables` (CpuRopeTables::build(plan)) may be shared by the executors
  // of one plan; null builds the executor's own.
  static Expected<CpuExecutor> create(const Plan &plan, const LoadedWeights &weights,
                                      fb::Phase phase,
                                      std::shared_ptr<const CpuRopeTables> ropeTables = nullptr);

  // Runs the program and fills `out` (engine/step.h; out.reset() first):
  // a program ending in the fused LmHead step writes the ids of the Argmax
  // rows without their logits and the logits of the other rows; a program
  // ending in a Logits step returns logits for every output row. Logits are
  // valid until the next run().
  Status run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache, StepOutput &out);

private:
  const Plan *plan_ = nullptr;
  const LoadedWeights *weights_ = nullptr;
  const fb::Program *program_ = nullptr;
  std::shared_ptr<const CpuRopeTables> ropeTables_;
  std::vector<cpu::OpFunction> stepFunctions_; // [steps]: the registry's function per step
  std::vector<const float *> stepRopes_;       // [steps]: the step's RoPE table, or null
  std::vector<uint8_t> arena_;                 // activations: arena_bytes_per_token * T
  cpu::OpScratch scratch_;
  std::vector<cpu::AttentionSequence> attentionSequences_;
  std::vector<int64_t> outputRows_; // the rows of input.outputs, empty when they are 0 .. T-1
};

} // namespace llmc
