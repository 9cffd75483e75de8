// What a client asks of the serving layer, and what it gets back token by
// token. Shared by serving::Scheduler (single-threaded core) and
// serving::ServingLoop (the thread-safe front the HTTP server uses).
#pragma once

#include "sampling/sampler.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace llmc::serving {

using RequestId = int64_t;

// One completion request, already tokenized. Text-level stop strings are the
// caller's business (it sees the text): it cancels the request when one
// matches (ServingLoop::cancel / Scheduler::abort).
struct RequestParams {
  std::vector<int32_t> prompt;       // token ids, at least one, each in [0, vocab)
  sampling::SamplingParams sampling; // temperature 0 = greedy; `seed` seeds this request alone
  int64_t maxTokens = 16;            // generated tokens at most, >= 1 (also capped by max_seq_len)
  int64_t minTokens = 0;             // EOS and stop ids are not honoured before this many, >= 0
  bool ignoreEos = false;            // do not stop at the plan's EOS ids
  std::vector<int32_t> stopTokenIds; // extra ids that end the request ("stop")
  // OpenAI presence / frequency penalties over the generated tokens, in
  // [-2, 2]: logit -= presence * (count > 0) + frequency * count.
  float presencePenalty = 0.0f;
  float frequencyPenalty = 0.0f;
  // -1: no logprobs. 0: the chosen token's logprob. N in 1..20: also the N
  // most likely tokens. Logprobs are of the model's raw distribution
  // (log-softmax of the logits, before temperature and penalties), as vLLM's.
  int32_t logprobs = -1;
};

constexpr int32_t kMaxTopLogprobs = 20;

enum class FinishReason : uint8_t {
  None,   // not finished
  Stop,   // an EOS or stop token id (not emitted as a token)
  Length, // maxTokens or the plan's max_seq_len
  Abort,  // aborted / cancelled by the caller, or the loop shut down
  Error,  // the engine failed; TokenEvent::error says why
};

// "stop", "length", "abort", "error" (OpenAI's finish_reason for the first two).
const char *finishReasonName(FinishReason reason);

// One step's news for one request. Every request gets token events (zero or
// more) and then exactly one event with finished = true (which may carry the
// last token too).
struct TokenEvent {
  RequestId id = 0;
  // The new generated token, or -1 when the event carries none (a stop token
  // is never emitted: the event says Stop and stopToken names it).
  int32_t token = -1;
  float logprob = 0.0f;                               // when asked (RequestParams::logprobs >= 0)
  std::vector<std::pair<int32_t, float>> topLogprobs; // (id, logprob), most likely first
  bool finished = false;
  FinishReason reason = FinishReason::None;
  int32_t stopToken = -1;         // reason Stop: the id that stopped it
  std::string error;              // reason Error: what failed
  int64_t promptTokens = 0;       // the prompt's length
  int64_t generatedTokens = 0;    // tokens emitted so far, this one included
  int64_t cachedPromptTokens = 0; // prompt tokens served by the prefix cache at first admission
};

} // namespace llmc::serving
