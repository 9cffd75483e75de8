// The sampling flags of `llmrun PLAN -p ...` and `llmrun chat`, with the
// names llama.cpp and vLLM users type, and the plan's generation_config.json
// defaults for the flags not given (vLLM's behaviour: explicit flags win).
#pragma once

#include "cli_common.h"
#include "engine/generate.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace llmc {

struct SamplingFlags {
  int64_t maxNewTokens = 128;
  float temperature = 0.0f; // greedy unless the plan or the flag says otherwise
  int32_t topK = 0;
  float topP = 1.0f;
  float minP = 0.0f;
  float repetitionPenalty = 1.0f;
  float frequencyPenalty = 0.0f;
  float presencePenalty = 0.0f;
  int64_t minTokens = 0;
  int32_t logprobs = -1;
  uint64_t seed = 0;
  std::vector<std::string> stops;
  bool ignoreEos = false;
  int64_t contextSize = 0;

  CLI::Option *maxTokensOption = nullptr, *temperatureOption = nullptr, *topKOption = nullptr,
              *topPOption = nullptr, *minPOption = nullptr, *repetitionOption = nullptr,
              *seedOption = nullptr;

  void add(CLI::App &app, int64_t defaultMaxTokens) {
    maxNewTokens = defaultMaxTokens;
    maxTokensOption = app.add_option("-n,--max-tokens,--n-predict", maxNewTokens,
                                     "Tokens to generate at most (" +
                                         std::to_string(defaultMaxTokens) +
                                         "); -1: until EOS or the context ends; 0: none");
    temperatureOption = app.add_option("--temperature,--temp", temperature,
                                       "0 is greedy (default: the plan's generation_config, "
                                       "else 0)");
    topKOption = app.add_option("--top-k", topK, "Keep the K most likely tokens (0: off)");
    topPOption = app.add_option("--top-p", topP, "Nucleus sampling mass (1: off)");
    minPOption = app.add_option("--min-p", minP, "Drop tokens below min-p x the top probability");
    repetitionOption = app.add_option("--repetition-penalty,--repeat-penalty", repetitionPenalty,
                                      "Divide seen tokens' logits (HF semantics; 1: off)");
    app.add_option("--frequency-penalty", frequencyPenalty,
                   "Subtract x each generated token's count from its logit (OpenAI; [-2, 2])");
    app.add_option("--presence-penalty", presencePenalty,
                   "Subtract from the logit of every token generated so far (OpenAI; [-2, 2])");
    app.add_option("--min-tokens", minTokens, "Generate at least N tokens before EOS or a stop");
    app.add_option("--logprobs", logprobs,
                   "With --json: each token's logprob and the N most likely (0-20)");
    seedOption = app.add_option("-s,--seed", seed,
                                "Sampling seed (default: random, shown with -v and in --json)");
    app.add_option("--stop", stops, "Stop before this text (repeatable; not printed)")
        ->allow_extra_args(false);
    app.add_flag("--ignore-eos", ignoreEos, "Keep generating past end-of-sequence");
    app.add_option("-c,--ctx-size", contextSize,
                   "Context in tokens, prompt included (default and most: the plan's "
                   "max_seq_len)");
  }

  // The options from the flags alone, checked before any work.
  Expected<GenerateOptions> options() const {
    if (maxNewTokens < -1)
      return Status::error("-n/--max-tokens " + std::to_string(maxNewTokens) +
                           ": expected -1 (until EOS or the context ends), 0 or more");
    if (contextSize < 0)
      return Status::error("-c/--ctx-size " + std::to_string(contextSize) +
                           ": expected a number of tokens > 0");
    GenerateOptions o;
    o.maxNewTokens = maxNewTokens;
    o.sampling.temperature = temperature;
    o.sampling.topK = topK;
    o.sampling.topP = topP;
    o.sampling.minP = minP;
    o.sampling.repetitionPenalty = repetitionPenalty;
    o.sampling.frequencyPenalty = frequencyPenalty;
    o.sampling.presencePenalty = presencePenalty;
    o.sampling.minTokens = minTokens;
    o.sampling.logprobs = logprobs;
    o.sampling.seed = seed;
    o.stopStrings = stops;
    o.ignoreEos = ignoreEos;
    o.contextSize = contextSize;
    auto sampler = sampling::Sampler::create(o.sampling);
    if (!sampler)
      return Status::error(flagMessage(sampler.status().message()));
    return o;
  }

  // The plan's defaults for the flags not given, and a random seed when none
  // was; returns what it took, for -v.
  Expected<std::vector<std::string>> applyPlan(const Engine &engine, GenerateOptions &o) {
    std::vector<std::string> used;
    const int64_t planContext = engine.model().max_seq_len();
    if (contextSize > planContext)
      return Status::error("-c/--ctx-size " + std::to_string(contextSize) +
                           ": the plan's context is " + std::to_string(planContext) +
                           " tokens (max_seq_len); rebuild it with llmc build --max-seq-len " +
                           std::to_string(contextSize));
    if (const fb::GenerationDefaults *g = engine.plan().meta().generation()) {
      auto take = [&](CLI::Option *flag, auto value, auto &target, const char *name) {
        if (flag->count() == 0 && value.has_value()) {
          target = *value;
          used.push_back(std::string(name) + " " + std::to_string(*value));
        }
      };
      take(temperatureOption, g->temperature(), o.sampling.temperature, "temperature");
      take(topKOption, g->top_k(), o.sampling.topK, "top_k");
      take(topPOption, g->top_p(), o.sampling.topP, "top_p");
      take(minPOption, g->min_p(), o.sampling.minP, "min_p");
      take(repetitionOption, g->repetition_penalty(), o.sampling.repetitionPenalty,
           "repetition_penalty");
      take(maxTokensOption, g->max_new_tokens(), o.maxNewTokens, "max_new_tokens");
    }
    if (seedOption->count() == 0) {
      std::random_device device;
      o.sampling.seed = (static_cast<uint64_t>(device()) << 32) ^ device();
    }
    auto sampler = sampling::Sampler::create(o.sampling);
    if (!sampler)
      return Status::error("the plan's generation defaults: " + sampler.status().message());
    return used;
  }

  // "sampling: field 'top_p': expected..." -> "--top-p: expected ...".
  static std::string flagMessage(const std::string &message) {
    static const std::pair<const char *, const char *> names[] = {
        {"'temperature'", "--temperature"}, {"'top_k'", "--top-k"},
        {"'top_p'", "--top-p"},             {"'min_p'", "--min-p"},
        {"'repetition_penalty'", "--repetition-penalty"},
        {"'frequency_penalty'", "--frequency-penalty"},
        {"'presence_penalty'", "--presence-penalty"},
        {"'min_tokens'", "--min-tokens"},   {"'logprobs'", "--logprobs"}};
    for (const auto &[field, flag] : names) {
      size_t at = message.find(field);
      if (at != std::string::npos) {
        size_t colon = message.find(':', at);
        return std::string(flag) +
               (colon == std::string::npos ? ": " + message : message.substr(colon));
      }
    }
    return message;
  }
};

} // namespace llmc
