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
  sequences_.emplace(id, Sequence{kv::BlockTable(backend_->blockSize()), 0});
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

Expected<const float *> Engine::step(const std::vector<SequenceTokens> &batch, bool allLogits) {
  const float *logits = nullptr;
  LLMC_RETURN_IF_ERROR(runBatch(batch, allLogits, nullptr, nullptr, &logits));
  return logits;
}

Expected<Engine::TopKRows> Engine::stepTopK(const std::vector<SequenceTokens> &batch, int32_t k,
                                            float temperature) {
  if (k < 1 || k > hd::kTopKMaxK || k >= vocabSize())
    return Status::error("top-k sampling on the device takes k in [1, " +
                         std::to_string(hd::kTopKMaxK) + "] below the vocabulary size, got " +
                         std::to_string(k));
  const size_t rows = batch.size();
  topKScores_.resize(rows * hd::kTopKCapacity);
  topKIds_.resize(rows * hd::kTopKCapacity);
  topKCounts_.resize(rows);
  TopKRequest request;
  request.k = k;
  request.temperature = temperature;
  request.scores = topKScores_.data();
  request.ids = topKIds_.data();
  request.counts = topKCounts_.data();
  const float *logits = nullptr;
  LLMC_RETURN_IF_ERROR(runBatch(batch, /*allLogits=*/false, nullptr, &request, &logits));
  if (!request.filled) // the backend returned logits: the candidates from them
    for (size_t r = 0; r < rows; ++r)
      topKCounts_[r] = sampling::topKCandidates(
          logits + r * vocabSize(), static_cast<int32_t>(vocabSize()), k, temperature,
          topKScores_.data() + r * hd::kTopKCapacity, topKIds_.data() + r * hd::kTopKCapacity);
  return TopKRows{topKScores_.data(), topKIds_.data(), topKCounts_.data(), logits};
}

Expected<const int32_t *> Engine::stepGreedy(const std::vector<SequenceTokens> &batch) {
  greedyIds_.resize(batch.size());
  const float *logits = nullptr;
  LLMC_RETURN_IF_ERROR(runBatch(batch, /*allLogits=*/false, greedyIds_.data(), nullptr, &logits));
  if (logits != nullptr) // the program has no LmHead step: the argmax of its logits
    cpu::argmax(logits, static_cast<int64_t>(batch.size()), vocabSize(), greedyIds_.data());
  return greedyIds_.data();
}

Status Engine::runBatch(const std::vector<SequenceTokens> &batch, bool allLogits,
                        int32_t *greedyIds, TopKRequest *topK, const float **logits) {
  if (batch.empty())
    return Status::error("empty batch");
  // Reserve KV blocks for every sequence first; all or nothing.
  std::vector<Sequence *> members;
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
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    int64_t needed = members[i]->length + static_cast<int64_t>(batch[i].tokens.size());
    Status reserved = members[i]->blocks.reserve(backend_->blockPool(), needed);
    if (!reserved)
      return reserved.withContext("KV cache full");
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
    if (!allLogits)
      input.logitRows.push_back(s.firstRow + s.numRows - 1);
    input.sequences.push_back(s);
  }
  input.tokens = tokens_.data();
  input.positions = positions_.data();
  input.numTokens = static_cast<int64_t>(tokens_.size());
  input.greedyIds = greedyIds;
  input.topK = topK;
  LLMC_RETURN_IF_ERROR(backend_->run(input, logits));
  for (size_t i = 0; i < batch.size(); ++i)
    members[i]->length += static_cast<int64_t>(batch[i].tokens.size());
  return Status::ok();
}

} // namespace llmc
