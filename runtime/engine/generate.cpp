#include "engine/generate.h"

#include "kernels/common/sampling.h"

#include <algorithm>
#include <chrono>

namespace llmc {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Running {
  SequenceId id = 0;
  sampling::Sampler sampler;
  StreamDecoder stream;
  std::vector<int32_t> seen; // prompt + generated, for the repetition penalty
  bool done = false;
};

bool isStop(int32_t token, const fb::ModelInfo &model, const GenerateOptions &options) {
  if (std::find(options.stopTokens.begin(), options.stopTokens.end(), token) !=
      options.stopTokens.end())
    return true;
  if (options.ignoreEos || model.eos_token_ids() == nullptr)
    return false;
  for (int64_t eos : *model.eos_token_ids())
    if (eos == token)
      return true;
  return false;
}

} // namespace

Expected<std::vector<GenerateResult>>
generateBatch(Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
              const GenerateOptions &options, GenerateTimings *timings,
              const TextCallback &onText) {
  const int64_t vocab = engine.vocabSize();
  const int64_t maxLen = engine.model().max_seq_len();
  std::vector<GenerateResult> results(prompts.size());
  std::vector<Running> running;
  std::vector<SequenceTokens> batch;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty())
      return Status::error("prompt " + std::to_string(i) + " has no tokens");
    if (static_cast<int64_t>(prompts[i].size()) > maxLen)
      return Status::error("prompt " + std::to_string(i) + " has " +
                           std::to_string(prompts[i].size()) + " tokens, over the plan's " +
                           "max_seq_len " + std::to_string(maxLen));
    LLMC_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(options.sampling));
    running.push_back({engine.addSequence(), std::move(sampler), StreamDecoder(engine.tokenizer()),
                       prompts[i], false});
    results[i].promptIds = prompts[i];
    batch.push_back({running.back().id, prompts[i]});
  }
  auto releaseAll = [&]() {
    for (Running &r : running)
      (void)engine.releaseSequence(r.id);
  };

  // Plain greedy decoding needs only each sequence's argmax, which a fused
  // plan computes without writing logits (Engine::stepGreedy).
  const bool greedy = !options.keepAllLogits && options.sampling.temperature == 0.0f &&
                      options.sampling.repetitionPenalty == 1.0f;
  // Top-k sampling needs only each row's top-k candidates, which a GPU
  // computes next to the logits (Engine::stepTopK); the draws are the same.
  const bool topK = !greedy && !options.keepAllLogits && !running.empty() &&
                    running.front().sampler.drawsFromTopK(static_cast<int32_t>(vocab));
  GenerateTimings local;
  bool first = true;
  while (!batch.empty()) {
    auto start = Clock::now();
    const float *logits = nullptr;
    const int32_t *greedyIds = nullptr;
    Engine::TopKRows candidates;
    Status status = Status::ok();
    if (greedy) {
      auto ids = engine.stepGreedy(batch);
      status = ids.status();
      greedyIds = ids ? *ids : nullptr;
    } else if (topK) {
      auto rows = engine.stepTopK(batch, options.sampling.topK, options.sampling.temperature);
      status = rows.status();
      if (rows)
        candidates = *rows;
      logits = candidates.logits;
    } else {
      auto rows = engine.step(batch, options.keepAllLogits);
      status = rows.status();
      logits = rows ? *rows : nullptr;
    }
    if (!status) {
      releaseAll();
      return status;
    }
    double seconds = secondsSince(start);
    int64_t stepTokens = 0;
    for (const SequenceTokens &entry : batch)
      stepTokens += static_cast<int64_t>(entry.tokens.size());
    // Decode steps feed one token per sequence, so stepTokens counts both phases.
    if (first) {
      local.prefillSeconds += seconds;
      local.prefillTokens += stepTokens;
    } else {
      local.decodeSeconds += seconds;
      local.decodeTokens += stepTokens;
    }

    std::vector<SequenceTokens> next;
    int64_t row = 0;
    for (const SequenceTokens &entry : batch) {
      size_t index = 0;
      while (running[index].id != entry.sequence)
        ++index;
      Running &r = running[index];
      GenerateResult &result = results[index];
      int64_t rows = options.keepAllLogits ? static_cast<int64_t>(entry.tokens.size()) : 1;
      if (options.keepAllLogits)
        result.logits.insert(result.logits.end(), logits + row * vocab,
                             logits + (row + rows) * vocab);
      row += rows;
      int32_t token = 0;
      const int64_t last = row - 1;
      if (greedy)
        token = greedyIds[last];
      else if (topK && candidates.counts[last] <= hd::kTopKCapacity)
        token = r.sampler.sampleTopK(candidates.scores + last * hd::kTopKCapacity,
                                     candidates.ids + last * hd::kTopKCapacity,
                                     candidates.counts[last], static_cast<int32_t>(vocab));
      else // sampling from the logits (also a top-k row whose ties overflowed)
        token = r.sampler.sample(logits + last * vocab, static_cast<int32_t>(vocab), r.seen.data(),
                                 static_cast<int64_t>(r.seen.size()));
      if (isStop(token, engine.model(), options)) {
        result.finishReason = "stop";
        continue;
      }
      result.ids.push_back(token);
      r.seen.push_back(token);
      if (onText) {
        std::string piece = r.stream.step(token);
        if (!piece.empty())
          onText(index, piece);
      }
      if (options.shouldStop && options.shouldStop(index)) {
        result.finishReason = "cancelled";
        continue;
      }
      int64_t length = engine.sequenceLength(r.id);
      if (static_cast<int64_t>(result.ids.size()) >= options.maxNewTokens || length >= maxLen) {
        result.finishReason = "length";
        continue;
      }
      next.push_back({r.id, {token}});
    }
    batch = std::move(next);
    first = false;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (onText) {
      std::string rest = running[i].stream.flush();
      if (!rest.empty())
        onText(i, rest);
    }
    results[i].text = engine.tokenizer().decode(results[i].ids);
  }
  releaseAll();
  if (timings != nullptr)
    *timings = local;
  return results;
}

} // namespace llmc
