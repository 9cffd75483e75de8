// The public entry points: parse (normalize newlines as jinja2 does, lex,
// parse) and render (bind messages, context and transformers' globals, run,
// and turn an error's byte offset into "<name>:<line>:<column>").
#include "chat/chat_template.h"

#include "chat/renderer.h"

namespace llmc::chat {

struct ChatTemplate {
  std::string name;
  std::string originalSource;
  std::string source; // newlines normalized, one trailing newline dropped
  Body body;
};

namespace {

constexpr size_t kMaxTemplateBytes = size_t(4) << 20;

// jinja2 turns \r\n and \r into \n and drops one trailing newline
// (keep_trailing_newline=False).
std::string normalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n')
        ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n')
    out.pop_back();
  return out;
}

// 1-based line and column (in code points) of byte `offset`.
std::string position(const std::string &source, size_t offset) {
  offset = std::min(offset, source.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

Status errorAt(const ChatTemplate &tmpl, const RenderError &e) {
  if (e.offset == SIZE_MAX)
    return Status::error(tmpl.name + ": " + e.message);
  return Status::error(tmpl.name + ":" + position(tmpl.source, e.offset) + ": " + e.message);
}

template <typename JsonType>
Expected<std::string> renderAny(const ChatTemplate &tmpl, const JsonType &messages,
                                const JsonType &context, bool addGenerationPrompt,
                                const RenderOptions &options) {
  if (!messages.is_array())
    return Status::error(tmpl.name + ": messages must be a JSON array of {role, content} objects, got " +
                         std::string(messages.type_name()));
  if (!context.is_null() && !context.is_object())
    return Status::error(tmpl.name + ": the context must be a JSON object of variables, got " +
                         std::string(context.type_name()));
  Renderer renderer(options);
  try {
    auto globals = std::make_shared<Scope>();
    addGlobals(*globals, options);
    auto vars = std::make_shared<Scope>();
    vars->parent = globals;
    vars->set("tools", Value::none());
    vars->set("documents", Value::none());
    if (context.is_object())
      for (auto it = context.begin(); it != context.end(); ++it)
        vars->set(it.key(), Value::fromJson(it.value()));
    vars->set("messages", Value::fromJson(messages));
    vars->set("add_generation_prompt", Value::boolean(addGenerationPrompt));
    return renderer.render(tmpl.body, vars);
  } catch (const RenderError &e) {
    return errorAt(tmpl, e);
  } catch (const std::bad_alloc &) {
    return Status::error(tmpl.name + ": out of memory while rendering");
  }
}

} // namespace

Expected<std::shared_ptr<const ChatTemplate>> parseChatTemplate(std::string_view source,
                                                                const std::string &name) {
  if (source.size() > kMaxTemplateBytes)
    return Status::error(name + ": the template is " + std::to_string(source.size()) +
                         " bytes; chat templates over " + std::to_string(kMaxTemplateBytes) +
                         " bytes are refused");
  auto tmpl = std::make_shared<ChatTemplate>();
  tmpl->name = name;
  tmpl->originalSource = std::string(source);
  tmpl->source = normalizeNewlines(source);
  try {
    tmpl->body = parseTemplate(lexTemplate(tmpl->source));
  } catch (const RenderError &e) {
    return errorAt(*tmpl, e);
  }
  return std::shared_ptr<const ChatTemplate>(std::move(tmpl));
}

Expected<std::string> renderChatTemplate(const ChatTemplate &tmpl, const Json &messages,
                                         const Json &context, bool addGenerationPrompt) {
  return renderAny(tmpl, messages, context, addGenerationPrompt, RenderOptions{});
}

Expected<std::string> renderChatTemplate(const ChatTemplate &tmpl, const Json &messages,
                                         const Json &context, bool addGenerationPrompt,
                                         const RenderOptions &options) {
  return renderAny(tmpl, messages, context, addGenerationPrompt, options);
}

Expected<std::string> renderChatTemplate(const ChatTemplate &tmpl, const OrderedJson &messages,
                                         const OrderedJson &context, bool addGenerationPrompt,
                                         const RenderOptions &options) {
  return renderAny(tmpl, messages, context, addGenerationPrompt, options);
}

Expected<OrderedJson> parseOrderedJson(std::string_view text, const std::string &source) {
  try {
    int maxDepthSeen = 0;
    OrderedJson json = OrderedJson::parse(
        text.begin(), text.end(),
        [&](int depth, OrderedJson::parse_event_t, OrderedJson &) {
          maxDepthSeen = std::max(maxDepthSeen, depth);
          if (depth > 128)
            throw std::runtime_error("nested deeper than 128 levels");
          return true;
        });
    return json;
  } catch (const std::exception &e) {
    return Status::error(source + ": not valid JSON: " + e.what());
  }
}

const std::string &chatTemplateName(const ChatTemplate &tmpl) { return tmpl.name; }
const std::string &chatTemplateSource(const ChatTemplate &tmpl) { return tmpl.originalSource; }

} // namespace llmc::chat
