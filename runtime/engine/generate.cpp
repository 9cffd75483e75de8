#include "engine/generate.h"

#include "generation/text_stream.h"
#include "kernels/common/sampling.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace llmc {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Running {
  SequenceId id = 0;
  sampling::Sampler sampler;
  generation::TextStream stream;
  std::vector<int32_t> seen; // prompt + generated, for the penalties
  int64_t promptSize = 0;
};

// EOS ids (unless ignored) and the extra stop ids: the ids that end a
// sequence, which min_tokens keeps from being drawn.
std::vector<int32_t> stopIds(const fb::ModelInfo &model, const GenerateOptions &options) {
  std::vector<int32_t> ids = options.stopTokens;
  if (!options.ignoreEos && model.eos_token_ids() != nullptr)
    for (int64_t eos : *model.eos_token_ids())
      ids.push_back(static_cast<int32_t>(eos));
  return ids;
}

// Plain greedy decoding needs only each sequence's argmax, which a fused
// plan computes without writing logits (Engine::stepGreedy).
bool greedyOnly(const GenerateOptions &options) {
  const sampling::SamplingParams &s = options.sampling;
  return !options.keepAllLogits && s.temperature == 0.0f && s.repetitionPenalty == 1.0f &&
         s.frequencyPenalty == 0.0f && s.presencePenalty == 0.0f && s.minTokens == 0 &&
         s.logprobs < 0;
}

std::string promptTooLong(size_t index, size_t tokens, int64_t maxLen) {
  return "prompt " + std::to_string(index) + " has " + std::to_string(tokens) +
         " tokens, over the context of " + std::to_string(maxLen) +
         " tokens: shorten the prompt, or raise the context (-c, up to the plan's max_seq_len; "
         "llmc build --max-seq-len for more)";
}

} // namespace

int64_t contextSizeOf(const Engine &engine, const GenerateOptions &options) {
  const int64_t planMax = engine.model().max_seq_len();
  return options.contextSize > 0 && options.contextSize < planMax ? options.contextSize : planMax;
}

Status checkGenerateOptions(const Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
                            const GenerateOptions &options) {
  if (options.maxNewTokens < -1)
    return Status::error("max_tokens: expected -1 (until a stop or the end of the context), 0 or "
                         "more, got " + std::to_string(options.maxNewTokens));
  LLMC_RETURN_IF_ERROR(sampling::Sampler::create(options.sampling).status());
  const int64_t maxLen = contextSizeOf(engine, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty())
      return Status::error("prompt " + std::to_string(i) + " has no tokens");
    const int64_t size = static_cast<int64_t>(prompts[i].size());
    if (size > maxLen)
      return Status::error(promptTooLong(i, prompts[i].size(), maxLen));
  }
  return Status::ok();
}

Expected<std::vector<GenerateResult>>
generateBatch(Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
              const GenerateOptions &options, GenerateTimings *timings,
              const TextCallback &onText) {
  LLMC_RETURN_IF_ERROR(checkGenerateOptions(engine, prompts, options));
  std::vector<GenerateRequest> requests;
  for (const std::vector<int32_t> &prompt : prompts)
    requests.push_back({engine.addSequence(), prompt, 0});
  auto results = generateOnSequences(engine, requests, options, timings, onText);
  for (const GenerateRequest &request : requests)
    (void)engine.releaseSequence(request.sequence);
  return results;
}

Expected<std::vector<GenerateResult>>
generateOnSequences(Engine &engine, const std::vector<GenerateRequest> &requests,
                    const GenerateOptions &options, GenerateTimings *timings,
                    const TextCallback &onText) {
  const int64_t vocab = engine.vocabSize();
  const int64_t maxLen = contextSizeOf(engine, options);
  std::vector<std::vector<int32_t>> prompts;
  for (const GenerateRequest &request : requests)
    prompts.push_back(request.prompt);
  LLMC_RETURN_IF_ERROR(checkGenerateOptions(engine, prompts, options));
  sampling::SamplingParams params = options.sampling;
  params.stopTokenIds = stopIds(engine.model(), options);

  std::vector<GenerateResult> results(requests.size());
  std::vector<Running> running;
  std::vector<SequenceTokens> batch;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerateRequest &request = requests[i];
    if (request.cached < 0 || request.cached >= static_cast<int64_t>(request.prompt.size()) ||
        engine.sequenceLength(request.sequence) != request.cached)
      return Status::error("sequence " + std::to_string(request.sequence) + " holds " +
                           std::to_string(engine.sequenceLength(request.sequence)) +
                           " tokens, not the " + std::to_string(request.cached) +
                           " cached prompt tokens of a " +
                           std::to_string(request.prompt.size()) + "-token prompt");
    LLMC_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(params));
    running.push_back({request.sequence, std::move(sampler),
                       generation::TextStream(engine.tokenizer(), request.prompt,
                                              options.stopStrings, options.skipSpecialTokens),
                       request.prompt, static_cast<int64_t>(request.prompt.size())});
    results[i].promptIds = request.prompt;
    results[i].finishReason = "length";
    batch.push_back({request.sequence,
                     std::vector<int32_t>(request.prompt.begin() + request.cached,
                                          request.prompt.end())});
  }
  if (options.maxNewTokens == 0 && !options.keepAllLogits)
    batch.clear(); // nothing to generate, nothing to record

  const bool greedy = greedyOnly(options);
  const bool wantLogprobs = options.sampling.logprobs >= 0;
  GenerateTimings local;
  bool first = true;
  while (!batch.empty()) {
    // Top-k sampling needs only each row's top-k candidates, which a GPU
    // computes next to the logits (Engine::stepTopK); the draws are the
    // same. Decided per step: min_tokens masks the stop ids at first.
    bool topK = !greedy && !options.keepAllLogits;
    for (size_t i = 0; topK && i < running.size(); ++i)
      topK = running[i].sampler.drawsFromTopK(
          static_cast<int32_t>(vocab), static_cast<int64_t>(results[i].ids.size()));
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
      auto rows = engine.stepTopK(batch, params.topK, params.temperature);
      status = rows.status();
      if (rows)
        candidates = *rows;
      logits = candidates.logits;
    } else {
      auto rows = engine.step(batch, options.keepAllLogits);
      status = rows.status();
      logits = rows ? *rows : nullptr;
    }
    if (!status)
      return status;
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
      if (options.maxNewTokens == 0)
        continue; // the prompt's logits only
      const int64_t last = row - 1;
      sampling::SampledLogprobs logprobs;
      sampling::SampledLogprobs *logprobsOut = wantLogprobs ? &logprobs : nullptr;
      const sampling::TokenHistory history{r.seen.data(), static_cast<int64_t>(r.seen.size()),
                                           r.promptSize};
      int32_t token = 0;
      if (greedy)
        token = greedyIds[last];
      else if (topK && candidates.counts[last] <= hd::kTopKCapacity)
        token = r.sampler.sampleTopK(candidates.scores + last * hd::kTopKCapacity,
                                     candidates.ids + last * hd::kTopKCapacity,
                                     candidates.counts[last], static_cast<int32_t>(vocab));
      else // sampling from the logits (also a top-k row whose ties overflowed)
        token = r.sampler.sample(logits + last * vocab, static_cast<int32_t>(vocab), history,
                                 logprobsOut);
      if (std::find(params.stopTokenIds.begin(), params.stopTokenIds.end(), token) !=
          params.stopTokenIds.end()) {
        result.finishReason = "stop";
        continue;
      }
      result.ids.push_back(token);
      r.seen.push_back(token);
      if (wantLogprobs)
        result.logprobs.push_back(std::move(logprobs));
      const int64_t generated = static_cast<int64_t>(result.ids.size());
      generation::TextStream::Update update = r.stream.push(token, generated >= params.minTokens);
      if (onText && !update.text.empty())
        onText(index, update.text);
      if (update.stopped) {
        result.finishReason = "stop";
        result.stopString = r.stream.matchedStop();
        continue;
      }
      if (options.shouldStop && options.shouldStop(index)) {
        result.finishReason = "cancelled";
        continue;
      }
      const bool budgetSpent = options.maxNewTokens >= 0 && generated >= options.maxNewTokens;
      // The context ends when the KV cache holds max_seq_len tokens: the
      // token sampled from the last position is kept but never fed.
      if (budgetSpent || engine.sequenceLength(r.id) >= maxLen) {
        result.contextFull = !budgetSpent;
        continue; // "length"
      }
      next.push_back({r.id, {token}});
    }
    batch = std::move(next);
    first = false;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    std::string rest = running[i].stream.finish();
    if (onText && !rest.empty())
      onText(i, rest);
    results[i].text = running[i].stream.text();
  }
  if (timings != nullptr)
    *timings = local;
  return results;
}

} // namespace llmc
