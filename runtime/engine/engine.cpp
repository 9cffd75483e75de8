#include "engine/engine.h"

#include "cpu/kernels.h"
#include "kernels/common/sampling.h"
#include "sampling/sampler.h"

#include <algorithm>

namespace llmc {

Expected<std::unique_ptr<Engine>> Engine::load(const std::string &planPath,
                                               const EngineOptions &options) {
  std::unique_ptr<Engine> engine(new Engine());
  PlanLoadOptions loadOptions;
  loadOptions.verifyWeights = options.verifyWeights;
  LLMC_ASSIGN_OR_RETURN(engine->plan_, Plan::open(planPath, loadOptions));
  const fb::Plan &meta = engine->plan_.meta();
  LLMC_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                        Tokenizer::fromJson(meta.tokenizer()->tokenizer_json()->string_view(),
                                            planPath + " (embedded tokenizer)"));
  engine->tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer));
  LLMC_ASSIGN_OR_RETURN(engine->backend_,
                        createBackend(engine->plan_, options, &engine->backendNotice_));
  return engine;
}

SequenceId Engine::addSequence() {
  SequenceId id = nextId_++;
  sequences_.emplace(id, Sequence{kv::BlockTable(backend_->blockSize()), 0, {}});
  return id;
}

Status Engine::releaseSequence(SequenceId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end())
    return Status::error("unknown sequence " + std::to_string(id));
  Status status = it->second.blocks.releaseAll(backend_->blockPool());
  sequences_.erase(it);
  return status;
}

int64_t Engine::sequenceLength(SequenceId id) const {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? 0 : it->second.length;
}

Expected<int64_t> Engine::attachCachedPrefix(SequenceId id, const std::vector<int32_t> &tokens) {
  auto it = sequences_.find(id);
  if (it == sequences_.end())
    return Status::error("unknown sequence " + std::to_string(id));
  Sequence &seq = it->second;
  if (seq.length != 0)
    return Status::error("sequence " + std::to_string(id) +
                         " already holds tokens: a cached prefix can only start a sequence");
  if (!prefixCaching_ || tokens.size() < 2)
    return int64_t{0};
  const int64_t blockSize = backend_->blockSize();
  // Leave the last token to compute: its logits are what the caller wants.
  const int64_t maxBlocks = (static_cast<int64_t>(tokens.size()) - 1) / blockSize;
  LLMC_ASSIGN_OR_RETURN(int64_t matched,
                        seq.blocks.attachCached(backend_->blockPool(), tokens.data(),
                                                static_cast<int64_t>(tokens.size()), maxBlocks));
  seq.length = matched * blockSize;
  seq.tokens.assign(tokens.begin(), tokens.begin() + seq.length);
  return seq.length;
}

int64_t Engine::blocksToGrow(SequenceId id, int64_t newTokens) const {
  auto it = sequences_.find(id);
  if (it == sequences_.end())
    return 0;
  const int64_t blockSize = backend_->blockSize();
  const int64_t needed = (it->second.length + newTokens + blockSize - 1) / blockSize;
  return std::max<int64_t>(0, needed - static_cast<int64_t>(it->second.blocks.blocks().size()));
}

std::vector<int64_t> Engine::lastRows(const std::vector<SequenceTokens> &batch) {
  std::vector<int64_t> rows;
  int64_t next = 0;
  for (const SequenceTokens &entry : batch) {
    next += static_cast<int64_t>(entry.tokens.size());
    rows.push_back(next - 1);
  }
  return rows;
}

Expected<const StepOutput *> Engine::run(const std::vector<SequenceTokens> &batch,
                                         const std::vector<OutputRequest> &outputs) {
  LLMC_RETURN_IF_ERROR(runBatch(batch, outputs));
  return &output_;
}

Expected<const float *> Engine::step(const std::vector<SequenceTokens> &batch, bool allLogits) {
  std::vector<OutputRequest> outputs;
  if (allLogits) {
    int64_t rows = 0;
    for (const SequenceTokens &entry : batch)
      rows += static_cast<int64_t>(entry.tokens.size());
    for (int64_t r = 0; r < rows; ++r)
      outputs.push_back({r, OutputKind::Logits});
  } else {
    for (int64_t r : lastRows(batch))
      outputs.push_back({r, OutputKind::Logits});
  }
  LLMC_RETURN_IF_ERROR(runBatch(batch, outputs));
  return output_.logits; // Logits rows come back in request order (logitIndex[r] == r)
}

Expected<Engine::TopKRows> Engine::stepTopK(const std::vector<SequenceTokens> &batch, int32_t k,
                                            float temperature) {
  std::vector<OutputRequest> outputs;
  for (int64_t r : lastRows(batch))
    outputs.push_back({r, OutputKind::TopK, k, temperature});
  LLMC_RETURN_IF_ERROR(runBatch(batch, outputs));
  // Every row is TopK, so logits that came back are in request order.
  return TopKRows{output_.scores.data(), output_.candidates.data(), output_.counts.data(),
                  output_.logits};
}

Expected<const int32_t *> Engine::stepGreedy(const std::vector<SequenceTokens> &batch) {
  std::vector<OutputRequest> outputs;
  for (int64_t r : lastRows(batch))
    outputs.push_back({r, OutputKind::Argmax});
  LLMC_RETURN_IF_ERROR(runBatch(batch, outputs));
  return output_.ids.data();
}

Status Engine::validateOutputs(const std::vector<OutputRequest> &outputs, int64_t rows) const {
  if (outputs.empty())
    return Status::error("a step needs at least one output row");
  std::vector<bool> seen(static_cast<size_t>(rows), false);
  for (const OutputRequest &o : outputs) {
    if (o.row < 0 || o.row >= rows)
      return Status::error("output row " + std::to_string(o.row) + " is outside the step's " +
                           std::to_string(rows) + " rows");
    if (seen[o.row])
      return Status::error("output row " + std::to_string(o.row) + " is requested twice");
    seen[o.row] = true;
    if (o.kind == OutputKind::TopK &&
        (o.k < 1 || o.k > hd::kTopKMaxK || o.k >= vocabSize() || !(o.temperature > 0.0f)))
      return Status::error("top-k output of row " + std::to_string(o.row) + " takes k in [1, " +
                           std::to_string(hd::kTopKMaxK) +
                           "] below the vocabulary size and a temperature > 0, got k " +
                           std::to_string(o.k) + ", temperature " + std::to_string(o.temperature));
  }
  return Status::ok();
}

// What the backend answered with logits in place of a row's kind, computed
// from them: the argmax, or the top-k candidates (the logits stay available).
void Engine::completeOutputs(const std::vector<OutputRequest> &outputs) {
  const int64_t vocab = vocabSize();
  for (size_t r = 0; r < outputs.size(); ++r) {
    if (output_.filled[r] != OutputKind::Logits || outputs[r].kind == OutputKind::Logits)
      continue;
    const float *row = output_.logitsOf(r);
    if (outputs[r].kind == OutputKind::Argmax) {
      cpu::argmax(row, 1, vocab, &output_.ids[r]);
    } else {
      output_.counts[r] = sampling::topKCandidates(
          row, static_cast<int32_t>(vocab), outputs[r].k, outputs[r].temperature,
          output_.scores.data() + r * hd::kTopKCapacity,
          output_.candidates.data() + r * hd::kTopKCapacity);
    }
    output_.filled[r] = outputs[r].kind;
  }
}

Status Engine::runBatch(const std::vector<SequenceTokens> &batch,
                        const std::vector<OutputRequest> &outputs) {
  if (batch.empty())
    return Status::error("empty batch");
  std::vector<Sequence *> members;
  int64_t rows = 0;
  for (const SequenceTokens &entry : batch) {
    auto it = sequences_.find(entry.sequence);
    if (it == sequences_.end())
      return Status::error("unknown sequence " + std::to_string(entry.sequence));
    if (entry.tokens.empty())
      return Status::error("sequence " + std::to_string(entry.sequence) + " has no new tokens");
    int64_t newLength = it->second.length + static_cast<int64_t>(entry.tokens.size());
    if (newLength > model().max_seq_len())
      return Status::error("sequence " + std::to_string(entry.sequence) + " would reach " +
                           std::to_string(newLength) + " tokens, over the plan's max_seq_len " +
                           std::to_string(model().max_seq_len()));
    if (std::find(members.begin(), members.end(), &it->second) != members.end())
      return Status::error("sequence " + std::to_string(entry.sequence) + " appears twice");
    members.push_back(&it->second);
    rows += static_cast<int64_t>(entry.tokens.size());
  }
  LLMC_RETURN_IF_ERROR(validateOutputs(outputs, rows));
  // Reserve KV blocks for every sequence, all or nothing: the blocks the
  // step needs are counted first, and a reservation that fails anyway rolls
  // back those made before it.
  kv::BlockPool &pool = backend_->blockPool();
  int64_t needed = 0;
  for (size_t i = 0; i < batch.size(); ++i)
    needed += blocksToGrow(batch[i].sequence, static_cast<int64_t>(batch[i].tokens.size()));
  if (needed > pool.numFree())
    return Status::error("KV cache full: the step needs " + std::to_string(needed) +
                         " more blocks, " + std::to_string(pool.numFree()) + " of " +
                         std::to_string(pool.numBlocks() - 1) + " free");
  std::vector<size_t> blocksBefore;
  auto rollback = [&] {
    for (size_t j = 0; j < blocksBefore.size(); ++j)
      (void)members[j]->blocks.truncate(pool, blocksBefore[j]);
  };
  for (size_t i = 0; i < batch.size(); ++i) {
    blocksBefore.push_back(members[i]->blocks.blocks().size());
    int64_t length = members[i]->length + static_cast<int64_t>(batch[i].tokens.size());
    Status reserved = members[i]->blocks.reserve(pool, length);
    if (!reserved) {
      rollback();
      return reserved.withContext("KV cache full");
    }
  }
  StepInput input;
  tokens_.clear();
  positions_.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    StepSequence s;
    s.firstRow = static_cast<int64_t>(tokens_.size());
    s.numRows = static_cast<int64_t>(batch[i].tokens.size());
    s.blockTable = members[i]->blocks.blocks().data();
    for (int64_t t = 0; t < s.numRows; ++t) {
      tokens_.push_back(batch[i].tokens[t]);
      positions_.push_back(static_cast<int32_t>(members[i]->length + t));
    }
    input.sequences.push_back(s);
  }
  input.tokens = tokens_.data();
  input.positions = positions_.data();
  input.numTokens = static_cast<int64_t>(tokens_.size());
  input.outputs = outputs;
  output_.reset(outputs.size());
  output_.vocab = vocabSize();
  Status ran = backend_->run(input, output_);
  if (!ran) {
    rollback();
    return ran;
  }
  completeOutputs(outputs);
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence &seq = *members[i];
    seq.length += static_cast<int64_t>(batch[i].tokens.size());
    seq.tokens.insert(seq.tokens.end(), batch[i].tokens.begin(), batch[i].tokens.end());
    if (prefixCaching_) // the blocks this step filled now hold computed KV
      LLMC_RETURN_IF_ERROR(
          seq.blocks.registerFull(pool, seq.tokens.data(), static_cast<int64_t>(seq.tokens.size())));
  }
  return Status::ok();
}

} // namespace llmc
