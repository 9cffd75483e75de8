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
#include <functional>
#include <memory>
#include <string>
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

// What one run may do besides the whole program (docs/runtime.md, "Executor
// hooks"): observe what steps read, run only a range of steps from rows put
// into an intermediate buffer, and compute with other float weights. The
// compiler's calibration (compiler/quantize/calibration_model.h) is built on
// them; a run without hooks takes none of these paths.
struct CpuRunHooks {
  // Called before step `step` runs, once per F32 input buffer of the step
  // (`input` its operand index, `buffer` its program buffer), with the rows
  // [numRows = T, width] the step reads; valid during the call only.
  using Observer = std::function<void(uint32_t step, int input, int buffer, const float *rows,
                                      int64_t numRows, int64_t width)>;
  Observer observe;
  // The steps [firstStep, endStep) run (endStep < 0: to the last step).
  int64_t firstStep = 0;
  int64_t endStep = -1;
  // Rows [T, width] copied into a program buffer before the first step runs:
  // the values a range starting in the middle of the program reads.
  struct Seed {
    int buffer = 0;
    const float *rows = nullptr;
  };
  std::vector<Seed> seeds;
  // Float [N, K] matrices used in place of the plan tensor of that name (the
  // shape must match the tensor's; F32, F16 or BF16).
  struct WeightOverride {
    std::string tensor;
    cpu::WeightMatrix matrix;
  };
  std::vector<WeightOverride> overrides;
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
  // The same with `hooks` (null: the plain run). With a step range the
  // logits are those the range leaves in the logits buffer.
  Status run(ThreadPool &pool, const StepInput &input, kv::KvCache &cache, StepOutput &out,
             const CpuRunHooks *hooks);

  // Program buffer `index` of the last run: [T, width] rows as the last step
  // run left them (valid until the next run; a buffer the memory plan let a
  // later step reuse holds that step's values).
  const float *buffer(int index) const;
  const fb::Program &program() const { return *program_; }

private:
  Status checkHooks(const CpuRunHooks &hooks) const;
  void observeInputs(const CpuRunHooks &hooks, uint32_t step, int64_t tokens);
  const Plan *plan_ = nullptr;
  const LoadedWeights *weights_ = nullptr;
  const fb::Program *program_ = nullptr;
  std::shared_ptr<const CpuRopeTables> ropeTables_;
  std::vector<cpu::OpFunction> stepFunctions_; // [steps]: the registry's function per step
  std::vector<const float *> stepRopes_;       // [steps]: the step's RoPE table, or null
  // Dynamic / longrope configurations: their frequencies follow each run's
  // sequence lengths, so their steps read a table built per run.
  std::vector<int> stepLengthRope_;          // [steps]: index into lengthRopes_, or -1
  std::vector<ops::RopeConfig> lengthRopes_;
  std::vector<std::vector<float>> runTables_; // [lengthRopes_] cos/sin [T, rotary_dim]
  std::vector<int32_t> rowIndex_;             // 0 .. T-1: the rows of a per-run table
  void buildRunTables(const StepInput &input);
  std::vector<uint8_t> arena_;                 // activations: arena_bytes_per_token * T
  cpu::OpScratch scratch_;
  std::vector<cpu::AttentionSequence> attentionSequences_;
  std::vector<int64_t> outputRows_; // the rows of input.outputs, empty when they are 0 .. T-1
  int64_t lastTokens_ = 0;          // T of the last run
};

} // namespace llmc
