// llmrun engine.plan -p PROMPT: generate text, streaming it to stdout.
//
// Every option is checked before any output: the flags first, then (once
// the plan is loaded) the plan's defaults and the prompt's length; only
// then is the prompt echoed and the text streamed.
#include "cli_common.h"
#include "engine/generate.h"
#include "llmrun_commands.h"
#include "llmrun_engine.h"
#include "llmrun_sampling.h"
#include "support/mapped_file.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

namespace llmc {

struct GenerateCommand {
  std::string plan;
  std::string model; // -m: the plan, as llama.cpp and vLLM users write it
  std::string prompt;
  std::string promptFile;
  bool json = false;
  bool noBos = false;
  std::string dumpLogits;
  SamplingFlags sampling;
  cli::LogFlags log;
  EngineFlags engine;
  CLI::Option *promptOption = nullptr;
};

GenerateCommand *addGenerateOptions(CLI::App &app) {
  static GenerateCommand command;
  app.add_option("plan", command.plan, "Engine plan built by `llmc build`");
  app.add_option("-m,--model", command.model, "Engine plan (the same as the positional PLAN)");
  command.promptOption =
      app.add_option("-p,--prompt", command.prompt, "Prompt text; - reads it from stdin");
  app.add_option("-f,--file", command.promptFile, "Read the prompt from this file");
  command.sampling.add(app, 128);
  app.add_flag("--json", command.json, "Print one JSON object instead of streaming text");
  app.add_flag("--no-bos", command.noBos, "Do not add the tokenizer's BOS to the prompt");
  app.add_option("--dump-logits", command.dumpLogits,
                 "Write the f32 logits of every position to FILE, row-major [positions][vocab]");
  command.log.add(app);
  command.engine.add(app);
  return &command;
}

namespace {

// The plan from the positional argument or -m.
Expected<std::string> planPath(const GenerateCommand &c) {
  if (!c.plan.empty() && !c.model.empty() && c.plan != c.model)
    return Status::error("two plans given ('" + c.plan + "' and -m '" + c.model +
                         "'): pass one");
  std::string plan = c.plan.empty() ? c.model : c.plan;
  if (plan.empty())
    return Status::error("no engine plan given; usage: llmrun engine.plan -p PROMPT (or "
                         "llmrun help)");
  return plan;
}

// The prompt from -p TEXT, -p - (stdin) or -f FILE.
Expected<std::string> promptText(const GenerateCommand &c) {
  const bool hasPrompt = c.promptOption->count() > 0;
  if (hasPrompt && !c.promptFile.empty())
    return Status::error("both -p and -f give a prompt: pass one");
  if (!c.promptFile.empty())
    return readTextFile(c.promptFile);
  if (!hasPrompt)
    return Status::error("no prompt: pass -p TEXT, -p - (read stdin) or -f FILE");
  if (c.prompt != "-")
    return c.prompt;
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad())
    return Status::error("cannot read the prompt from stdin");
  return text;
}

std::string dumpJson(const nlohmann::json &j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json logprobsJson(const Tokenizer &tokenizer, const GenerateResult &r) {
  auto entry = [&](const sampling::TokenLogprob &t) {
    return nlohmann::json{{"id", t.id}, {"token", tokenizer.decode({t.id})}, {"logprob", t.logprob}};
  };
  nlohmann::json list = nlohmann::json::array();
  for (const sampling::SampledLogprobs &lp : r.logprobs) {
    nlohmann::json item = entry(lp.chosen);
    item["top_logprobs"] = nlohmann::json::array();
    for (const sampling::TokenLogprob &t : lp.top)
      item["top_logprobs"].push_back(entry(t));
    list.push_back(std::move(item));
  }
  return list;
}

// The --dump-logits file: created before generating (a bad path fails
// first), removed unless the logits were written whole.
class LogitsFile {
public:
  ~LogitsFile() {
    if (!path_.empty() && !done_) {
      out_.close();
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
  }
  Status open(const std::string &path) {
    path_ = path;
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (!out_)
      return Status::error("--dump-logits " + path + ": cannot create the file");
    return Status::ok();
  }
  Status write(const std::vector<float> &logits) {
    out_.write(reinterpret_cast<const char *>(logits.data()),
               static_cast<std::streamsize>(logits.size() * sizeof(float)));
    out_.close();
    if (!out_)
      return Status::error("--dump-logits " + path_ + ": cannot write the logits");
    done_ = true;
    return Status::ok();
  }

private:
  std::string path_;
  std::ofstream out_;
  bool done_ = false;
};

} // namespace

int runGenerate(GenerateCommand &c) {
  const cli::LogLevel level = c.log.get();
  auto plan = planPath(c);
  if (!plan)
    return cli::fail(plan.status());
  auto flagOptions = c.sampling.options();
  if (!flagOptions)
    return cli::fail(flagOptions.status());
  GenerateOptions options = *flagOptions;
  if (options.sampling.logprobs >= 0 && !c.json)
    return cli::fail("--logprobs shows in the JSON output: add --json");
  auto text = promptText(c);
  if (!text)
    return cli::fail(text.status());
  LogitsFile logitsFile;
  options.keepAllLogits = !c.dumpLogits.empty();
  if (options.keepAllLogits)
    if (Status s = logitsFile.open(c.dumpLogits); !s)
      return cli::fail(s);

  // --json keeps stderr to warnings: the backend line would be noise to a script.
  auto engine =
      loadEngine(*plan, c.engine, 1, c.json ? std::min(level, cli::LogLevel::Warning) : level);
  if (!engine)
    return cli::fail(engine.status());
  Engine &e = **engine;
  auto fromPlan = c.sampling.applyPlan(e, options);
  if (!fromPlan)
    return cli::fail(fromPlan.status());
  std::vector<int32_t> prompt = e.tokenizer().encode(*text, !c.noBos);
  if (prompt.empty())
    return cli::fail("the prompt encodes to no tokens (pass text with -p, or drop --no-bos)");
  if (Status s = checkGenerateOptions(e, {prompt}, options); !s)
    return cli::fail(SamplingFlags::flagMessage(s.message()));
  if (level >= cli::LogLevel::Debug) {
    std::fprintf(stderr, "llmrun: seed %llu\n",
                 static_cast<unsigned long long>(options.sampling.seed));
    for (const std::string &setting : *fromPlan)
      std::fprintf(stderr, "llmrun: from the plan's generation_config: %s\n", setting.c_str());
  }

  GenerateTimings timings;
  TextCallback stream = nullptr;
  if (!c.json) {
    std::fputs(text->c_str(), stdout);
    std::fflush(stdout);
    stream = [](size_t, const std::string &piece) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    };
  }
  auto results = generateBatch(e, {prompt}, options, &timings, stream);
  if (!results)
    return cli::fail(results.status());
  const GenerateResult &r = results->front();
  if (options.keepAllLogits)
    if (Status s = logitsFile.write(r.logits); !s)
      return cli::fail(s);
  double prefillTps = timings.prefillTokens / std::max(timings.prefillSeconds, 1e-9);
  double decodeTps = timings.decodeTokens / std::max(timings.decodeSeconds, 1e-9);
  if (r.contextFull && level >= cli::LogLevel::Warning)
    std::fprintf(stderr,
                 "%sllmrun: the context is full (%lld tokens): generation stopped; use a larger "
                 "-c, up to the plan's max_seq_len %lld\n",
                 c.json ? "" : "\n", static_cast<long long>(contextSizeOf(e, options)),
                 static_cast<long long>(e.model().max_seq_len()));
  if (c.json) {
    nlohmann::json j;
    j["prompt_ids"] = r.promptIds;
    j["ids"] = r.ids;
    j["text"] = r.text;
    j["finish_reason"] = r.finishReason;
    if (!r.stopString.empty())
      j["stop_string"] = r.stopString;
    j["context_full"] = r.contextFull;
    j["seed"] = options.sampling.seed;
    if (options.sampling.logprobs >= 0)
      j["logprobs"] = logprobsJson(e.tokenizer(), r);
    j["timings"] = {{"prefill_tokens", timings.prefillTokens},
                    {"prefill_seconds", timings.prefillSeconds},
                    {"prefill_tokens_per_second", prefillTps},
                    {"decode_tokens", timings.decodeTokens},
                    {"decode_seconds", timings.decodeSeconds},
                    {"decode_tokens_per_second", decodeTps},
                    {"time_to_first_token_seconds", timings.prefillSeconds}};
    std::printf("%s\n", dumpJson(j).c_str());
    if (Status s = cli::flushStdout(); !s)
      return cli::fail(s);
    return 0;
  }
  std::printf("\n");
  if (Status s = cli::flushStdout(); !s)
    return cli::fail(s);
  if (level >= cli::LogLevel::Info)
    std::fprintf(stderr,
                 "llmrun: prefill %lld tokens at %.1f tok/s, decode %lld tokens at %.1f tok/s, "
                 "time to first token %.1f ms (%s)\n",
                 static_cast<long long>(timings.prefillTokens), prefillTps,
                 static_cast<long long>(timings.decodeTokens), decodeTps,
                 timings.prefillSeconds * 1000.0, r.finishReason.c_str());
  return 0;
}

} // namespace llmc
