// The CUDA backend's host side without a GPU: a fake libcuda
// (fake_libcuda.cpp: host memory, no kernel runs) checks every launch's
// shape and that each StepArgs pointer lies inside an allocation, while the
// engine loads a plan, prefills, decodes (CUDA graphs), decodes greedily
// (ids on the device), grows its arena, and reports bad input.
#include "cuda/model_dirs.h"
#include "driver/build.h"
#include "engine/generate.h"

#include <cstdlib>
#include <dlfcn.h>

namespace llmc {
namespace {

// Before anything opens the driver.
const bool kFakeDriver = setenv("LLMC_LIBCUDA", LLMC_FAKE_LIBCUDA, 1) == 0;

template <typename Fn> Fn fake(const char *name) {
  void *library = dlopen(LLMC_FAKE_LIBCUDA, RTLD_NOW | RTLD_NOLOAD);
  return library ? reinterpret_cast<Fn>(dlsym(library, name)) : nullptr;
}
std::string fakeError() { return fake<const char *(*)()>("fakeCudaError")(); }
long fakeCount(const char *what) { return fake<long (*)()>(what)(); }

// A stories260K-shape synthetic plan; `variant` is "" (fused f32), "O0",
// "bf16" or "int4".
std::string plan(const std::string &targets, const std::string &variant = "") {
  static std::map<std::string, std::string> built;
  std::string key = targets + "/" + variant;
  if (built.count(key))
    return built[key];
  std::string dir = test::writeModelDir("cuda-fake-" + targets + variant, test::kStories260kShape);
  BuildOptions options;
  options.input = dir;
  options.output = dir + "/plan.plan";
  options.syntheticSeed = 5;
  options.targets = targets;
  if (variant == "O0")
    options.optimizationLevel = 0;
  if (variant == "bf16")
    options.dtype = "bf16";
  if (variant == "int4") {
    options.quantize = "rtn";
    options.groupSize = 32;
  }
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  return built[key] = options.output;
}

std::unique_ptr<Engine> loadCuda(const std::string &path, int64_t sequences, int64_t kvTokens = 0) {
  EngineOptions options;
  options.device = "cuda";
  options.maxSequences = sequences;
  options.kvCacheTokens = kvTokens;
  options.gpuMemoryFraction = 0.5;
  auto engine = Engine::load(path, options);
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

class CudaFakeDriverPlans : public ::testing::TestWithParam<const char *> {};

TEST_P(CudaFakeDriverPlans, PrefillDecodeAndGreedyLaunchOnlyValidAddresses) {
  ASSERT_TRUE(kFakeDriver);
  long capturedBefore = fakeCount("fakeCudaGraphsCaptured");
  auto engine = loadCuda(plan("cpu,sm_90a,ptx", GetParam()), 3);
  ASSERT_NE(engine, nullptr);
  EXPECT_NE(engine->backend().description().find("Fake H200"), std::string::npos);
  EXPECT_NE(engine->backend().description().find("sm_90a"), std::string::npos);
  GenerateOptions options;
  options.maxNewTokens = 20;
  options.ignoreEos = true;
  auto greedy = generateBatch(*engine, {{1, 3, 4}, {1, 5}, {1, 3, 3, 3, 4}}, options);
  ASSERT_TRUE(greedy.isOk()) << greedy.message();
  options.sampling.temperature = 0.8f; // logits come back instead of ids
  auto sampled = generateBatch(*engine, {{1, 3, 4}, {1, 5}}, options);
  ASSERT_TRUE(sampled.isOk()) << sampled.message();
  EXPECT_EQ(fakeError(), "");
  EXPECT_GT(fakeCount("fakeCudaLaunches"), 0);
  // Decode steps of 3 and 2 sequences: a graph each, replayed.
  EXPECT_GE(fakeCount("fakeCudaGraphsCaptured") - capturedBefore, 2);
  EXPECT_GT(fakeCount("fakeCudaGraphLaunches"), fakeCount("fakeCudaGraphsCaptured"));
  auto bandwidth = engine->backend().memoryBandwidthGBs();
  ASSERT_TRUE(bandwidth.isOk()) << bandwidth.message();
  EXPECT_GT(*bandwidth, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Variants, CudaFakeDriverPlans, ::testing::Values("", "O0", "bf16", "int4"),
                         [](const auto &info) {
                           return std::string(*info.param ? info.param : "fused");
                         });

TEST(CudaFakeDriver, ArenaGrowsForALongerStep) {
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 1, /*kvTokens=*/2048);
  ASSERT_NE(engine, nullptr);
  SequenceId a = engine->addSequence(), b = engine->addSequence();
  std::vector<int32_t> prompt(400, 3);
  auto logits = engine->step({{a, prompt}, {b, prompt}}, /*allLogits=*/true); // 800 rows > 512
  ASSERT_TRUE(logits.isOk()) << logits.message();
  auto next = engine->step({{a, {4}}, {b, {5}}}, false);
  ASSERT_TRUE(next.isOk()) << next.message();
  EXPECT_EQ(fakeError(), "");
}

TEST(CudaFakeDriver, BadTokenIdsAreAnErrorNamingThePosition) {
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 1);
  ASSERT_NE(engine, nullptr);
  SequenceId s = engine->addSequence();
  auto logits = engine->step({{s, {1, 9999}}}, false);
  ASSERT_FALSE(logits.isOk());
  EXPECT_NE(logits.message().find("token id 9999 at position 1"), std::string::npos)
      << logits.message();
}

TEST(CudaFakeDriver, PlanWithoutGpuCodeIsAClearError) {
  EngineOptions options;
  options.device = "cuda";
  auto engine = Engine::load(plan("cpu"), options);
  ASSERT_FALSE(engine.isOk());
  EXPECT_NE(engine.message().find("has no GPU programs"), std::string::npos) << engine.message();
}

} // namespace
} // namespace llmc
