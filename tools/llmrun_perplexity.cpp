// llmrun perplexity engine.plan --file F [--ctx 512]: the protocol of
// ../shared/README.md: tokenize the whole text once without BOS, cut the ids
// into windows of ctx - 1 (a last partial window is kept if it has at least
// 2 ids), feed [BOS] + window with a fresh KV cache; every window id is
// predicted (the first one from BOS); NLL is the mean over all predicted ids.
#include "cli_common.h"
#include "llmrun_commands.h"
#include "llmrun_engine.h"
#include "support/mapped_file.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

namespace llmc {
namespace {

// -log softmax(row)[target], computed in double.
double negativeLogLikelihood(const float *row, int64_t vocab, int32_t target) {
  double maxLogit = row[0];
  for (int64_t i = 1; i < vocab; ++i)
    maxLogit = std::max(maxLogit, static_cast<double>(row[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i)
    sum += std::exp(static_cast<double>(row[i]) - maxLogit);
  return std::log(sum) + maxLogit - row[target];
}

} // namespace

void registerPerplexityCommand(CLI::App &app, int &exitCode) {
  struct Options {
    std::string plan, file;
    int64_t ctx = 512;
    bool json = false;
    EngineFlags engine;
  };
  auto o = std::make_shared<Options>();
  CLI::App *cmd = app.add_subcommand("perplexity", "Perplexity of a text file");
  cmd->add_option("plan", o->plan, "Engine plan")->required();
  cmd->add_option("--file", o->file, "UTF-8 text file")->required();
  cmd->add_option("--ctx", o->ctx, "Window length including BOS (512)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24)); // the plan's max_seq_len: after load
  cmd->add_flag("--json", o->json, "Print JSON");
  o->engine.add(*cmd);
  cmd->callback([o, &exitCode]() {
    exitCode = 1;
    auto text = readTextFile(o->file);
    if (!text) {
      exitCode = cli::fail(text.status());
      return;
    }
    auto loaded = loadEngine(o->plan, o->engine, 1, o->json);
    if (!loaded) {
      exitCode = cli::fail(loaded.status());
      return;
    }
    Engine &engine = **loaded;
    auto bos = engine.tokenizer().bosId();
    if (!bos) {
      exitCode = cli::fail("the plan's tokenizer has no BOS token, which this protocol needs");
      return;
    }
    if (o->ctx < 2 || o->ctx > engine.model().max_seq_len()) {
      exitCode = cli::fail("--ctx must be in [2, " +
                           std::to_string(engine.model().max_seq_len()) + "]");
      return;
    }
    auto encoded = engine.tokenizer().tryEncode(*text, false);
    if (!encoded) {
      exitCode = cli::fail(encoded.status());
      return;
    }
    std::vector<int32_t> ids = std::move(encoded).value();
    int64_t window = o->ctx - 1, vocab = engine.vocabSize();
    double totalNll = 0.0;
    int64_t predicted = 0, windows = 0;
    for (size_t begin = 0; begin < ids.size(); begin += window) {
      size_t end = std::min(ids.size(), begin + window);
      if (end - begin < 2 && begin > 0)
        break;
      std::vector<int32_t> input{*bos};
      input.insert(input.end(), ids.begin() + begin, ids.begin() + end);
      input.pop_back(); // the last id is only predicted
      SequenceId seq = engine.addSequence();
      auto logits = engine.step({{seq, input}}, /*allLogits=*/true);
      (void)engine.releaseSequence(seq);
      if (!logits) {
        exitCode = cli::fail(logits.status());
        return;
      }
      for (size_t i = begin; i < end; ++i)
        totalNll += negativeLogLikelihood(*logits + (i - begin) * vocab, vocab, ids[i]);
      predicted += static_cast<int64_t>(end - begin);
      ++windows;
    }
    double nll = predicted > 0 ? totalNll / predicted : 0.0;
    if (o->json) {
      nlohmann::json j{{"tokens", ids.size()}, {"predicted", predicted}, {"windows", windows},
                       {"ctx", o->ctx}, {"nll", nll}, {"ppl", std::exp(nll)}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("tokens %zu, windows %lld (ctx %lld), predicted %lld, NLL %.4f, PPL %.4f\n",
                  ids.size(), static_cast<long long>(windows), static_cast<long long>(o->ctx),
                  static_cast<long long>(predicted), nll, std::exp(nll));
    }
    exitCode = cli::flushStdout();
  });
}

} // namespace llmc
