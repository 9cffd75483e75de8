// Architecture goldens: tiny random-weight checkpoints of each supported HF
// family (tests/data/hf/<name>, written by tests/data/hf/generate.py with
// transformers, an independent implementation), built into f32 plans by the
// llmc driver and run by the CPU engine. Every position's logits must match
// transformers' within 1e-4, in one prefill step and token by token.
#include "common/compare.h"
#include "common/test_paths.h"
#include "driver/build.h"
#include "engine/engine.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace llmc {
namespace {

constexpr double kTolerance = 1e-4;

// HF's reference: the ids and their logits [ids.size(), vocab].
struct Reference {
  std::vector<int32_t> ids;
  std::vector<int32_t> greedyNext; // argmax of each row
  int64_t vocab = 0;
  std::vector<float> logits;
};

Reference loadReference(const std::string &name) {
  Reference ref;
  auto text = readTextFile(test::testDataPath("hf/" + name + "/logits.json"));
  EXPECT_TRUE(text.isOk()) << text.message();
  auto json = parseJson(text.isOk() ? *text : "{}", name + "/logits.json");
  EXPECT_TRUE(json.isOk()) << json.message();
  if (!text.isOk() || !json.isOk())
    return ref;
  ref.ids = (*json)["ids"].get<std::vector<int32_t>>();
  ref.greedyNext = (*json)["greedy_next"].get<std::vector<int32_t>>();
  ref.vocab = (*json)["shape"][1].get<int64_t>();
  auto raw = MappedFile::open(test::testDataPath("hf/" + name + "/logits.f32"));
  EXPECT_TRUE(raw.isOk()) << raw.message();
  if (!raw.isOk())
    return ref;
  EXPECT_EQ(raw->size(), ref.ids.size() * ref.vocab * sizeof(float));
  const float *data = reinterpret_cast<const float *>(raw->data());
  ref.logits.assign(data, data + raw->size() / sizeof(float));
  return ref;
}

// Builds (once per test binary) the f32 plan of tests/data/hf/<name>; "" on failure.
std::string planFor(const std::string &name) {
  static std::map<std::string, std::string> built;
  if (auto it = built.find(name); it != built.end())
    return it->second;
  BuildOptions options;
  options.input = test::testDataPath("hf/" + name);
  options.output = test::scratchDir("hf-" + name) + "/" + name + ".plan";
  options.dtype = "f32";
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  return built[name] = status.isOk() ? options.output : "";
}

std::unique_ptr<Engine> buildAndLoad(const std::string &name) {
  std::string plan = planFor(name);
  if (plan.empty())
    return nullptr;
  auto engine = Engine::load(plan, EngineOptions{});
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

int32_t argmax(const float *row, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

// Max |ours - HF| over one position's logits; also checks its greedy token.
double compareRow(const Reference &ref, size_t position, const float *row) {
  const float *golden = ref.logits.data() + position * ref.vocab;
  double maxDiff = test::maxAbsDiff(row, golden, ref.vocab).maxAbs; // +inf on a NaN
  EXPECT_EQ(argmax(row, ref.vocab), ref.greedyNext[position]) << "position " << position;
  return maxDiff;
}

class HfLogits : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    ref_ = loadReference(GetParam());
    ASSERT_FALSE(ref_.logits.empty());
    ASSERT_TRUE(test::allFinite(ref_.logits.data(), ref_.logits.size())) << GetParam();
    engine_ = buildAndLoad(GetParam());
    ASSERT_NE(engine_, nullptr);
    ASSERT_EQ(engine_->vocabSize(), ref_.vocab);
  }

  void report(const char *mode, double maxDiff) {
    EXPECT_LT(maxDiff, kTolerance) << mode;
    std::printf("%s %s: max |logit - HF| over %zu positions: %.3g\n", GetParam(), mode,
                ref_.ids.size(), maxDiff);
  }

  Reference ref_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(HfLogits, ReferenceLogitsDifferBetweenPositions) {
  // Guards the data: identical rows would hide position (RoPE, mask) bugs.
  for (size_t t = 1; t < ref_.ids.size(); ++t) {
    // SetUp checked the logits are finite, so a NaN cannot pass as "differs".
    double diff = test::maxAbsDiff(&ref_.logits[t * ref_.vocab],
                                   &ref_.logits[(t - 1) * ref_.vocab], ref_.vocab)
                      .maxAbs;
    EXPECT_GT(diff, 0.1) << "positions " << t - 1 << " and " << t;
  }
}

TEST_P(HfLogits, PrefillMatchesHfAtEveryPosition) {
  SequenceId seq = engine_->addSequence();
  auto logits = engine_->step({{seq, ref_.ids}}, /*allLogits=*/true);
  ASSERT_TRUE(logits.isOk()) << logits.message();
  double maxDiff = 0.0;
  for (size_t t = 0; t < ref_.ids.size(); ++t)
    maxDiff = std::max(maxDiff, compareRow(ref_, t, *logits + t * ref_.vocab));
  report("prefill", maxDiff);
}

TEST_P(HfLogits, DecodeTokenByTokenMatchesHfAtEveryPosition) {
  SequenceId seq = engine_->addSequence();
  double maxDiff = 0.0;
  for (size_t t = 0; t < ref_.ids.size(); ++t) {
    auto logits = engine_->step({{seq, {ref_.ids[t]}}}, /*allLogits=*/true);
    ASSERT_TRUE(logits.isOk()) << logits.message();
    maxDiff = std::max(maxDiff, compareRow(ref_, t, *logits));
  }
  report("decode", maxDiff);
}

INSTANTIATE_TEST_SUITE_P(Families, HfLogits,
                         ::testing::Values("llama3-rope", "mistral", "qwen2", "llama-tied-bias",
                                           "llama-plain"),
                         [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

} // namespace
} // namespace llmc
