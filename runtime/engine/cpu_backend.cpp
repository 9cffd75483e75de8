#include "engine/cpu_backend.h"

#include "engine/engine.h"

#include <algorithm>

namespace llmc {

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(const Plan &plan,
                                                         const EngineOptions &options) {
  std::unique_ptr<CpuBackend> backend(new CpuBackend());
  backend->pool_ = std::make_unique<ThreadPool>(options.threads);
  LLMC_ASSIGN_OR_RETURN(backend->weights_, LoadedWeights::load(plan, *backend->pool_));
  const fb::ModelInfo &m = *plan.meta().model();
  const fb::KvCacheInfo &kvInfo = *plan.meta().kv_cache();
  int64_t slots = options.kvCacheTokens > 0
                      ? options.kvCacheTokens
                      : m.max_seq_len() * std::max<int64_t>(1, options.maxSequences);
  kv::KvCacheShape shape;
  shape.numLayers = static_cast<int32_t>(m.num_layers());
  shape.blockSize = static_cast<int32_t>(kvInfo.block_size());
  shape.numBlocks = static_cast<int32_t>((slots + shape.blockSize - 1) / shape.blockSize + 1);
  shape.kvHeads = static_cast<int32_t>(m.num_kv_heads());
  shape.headDim = static_cast<int32_t>(m.head_dim());
  LLMC_ASSIGN_OR_RETURN(kv::KvCache cache, kv::KvCache::create(shape));
  backend->cache_ = std::make_unique<kv::KvCache>(std::move(cache));
  auto ropeTable = CpuExecutor::ropeTableFor(plan); // one table for both programs
  LLMC_ASSIGN_OR_RETURN(CpuExecutor prefill, CpuExecutor::create(plan, backend->weights_,
                                                                 fb::Phase::Prefill, ropeTable));
  LLMC_ASSIGN_OR_RETURN(CpuExecutor decode,
                        CpuExecutor::create(plan, backend->weights_, fb::Phase::Decode, ropeTable));
  backend->prefill_ = std::make_unique<CpuExecutor>(std::move(prefill));
  backend->decode_ = std::make_unique<CpuExecutor>(std::move(decode));
  return backend;
}

std::string CpuBackend::description() const {
  return "the CPU backend (" + std::to_string(pool_->numThreads()) + " threads)";
}

Status CpuBackend::run(const StepInput &input, StepOutput &out) {
  bool anyPrefill = false;
  for (const StepSequence &s : input.sequences)
    anyPrefill |= s.numRows > 1;
  CpuExecutor &executor = anyPrefill ? *prefill_ : *decode_;
  return executor.run(*pool_, input, *cache_, out);
}

} // namespace llmc
