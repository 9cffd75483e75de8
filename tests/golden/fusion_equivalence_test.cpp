// The fusion passes change where intermediates live, never what is computed:
// on stories260K (../shared, f32) the default (fused) plan, and plans with a
// single fusion on or off, must give the -O0 plan's logits within 1e-5 at
// every position (one prefill step and token by token), and the same greedy
// ids for every golden prompt.
#include "common/compare.h"
#include "common/test_paths.h"
#include "driver/build.h"
#include "engine/generate.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <cmath>
#include <map>

namespace llmc {
namespace {

constexpr int64_t kVocab = 512, kPositions = 256;

// Builds (once per test binary) the stories260K plan for -O<level> without
// the fusions in `noFuse`.
std::string planFor(int level, const std::vector<std::string> &noFuse = {}) {
  static std::map<std::string, std::string> built;
  std::string key = std::to_string(level);
  for (const std::string &name : noFuse)
    key += "-" + name;
  auto it = built.find(key);
  if (it != built.end())
    return it->second;
  BuildOptions options;
  options.input = test::sharedPath("models/stories260k");
  options.output = test::scratchDir("fusion-" + key) + "/s.plan";
  options.optimizationLevel = level;
  options.noFuse = noFuse;
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  return built[key] = options.output;
}

std::unique_ptr<Engine> load(const std::string &plan) {
  auto engine = Engine::load(plan, EngineOptions{});
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

Json goldenRuns() {
  auto text = readTextFile(test::sharedPath("golden/stories260k_greedy.json"));
  EXPECT_TRUE(text.isOk()) << text.message();
  auto json = parseJson(text.isOk() ? *text : "{}", "stories260k_greedy.json");
  EXPECT_TRUE(json.isOk()) << json.message();
  return json.isOk() ? (*json)["runs"] : Json::array();
}

// run.c's token sequence for "Once upon a time" (prompt + greedy output),
// 256 positions.
std::vector<int32_t> goldenSequence() {
  const Json run = goldenRuns()[0];
  std::vector<int32_t> ids = run["prompt_ids"].get<std::vector<int32_t>>();
  for (int32_t id : run["generated_ids"].get<std::vector<int32_t>>())
    ids.push_back(id);
  ids.resize(kPositions);
  return ids;
}

// Logits [positions, V] of the whole sequence: one prefill step, or one
// decode step per token.
std::vector<float> logitsOf(Engine &engine, const std::vector<int32_t> &ids, bool tokenByToken) {
  SequenceId seq = engine.addSequence();
  std::vector<float> all;
  if (!tokenByToken) {
    auto logits = engine.step({{seq, ids}}, /*allLogits=*/true);
    EXPECT_TRUE(logits.isOk()) << logits.message();
    if (logits)
      all.assign(*logits, *logits + ids.size() * kVocab);
  } else {
    for (int32_t id : ids) {
      auto logits = engine.step({{seq, {id}}}, /*allLogits=*/false);
      EXPECT_TRUE(logits.isOk()) << logits.message();
      if (!logits)
        break;
      all.insert(all.end(), *logits, *logits + kVocab);
    }
  }
  EXPECT_TRUE(engine.releaseSequence(seq).isOk());
  return all;
}

// The largest |a - b| over each position's logits must stay within 1e-5.
void expectSameLogits(const std::vector<float> &reference, const std::vector<float> &fused,
                      const std::string &what) {
  ASSERT_EQ(reference.size(), fused.size()) << what;
  ASSERT_FALSE(reference.empty()) << what;
  test::Difference worst;
  for (int64_t p = 0; p < static_cast<int64_t>(reference.size()) / kVocab; ++p) {
    ASSERT_TRUE(test::allClose(&reference[p * kVocab], &fused[p * kVocab], kVocab, 1e-5))
        << what << ": position " << p;
    worst.merge(test::maxAbsDiff(&reference[p * kVocab], &fused[p * kVocab], kVocab), p * kVocab);
  }
  std::printf("%s: max |logit - -O0 logit| over %lld positions: %.3g\n", what.c_str(),
              static_cast<long long>(reference.size() / kVocab), worst.maxAbs);
}

class FusionEquivalence : public ::testing::Test {
protected:
  void SetUp() override {
    LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
    LLMC_REQUIRE_SHARED("golden/stories260k_greedy.json");
  }
};

TEST_F(FusionEquivalence, DefaultPlanLogitsMatchO0AtEveryPosition) {
  auto reference = load(planFor(0)), fused = load(planFor(1));
  ASSERT_TRUE(reference && fused);
  std::vector<int32_t> ids = goldenSequence();
  for (bool tokenByToken : {false, true})
    expectSameLogits(logitsOf(*reference, ids, tokenByToken), logitsOf(*fused, ids, tokenByToken),
                     tokenByToken ? "decode" : "prefill");
}

// Each fusion alone, and all but one: every combination of the lowered forms
// (e.g. a packed q/k/v buffer read by separate RoPE and attention steps).
TEST_F(FusionEquivalence, SingleFusionsOnAndOffMatchO0) {
  const std::vector<std::string> all = {"qkv", "swiglu", "head", "norm", "residual", "rope"};
  auto reference = load(planFor(0));
  ASSERT_NE(reference, nullptr);
  std::vector<int32_t> ids = goldenSequence();
  ids.resize(40);
  std::vector<float> expected = logitsOf(*reference, ids, false);
  std::vector<float> expectedDecode = logitsOf(*reference, ids, true);
  for (const std::string &name : all) {
    std::vector<std::string> others;
    for (const std::string &other : all)
      if (other != name)
        others.push_back(other);
    for (const auto &[what, noFuse] :
         {std::pair("only " + name, others), std::pair("all but " + name, std::vector{name})}) {
      auto engine = load(planFor(1, noFuse));
      ASSERT_NE(engine, nullptr) << what;
      expectSameLogits(expected, logitsOf(*engine, ids, false), what + ", prefill");
      expectSameLogits(expectedDecode, logitsOf(*engine, ids, true), what + ", decode");
    }
  }
}

// run.c semantics (greedy, stop at BOS, positions < 256), as in
// stories260k_test.cpp; greedy generation takes Engine::stepGreedy, so the
// fused plan's ids come from its LmHead argmax without logits.
TEST_F(FusionEquivalence, GreedyIdsIdenticalForEveryGoldenPrompt) {
  auto reference = load(planFor(0)), fused = load(planFor(1));
  ASSERT_TRUE(reference && fused);
  for (const Json &run : goldenRuns()) {
    std::vector<int32_t> prompt = run["prompt_ids"].get<std::vector<int32_t>>();
    GenerateOptions options;
    options.maxNewTokens = kPositions - static_cast<int64_t>(prompt.size()) + 1;
    options.sampling.temperature = 0.0f;
    options.ignoreEos = true;
    options.stopTokens = {1};
    auto expected = generateBatch(*reference, {prompt}, options);
    auto got = generateBatch(*fused, {prompt}, options);
    ASSERT_TRUE(expected.isOk() && got.isOk());
    EXPECT_EQ(got->front().ids, expected->front().ids) << run["prompt"];
    EXPECT_EQ(got->front().ids, run["generated_ids"].get<std::vector<int32_t>>()) << run["prompt"];
  }
}

// Engine::stepGreedy on the fused plan (LmHead writes ids, no logits) gives
// the argmax of the logits step() returns, for a batch mixing a prefill
// chunk and decode tokens.
TEST_F(FusionEquivalence, StepGreedyIsTheArgmaxOfTheLogits) {
  auto logitsEngine = load(planFor(1)), idsEngine = load(planFor(1));
  ASSERT_TRUE(logitsEngine && idsEngine);
  std::vector<int32_t> ids = goldenSequence();
  std::vector<SequenceId> a = {logitsEngine->addSequence(), logitsEngine->addSequence()};
  std::vector<SequenceId> b = {idsEngine->addSequence(), idsEngine->addSequence()};
  for (int64_t p = 0; p < 20; ++p) {
    std::vector<int32_t> first = p == 0 ? std::vector<int32_t>(ids.begin(), ids.begin() + 7)
                                        : std::vector<int32_t>{ids[6 + p]};
    std::vector<int32_t> second = {ids[p]};
    auto logits = logitsEngine->step({{a[0], first}, {a[1], second}}, false);
    auto greedy = idsEngine->stepGreedy({{b[0], first}, {b[1], second}});
    ASSERT_TRUE(logits.isOk() && greedy.isOk());
    for (int r = 0; r < 2; ++r) {
      const float *row = *logits + r * kVocab;
      int32_t best = static_cast<int32_t>(std::max_element(row, row + kVocab) - row);
      EXPECT_EQ((*greedy)[r], best) << "step " << p << " sequence " << r;
    }
  }
}

} // namespace
} // namespace llmc
