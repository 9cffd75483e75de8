// Errors the HTTP API returns, shaped as OpenAI's and vLLM's:
//   HTTP <status>  {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// `param` names the request field at fault (null when none); `code` repeats
// the HTTP status as vLLM does.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace llmc::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "BadRequestError";
  std::string param; // "" -> null

  nlohmann::json toJson() const;
  std::string body() const; // toJson() as text
};

// 400: a malformed body, a field of the wrong type or out of range.
ApiError badRequest(const std::string &param, const std::string &message);
// 401: a missing or wrong API key.
ApiError unauthorized();
// 404: a model the server does not serve, or an unknown path.
ApiError notFound(const std::string &param, const std::string &message);
// 413: a body over the server's limit.
ApiError payloadTooLarge(size_t limitBytes);
// 503: the waiting queue is full, or the server is shutting down.
ApiError unavailable(const std::string &message);
// 500: something inside the server failed.
ApiError internalError(const std::string &message);

} // namespace llmc::server
