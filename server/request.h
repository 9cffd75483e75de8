// The request bodies of POST /v1/completions and /v1/chat/completions:
// parsed from untrusted JSON and validated field by field, with OpenAI's
// field names and ranges plus vLLM's extras (top_k, min_p,
// repetition_penalty, ignore_eos, min_tokens, stop_token_ids,
// skip_special_tokens). Unknown fields are ignored, as OpenAI and vLLM do;
// null is the same as absent. Every error names the field (ApiError::param).
//
// This layer knows nothing of the model: tokenizing the prompts and checking
// them against the context happen later (server/handlers.cpp).
#pragma once

#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::server {

enum class Endpoint { Completions, ChatCompletions };

// One prompt of a completions request: text, or token ids given directly.
struct PromptInput {
  bool isTokens = false;
  std::string text;
  std::vector<int64_t> tokens;
};

// Which sampling fields the request set: the others take the plan's
// generation defaults (generation_config.json), as vLLM does.
struct GivenSampling {
  bool temperature = false, topP = false, topK = false, minP = false, repetitionPenalty = false;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model; // "" when the client left it out

  std::vector<PromptInput> prompts; // completions: one or more (each gets n choices)
  nlohmann::json messages;          // chat: the array of {role, content} objects

  // Absent: completions 16, chat the rest of the context, at most the plan's
  // max_new_tokens (generation_config.json) when it has one.
  std::optional<int64_t> maxTokens;
  int64_t minTokens = 0;
  int64_t n = 1;
  bool stream = false;
  bool includeUsage = false; // stream_options.include_usage
  bool echo = false;         // completions only

  float temperature = 1.0f;
  float topP = 1.0f;
  int64_t topK = 0; // 0 and -1: off
  float minP = 0.0f;
  float repetitionPenalty = 1.0f;
  float presencePenalty = 0.0f;
  float frequencyPenalty = 0.0f;
  std::optional<uint64_t> seed;
  GivenSampling given;

  std::vector<std::string> stop;
  std::vector<int64_t> stopTokenIds;
  bool ignoreEos = false;
  bool skipSpecialTokens = true;

  // completions: `logprobs` is an integer (alternatives per token), absent -> off;
  // chat: `logprobs` is a boolean and `top_logprobs` the alternatives.
  bool logprobs = false;
  int64_t topLogprobs = 0;

  // chat only: extra variables for the template and whether to open the
  // assistant's turn (add_generation_prompt, default true).
  nlohmann::json chatTemplateKwargs = nlohmann::json::object();
  bool addGenerationPrompt = true;
};

// Limits of the parser, documented in docs/serving.md.
struct RequestLimits {
  int64_t maxN = 128;          // choices per prompt
  int64_t maxPrompts = 256;    // prompts in one completions request
  int64_t maxStop = 16;        // stop strings
  int64_t maxStopLength = 256; // bytes of one stop string
  int64_t maxLogprobs = 20;    // alternatives per token
  int64_t maxMessages = 1024;  // chat messages
};

// Parses and validates a request body. Never throws; on error returns the
// ApiError (status 400) that names the field.
std::optional<ApiError> parseGenerationRequest(std::string_view body, Endpoint endpoint,
                                               const RequestLimits &limits,
                                               GenerationRequest &out);

} // namespace llmc::server
