// llmrun chat-template: renders a chat template as transformers'
// apply_chat_template would, and prints it exactly (no newline added).
//   llmrun chat-template --template F.jinja --messages M.json [--context C.json]
//                        [--add-generation-prompt]
// A template's raise_exception (or any render error) exits 1 with the
// message on stderr.
#include "chat/chat_template.h"

#include "cli_common.h"
#include "llmrun_commands.h"
#include "support/mapped_file.h"

#include <cstdio>
#include <memory>

namespace llmc {
namespace {

struct ChatTemplateOptions {
  std::string templateFile;
  std::string messagesFile;
  std::string contextFile;
  bool addGenerationPrompt = false;
  int64_t fixedTime = -1;
};

// Where the template text comes from. Today a .jinja file; a plan carrying
// its model's template (and special tokens, merged under --context) plugs in
// here.
struct TemplateSource {
  std::string name;
  std::string text;
  chat::OrderedJson context = chat::OrderedJson::object();
};

Expected<TemplateSource> loadTemplateSource(const ChatTemplateOptions &o) {
  LLMC_ASSIGN_OR_RETURN(std::string text, readTextFile(o.templateFile));
  return TemplateSource{o.templateFile, std::move(text), chat::OrderedJson::object()};
}

Expected<chat::OrderedJson> readJsonFile(const std::string &path) {
  LLMC_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return chat::parseOrderedJson(text, path);
}

int runChatTemplate(const ChatTemplateOptions &o) {
  auto source = loadTemplateSource(o);
  if (!source)
    return cli::fail(source.status());
  auto tmpl = chat::parseChatTemplate(source->text, source->name);
  if (!tmpl)
    return cli::fail(tmpl.status());
  auto messages = readJsonFile(o.messagesFile);
  if (!messages)
    return cli::fail(messages.status());
  chat::OrderedJson context = source->context;
  if (!o.contextFile.empty()) {
    auto extra = readJsonFile(o.contextFile);
    if (!extra)
      return cli::fail(extra.status());
    if (!extra->is_object())
      return cli::fail(o.contextFile + ": --context must be a JSON object of variables, e.g. "
                                       "{\"bos_token\": \"<s>\"}");
    for (auto it = extra->begin(); it != extra->end(); ++it)
      context[it.key()] = it.value();
  }
  chat::RenderOptions renderOptions;
  if (o.fixedTime >= 0)
    renderOptions.fixedTimeSeconds = o.fixedTime;
  auto text = chat::renderChatTemplate(**tmpl, *messages, context, o.addGenerationPrompt, renderOptions);
  if (!text)
    return cli::fail(text.status());
  std::fwrite(text->data(), 1, text->size(), stdout);
  std::fflush(stdout);
  return 0;
}

} // namespace

void registerChatTemplateCommand(CLI::App &app, int &exitCode) {
  auto options = std::make_shared<ChatTemplateOptions>();
  CLI::App *command = app.add_subcommand(
      "chat-template", "Render a chat template over messages, as transformers' apply_chat_template does");
  command->add_option("--template", options->templateFile, "The Jinja chat template file")->required();
  command->add_option("--messages", options->messagesFile,
                      "A JSON array of {\"role\": ..., \"content\": ...} messages")
      ->required();
  command->add_option("--context", options->contextFile,
                      "A JSON object of extra variables (bos_token, eos_token, tools, "
                      "enable_thinking, ...)");
  command->add_flag("--add-generation-prompt", options->addGenerationPrompt,
                    "Set add_generation_prompt: end with the assistant turn's opening");
  command->add_option("--fixed-time", options->fixedTime,
                      "strftime_now() formats this moment (seconds since 1970, UTC) instead of "
                      "now: reproducible renderings")
      ->check(CLI::NonNegativeNumber);
  command->callback([options, &exitCode] { exitCode = runChatTemplate(*options); });
}

} // namespace llmc
