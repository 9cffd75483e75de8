// llmrun chat PLAN: a multi-turn chat in the terminal with the plan's chat
// template (tokenizer_config.json's chat_template, rendered by
// runtime/chat), streaming each answer.
//
// Each turn re-renders the whole conversation, as apply_chat_template
// would, and encodes it. When the tokens the KV cache holds (the previous
// turns' prompt and answer) are a prefix of the new prompt, only the new
// tokens are prefilled; otherwise (a template that rewrites earlier turns,
// or an answer that re-encodes differently) the conversation is prefilled
// again. The KV cache is append-only, so a prefix is reused whole or not at
// all; -v says which happened each turn.
//
// On a terminal, lines are read with libedit (history, editing); otherwise
// stdin is read line by line and only the answers are printed, one per
// line. /clear starts a new conversation, /exit (or end of input) ends.
#include "chat/chat_template.h"
#include "cli_common.h"
#include "engine/generate.h"
#include "llmrun_commands.h"
#include "llmrun_engine.h"
#include "llmrun_sampling.h"
#include "support/mapped_file.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>

#ifdef LLMC_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace llmc {
namespace {

struct ChatOptions {
  std::string plan;
  std::string model;
  std::string system;
  std::string templateName = "default";
  std::string templateFile;
  SamplingFlags sampling;
  cli::LogLevel level = cli::LogLevel::Info;
  cli::LogFlags log;
  EngineFlags engine;
};

// Reads the user's lines: libedit on a terminal, plain lines otherwise.
class LineReader {
public:
  LineReader() : interactive_(::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO)) {}
  bool interactive() const { return interactive_; }

  // The next line without its newline; nullopt at the end of input.
  std::optional<std::string> next() {
#ifdef LLMC_HAVE_LIBEDIT
    if (interactive_) {
      char *line = ::readline("> ");
      if (line == nullptr)
        return std::nullopt;
      std::string text(line);
      std::free(line);
      if (!text.empty())
        ::add_history(text.c_str());
      return text;
    }
#endif
    if (interactive_) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    std::string text;
    if (!std::getline(std::cin, text))
      return std::nullopt;
    if (!text.empty() && text.back() == '\r')
      text.pop_back();
    return text;
  }

private:
  bool interactive_;
};

// The plan's template `name`, or the file's.
Expected<std::shared_ptr<const chat::ChatTemplate>> chatTemplateFor(const Engine &engine,
                                                                    const ChatOptions &o) {
  if (!o.templateFile.empty()) {
    LLMC_ASSIGN_OR_RETURN(std::string source, readTextFile(o.templateFile));
    return chat::parseChatTemplate(source, o.templateFile);
  }
  const fb::TokenizerInfo &info = *engine.plan().meta().tokenizer();
  std::string names;
  if (info.chat_templates() != nullptr)
    for (const fb::ChatTemplate *t : *info.chat_templates()) {
      if (t->name()->str() == o.templateName)
        return chat::parseChatTemplate(t->source()->string_view(),
                                       o.plan + ": chat template '" + o.templateName + "'");
      names += (names.empty() ? "" : ", ") + t->name()->str();
    }
  if (names.empty())
    return Status::error(o.plan + " has no chat template (its model had no chat_template in "
                                  "tokenizer_config.json and no chat_template.jinja): pass "
                                  "--chat-template-file F.jinja, or rebuild the plan from a "
                                  "model folder that has one");
  return Status::error(o.plan + " has no chat template '" + o.templateName +
                       "' (it has: " + names + "); pick one with --chat-template NAME");
}

// bos_token, eos_token, ... for the template, as apply_chat_template passes them.
chat::OrderedJson templateContext(const Engine &engine) {
  const fb::TokenizerInfo &info = *engine.plan().meta().tokenizer();
  chat::OrderedJson context = chat::OrderedJson::object();
  auto add = [&](const char *key, const flatbuffers::String *value) {
    context[key] = value != nullptr ? value->str() : std::string();
  };
  add("bos_token", info.bos_token());
  add("eos_token", info.eos_token());
  add("pad_token", info.pad_token());
  add("unk_token", info.unk_token());
  return context;
}

class ChatSession {
public:
  ChatSession(Engine &engine, const ChatOptions &o, std::shared_ptr<const chat::ChatTemplate> t,
              GenerateOptions options)
      : engine_(engine), o_(o), template_(std::move(t)), options_(std::move(options)),
        context_(templateContext(engine)) {
    // The template's end-of-turn token ends an answer too (unless --ignore-eos).
    if (auto eos = context_["eos_token"].get<std::string>(); !eos.empty() && !options_.ignoreEos)
      if (auto id = engine.tokenizer().tokenToId(eos))
        options_.stopTokens.push_back(*id);
    clear();
  }
  ~ChatSession() { release(); }

  void clear() {
    messages_ = chat::OrderedJson::array();
    if (!o_.system.empty())
      messages_.push_back({{"role", "system"}, {"content", o_.system}});
    release();
  }

  // One user turn: renders, prefills what is new, streams the answer.
  Status turn(const std::string &userText) {
    chat::OrderedJson messages = messages_;
    messages.push_back({{"role", "user"}, {"content", userText}});
    LLMC_ASSIGN_OR_RETURN(std::string rendered,
                          chat::renderChatTemplate(*template_, messages, context_, true));
    // The template writes the special tokens (BOS) itself.
    std::vector<int32_t> prompt = engine_.tokenizer().encode(rendered, false);
    if (prompt.empty())
      return Status::error("the chat template rendered no tokens");
    const int64_t cached = reusablePrefix(prompt);
    if (o_.level >= cli::LogLevel::Debug)
      std::fprintf(stderr, "llmrun: turn %d: %zu prompt tokens, %lld from the KV cache%s\n",
                   turns_ + 1, prompt.size(), static_cast<long long>(cached),
                   cached == 0 && turns_ > 0 ? " (re-prefilled: the rendering changed)" : "");
    LLMC_RETURN_IF_ERROR(checkGenerateOptions(engine_, {prompt}, options_));
    GenerateOptions options = options_;
    options.sampling.seed += static_cast<uint64_t>(turns_); // a new draw each turn
    auto results = generateOnSequences(engine_, {{sequence_, prompt, cached}}, options, nullptr,
                                       [&](size_t, const std::string &piece) {
                                         std::fputs(piece.c_str(), stdout);
                                         std::fflush(stdout);
                                       });
    if (!results) {
      release();
      return results.status();
    }
    const GenerateResult &r = results->front();
    std::fputs("\n", stdout);
    LLMC_RETURN_IF_ERROR(cli::stdoutWritten());
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), r.ids.begin(), r.ids.end());
    all.resize(static_cast<size_t>(engine_.sequenceLength(sequence_)));
    kvTokens_ = std::move(all);
    messages_ = std::move(messages);
    messages_.push_back({{"role", "assistant"}, {"content", r.text}});
    ++turns_;
    if (r.contextFull && o_.level >= cli::LogLevel::Warning)
      std::fprintf(stderr, "llmrun: the context is full (%lld tokens): the answer was cut; "
                           "/clear starts a new conversation\n",
                   static_cast<long long>(contextSizeOf(engine_, options_)));
    return Status::ok();
  }

private:
  // How many of the prompt's tokens the KV cache already holds; 0 after
  // starting a fresh sequence when it holds anything else.
  int64_t reusablePrefix(const std::vector<int32_t> &prompt) {
    const bool extends = !kvTokens_.empty() && kvTokens_.size() < prompt.size() &&
                         std::equal(kvTokens_.begin(), kvTokens_.end(), prompt.begin());
    if (extends)
      return static_cast<int64_t>(kvTokens_.size());
    release();
    return 0;
  }

  void release() {
    if (sequence_ != 0)
      (void)engine_.releaseSequence(sequence_);
    sequence_ = engine_.addSequence();
    kvTokens_.clear();
  }

  Engine &engine_;
  const ChatOptions &o_;
  std::shared_ptr<const chat::ChatTemplate> template_;
  GenerateOptions options_;
  chat::OrderedJson context_;
  chat::OrderedJson messages_;
  SequenceId sequence_ = 0;
  std::vector<int32_t> kvTokens_; // what the KV cache of sequence_ holds
  int turns_ = 0;
};

int runChat(ChatOptions &o) {
  o.level = o.log.get();
  if (!o.plan.empty() && !o.model.empty() && o.plan != o.model)
    return cli::fail("two plans given ('" + o.plan + "' and -m '" + o.model + "'): pass one");
  if (o.plan.empty())
    o.plan = o.model;
  if (o.plan.empty())
    return cli::fail("no engine plan given; usage: llmrun chat engine.plan");
  auto flagOptions = o.sampling.options();
  if (!flagOptions)
    return cli::fail(flagOptions.status());
  GenerateOptions options = *flagOptions;
  if (options.sampling.logprobs >= 0)
    return cli::fail("--logprobs is not shown by chat: use llmrun PLAN -p ... --json");
  auto engine = loadEngine(o.plan, o.engine, 1, o.level);
  if (!engine)
    return cli::fail(engine.status());
  auto fromPlan = o.sampling.applyPlan(**engine, options);
  if (!fromPlan)
    return cli::fail(fromPlan.status());
  auto tmpl = chatTemplateFor(**engine, o);
  if (!tmpl)
    return cli::fail(tmpl.status());
  if (o.level >= cli::LogLevel::Debug)
    std::fprintf(stderr, "llmrun: seed %llu\n",
                 static_cast<unsigned long long>(options.sampling.seed));
  ChatSession session(**engine, o, *tmpl, options);
  LineReader reader;
  if (reader.interactive() && o.level >= cli::LogLevel::Info)
    std::fprintf(stderr, "llmrun: chat with %s; /clear starts over, /exit (or Ctrl-D) ends\n",
                 o.plan.c_str());
  while (std::optional<std::string> line = reader.next()) {
    if (*line == "/exit" || *line == "/quit")
      break;
    if (*line == "/clear") {
      session.clear();
      continue;
    }
    if (line->empty())
      continue;
    if (Status s = session.turn(*line); !s)
      return cli::fail(s);
  }
  return 0;
}

} // namespace

void registerChatCommand(CLI::App &app, int &exitCode) {
  static ChatOptions options;
  CLI::App *cmd = app.add_subcommand("chat", "Chat with a model in the terminal, with the plan's "
                                             "chat template");
  cmd->add_option("plan", options.plan, "Engine plan built by `llmc build`");
  cmd->add_option("-m,--model", options.model, "Engine plan (the same as PLAN)");
  cmd->add_option("--system-prompt", options.system, "System message (also -sys TEXT)");
  cmd->add_option("--chat-template", options.templateName,
                  "Which of the plan's templates (default: \"default\")");
  cmd->add_option("--chat-template-file", options.templateFile,
                  "A Jinja chat template file instead of the plan's");
  options.sampling.add(*cmd, -1);
  options.log.add(*cmd);
  options.engine.add(*cmd);
  cmd->callback([&exitCode]() { exitCode = runChat(options); });
}

} // namespace llmc
