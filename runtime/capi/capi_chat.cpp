// The C API's chat templates: a parsed runtime/chat template plus the
// variables every render gets (a plan's special tokens), rendered from JSON
// text or from role/content structs.
#include "capi_internal.h"

#include "chat/chat_template.h"

using namespace llmc;
using namespace llmc::capi;

struct llmc_chat_template {
  std::shared_ptr<const chat::ChatTemplate> parsed;
  chat::OrderedJson context = chat::OrderedJson::object(); // under the caller's context
};

namespace {

llmc_status templateFailure(const Status &status) {
  return fromStatus(status, LLMC_STATUS_TEMPLATE_ERROR);
}

// The render's variables: the template's own, then the caller's JSON object.
Expected<chat::OrderedJson> renderContext(const llmc_chat_template &tmpl,
                                          const llmc_chat_render_options &o, const char *fn) {
  chat::OrderedJson context = tmpl.context;
  if (o.context_json == nullptr)
    return context;
  LLMC_ASSIGN_OR_RETURN(chat::OrderedJson extra,
                        chat::parseOrderedJson(std::string_view(o.context_json,
                                                                o.context_json_length),
                                               std::string(fn) + " context_json"));
  if (!extra.is_object())
    return Status::error(std::string(fn) +
                         ": context_json must be a JSON object of variables, e.g. "
                         "{\"bos_token\": \"<s>\"}");
  for (auto it = extra.begin(); it != extra.end(); ++it)
    context[it.key()] = it.value();
  return context;
}

llmc_status render(const char *fn, const llmc_chat_template &tmpl,
                   const chat::OrderedJson &messages, const llmc_chat_render_options *given,
                   char *text, size_t capacity, size_t *length) {
  llmc_chat_render_options o = withDefaults(given, llmc_chat_render_options_init);
  if (o.context_json == nullptr && o.context_json_length > 0)
    return nullArgument(fn, "options->context_json");
  auto context = renderContext(tmpl, o, fn);
  if (!context)
    return fromStatus(context.status(), LLMC_STATUS_INVALID_ARGUMENT);
  chat::RenderOptions renderOptions;
  if (o.fixed_time != 0)
    renderOptions.fixedTimeSeconds = o.time_seconds;
  auto rendered = chat::renderChatTemplate(*tmpl.parsed, messages, *context,
                                           o.add_generation_prompt != 0, renderOptions);
  if (!rendered)
    return templateFailure(rendered.status());
  return copyText(fn, *rendered, text, capacity, length);
}

llmc_status checkOutput(const char *fn, const llmc_chat_template *tmpl, char *text,
                        size_t capacity, size_t *length) {
  if (tmpl == nullptr)
    return nullArgument(fn, "tmpl");
  if (length == nullptr)
    return nullArgument(fn, "length");
  if (text == nullptr && capacity > 0)
    return nullArgument(fn, "text");
  return LLMC_STATUS_OK;
}

} // namespace

extern "C" {

llmc_status llmc_chat_template_parse(const char *source, size_t sourceLength, const char *name,
                                     llmc_chat_template **out) {
  const char *fn = "llmc_chat_template_parse";
  return guarded(fn, [&]() -> llmc_status {
    if (out == nullptr)
      return nullArgument(fn, "tmpl");
    *out = nullptr;
    if (source == nullptr && sourceLength > 0)
      return nullArgument(fn, "source");
    auto parsed = chat::parseChatTemplate(std::string_view(source != nullptr ? source : "",
                                                           sourceLength),
                                          name != nullptr ? name : "chat template");
    if (!parsed)
      return templateFailure(parsed.status());
    auto handle = std::make_unique<llmc_chat_template>();
    handle->parsed = std::move(*parsed);
    *out = handle.release();
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_engine_chat_template(const llmc_engine *engine, const char *name,
                                      llmc_chat_template **out) {
  const char *fn = "llmc_engine_chat_template";
  return guarded(fn, [&]() -> llmc_status {
    if (engine == nullptr)
      return nullArgument(fn, "engine");
    if (out == nullptr)
      return nullArgument(fn, "tmpl");
    *out = nullptr;
    const std::string wanted = name != nullptr ? name : "default";
    const Plan &plan = engine->engine->plan();
    const fb::TokenizerInfo &info = *plan.meta().tokenizer();
    std::string names;
    if (info.chat_templates() != nullptr)
      for (const fb::ChatTemplate *t : *info.chat_templates()) {
        if (t->name()->str() != wanted) {
          names += (names.empty() ? "" : ", ") + t->name()->str();
          continue;
        }
        auto parsed = chat::parseChatTemplate(t->source()->string_view(),
                                              plan.path() + ": chat template '" + wanted + "'");
        if (!parsed)
          return templateFailure(parsed.status());
        auto handle = std::make_unique<llmc_chat_template>();
        handle->parsed = std::move(*parsed);
        auto token = [](const flatbuffers::String *s) {
          return s != nullptr ? s->str() : std::string();
        };
        handle->context["bos_token"] = token(info.bos_token());
        handle->context["eos_token"] = token(info.eos_token());
        handle->context["pad_token"] = token(info.pad_token());
        handle->context["unk_token"] = token(info.unk_token());
        *out = handle.release();
        return LLMC_STATUS_OK;
      }
    return fail(LLMC_STATUS_NOT_FOUND,
                plan.path() + " has no chat template '" + wanted + "'" +
                    (names.empty() ? std::string(" (its model had none: parse one with "
                                                 "llmc_chat_template_parse)")
                                   : " (it has: " + names + ")"));
  });
}

void llmc_chat_template_free(llmc_chat_template *tmpl) { delete tmpl; }

void llmc_chat_render_options_init(llmc_chat_render_options *options) {
  if (options == nullptr)
    return;
  *options = llmc_chat_render_options{};
  options->struct_size = sizeof(llmc_chat_render_options);
}

llmc_status llmc_chat_render_json(const llmc_chat_template *tmpl, const char *messagesJson,
                                  size_t messagesLength, const llmc_chat_render_options *options,
                                  char *text, size_t capacity, size_t *length) {
  const char *fn = "llmc_chat_render_json";
  return guarded(fn, [&]() -> llmc_status {
    if (llmc_status s = checkOutput(fn, tmpl, text, capacity, length); s)
      return s;
    if (messagesJson == nullptr)
      return nullArgument(fn, "messages_json");
    if (options != nullptr)
      if (llmc_status s = checkStructSize(fn, options->struct_size, sizeof(uint32_t) * 2); s)
        return s;
    auto messages = chat::parseOrderedJson(std::string_view(messagesJson, messagesLength),
                                           std::string(fn) + " messages_json");
    if (!messages)
      return fromStatus(messages.status(), LLMC_STATUS_INVALID_ARGUMENT);
    if (!messages->is_array())
      return fail(LLMC_STATUS_INVALID_ARGUMENT,
                  std::string(fn) + ": messages_json must be a JSON array of messages, e.g. "
                                    "[{\"role\": \"user\", \"content\": \"Hi\"}]");
    return render(fn, *tmpl, *messages, options, text, capacity, length);
  });
}

llmc_status llmc_chat_render(const llmc_chat_template *tmpl, const llmc_chat_message *messages,
                             size_t numMessages, const llmc_chat_render_options *options,
                             char *text, size_t capacity, size_t *length) {
  const char *fn = "llmc_chat_render";
  return guarded(fn, [&]() -> llmc_status {
    if (llmc_status s = checkOutput(fn, tmpl, text, capacity, length); s)
      return s;
    if (messages == nullptr && numMessages > 0)
      return nullArgument(fn, "messages");
    if (options != nullptr)
      if (llmc_status s = checkStructSize(fn, options->struct_size, sizeof(uint32_t) * 2); s)
        return s;
    chat::OrderedJson list = chat::OrderedJson::array();
    for (size_t i = 0; i < numMessages; ++i) {
      if (messages[i].role == nullptr || messages[i].content == nullptr)
        return fail(LLMC_STATUS_INVALID_ARGUMENT,
                    std::string(fn) + ": messages[" + std::to_string(i) +
                        "] has a NULL role or content");
      chat::OrderedJson message = chat::OrderedJson::object();
      message["role"] = messages[i].role;
      message["content"] = messages[i].content;
      list.push_back(std::move(message));
    }
    return render(fn, *tmpl, list, options, text, capacity, length);
  });
}

} // extern "C"
