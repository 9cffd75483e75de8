// Text generation over an Engine: prefill the prompts, then decode all
// sequences together one token per step (a batch of one is the common case).
//
// What a sequence's text is (runtime/generation/text_stream.h): what its
// generated ids add to the prompt's text, cut before the first stop string.
// It ends with finish reason "stop" (an EOS id, an extra stop id, or a stop
// string) or "length" (maxNewTokens, or the context: prompt + generated
// filled the plan's max_seq_len positions, see GenerateResult::contextFull;
// the token sampled at the last position is kept, as llama2.c's run.c does).
#pragma once

#include "engine/engine.h"
#include "sampling/sampler.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmc {

struct GenerateOptions {
  // Tokens to generate at most: -1 until a stop or the end of the context,
  // 0 none (nothing runs). Always capped by the context: prompt + generated
  // <= the plan's max_seq_len + 1.
  int64_t maxNewTokens = 256;
  // Temperature, top-k/p, min-p, penalties, seed, min_tokens, logprobs. Its
  // stopTokenIds are filled here (EOS ids and stopTokens) for min_tokens.
  sampling::SamplingParams sampling;
  bool ignoreEos = false;               // keep going past EOS tokens
  std::vector<int32_t> stopTokens;      // extra stop ids (e.g. BOS for llama2.c parity)
  std::vector<std::string> stopStrings; // end the text before the first one (not shown)
  bool skipSpecialTokens = true;        // leave special tokens out of the text (vLLM's default)
  bool keepAllLogits = false;           // record the logits of every position
  // The context in tokens (llama.cpp's -c): 0 or more than the plan's
  // max_seq_len means max_seq_len.
  int64_t contextSize = 0;
};

// The context a generation with `options` has: the plan's max_seq_len, or
// options.contextSize when that is smaller.
int64_t contextSizeOf(const Engine &engine, const GenerateOptions &options);

struct GenerateTimings {
  double prefillSeconds = 0; // first step: the prompts (time to first token)
  double decodeSeconds = 0;  // every later step
  int64_t prefillTokens = 0;
  int64_t decodeTokens = 0; // tokens produced by decode steps, all sequences
};

struct GenerateResult {
  std::vector<int32_t> promptIds;
  std::vector<int32_t> ids; // generated ids (a stop token is not included; the
                            // tokens of a stop string are)
  std::string text;         // the streamed text: decode(prompt + ids) - decode(prompt),
                            // cut before a stop string
  std::string finishReason; // "stop" or "length"
  std::string stopString;   // the stop string that ended the text, if one did
  bool contextFull = false; // "length" because the context is full, not maxNewTokens
  // options.sampling.logprobs >= 0: one entry per id in `ids`.
  std::vector<sampling::SampledLogprobs> logprobs;
  std::vector<float> logits; // keepAllLogits: [positions][vocab], prompt then generated
};

// Called with each sequence's newly visible text as it is generated.
using TextCallback = std::function<void(size_t sequence, const std::string &piece)>;

// Validates the options against the engine (sampling ranges, prompt sizes)
// without running anything: what a CLI checks before any output.
Status checkGenerateOptions(const Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
                            const GenerateOptions &options);

Expected<std::vector<GenerateResult>>
generateBatch(Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
              const GenerateOptions &options, GenerateTimings *timings = nullptr,
              const TextCallback &onText = nullptr);

// A sequence the caller owns (Engine::addSequence), which holds the first
// `cached` tokens of `prompt` in the KV cache already (a chat turn reusing
// the previous turns' KV); cached < prompt.size().
struct GenerateRequest {
  SequenceId sequence = 0;
  std::vector<int32_t> prompt;
  int64_t cached = 0;
};

// generateBatch on sequences the caller keeps: afterwards each holds the
// first Engine::sequenceLength() tokens of prompt + generated ids in the KV
// cache (a generated id is fed only when another one follows it). On
// failure the sequences may hold more than before: release them.
Expected<std::vector<GenerateResult>>
generateOnSequences(Engine &engine, const std::vector<GenerateRequest> &requests,
                    const GenerateOptions &options, GenerateTimings *timings = nullptr,
                    const TextCallback &onText = nullptr);

} // namespace llmc
