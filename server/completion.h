// POST /v1/completions and /v1/chat/completions: from a validated request to
// serving requests (one per choice), and from their token events to
// OpenAI-shaped JSON responses or SSE streams. Internal to llmc_server.
#pragma once

#include "server/http_server.h"

namespace httplib {
struct Request;
struct Response;
} // namespace httplib

namespace llmc::server {

struct GenerationContext {
  Engine &engine;
  serving::ServingLoop &loop;
  const ServerOptions &options;
  ServerMetrics &metrics;
  std::atomic<int64_t> &inFlight;
};

// Answers one generation request: sets `response` to a JSON body, an error,
// or a chunked SSE stream that the HTTP thread then writes.
void handleGeneration(const GenerationContext &context, Endpoint endpoint,
                      const httplib::Request &request, httplib::Response &response);

// The plan's generation defaults (generation_config.json; null: none) for
// the sampling fields the request did not set (temperature, top_p, top_k,
// min_p, repetition_penalty), as vLLM applies them. max_new_tokens lowers
// the default max_tokens instead (Handler::checkLength).
void applyGenerationDefaults(const fb::GenerationDefaults *defaults, const GivenSampling &given,
                             sampling::SamplingParams &params);

// Writes `error` as the response (status and OpenAI's error body).
void setError(httplib::Response &response, const ApiError &error);

} // namespace llmc::server
