// llmrun engine.plan -p PROMPT: generate text, streaming it to stdout.
#include "cli_common.h"
#include "engine/generate.h"
#include "llmrun_commands.h"
#include "llmrun_engine.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace llmc {

struct GenerateCommand {
  std::string plan;
  std::string prompt;
  int64_t maxNewTokens = 128;
  float temperature = 0.0f;
  int32_t topK = 0;
  float topP = 1.0f;
  float minP = 0.0f;
  float repetitionPenalty = 1.0f;
  uint64_t seed = 0;
  bool ignoreEos = false;
  bool json = false;
  bool noBos = false;
  std::string dumpLogits;
  EngineFlags engine;
};

GenerateCommand *addGenerateOptions(CLI::App &app) {
  static GenerateCommand command;
  app.add_option("plan", command.plan, "Engine plan built by `llmc build`");
  app.add_option("-p,--prompt", command.prompt, "Prompt text");
  app.add_option("-n,--max-tokens", command.maxNewTokens, "Tokens to generate at most (128)");
  app.add_option("--temperature", command.temperature, "0 (default) is greedy");
  app.add_option("--top-k", command.topK, "Keep the K most likely tokens (0: off)");
  app.add_option("--top-p", command.topP, "Nucleus sampling mass (1: off)");
  app.add_option("--min-p", command.minP, "Drop tokens below min-p x the top probability");
  app.add_option("--repetition-penalty", command.repetitionPenalty, "1: off");
  app.add_option("--seed", command.seed, "Sampling seed (same seed, same tokens)");
  app.add_flag("--ignore-eos", command.ignoreEos, "Keep generating past end-of-sequence");
  app.add_flag("--json", command.json, "Print one JSON object instead of streaming text");
  app.add_flag("--no-bos", command.noBos, "Do not add the tokenizer's BOS to the prompt");
  app.add_option("--dump-logits", command.dumpLogits,
                 "Write the f32 logits of every position to FILE, row-major [positions][vocab]");
  command.engine.add(app);
  return &command;
}

int runGenerate(GenerateCommand &c) {
  if (c.plan.empty())
    return cli::fail("no engine plan given; usage: llmrun engine.plan -p PROMPT (see --help)");
  auto engine = loadEngine(c.plan, c.engine, 1, c.json);
  if (!engine)
    return cli::fail(engine.status());
  Engine &e = **engine;
  auto encoded = e.tokenizer().tryEncode(c.prompt, !c.noBos);
  if (!encoded)
    return cli::fail(encoded.status());
  std::vector<int32_t> prompt = std::move(encoded).value();
  if (prompt.empty())
    return cli::fail("the prompt encodes to no tokens (pass text with -p, or drop --no-bos)");
  GenerateOptions options;
  options.maxNewTokens = c.maxNewTokens;
  options.sampling.temperature = c.temperature;
  options.sampling.topK = c.topK;
  options.sampling.topP = c.topP;
  options.sampling.minP = c.minP;
  options.sampling.repetitionPenalty = c.repetitionPenalty;
  options.sampling.seed = c.seed;
  options.ignoreEos = c.ignoreEos;
  options.keepAllLogits = !c.dumpLogits.empty();
  GenerateTimings timings;
  TextCallback stream = nullptr;
  if (!c.json) {
    std::fputs(c.prompt.c_str(), stdout);
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
  if (!c.dumpLogits.empty()) {
    std::ofstream out(c.dumpLogits, std::ios::binary);
    out.write(reinterpret_cast<const char *>(r.logits.data()),
              static_cast<std::streamsize>(r.logits.size() * sizeof(float)));
    if (!out)
      return cli::fail(c.dumpLogits + ": cannot write the logits");
  }
  double prefillTps = timings.prefillTokens / std::max(timings.prefillSeconds, 1e-9);
  double decodeTps = timings.decodeTokens / std::max(timings.decodeSeconds, 1e-9);
  if (c.json) {
    nlohmann::json j;
    j["prompt_ids"] = r.promptIds;
    j["ids"] = r.ids;
    j["text"] = r.text;
    j["finish_reason"] = r.finishReason;
    j["timings"] = {{"prefill_tokens", timings.prefillTokens},
                    {"prefill_seconds", timings.prefillSeconds},
                    {"prefill_tokens_per_second", prefillTps},
                    {"decode_tokens", timings.decodeTokens},
                    {"decode_seconds", timings.decodeSeconds},
                    {"decode_tokens_per_second", decodeTps},
                    {"time_to_first_token_seconds", timings.prefillSeconds}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("\n");
  std::fprintf(stderr,
               "llmrun: prefill %lld tokens at %.1f tok/s, decode %lld tokens at %.1f tok/s, "
               "time to first token %.1f ms (%s)\n",
               static_cast<long long>(timings.prefillTokens), prefillTps,
               static_cast<long long>(timings.decodeTokens), decodeTps,
               timings.prefillSeconds * 1000.0, r.finishReason.c_str());
  return 0;
}

} // namespace llmc
