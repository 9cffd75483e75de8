// llmrun perplexity engine.plan --file F [--ctx 512] [--protocol P]: NLL and
// perplexity of a text, each window with a fresh KV cache.
// --protocol llmc (default), that of ../shared/README.md: tokenize the whole
// text once without BOS, cut the ids into windows of ctx - 1 (a last partial
// window is kept if it has at least 2 ids), feed [BOS] + window; every window
// id is predicted (the first one from BOS); NLL is the mean over all of them.
// --protocol second-half, llama.cpp's llama-perplexity, for figures side by
// side with it: tokenize with BOS in front, cut into whole windows of ctx ids
// (the rest is dropped), put BOS in place of each window's first id, and score
// only the ids of the second half: positions ctx/2 + 1 .. ctx - 1.
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

struct Score {
  double totalNll = 0.0;
  int64_t predicted = 0, windows = 0;
};

// Adds the NLL of ids[score, end) of one window: input holds the window's ids
// [begin, end - 1) (BOS in front, or in place of ids[begin]); row i of the
// logits predicts ids[begin + i + 1] (row 0 of an llmc window predicts ids[begin]).
Status scoreWindow(Engine &engine, const std::vector<int32_t> &input,
                   const std::vector<int32_t> &targets, Score &score) {
  SequenceId seq = engine.addSequence();
  auto logits = engine.step({{seq, input}}, /*allLogits=*/true);
  (void)engine.releaseSequence(seq);
  if (!logits)
    return logits.status();
  const int64_t vocab = engine.vocabSize(), rows = static_cast<int64_t>(input.size());
  const int64_t firstRow = rows - static_cast<int64_t>(targets.size());
  for (size_t i = 0; i < targets.size(); ++i)
    score.totalNll += negativeLogLikelihood(*logits + (firstRow + i) * vocab, vocab, targets[i]);
  score.predicted += static_cast<int64_t>(targets.size());
  ++score.windows;
  return Status::ok();
}

// --protocol llmc: windows of ctx - 1 ids after BOS, every id predicted.
Status scoreEveryId(Engine &engine, const std::vector<int32_t> &ids, int32_t bos, int64_t ctx,
                    Score &score) {
  const size_t window = static_cast<size_t>(ctx - 1);
  for (size_t begin = 0; begin < ids.size(); begin += window) {
    size_t end = std::min(ids.size(), begin + window);
    if (end - begin < 2 && begin > 0)
      break;
    std::vector<int32_t> input{bos};
    input.insert(input.end(), ids.begin() + begin, ids.begin() + end - 1); // the last is only predicted
    Status status = scoreWindow(engine, input, {ids.begin() + begin, ids.begin() + end}, score);
    if (!status)
      return status;
  }
  return Status::ok();
}

// --protocol second-half: [BOS] + ids in whole windows of ctx, BOS first in
// each, the ids at positions ctx/2 + 1 .. ctx - 1 scored.
Status scoreSecondHalves(Engine &engine, const std::vector<int32_t> &ids, int32_t bos,
                         int64_t ctx, Score &score) {
  std::vector<int32_t> tokens{bos};
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  const size_t window = static_cast<size_t>(ctx), first = window / 2;
  for (size_t begin = 0; begin + window <= tokens.size(); begin += window) {
    std::vector<int32_t> input(tokens.begin() + begin, tokens.begin() + begin + window - 1);
    input[0] = bos;
    Status status = scoreWindow(
        engine, input, {tokens.begin() + begin + first + 1, tokens.begin() + begin + window},
        score);
    if (!status)
      return status;
  }
  return Status::ok();
}

} // namespace

void registerPerplexityCommand(CLI::App &app, int &exitCode) {
  struct Options {
    std::string plan, file;
    int64_t ctx = 512;
    std::string protocol = "llmc";
    bool json = false;
    EngineFlags engine;
  };
  auto o = std::make_shared<Options>();
  CLI::App *cmd = app.add_subcommand("perplexity", "Perplexity of a text file");
  cmd->add_option("plan", o->plan, "Engine plan")->required();
  cmd->add_option("--file", o->file, "UTF-8 text file")->required();
  cmd->add_option("--ctx", o->ctx, "Window length including BOS (512)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24)); // the plan's max_seq_len: after load
  cmd->add_option("--protocol", o->protocol,
                  "Which ids are scored: llmc (every id, windows of ctx - 1 after BOS; the "
                  "default) or second-half (llama.cpp's llama-perplexity: whole windows of ctx "
                  "with BOS first, the second half scored)")
      ->check(CLI::IsMember({"llmc", "second-half"}));
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
    const bool secondHalf = o->protocol == "second-half";
    if (secondHalf && static_cast<int64_t>(ids.size()) + 1 < o->ctx) {
      exitCode = cli::fail(o->file + ": " + std::to_string(ids.size()) +
                           " ids, fewer than one window of --ctx " + std::to_string(o->ctx) +
                           " for --protocol second-half: use a longer text or a smaller --ctx");
      return;
    }
    Score score;
    Status scored = secondHalf ? scoreSecondHalves(engine, ids, *bos, o->ctx, score)
                               : scoreEveryId(engine, ids, *bos, o->ctx, score);
    if (!scored) {
      exitCode = cli::fail(scored);
      return;
    }
    const int64_t predicted = score.predicted, windows = score.windows;
    const double totalNll = score.totalNll;
    double nll = predicted > 0 ? totalNll / predicted : 0.0;
    if (o->json) {
      nlohmann::json j{{"tokens", ids.size()}, {"predicted", predicted}, {"windows", windows},
                       {"ctx", o->ctx}, {"protocol", o->protocol}, {"nll", nll}, {"ppl", std::exp(nll)}};
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
