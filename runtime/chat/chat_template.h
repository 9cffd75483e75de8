// Chat templates: the Jinja dialect of Hugging Face tokenizer_config.json
// "chat_template", rendered as transformers' apply_chat_template renders it
// (jinja2 ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
// loopcontrols; raise_exception, strftime_now and transformers' tojson).
//
// A template is parsed once (syntax errors name the line and column) and then
// rendered any number of times, from any number of threads at once: a parsed
// ChatTemplate is immutable. Rendering is sandboxed (no files, no imports, no
// mutation of the caller's data) and bounded by ChatTemplateLimits; every
// error, including a template's own raise_exception, is returned as
// "<name>:<line>:<column>: <what>". docs/chat.md lists the supported subset.
#pragma once

#include "support/json.h"
#include "support/status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace llmc::chat {

struct ChatTemplate; // parsed once, rendered many times (runtime/chat/chat_template.cpp)

// Bounds on one render. Each limit hit is an error naming the limit and the
// template position where it was hit.
struct ChatTemplateLimits {
  size_t maxOutputBytes = size_t(32) << 20; // rendered text, and any one string or list built
  int64_t maxLoopIterations = 1'000'000;    // all for-loop iterations of one render together
  int maxCallDepth = 100;                   // nested macro / caller() calls (recursion)
  int64_t maxSteps = 50'000'000;            // expression and statement evaluations together
};

struct RenderOptions {
  ChatTemplateLimits limits;
  // strftime_now() formats this moment (seconds since the Unix epoch, in
  // UTC) instead of the local clock's: reproducible renderings for tests.
  std::optional<int64_t> fixedTimeSeconds;
};

// Parses `source` (the template text). `name` names it in errors, e.g.
// "tokenizer_config.json chat_template" or "chat.jinja".
Expected<std::shared_ptr<const ChatTemplate>> parseChatTemplate(std::string_view source,
                                                                const std::string &name);

// Renders with `messages` (a JSON array of {role, content, ...} objects)
// bound to `messages`, `add_generation_prompt` set from the flag, and every
// key of `context` (a JSON object: bos_token, eos_token, tools, documents,
// date_string, enable_thinking, ...) bound as a variable, as
// apply_chat_template's keyword arguments are. `tools` and `documents` are
// none unless `context` gives them, as in transformers.
Expected<std::string> renderChatTemplate(const ChatTemplate &tmpl, const Json &messages,
                                         const Json &context, bool addGenerationPrompt);
Expected<std::string> renderChatTemplate(const ChatTemplate &tmpl, const Json &messages,
                                         const Json &context, bool addGenerationPrompt,
                                         const RenderOptions &options);

// Key order matters to a rendering (tojson, dict printing) as it does in
// Python, and nlohmann::json sorts keys: callers that have the JSON text
// (a request body, a --messages file) parse it with parseOrderedJson and
// render through this overload to keep the order the user wrote.
using OrderedJson = nlohmann::ordered_json;
Expected<OrderedJson> parseOrderedJson(std::string_view text, const std::string &source);
Expected<std::string> renderChatTemplate(const ChatTemplate &tmpl, const OrderedJson &messages,
                                         const OrderedJson &context, bool addGenerationPrompt,
                                         const RenderOptions &options = {});

// The name the template was parsed with, and its source text.
const std::string &chatTemplateName(const ChatTemplate &tmpl);
const std::string &chatTemplateSource(const ChatTemplate &tmpl);

} // namespace llmc::chat
