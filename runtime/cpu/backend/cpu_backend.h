// The CPU backend: the plan's CPU programs on a thread pool, weights used in
// place from the mapped plan (generated once for synthetic plans), the KV
// cache in host memory.
#pragma once

#include "cpu/backend/cpu_executor.h"
#include "cpu/backend/loaded_weights.h"
#include "engine/backend.h"
#include "kv/kv_cache.h"
#include "support/thread_pool.h"

namespace llmc {

class CpuBackend : public Backend {
public:
  static Expected<std::unique_ptr<CpuBackend>> create(const Plan &plan,
                                                      const EngineOptions &options);

  std::string description() const override;
  kv::BlockPool &blockPool() override { return cache_->pool(); }
  int32_t blockSize() const override { return cache_->shape().blockSize; }
  int threads() const override { return pool_->numThreads(); }
  uint64_t kvCacheBytes() const override { return static_cast<uint64_t>(cache_->bytes()); }
  uint64_t generatedWeightBytes() const override { return weights_.generatedBytes(); }
  uint64_t releasedPlanBytes() const override { return weights_.releasedPlanBytes(); }
  uint64_t streamedWeightBytes(uint32_t index, uint64_t planBytes) const override {
    const uint64_t coded = weights_.codedBf16Bytes(index);
    return coded > 0 ? coded : planBytes;
  }
  Status run(const StepInput &input, StepOutput &out) override;

  const kv::KvCache &kvCache() const { return *cache_; }
  kv::KvCache &kvCache() { return *cache_; } // tests poison its free blocks
  const LoadedWeights &weights() const { return weights_; }

private:
  CpuBackend() = default;

  std::unique_ptr<ThreadPool> pool_;
  LoadedWeights weights_;
  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<CpuExecutor> prefill_;
  std::unique_ptr<CpuExecutor> decode_;
  std::string kvNote_; // why the KV cache is smaller than asked, for description()
};

} // namespace llmc
