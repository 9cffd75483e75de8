#include "cpu/backend/cpu_backend.h"

#include "cpu/isa.h"
#include "engine/engine_options.h"

#include <algorithm>
#include <limits>

namespace llmc {
namespace {

// The KV cache the options ask for: kvCacheTokens slots, or max_seq_len for
// each of maxSequences, in blocks of the plan's block size plus the null
// block. In checked 64-bit arithmetic: the block count must fit the pool's
// int32 ids.
Expected<kv::KvCacheShape> kvCacheShapeFor(const Plan &plan, const EngineOptions &options) {
  const fb::ModelInfo &m = *plan.meta().model();
  const int64_t blockSize = plan.meta().kv_cache()->block_size(); // 1..1024 (loader)
  const int64_t maxBlocks = std::numeric_limits<int32_t>::max() - 1;
  int64_t slots = options.kvCacheTokens;
  if (options.kvCacheTokens < 0 || options.maxSequences < 0)
    return Status::error(plan.path() + ": KV cache tokens and sequences must not be negative");
  if (slots == 0 &&
      __builtin_mul_overflow(m.max_seq_len(), std::max<int64_t>(1, options.maxSequences), &slots))
    slots = std::numeric_limits<int64_t>::max();
  if (slots / blockSize >= maxBlocks)
    return Status::error(plan.path() + ": a KV cache of " + std::to_string(slots) +
                         " token slots (" +
                         (options.kvCacheTokens > 0 ? std::string("as asked")
                                                    : std::to_string(options.maxSequences) +
                                                          " sequences of max_seq_len " +
                                                          std::to_string(m.max_seq_len())) +
                         ") needs more than " + std::to_string(maxBlocks) + " blocks of " +
                         std::to_string(blockSize) + " tokens; ask for fewer sequences or tokens");
  kv::KvCacheShape shape;
  if (options.kvCacheDtype != "auto") {
    LLMC_ASSIGN_OR_RETURN(shape.dtype, kv::parseKvDtype(options.kvCacheDtype, "--kv-cache-dtype"));
  }
  shape.numLayers = static_cast<int32_t>(m.num_layers());
  shape.blockSize = static_cast<int32_t>(blockSize);
  shape.numBlocks = static_cast<int32_t>((slots + blockSize - 1) / blockSize + 1);
  shape.kvHeads = static_cast<int32_t>(m.num_kv_heads());
  shape.headDim = static_cast<int32_t>(m.head_dim());
  return shape;
}

// Bytes of K and V for every layer, or 2^64 - 1 when that does not fit.
uint64_t kvCacheBytes(const kv::KvCacheShape &shape) {
  uint64_t bytes = 2 * static_cast<uint64_t>(kv::kvDtypeBytes(shape.dtype));
  for (int64_t factor : {int64_t{shape.numLayers}, int64_t{shape.numBlocks},
                         int64_t{shape.blockSize}, int64_t{shape.kvHeads}, int64_t{shape.headDim}})
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(factor), &bytes))
      return ~uint64_t{0};
  return bytes;
}

// What the backend allocates before the first step, each figure bounded by
// the loader's limits (max_seq_len <= 2^24, head_dim <= 4096, arena <= 2^32
// bytes per token), so no product wraps.
std::vector<MemoryDemand> hostMemoryDemands(const Plan &plan, const kv::KvCacheShape &kv) {
  const fb::ModelInfo &m = *plan.meta().model();
  uint64_t arenaPerToken = 0;
  for (const fb::Program *p : *plan.meta().programs())
    if (p->target() == fb::Target::Cpu)
      arenaPerToken = std::max<uint64_t>(arenaPerToken, p->arena_bytes_per_token());
  return {{"synthetic weights", syntheticWeightBytes(plan.meta())},
          {"KV cache of " + std::to_string(static_cast<int64_t>(kv.numBlocks - 1) * kv.blockSize) +
               " token slots",
           kvCacheBytes(kv)},
          {"RoPE table", static_cast<uint64_t>(m.max_seq_len()) * m.head_dim() * sizeof(float)},
          {"activations of a one-token step", arenaPerToken}};
}

// The default KV cache (one sequence of max_seq_len: no kvCacheTokens, no
// extra sequences) of a long-context model can exceed host memory (Llama 3's
// 131072 positions take 34 GB at 8B) while the weights fit. As vLLM sizes
// its pool by memory, take then the token slots that fit in 80% of what the
// rest leaves, whole blocks, and say so; a sequence then ends when the pool
// is full. Returns false (the caller refuses) when the user asked for a size
// or not even one block fits.
bool shrinkDefaultKvCache(const Plan &plan, const EngineOptions &options, uint64_t usable,
                          kv::KvCacheShape &shape, std::string *note) {
  if (options.kvCacheTokens != 0 || options.maxSequences > 1)
    return false;
  uint64_t others = 0;
  for (const MemoryDemand &d : hostMemoryDemands(plan, shape))
    if (d.what.rfind("KV cache", 0) != 0 && __builtin_add_overflow(others, d.bytes, &others))
      return false;
  if (others >= usable)
    return false;
  kv::KvCacheShape oneBlock = shape;
  oneBlock.numBlocks = 1;
  const uint64_t bytesPerBlock = kvCacheBytes(oneBlock);
  const uint64_t blocks = (usable - others) / 10 * 8 / bytesPerBlock;
  if (blocks < 2 || blocks >= static_cast<uint64_t>(shape.numBlocks))
    return false; // one block besides the null block, and smaller than asked
  shape.numBlocks = static_cast<int32_t>(blocks);
  const int64_t slots = static_cast<int64_t>(blocks - 1) * shape.blockSize;
  *note = "KV cache capped at " + std::to_string(slots) + " token slots of the plan's " +
          std::to_string(plan.meta().model()->max_seq_len()) + " to fit host memory";
  return true;
}

} // namespace

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(const Plan &plan,
                                                         const EngineOptions &options) {
  std::unique_ptr<CpuBackend> backend(new CpuBackend());
  backend->pool_ = std::make_unique<ThreadPool>(options.threads);
  LLMC_ASSIGN_OR_RETURN(kv::KvCacheShape shape, kvCacheShapeFor(plan, options));
  const uint64_t usable = usableHostMemoryBytes();
  Status fits = checkHostMemory(plan.path(), hostMemoryDemands(plan, shape), usable);
  if (!fits && shrinkDefaultKvCache(plan, options, usable, shape, &backend->kvNote_))
    fits = checkHostMemory(plan.path(), hostMemoryDemands(plan, shape), usable);
  LLMC_RETURN_IF_ERROR(fits);
  LLMC_ASSIGN_OR_RETURN(backend->weights_, LoadedWeights::load(plan, *backend->pool_));
  LLMC_ASSIGN_OR_RETURN(kv::KvCache cache, kv::KvCache::create(shape));
  backend->cache_ = std::make_unique<kv::KvCache>(std::move(cache));
  auto ropeTables = CpuRopeTables::build(plan); // one set of tables for both programs
  LLMC_ASSIGN_OR_RETURN(CpuExecutor prefill, CpuExecutor::create(plan, backend->weights_,
                                                                 fb::Phase::Prefill, ropeTables));
  LLMC_ASSIGN_OR_RETURN(CpuExecutor decode, CpuExecutor::create(plan, backend->weights_,
                                                                fb::Phase::Decode, ropeTables));
  backend->prefill_ = std::make_unique<CpuExecutor>(std::move(prefill));
  backend->decode_ = std::make_unique<CpuExecutor>(std::move(decode));
  return backend;
}

std::string CpuBackend::description() const {
  const bool f16 = cache_->shape().dtype == kv::KvDtype::F16;
  return "the CPU backend (" + std::to_string(pool_->numThreads()) + " threads" +
         (f16 ? std::string("; f16 KV cache") : std::string()) +
         (kvNote_.empty() ? std::string() : "; " + kvNote_) + ") with " + cpu::activeKernelsName() +
         " kernels";
}

Status CpuBackend::run(const StepInput &input, StepOutput &out) {
  bool anyPrefill = false;
  for (const StepSequence &s : input.sequences)
    anyPrefill |= s.numRows > 1;
  CpuExecutor &executor = anyPrefill ? *prefill_ : *decode_;
  return executor.run(*pool_, input, *cache_, out);
}

} // namespace llmc
