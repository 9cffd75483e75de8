// End-to-end goldens for stories260K (../shared): plans built by the llmc
// driver, run by the CPU engine, compared with llama2.c run.c's outputs.
#include "common/compare.h"
#include "common/stories260k_golden.h"
#include "driver/build.h"
#include "engine/generate.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <cmath>
#include <fstream>
#include <map>

namespace llmc {
namespace {

// Builds (once per test binary) the f32 plan of a shared model folder.
std::string planFor(const std::string &model) {
  static std::map<std::string, std::string> built;
  auto it = built.find(model);
  if (it != built.end())
    return it->second;
  std::string dir = test::scratchDir("golden-" + model);
  BuildOptions options;
  options.input = test::sharedPath("models/" + model);
  options.output = dir + "/" + model + ".plan";
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  built[model] = options.output;
  return options.output;
}

std::unique_ptr<Engine> load(const std::string &model, int64_t maxSequences = 1,
                             const std::string &kvCacheDtype = "auto") {
  EngineOptions options;
  options.maxSequences = maxSequences;
  options.kvCacheDtype = kvCacheDtype;
  auto engine = Engine::load(planFor(model), options);
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

using test::runcOptions;

Json goldenRuns() { return test::stories260kGoldenRuns(); }

class Stories260k : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
    LLMC_REQUIRE_SHARED("models/stories260k-untied/model.safetensors");
    LLMC_REQUIRE_SHARED("golden/stories260k_greedy.json");
  }
};

TEST_P(Stories260k, GreedyIdsMatchRuncForEveryPrompt) {
  auto engine = load(GetParam());
  ASSERT_NE(engine, nullptr);
  for (const Json &run : goldenRuns()) {
    std::string prompt = run["prompt"].get<std::string>();
    std::vector<int32_t> promptIds = run["prompt_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(engine->tokenizer().encode(prompt, true), promptIds) << "prompt: " << prompt;
    auto results = generateBatch(*engine, {promptIds}, runcOptions(promptIds.size()));
    ASSERT_TRUE(results.isOk()) << results.message();
    EXPECT_EQ(results->front().ids, run["generated_ids"].get<std::vector<int32_t>>())
        << "prompt: '" << prompt << "'";
  }
}

// Teacher-forces run.c's own token sequence ("Once upon a time" and its
// greedy output, 256 positions) through `engine`: its logits at every
// position and run.c's, [256, 512] each.
void teacherForcedLogits(Engine &engine, std::vector<float> &logits, std::vector<float> &golden) {
  auto raw = MappedFile::open(test::sharedPath("golden/stories260k_logits_once_upon_a_time.f32"));
  ASSERT_TRUE(raw.isOk());
  const int64_t vocab = 512, positions = 256;
  ASSERT_EQ(raw->size(), static_cast<size_t>(vocab * positions * 4));
  const float *data = reinterpret_cast<const float *>(raw->data());
  golden.assign(data, data + vocab * positions);
  const Json run = goldenRuns()[0];
  ASSERT_EQ(run["prompt"], "Once upon a time");
  std::vector<int32_t> ids = run["prompt_ids"].get<std::vector<int32_t>>();
  for (int32_t id : run["generated_ids"].get<std::vector<int32_t>>())
    ids.push_back(id);
  ids.resize(positions);
  SequenceId seq = engine.addSequence();
  auto all = engine.step({{seq, ids}}, /*allLogits=*/true);
  ASSERT_TRUE(all.isOk()) << all.message();
  logits.assign(*all, *all + golden.size()); // valid until the next step
}

TEST_P(Stories260k, LogitsWithin1e4OfRuncAtEveryPosition) {
  LLMC_REQUIRE_SHARED("golden/stories260k_logits_once_upon_a_time.f32");
  auto engine = load(GetParam());
  ASSERT_NE(engine, nullptr);
  std::vector<float> logits, golden;
  ASSERT_NO_FATAL_FAILURE(teacherForcedLogits(*engine, logits, golden));
  EXPECT_TRUE(test::allClose(logits, golden, 1e-4));
  std::printf("max |logit - run.c| over 256 positions: %.3g\n",
              test::maxAbsDiff(logits, golden).maxAbs);
}

// An f16 KV cache (llmrun --kv-cache-dtype f16) rounds K and V to about 3
// digits: the logits stay within 5e-2 of run.c's over 256 positions (0.0232
// measured, at a logit of -7.1, where f32 caches are within 1e-4), and greedy
// decoding keeps run.c's ids for every prompt.
TEST_P(Stories260k, F16KvCacheKeepsRuncsIdsAndLogitsClose) {
  LLMC_REQUIRE_SHARED("golden/stories260k_logits_once_upon_a_time.f32");
  auto engine = load(GetParam(), 1, "f16");
  ASSERT_NE(engine, nullptr);
  EXPECT_NE(engine->backend().description().find("f16 KV cache"), std::string::npos)
      << engine->backend().description();
  for (const Json &run : goldenRuns()) {
    std::vector<int32_t> promptIds = run["prompt_ids"].get<std::vector<int32_t>>();
    auto results = generateBatch(*engine, {promptIds}, runcOptions(promptIds.size()));
    ASSERT_TRUE(results.isOk()) << results.message();
    EXPECT_EQ(results->front().ids, run["generated_ids"].get<std::vector<int32_t>>())
        << "prompt: '" << run["prompt"].get<std::string>() << "'";
  }
  std::vector<float> logits, golden;
  ASSERT_NO_FATAL_FAILURE(teacherForcedLogits(*engine, logits, golden));
  test::Difference diff = test::maxAbsDiff(logits, golden);
  EXPECT_FALSE(diff.nonFinite) << diff.describe();
  EXPECT_LE(diff.maxAbs, 5e-2) << diff.describe();
  EXPECT_GT(diff.maxAbs, 0.0) << "the cache did not round: an f32 cache ran";
  std::printf("f16 KV cache: max |logit - run.c| over 256 positions: %.3g\n", diff.maxAbs);
}

TEST_P(Stories260k, BatchGivesTheSameTokensAsEachSequenceAlone) {
  auto engine = load(GetParam(), static_cast<int64_t>(goldenRuns().size()));
  ASSERT_NE(engine, nullptr);
  test::expectBatchGivesEachSequenceItsOwnIds(*engine);
}

// Top-k sampling through Engine::stepTopK's candidates (the path a GPU
// serves without sending the logits back) draws the tokens that sampling
// from the full logits draws, with the same seed.
TEST_P(Stories260k, TopKSamplingDrawsWhatFullLogitsSamplingDraws) {
  const std::vector<int32_t> prompt = goldenRuns()[0]["prompt_ids"].get<std::vector<int32_t>>();
  GenerateOptions options;
  options.maxNewTokens = 120;
  options.ignoreEos = true;
  options.sampling.temperature = 0.9f;
  options.sampling.topK = 20;
  options.sampling.topP = 0.95f;
  options.sampling.seed = 5;
  auto engine = load(GetParam());
  ASSERT_NE(engine, nullptr);
  auto generated = generateBatch(*engine, {prompt}, options);
  ASSERT_TRUE(generated.isOk()) << generated.message();

  auto sampler = sampling::Sampler::create(options.sampling);
  ASSERT_TRUE(sampler.isOk());
  auto reference = load(GetParam());
  ASSERT_NE(reference, nullptr);
  SequenceId sequence = reference->addSequence();
  std::vector<int32_t> next = prompt, ids;
  const int32_t vocab = static_cast<int32_t>(reference->vocabSize());
  while (static_cast<int64_t>(ids.size()) < options.maxNewTokens) {
    auto logits = reference->step({{sequence, next}}, /*allLogits=*/false);
    ASSERT_TRUE(logits.isOk()) << logits.message();
    ids.push_back(sampler->sample(*logits, vocab, nullptr, 0));
    next = {ids.back()};
  }
  EXPECT_EQ(generated->front().ids, ids);
}

INSTANTIATE_TEST_SUITE_P(TiedAndUntied, Stories260k,
                         ::testing::Values("stories260k", "stories260k-untied"),
                         [](const auto &info) {
                           return std::string(info.param) == "stories260k" ? "tied" : "untied";
                         });

} // namespace
} // namespace llmc
