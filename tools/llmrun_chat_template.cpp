// llmrun chat-template: renders a chat template as transformers'
// apply_chat_template would, and prints it exactly (no newline added).
//   llmrun chat-template --template F.jinja --messages M.json [--context C.json]
//                        [--add-generation-prompt]
// A template's raise_exception (or any render error) exits 1 with the
// message on stderr.
#include "chat/chat_template.h"

#include "cli_common.h"
#include "llmrun_commands.h"
#include "plan/plan.h"
#include "support/mapped_file.h"

#include <cstdio>
#include <memory>

namespace llmc {
namespace {

struct ChatTemplateOptions {
  std::string plan;         // a plan in place of --template: its template and special tokens
  std::string templateName = "default";
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

// A plan's template `name`, with its special tokens as the context.
Expected<TemplateSource> planTemplateSource(const ChatTemplateOptions &o) {
  PlanLoadOptions load;
  load.verifyWeights = false; // only the metadata is read
  LLMC_ASSIGN_OR_RETURN(Plan plan, Plan::open(o.plan, load));
  const fb::TokenizerInfo &info = *plan.meta().tokenizer();
  TemplateSource source;
  auto token = [](const flatbuffers::String *s) { return s != nullptr ? s->str() : std::string(); };
  source.context["bos_token"] = token(info.bos_token());
  source.context["eos_token"] = token(info.eos_token());
  source.context["pad_token"] = token(info.pad_token());
  source.context["unk_token"] = token(info.unk_token());
  std::string names;
  if (info.chat_templates() != nullptr)
    for (const fb::ChatTemplate *t : *info.chat_templates()) {
      if (t->name()->str() == o.templateName) {
        source.name = o.plan + ": chat template '" + o.templateName + "'";
        source.text = t->source()->str();
        return source;
      }
      names += (names.empty() ? "" : ", ") + t->name()->str();
    }
  return Status::error(o.plan + " has no chat template '" + o.templateName + "'" +
                       (names.empty() ? std::string(" (its model had none)")
                                      : " (it has: " + names + ")"));
}

Expected<TemplateSource> loadTemplateSource(const ChatTemplateOptions &o) {
  if (o.plan.empty() == o.templateFile.empty())
    return Status::error("give the template as --template F.jinja or as a plan (llmrun "
                         "chat-template PLAN ...), one of them");
  if (!o.plan.empty())
    return planTemplateSource(o);
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
  command->add_option("plan", options->plan,
                      "An engine plan whose chat template (and special tokens) to render");
  command->add_option("--template", options->templateFile, "The Jinja chat template file");
  command->add_option("--chat-template", options->templateName,
                      "With a plan: which of its templates (default: \"default\")");
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
