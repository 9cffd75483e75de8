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
  std::vector<int32_t> prompt; // token ids, at least one, each in [0, vocab)
  // The sampler's parameters (temperature 0 = greedy; `seed` seeds this
  // request alone), with OpenAI's and vLLM's semantics as sampling::Sampler
  // implements them: repetition, presence and frequency penalties,
  // min_tokens (EOS and stop ids are not drawn before that many tokens),
  // logprobs (-1 off, 0 the chosen token's, N also the N most likely; raw
  // logprobs). Its stopTokenIds are the scheduler's to fill (EOS unless
  // ignoreEos, plus stopTokenIds below).
  sampling::SamplingParams sampling;
  int64_t maxTokens = 16;            // generated tokens at most, >= 1 (also capped by max_seq_len)
  bool ignoreEos = false;            // do not stop at the plan's EOS ids
  std::vector<int32_t> stopTokenIds; // extra ids that end the request ("stop")
  // -1: none. N in 0..20: the raw logprob of every prompt token after the
  // first, given the ones before it, and the N most likely there (OpenAI's
  // echo with logprobs, vLLM's prompt_logprobs). Such a request computes its
  // whole prompt (no prefix-cache hit), so every position has logits.
  int32_t promptLogprobs = -1;
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
  float logprob = 0.0f; // when asked (sampling.logprobs >= 0)
  std::vector<std::pair<int32_t, float>> topLogprobs; // (id, logprob), most likely first
  // With promptLogprobs >= 0, on the event of the first generated token (or
  // the final one when none came): prompt.size() - 1 entries, entry i for
  // prompt token i + 1.
  std::vector<sampling::SampledLogprobs> promptLogprobs;
  bool finished = false;
  FinishReason reason = FinishReason::None;
  int32_t stopToken = -1;         // reason Stop: the id that stopped it
  std::string error;              // reason Error: what failed
  int64_t promptTokens = 0;       // the prompt's length
  int64_t generatedTokens = 0;    // tokens emitted so far, this one included
  int64_t cachedPromptTokens = 0; // prompt tokens served by the prefix cache at first admission
};

} // namespace llmc::serving
