#include "server/api_error.h"

namespace llmc::server {

nlohmann::json ApiError::toJson() const {
  nlohmann::json error = {{"message", message}, {"type", type}, {"code", status}};
  error["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  return {{"error", error}};
}

std::string ApiError::body() const {
  return toJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError badRequest(const std::string &param, const std::string &message) {
  return {400, message, "BadRequestError", param};
}

ApiError unauthorized() {
  return {401, "missing or invalid API key: send the header 'Authorization: Bearer <key>'",
          "AuthenticationError", ""};
}

ApiError notFound(const std::string &param, const std::string &message) {
  return {404, message, "NotFoundError", param};
}

ApiError payloadTooLarge(size_t limitBytes) {
  return {413,
          "request body over the server's limit of " + std::to_string(limitBytes) +
              " bytes; send a shorter prompt",
          "RequestEntityTooLargeError", ""};
}

ApiError unavailable(const std::string &message) {
  return {503, message, "ServiceUnavailableError", ""};
}

ApiError internalError(const std::string &message) {
  return {500, message, "InternalServerError", ""};
}

} // namespace llmc::server
