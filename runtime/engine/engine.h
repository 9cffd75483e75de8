// A loaded engine plan, ready to run batches: the plan (mapped), its
// tokenizer, and a backend (engine/backend.h: the CPU, or a CUDA GPU) that
// holds the weights, the paged KV cache and the program executors.
//
// Sequences are added, stepped (several per batch, each with any number of
// new tokens) and released. Each sequence owns an append-only block table in
// the backend's block pool. The engine is single-threaded from the caller's
// side; CPU kernels use the backend's thread pool.
#pragma once

#include "engine/backend.h"
#include "engine/engine_options.h"
#include "engine/step.h"
#include "plan/plan.h"
#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace llmc {


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
  int threads() const { return backend_->threads(); }
  bool synthetic() const { return plan_.meta().synthetic(); }
  const Backend &backend() const { return *backend_; }
  Backend &backend() { return *backend_; }
  // Why EngineOptions::device "auto" fell back to the CPU ("" otherwise).
  const std::string &backendNotice() const { return backendNotice_; }

  SequenceId addSequence();
  Status releaseSequence(SequenceId id);
  // Tokens the sequence holds in the KV cache.
  int64_t sequenceLength(SequenceId id) const;

  // Prefix caching (off by default). When on, every block a sequence fills
  // is registered in the block pool under its chained hash (kv/block_pool.h)
  // once the step that wrote it has run, and stays there, evictable, after
  // the sequence is released.
  void setPrefixCaching(bool on) { prefixCaching_ = on; }
  bool prefixCaching() const { return prefixCaching_; }
  // For a sequence that holds no tokens yet: shares the cached blocks of the
  // longest run of full blocks of `tokens` found in the pool, leaving at
  // least the last token to compute (its logits are wanted), and returns how
  // many tokens they cover (a multiple of the block size; 0 when caching is
  // off or nothing matches). The sequence's length becomes that; the caller
  // then steps the rest of `tokens`.
  Expected<int64_t> attachCachedPrefix(SequenceId id, const std::vector<int32_t> &tokens);
  // Blocks a step that adds `newTokens` to the sequence must take from the pool.
  int64_t blocksToGrow(SequenceId id, int64_t newTokens) const;
  // Blocks allocatable now (free, or cached and unreferenced) and in all
  // (the null block aside).
  int64_t availableBlocks() { return backend_->blockPool().numFree(); }
  int64_t usableBlocks() { return backend_->blockPool().numBlocks() - 1; }

  // Runs one batch step with one output per requested row (engine/step.h):
  // `outputs[r].row` indexes the flattened new tokens of `batch` in order
  // (lastRows() gives each sequence's last). Every row gets its own kind
  // (Argmax, TopK at its own k and temperature, Logits), completed here from
  // the logits when the backend returned those instead. The result is valid
  // until the next step. KV blocks are reserved for every sequence or none:
  // a failure leaves every sequence unchanged.
  Expected<const StepOutput *> run(const std::vector<SequenceTokens> &batch,
                                   const std::vector<OutputRequest> &outputs);
  // The row of each sequence's last new token, [batch.size()].
  static std::vector<int64_t> lastRows(const std::vector<SequenceTokens> &batch);

  // Runs one batch step. With allLogits false the result holds the logits of
  // each sequence's last new token ([batch.size(), V]); with true, of every
  // new token in batch order ([sum of tokens, V]). The pointer is valid until
  // the next step. Fails (leaving every sequence unchanged) when the KV pool
  // has no room or a sequence would exceed max_seq_len.
  Expected<const float *> step(const std::vector<SequenceTokens> &batch, bool allLogits);

  // Runs one batch step for greedy decoding: the result holds, per sequence,
  // the id of the largest logit of its last new token (the first on ties),
  // [batch.size()], valid until the next step. A plan whose program ends in
  // the fused LmHead step computes these ids without writing any logits;
  // otherwise they are the argmax of step()'s logits. Fails as step() does.
  Expected<const int32_t *> stepGreedy(const std::vector<SequenceTokens> &batch);

  // Per sequence, the top-k sampling candidates of its last new token
  // (sampling::topKCandidates at k and temperature): row r's count, and when
  // it is at most kTopKCapacity its scores and ids at r * kTopKCapacity;
  // `logits` ([batch.size(), V]) is set when some row needs them (its count
  // is larger). Valid until the next step.
  struct TopKRows {
    const float *scores = nullptr;
    const int32_t *ids = nullptr;
    const int32_t *counts = nullptr;
    const float *logits = nullptr;
  };
  // Runs one batch step for top-k sampling (sampling::Sampler::drawsFromTopK).
  // A backend that computes the candidates next to the logits (CUDA) returns
  // only them; otherwise they come from the logits here. Fails as step() does.
  Expected<TopKRows> stepTopK(const std::vector<SequenceTokens> &batch, int32_t k,
                              float temperature);

private:
  struct Sequence {
    kv::BlockTable blocks;
    int64_t length = 0;
    std::vector<int32_t> tokens; // every token stepped, for the prefix cache's block hashes
  };

  Engine() = default;

  // Reserves KV for every sequence of the batch (all or none), runs the
  // backend, completes the outputs and commits the sequences' new tokens.
  Status runBatch(const std::vector<SequenceTokens> &batch,
                  const std::vector<OutputRequest> &outputs);
  Status validateOutputs(const std::vector<OutputRequest> &outputs, int64_t rows) const;
  void completeOutputs(const std::vector<OutputRequest> &outputs);

  Plan plan_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::string backendNotice_;
  std::map<SequenceId, Sequence> sequences_;
  SequenceId nextId_ = 1;
  std::vector<int32_t> tokens_, positions_;
  StepOutput output_;
  bool prefixCaching_ = false;
};

} // namespace llmc
