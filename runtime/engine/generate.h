// Text generation over an Engine: prefill the prompts, then decode all
// sequences together one token per step (a batch of one is the common case).
#pragma once

#include "engine/engine.h"
#include "sampling/sampler.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmc {

struct GenerateOptions {
  int64_t maxNewTokens = 256; // also capped by the plan's max_seq_len
  sampling::SamplingParams sampling;
  bool ignoreEos = false;          // keep going past EOS tokens
  std::vector<int32_t> stopTokens; // extra stop ids (e.g. BOS for llama2.c parity)
  bool keepAllLogits = false;      // record the logits of every position
  // Asked after each generated token of sequence i (its text already passed
  // to the callback); true ends that sequence with finishReason "cancelled"
  // (an embedder's stop button, a client that went away).
  std::function<bool(size_t sequence)> shouldStop;
};

struct GenerateTimings {
  double prefillSeconds = 0; // first step: the prompts (time to first token)
  double decodeSeconds = 0;  // every later step
  int64_t prefillTokens = 0;
  int64_t decodeTokens = 0; // tokens produced by decode steps, all sequences
};

struct GenerateResult {
  std::vector<int32_t> promptIds;
  std::vector<int32_t> ids;  // generated ids (a stop token is not included)
  std::string text;          // decode of ids
  std::string finishReason;  // "stop" (EOS or a stop token), "length" or "cancelled"
  std::vector<float> logits; // keepAllLogits: [positions][vocab], prompt then generated
};

// Called with each sequence's newly complete text as it is generated.
using TextCallback = std::function<void(size_t sequence, const std::string &piece)>;

Expected<std::vector<GenerateResult>>
generateBatch(Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
              const GenerateOptions &options, GenerateTimings *timings = nullptr,
              const TextCallback &onText = nullptr);

} // namespace llmc
