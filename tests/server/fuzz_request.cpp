// libFuzzer target: request bodies of both generation endpoints. Any input
// must give either a request or an ApiError with status 400 and a message,
// never a crash, a hang or an exception.
#include "server/request.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view body(reinterpret_cast<const char *>(data), size);
  llmc::server::RequestLimits limits;
  for (auto endpoint : {llmc::server::Endpoint::Completions,
                        llmc::server::Endpoint::ChatCompletions}) {
    llmc::server::GenerationRequest request;
    auto error = llmc::server::parseGenerationRequest(body, endpoint, limits, request);
    if (error) {
      if (error->status != 400 || error->message.empty())
        std::abort();
      (void)error->body();
      continue;
    }
    if (endpoint == llmc::server::Endpoint::Completions && request.prompts.empty())
      std::abort();
    if (request.n < 1 || request.n > limits.maxN)
      std::abort();
  }
  return 0;
}
