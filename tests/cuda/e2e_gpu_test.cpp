// stories260K end to end on the GPU (label gpu; skipped without one): the
// f32 plan's logits match the CPU backend's, greedy decoding gives llama2.c
// run.c's ids (../shared/golden), a batch gives each sequence's own ids; the
// int4 plan (RTN, groups of 32: the W4A16 GEMVs and int4 GEMMs) matches the
// CPU's int4 kernels. Plans come from $LLMC_TEST_PLAN_DIR/stories260k-<f32|q4>.plan
// (carried to a GPU machine that has no compiler), else are built here.
#include "common/stories260k_golden.h"
#include "cuda/device.h"
#include "engine/generate.h"
#include "support/json.h"

#ifdef LLMC_HAVE_DRIVER
#include "driver/build.h"
#endif

#include <cmath>
#include <cstdlib>
#include <map>

namespace llmc {
namespace {

// variant: "f32", or "q4" (int4 RTN, groups of 32, f32 activations).
std::string planPath(const std::string &variant, std::string *why) {
  const std::string file = "stories260k-" + variant + ".plan";
  if (const char *dir = std::getenv("LLMC_TEST_PLAN_DIR"))
    return std::string(dir) + "/" + file;
#ifdef LLMC_HAVE_DRIVER
  static std::map<std::string, std::string> built;
  if (built.count(variant))
    return built[variant];
  BuildOptions options;
  options.input = test::sharedPath("models/stories260k");
  options.output = test::scratchDir("gpu-e2e") + "/" + file;
  options.targets = "cpu,sm_90a,ptx";
  if (variant == "q4") {
    options.quantize = "rtn";
    options.groupSize = 32;
  }
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  if (!status) {
    *why = status.message();
    return "";
  }
  return built[variant] = options.output;
#else
  *why = "set LLMC_TEST_PLAN_DIR to a folder holding " + file;
  return "";
#endif
}

class GpuStories260k : public ::testing::Test {
protected:
  virtual std::string variant() const { return "f32"; }

  void SetUp() override {
    std::string noGpu = cuda::Device::unavailableReason();
    if (!noGpu.empty())
      GTEST_SKIP() << "no usable GPU: " << noGpu;
    LLMC_REQUIRE_SHARED("golden/stories260k_greedy.json");
    if (std::getenv("LLMC_TEST_PLAN_DIR") == nullptr)
      LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
    std::string why;
    plan_ = planPath(variant(), &why);
    ASSERT_FALSE(plan_.empty()) << why;
  }

  std::unique_ptr<Engine> load(const std::string &device, int64_t maxSequences = 1) {
    EngineOptions options;
    options.device = device;
    options.maxSequences = maxSequences;
    options.gpuMemoryFraction = 0.5;
    auto engine = Engine::load(plan_, options);
    EXPECT_TRUE(engine.isOk()) << engine.message();
    return engine.isOk() ? std::move(*engine) : nullptr;
  }

  static Json runs() { return test::stories260kGoldenRuns(); }

  // The largest |logit| difference GPU vs CPU over a 64-token prefill (all
  // rows) and 48 decode steps (decode GEMVs, flash-decoding, CUDA graphs).
  double maxLogitDifference() {
    auto cpu = load("cpu");
    auto gpu = load("cuda");
    if (!cpu || !gpu)
      return INFINITY;
    std::vector<int32_t> ids = runs()[0]["prompt_ids"].get<std::vector<int32_t>>();
    for (int32_t id : runs()[0]["generated_ids"].get<std::vector<int32_t>>())
      ids.push_back(id);
    const int64_t vocab = cpu->vocabSize(), prefill = 64, decode = 48;
    ids.resize(prefill + decode);
    SequenceId a = cpu->addSequence(), b = gpu->addSequence();
    double maxDiff = 0.0;
    auto compare = [&](const std::vector<int32_t> &tokens, bool all) {
      auto want = cpu->step({{a, tokens}}, all);
      ASSERT_TRUE(want.isOk()) << want.message();
      std::vector<float> wantCopy(*want, *want + (all ? tokens.size() : 1) * vocab);
      auto got = gpu->step({{b, tokens}}, all);
      ASSERT_TRUE(got.isOk()) << got.message();
      for (size_t i = 0; i < wantCopy.size(); ++i) {
        double diff = std::fabs(double((*got)[i]) - wantCopy[i]);
        maxDiff = std::isnan(diff) ? INFINITY : std::max(maxDiff, diff); // NaN: a failure
      }
    };
    compare(std::vector<int32_t>(ids.begin(), ids.begin() + prefill), true);
    for (int64_t t = prefill; t < prefill + decode; ++t)
      compare({ids[t]}, false);
    std::printf("%s: max |logit gpu - cpu| over %lld positions: %.3g\n", variant().c_str(),
                static_cast<long long>(prefill + decode), maxDiff);
    return maxDiff;
  }

  std::string plan_;
};

class GpuStories260kInt4 : public GpuStories260k {
protected:
  std::string variant() const override { return "q4"; }
};

TEST_F(GpuStories260k, PrefillAndDecodeLogitsMatchTheCpu) { EXPECT_LT(maxLogitDifference(), 2e-3); }

TEST_F(GpuStories260kInt4, PrefillAndDecodeLogitsMatchTheCpu) {
  EXPECT_LT(maxLogitDifference(), 2e-3);
}

TEST_F(GpuStories260k, GreedyIdsMatchRunc) {
  auto engine = load("cuda");
  ASSERT_NE(engine, nullptr);
  for (const Json &run : runs()) {
    std::vector<int32_t> prompt = run["prompt_ids"].get<std::vector<int32_t>>();
    auto results = generateBatch(*engine, {prompt}, test::runcOptions(prompt.size()));
    ASSERT_TRUE(results.isOk()) << results.message();
    EXPECT_EQ(results->front().ids, run["generated_ids"].get<std::vector<int32_t>>())
        << "prompt: " << run["prompt"].get<std::string>();
  }
}

TEST_F(GpuStories260k, BatchGivesEachSequenceItsOwnIds) {
  auto engine = load("cuda", static_cast<int64_t>(runs().size()));
  ASSERT_NE(engine, nullptr);
  test::expectBatchGivesEachSequenceItsOwnIds(*engine);
}

} // namespace
} // namespace llmc
