// Runs an accepted plan on the CPU backend for a few tokens: one sequence, a
// prefill of `promptTokens` ids and `decodeSteps` single-token steps, one
// thread and a KV cache just big enough. Used by the run fuzzer
// (fuzz_plan_run.cpp) and its regression test (plan_run_test.cpp), so that a
// plan the loader accepts is also one the kernels can run.
#pragma once

#include "cpu/backend/cpu_backend.h"
#include "engine/engine.h"
#include "kv/block_pool.h"
#include "plan/plan.h"

#include <algorithm>
#include <vector>

namespace llmc::test {

// What a fuzzed plan may cost per exec before it is only validated: the
// synthetic weights generated, the RoPE table and one step's activations.
constexpr uint64_t kRunBudgetBytes = uint64_t{64} << 20;

inline bool cheapToRun(const Plan &plan) {
  const fb::ModelInfo &m = *plan.meta().model();
  uint64_t arena = 0;
  for (const fb::Program *p : *plan.meta().programs())
    arena = std::max<uint64_t>(arena, p->arena_bytes_per_token());
  return syntheticWeightBytes(plan.meta()) <= kRunBudgetBytes &&
         static_cast<uint64_t>(m.max_seq_len()) * m.head_dim() * 4 <= kRunBudgetBytes &&
         arena * 8 <= kRunBudgetBytes &&
         static_cast<uint64_t>(m.num_layers()) * m.num_kv_heads() * m.head_dim() * 8 * 1024 <=
             kRunBudgetBytes;
}

inline Status runOnCpu(const Plan &plan, int64_t promptTokens, int64_t decodeSteps) {
  const fb::ModelInfo &m = *plan.meta().model();
  const int64_t total = std::min<int64_t>(promptTokens + decodeSteps, m.max_seq_len());
  EngineOptions options;
  options.threads = 1;
  options.kvCacheTokens = total;
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::create(plan, options));
  kv::BlockTable blocks(backend->blockSize());
  LLMC_RETURN_IF_ERROR(blocks.reserve(backend->blockPool(), total));
  std::vector<int32_t> tokens, positions;
  for (int64_t done = 0; done < total;) {
    const int64_t rows = done == 0 ? std::min(promptTokens, total) : 1;
    tokens.clear();
    positions.clear();
    for (int64_t r = 0; r < rows; ++r) {
      tokens.push_back(static_cast<int32_t>((done + r) * 7 % m.vocab_size()));
      positions.push_back(static_cast<int32_t>(done + r));
    }
    StepInput input;
    input.tokens = tokens.data();
    input.positions = positions.data();
    input.numTokens = rows;
    input.sequences.push_back({0, rows, blocks.blocks().data()});
    // The prompt asks for logits, each decode step for its argmax, so that a
    // fused LmHead program runs both of its paths.
    const OutputKind kind = done == 0 ? OutputKind::Logits : OutputKind::Argmax;
    input.outputs = {OutputRequest{rows - 1, kind}};
    StepOutput output;
    output.reset(1);
    output.vocab = m.vocab_size();
    LLMC_RETURN_IF_ERROR(backend->run(input, output));
    const bool answered = output.filled[0] == OutputKind::Logits ? output.logitsOf(0) != nullptr
                                                                 : output.ids[0] >= 0;
    if (!answered)
      return Status::error(plan.path() + ": the CPU backend returned no result for the row");
    done += rows;
  }
  return blocks.releaseAll(backend->blockPool());
}

} // namespace llmc::test
