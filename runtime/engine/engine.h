// A loaded engine plan, ready to run batches: the plan (mapped), its weights,
// tokenizer, paged KV cache and the CPU executors for prefill and decode.
//
// Sequences are added, stepped (several per batch, each with any number of
// new tokens) and released. Each sequence owns an append-only block table in
// the shared block pool. The engine is single-threaded from the caller's
// side; kernels use its thread pool.
#pragma once

#include "engine/cpu_executor.h"
#include "engine/weights.h"
#include "kv/kv_cache.h"
#include "plan/plan.h"
#include "support/thread_pool.h"
#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace llmc {

struct EngineOptions {
  int threads = 0;            // 0: all cores
  int64_t kvCacheTokens = 0;  // token slots in the KV pool; 0: max_seq_len * maxSequences
  int64_t maxSequences = 1;   // used to size the KV pool when kvCacheTokens == 0
  bool verifyWeights = true;  // recompute the plan's weight checksum at load
};

using SequenceId = int64_t;

// One sequence's new tokens in a batch step.
struct SequenceTokens {
  SequenceId sequence = 0;
  std::vector<int32_t> tokens;
};

class Engine {
public:
  static Expected<std::unique_ptr<Engine>> load(const std::string &planPath,
                                                 const EngineOptions &options);

  const Plan &plan() const { return plan_; }
  const fb::ModelInfo &model() const { return *plan_.meta().model(); }
  const Tokenizer &tokenizer() const { return *tokenizer_; }
  int64_t vocabSize() const { return model().vocab_size(); }
  int threads() const { return pool_->numThreads(); }
  bool synthetic() const { return plan_.meta().synthetic(); }
  const kv::KvCache &kvCache() const { return *cache_; }
  const LoadedWeights &weights() const { return weights_; }

  SequenceId addSequence();
  Status releaseSequence(SequenceId id);
  // Tokens the sequence holds in the KV cache.
  int64_t sequenceLength(SequenceId id) const;

  // Runs one batch step. With allLogits false the result holds the logits of
  // each sequence's last new token ([batch.size(), V]); with true, of every
  // new token in batch order ([sum of tokens, V]). The pointer is valid until
  // the next step. Fails (leaving every sequence unchanged) when the KV pool
  // has no room or a sequence would exceed max_seq_len.
  Expected<const float *> step(const std::vector<SequenceTokens> &batch, bool allLogits);

private:
  struct Sequence {
    kv::BlockTable blocks;
    int64_t length = 0;
  };

  Engine() = default;

  Plan plan_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  LoadedWeights weights_;
  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<CpuExecutor> prefill_;
  std::unique_ptr<CpuExecutor> decode_;
  std::map<SequenceId, Sequence> sequences_;
  SequenceId nextId_ = 1;
  std::vector<int32_t> tokens_, positions_;
};

} // namespace llmc
