// Fuzz target for the chat-template engine: any text must parse or fail with
// a positioned error, and a parsed template must render or fail within small
// limits, never crash, hang or leak. Every error starts with the name.
#include "chat/chat_template.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view source(reinterpret_cast<const char *>(data), size);
  auto tmpl = llmc::chat::parseChatTemplate(source, "fuzz.jinja");
  if (!tmpl.isOk()) {
    if (tmpl.message().rfind("fuzz.jinja", 0) != 0)
      std::abort();
    return 0;
  }
  static const auto messages = *llmc::chat::parseOrderedJson(
      R"([{"role": "system", "content": "sys"}, {"role": "user", "content": "héllo {{ x }}"},
          {"role": "assistant", "content": "ok", "tool_calls": [{"type": "function",
           "function": {"name": "f", "arguments": {"a": 1}}}]}, {"role": "tool", "content": "1"}])",
      "messages");
  static const auto context = *llmc::chat::parseOrderedJson(
      R"({"bos_token": "<s>", "eos_token": "</s>", "tools": [{"type": "function", "function": {"name": "f"}}]})",
      "context");
  llmc::chat::RenderOptions options;
  options.limits.maxOutputBytes = 1 << 16;
  options.limits.maxLoopIterations = 10000;
  options.limits.maxCallDepth = 20;
  options.limits.maxSteps = 200000;
  options.fixedTimeSeconds = 0;
  for (bool generation : {false, true}) {
    auto text = llmc::chat::renderChatTemplate(**tmpl, messages, context, generation, options);
    if (!text.isOk() && text.message().rfind("fuzz.jinja", 0) != 0)
      std::abort();
    if (text.isOk() && text->size() > options.limits.maxOutputBytes)
      std::abort();
  }
  return 0;
}
