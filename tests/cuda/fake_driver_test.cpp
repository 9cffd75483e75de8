// The CUDA backend's host side without a GPU: a fake libcuda
// (fake_libcuda.cpp: host memory, no kernel runs) checks every launch's
// shape and that each StepArgs pointer lies inside an allocation, while the
// engine loads a plan, prefills, decodes (CUDA graphs), decodes greedily
// (ids on the device), grows its arena, and reports bad input. A fake
// libcublasLt (fake_libcublaslt.cpp) records the GEMMs of bf16 plans' plain
// Linear steps: their shapes, strides and buffers, and the fallback to the
// steps' kernels.
#include "common/test_paths.h"
#include "cuda/cuda_backend.h"
#include "cuda/fake_cublaslt.h"
#include "cuda/model_dirs.h"
#include "driver/build.h"
#include "engine/generate.h"
#include "ops/op_table.h"
#include "plan/plan.h"
#include "plan/plan_format.h"

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <set>

namespace llmc {
namespace {

// Before anything opens the driver or cuBLASLt.
const bool kFakeDriver = setenv("LLMC_LIBCUDA", LLMC_FAKE_LIBCUDA, 1) == 0 &&
                         setenv("LLMC_LIBCUBLASLT", LLMC_FAKE_LIBCUBLASLT, 1) == 0;

template <typename Fn> Fn fakeIn(const char *library, const char *name) {
  void *handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  return handle ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr;
}
template <typename Fn> Fn fake(const char *name) { return fakeIn<Fn>(LLMC_FAKE_LIBCUDA, name); }
std::string fakeError() { return fake<const char *(*)()>("fakeCudaError")(); }
long fakeCount(const char *what) { return fake<long (*)()>(what)(); }
long fakeCountOf(const char *kernel) {
  return fake<long (*)(const char *)>("fakeCudaLaunchesOf")(kernel);
}

// A stories260K-shape synthetic plan; `variant` is "" (fused f32), "O0",
// "bf16", "bf16-O0" or "int4".
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
  if (variant == "O0" || variant == "bf16-O0")
    options.optimizationLevel = 0;
  if (variant == "bf16" || variant == "bf16-O0")
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
  // Top-k sampling asks the device for candidates (the fake reports every
  // token tied, so the logits come back too).
  long topKBefore = fakeCountOf("llmc_topk_f32");
  options.sampling.topK = 8;
  auto topK = generateBatch(*engine, {{1, 3, 4}, {1, 5}}, options);
  ASSERT_TRUE(topK.isOk()) << topK.message();
  EXPECT_EQ(fakeCountOf("llmc_topk_f32") - topKBefore, 20);
  EXPECT_EQ(topK->front().ids.size(), 20u);
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

// An int4 GEMM with a norm prologue and a bias (Qwen2's q/k/v: gamma,
// qweight, scales, zeros, bias) compiles for sm_90a, and its launches
// pass all five weights, each a valid device address (the fake checks them).
TEST(CudaFakeDriver, Int4NormGemmWithABiasGetsAllFiveWeights) {
  ASSERT_TRUE(kFakeDriver);
  std::string dir = test::writeModelDir("cuda-fake-qwen2-int4", test::kQwen2Shape);
  BuildOptions options;
  options.input = dir;
  options.output = dir + "/plan.plan";
  options.syntheticSeed = 9;
  options.targets = "cpu,sm_90a"; // what the fake H200 loads; ptx would double the compile
  options.quantize = "rtn";
  options.groupSize = 32;
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status built = runBuild(options, quiet);
  ASSERT_TRUE(built.isOk()) << built.message();
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  std::set<std::string> biased; // the sm_90a kernels of int4 norm Linear steps with a bias
  for (const fb::Program *program : *plan->meta().programs()) {
    if (program->target() != fb::Target::Sm90a)
      continue;
    for (const fb::Step *step : *program->steps())
      if (ops::stepVariant(*step) == "Linear[norm,q4,bias]") {
        EXPECT_EQ(step->weights()->size(), 5u);
        std::string kernel =
            plan->module(fb::Target::Sm90a)->functions()->Get(step->kernel())->str();
        EXPECT_NE(kernel.find("_biasf32"), std::string::npos) << kernel;
        biased.insert(kernel);
      }
  }
  // A prefill GEMM and the decode GEMVs.
  ASSERT_GE(biased.size(), 2u);
  EXPECT_TRUE(std::any_of(biased.begin(), biased.end(), [](const std::string &k) {
    return k.find("llmc_norm_linear_q4_gemm_") == 0;
  }));
  EXPECT_TRUE(std::any_of(biased.begin(), biased.end(), [](const std::string &k) {
    return k.find("llmc_norm_linear_q4_gemv_") == 0;
  }));

  auto engine = loadCuda(options.output, 2);
  ASSERT_NE(engine, nullptr);
  GenerateOptions generate;
  generate.maxNewTokens = 6;
  generate.ignoreEos = true;
  auto out = generateBatch(*engine, {{1, 3, 4, 5, 3}, {1, 4}}, generate);
  ASSERT_TRUE(out.isOk()) << out.message();
  EXPECT_EQ(fakeError(), "");
  auto weightsOf = fake<int (*)(const char *)>("fakeCudaWeightsOf");
  ASSERT_NE(weightsOf, nullptr);
  int launched = 0;
  for (const std::string &kernel : biased)
    if (fakeCountOf(kernel.c_str()) > 0) {
      EXPECT_EQ(weightsOf(kernel.c_str()), 5) << kernel;
      ++launched;
    }
  EXPECT_GE(launched, 2) << "the prefill GEMM and at least one decode GEMV ran";
}

// The families whose kernels are new (LayerNorm with its bias, per-head
// RMSNorm, partial / interleaved / per-pass RoPE, Logits with a bias or a
// scale), and `--quantize int8` plans (the W8A16 kernels in their fused
// forms), prefill and decode on the fake H200 with only valid addresses:
// each LayerNorm launch passes gamma and beta, Phi's Logits W and its bias,
// an int8 norm linear gamma, qweight and scales.
struct FakeFamily {
  const char *fixture;
  const char *kernelPart; // a kernel of the family, in its name
  int weights;            // what its launches pass
  const char *quantize = "";
};

class CudaFakeDriverFamilies : public ::testing::TestWithParam<FakeFamily> {};

TEST_P(CudaFakeDriverFamilies, PrefillAndDecodeLaunchOnlyValidAddresses) {
  ASSERT_TRUE(kFakeDriver);
  const FakeFamily &family = GetParam();
  BuildOptions options;
  options.input = test::testDataPath(std::string("hf/") + family.fixture);
  options.output = test::scratchDir(std::string("cuda-fake-family-") + family.fixture +
                                    family.quantize) +
                   "/x.plan";
  options.targets = "cpu,sm_90a";
  options.quantize = family.quantize;
  options.groupSize = 32;
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status built = runBuild(options, quiet);
  ASSERT_TRUE(built.isOk()) << built.message();
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  std::set<std::string> kernels;
  const fb::KernelModule *module = plan->module(fb::Target::Sm90a);
  ASSERT_NE(module, nullptr);
  for (const flatbuffers::String *name : *module->functions())
    if (name->str().find(family.kernelPart) != std::string::npos)
      kernels.insert(name->str());
  ASSERT_FALSE(kernels.empty()) << "no kernel named ..." << family.kernelPart << "...";

  auto engine = loadCuda(options.output, 2);
  ASSERT_NE(engine, nullptr);
  GenerateOptions generate;
  generate.maxNewTokens = 5;
  generate.ignoreEos = true;
  auto out = generateBatch(*engine, {{1, 3, 4, 5, 3}, {1, 4}}, generate);
  ASSERT_TRUE(out.isOk()) << out.message();
  EXPECT_EQ(fakeError(), "");
  auto weightsOf = fake<int (*)(const char *)>("fakeCudaWeightsOf");
  ASSERT_NE(weightsOf, nullptr);
  int launched = 0;
  for (const std::string &kernel : kernels)
    if (fakeCountOf(kernel.c_str()) > 0) {
      EXPECT_EQ(weightsOf(kernel.c_str()), family.weights) << kernel;
      ++launched;
    }
  EXPECT_GE(launched, 1) << family.kernelPart;
}

INSTANTIATE_TEST_SUITE_P(
    Families, CudaFakeDriverFamilies,
    ::testing::Values(FakeFamily{"phi", "llmc_layer_norm_f32_wf32_h64_bias", 2},
                      FakeFamily{"phi", "_biasf32", 2}, // the Logits kernels: W, bias
                      FakeFamily{"cohere", "_ls3f000000", 1},
                      FakeFamily{"qwen3", "llmc_rms_norm_f32_wf32_h64_g32", 1},
                      FakeFamily{"stablelm", "llmc_attention_", 0},
                      FakeFamily{"llama-longrope", "llmc_attention_", 0},
                      FakeFamily{"long-dynamic", "llmc_attention_", 0},
                      // int8 (W8A16): gamma, qweight, scales; qweight, scales.
                      FakeFamily{"llama-plain", "llmc_norm_linear_q8_", 3, "int8"},
                      FakeFamily{"llama-plain", "llmc_norm_linear_swiglu_q8_", 3, "int8"},
                      FakeFamily{"llama-plain", "llmc_linear_q8_", 2, "int8"}),
    [](const auto &info) {
      std::string name = std::string(info.param.fixture) + "_" + std::to_string(info.index);
      for (char &c : name)
        if (c == '-')
          c = '_';
      return name;
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

// --- Faults: a failed growth, an attributed launch error, the driver version. ---

template <typename... A> void fakeSet(const char *name, A... args) {
  fake<void (*)(A...)>(name)(args...);
}

// The first module function whose name holds `part`.
std::string kernelNamed(const Engine &engine, const std::string &part) {
  for (const auto *name : *engine.plan().module(fb::Target::Sm90a)->functions())
    if (name->str().find(part) != std::string::npos)
      return name->str();
  ADD_FAILURE() << "no kernel named *" << part << "*";
  return "";
}

TEST(CudaFakeDriverFaults, AFailedGrowthLeavesNoStepOnFreedBuffers) {
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 1, /*kvTokens=*/2048);
  ASSERT_NE(engine, nullptr);
  uint64_t perToken = 0;
  for (const fb::Program *p : *engine->plan().meta().programs())
    perToken = std::max(perToken, p->arena_bytes_per_token());
  ASSERT_GT(perToken, 0u);
  SequenceId a = engine->addSequence(), a2 = engine->addSequence();
  // The arena for 800 rows (512 reserved at load) cannot be had; one for 600 could.
  fakeSet<uint64_t>("fakeCudaFailAllocationsAbove", perToken * 600);
  std::vector<int32_t> prompt(400, 3);
  auto grown = engine->step({{a, prompt}, {a2, prompt}}, false);
  ASSERT_FALSE(grown.isOk());
  EXPECT_NE(grown.message().find("growing the activations to 800 rows"), std::string::npos)
      << grown.message();
  EXPECT_NE(grown.message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos);
  // A smaller step allocates for itself and launches only on live buffers.
  SequenceId b = engine->addSequence();
  auto small = engine->step({{b, {1, 3, 4, 5, 6}}}, false);
  ASSERT_TRUE(small.isOk()) << small.message();
  auto decode = engine->step({{b, {7}}}, false);
  ASSERT_TRUE(decode.isOk()) << decode.message();
  EXPECT_EQ(fakeError(), "");
  fakeSet<uint64_t>("fakeCudaFailAllocationsAbove", 0);
  SequenceId c = engine->addSequence(), c2 = engine->addSequence();
  std::vector<int32_t> longer(280, 3);
  ASSERT_TRUE(engine->step({{c, longer}, {c2, longer}}, false).isOk());
  EXPECT_EQ(fakeError(), "");
}

TEST(CudaFakeDriverFaults, DecodePartialsAreSizedBySequencesNotRows) {
  const int64_t sequences = 3;
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), sequences);
  ASSERT_NE(engine, nullptr);
  uint64_t decodePerRow = 0, prefillPerRow = 0;
  for (const fb::Program *p : *engine->plan().meta().programs())
    if (p->target() == fb::Target::Sm90a)
      for (const fb::Step *s : *p->steps())
        (p->phase() == fb::Phase::Decode ? decodePerRow : prefillPerRow) =
            std::max(p->phase() == fb::Phase::Decode ? decodePerRow : prefillPerRow,
                     s->workspace_bytes_per_token());
  ASSERT_GT(decodePerRow, 0u) << "no flash-decoding or split-K step in the decode programs";
  EXPECT_EQ(prefillPerRow, 0u);
  std::vector<SequenceTokens> batch;
  for (int64_t s = 0; s < sequences; ++s)
    batch.push_back({engine->addSequence(), {1, 3, 4}});
  ASSERT_TRUE(engine->step(batch, false).isOk());
  for (auto &t : batch)
    t.tokens = {5};
  ASSERT_TRUE(engine->step(batch, false).isOk());
  // The 512 rows reserved at load do not multiply the decode partials.
  EXPECT_EQ(fakeCount("fakeCudaLastWorkspaceBytes"),
            static_cast<long>(std::max<uint64_t>(256, decodePerRow * sequences)));
  EXPECT_EQ(fakeError(), "");
}

TEST(CudaFakeDriverFaults, ALaunchErrorInACaptureIsReportedNotTheInvalidatedCapture) {
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 1);
  ASSERT_NE(engine, nullptr);
  SequenceId a = engine->addSequence();
  ASSERT_TRUE(engine->step({{a, {1, 3, 4}}}, false).isOk());
  const std::string kernel = kernelNamed(*engine, "attention_decode");
  fakeSet<const char *, int>("fakeCudaFailLaunchesOf", kernel.c_str(), 701);
  auto decode = engine->step({{a, {5}}}, false);
  fakeSet<const char *, int>("fakeCudaFailLaunchesOf", "", 0);
  ASSERT_FALSE(decode.isOk());
  EXPECT_NE(decode.message().find("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"), std::string::npos)
      << decode.message();
  EXPECT_NE(decode.message().find(kernel), std::string::npos) << decode.message();
  EXPECT_NE(decode.message().find("capturing the CUDA graph"), std::string::npos);
  EXPECT_EQ(decode.message().find("CAPTURE_INVALIDATED"), std::string::npos) << decode.message();
  EXPECT_EQ(decode.message().find('\n'), std::string::npos) << decode.message();
  // The next decode captures again and runs.
  ASSERT_TRUE(engine->step({{a, {5}}}, false).isOk());
  EXPECT_EQ(fakeError(), "");
}

TEST(CudaFakeDriverFaults, CudaSyncNamesTheStepAndKernelOfAnAsynchronousFault) {
  setenv("LLMC_CUDA_SYNC", "1", 1);
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 1);
  unsetenv("LLMC_CUDA_SYNC");
  ASSERT_NE(engine, nullptr);
  EXPECT_NE(engine->backend().description().find("LLMC_CUDA_SYNC=1"), std::string::npos);
  SequenceId a = engine->addSequence();
  ASSERT_TRUE(engine->step({{a, {1, 3, 4}}}, false).isOk());
  const std::string kernel = kernelNamed(*engine, "attention_decode");
  long graphsBefore = fakeCount("fakeCudaGraphsCaptured");
  fakeSet<const char *, int>("fakeCudaFailSyncAfter", kernel.c_str(), 700);
  auto decode = engine->step({{a, {5}}}, false);
  fakeSet<const char *, int>("fakeCudaFailSyncAfter", "", 0);
  ASSERT_FALSE(decode.isOk());
  const std::string &m = decode.message();
  EXPECT_NE(m.find("LLMC_CUDA_SYNC: step "), std::string::npos) << m;
  EXPECT_NE(m.find("of the Decode program (max_tokens 1)"), std::string::npos) << m;
  EXPECT_NE(m.find("Attention, kernel " + kernel), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << m;
  EXPECT_EQ(fakeCount("fakeCudaGraphsCaptured"), graphsBefore); // kernel by kernel
  ASSERT_TRUE(engine->step({{a, {5}}}, false).isOk());
}

TEST(CudaFakeDriverFaults, AnOldDriverIsOneLineNamingBothVersions) {
  const std::string path = plan("cpu,sm_90a,ptx");
  fakeSet<int>("fakeCudaSetDriverVersion", 12080);
  EngineOptions options;
  options.device = "cuda";
  options.gpuMemoryFraction = 0.5;
  auto engine = Engine::load(path, options);
  fakeSet<int>("fakeCudaSetDriverVersion", 13000);
  ASSERT_FALSE(engine.isOk());
  const std::string &m = engine.message();
  EXPECT_NE(m.find("the CUDA driver on this machine is 12.8, older than the 13.0"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("sm_90a cubin (compiled by CUDA 13."), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  auto current = loadCuda(path, 1);
  ASSERT_NE(current, nullptr);
  EXPECT_NE(current->backend().description().find(", driver 13.0;"), std::string::npos)
      << current->backend().description();
}

// The GPU's KV cache holds what the plan's attention kernels read: a bf16
// plan takes "auto" or "bf16"-equal types only, and an f16 or f32 request is
// one line naming the plan's type and the way out.
TEST(CudaFakeDriver, KvCacheDtypeOtherThanThePlansIsRefusedWithTheFix) {
  const std::string path = plan("cpu,sm_90a,ptx", "bf16");
  for (const char *asked : {"f16", "f32"}) {
    EngineOptions options;
    options.device = "cuda";
    options.gpuMemoryFraction = 0.5;
    options.kvCacheDtype = asked;
    auto engine = Engine::load(path, options);
    ASSERT_FALSE(engine.isOk()) << asked;
    EXPECT_NE(engine.message().find(std::string("--kv-cache-dtype ") + asked +
                                    ": the GPU's KV cache holds what this plan's attention "
                                    "kernels read, bf16; use auto (or bf16) on the GPU, or "
                                    "--device cpu"),
              std::string::npos)
        << engine.message();
  }
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

// Per-row outputs in one step: one argmax launch for the Argmax rows, one
// top-k launch per distinct (k, temperature), logits for the Logits row
// (and for the top-k rows, whose ties overflow on the fake device).
TEST(CudaFakeDriver, EachRowGetsItsOwnOutputKind) {
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 4);
  ASSERT_NE(engine, nullptr);
  std::vector<SequenceTokens> batch;
  for (int i = 0; i < 5; ++i)
    batch.push_back({engine->addSequence(), {1, 3, 4 + i}});
  std::vector<int64_t> last = Engine::lastRows(batch);
  long argmaxBefore = fakeCountOf("llmc_argmax_f32"), topKBefore = fakeCountOf("llmc_topk_f32");
  auto out = engine->run(batch, {{last[0], OutputKind::Argmax},
                                 {last[1], OutputKind::TopK, 8, 0.7f},
                                 {last[2], OutputKind::Logits},
                                 {last[3], OutputKind::TopK, 3, 1.0f},
                                 {last[4], OutputKind::TopK, 8, 0.7f}});
  ASSERT_TRUE(out.isOk()) << out.message();
  EXPECT_EQ(fakeError(), "");
  EXPECT_EQ(fakeCountOf("llmc_argmax_f32") - argmaxBefore, 1);
  EXPECT_EQ(fakeCountOf("llmc_topk_f32") - topKBefore, 2);
  const StepOutput &o = **out;
  EXPECT_EQ(o.filled,
            (std::vector<OutputKind>{OutputKind::Argmax, OutputKind::TopK, OutputKind::Logits,
                                     OutputKind::TopK, OutputKind::TopK}));
  const int64_t vocab = engine->vocabSize();
  for (int r : {1, 3, 4}) {
    EXPECT_EQ(o.counts[r], vocab); // every token ties on the fake device
    EXPECT_NE(o.logitsOf(r), nullptr);
  }
  EXPECT_NE(o.logitsOf(2), nullptr);
  // Only argmax rows: ids come back, no logits.
  std::vector<SequenceTokens> next;
  for (const SequenceTokens &entry : batch)
    next.push_back({entry.sequence, {5}});
  std::vector<OutputRequest> greedy;
  for (int64_t r : Engine::lastRows(next))
    greedy.push_back({r, OutputKind::Argmax});
  auto ids = engine->run(next, greedy);
  ASSERT_TRUE(ids.isOk()) << ids.message();
  EXPECT_EQ((*ids)->logits, nullptr);
  EXPECT_EQ(fakeError(), "");
}

TEST(CudaFakeDriver, PlanWithoutGpuCodeIsAClearError) {
  EngineOptions options;
  options.device = "cuda";
  auto engine = Engine::load(plan("cpu"), options);
  ASSERT_FALSE(engine.isOk());
  EXPECT_NE(engine.message().find("has no GPU programs"), std::string::npos) << engine.message();
}

// --- cuBLASLt for the plain bf16 Linear steps of any-T programs. ---

template <typename Fn> Fn fakeLt(const char *name) {
  return fakeIn<Fn>(LLMC_FAKE_LIBCUBLASLT, name);
}
long ltMatmuls() { return fakeLt<test::FakeLtCount>("fakeLtMatmuls")(); }
const test::FakeLtMatmul &ltMatmul(long i) { return *fakeLt<test::FakeLtGet>("fakeLtMatmul")(i); }
std::string ltError() { return fakeLt<test::FakeLtText>("fakeLtError")(); }
void ltReset() { fakeLt<void (*)()>("fakeLtReset")(); }
uintptr_t allocationBase(const void *p) {
  return fake<uintptr_t (*)(const void *)>("fakeCudaAllocationBase")(p);
}

cuda::CudaBackend &cudaBackend(Engine &engine) {
  return static_cast<cuda::CudaBackend &>(engine.backend());
}

// The steps of `program` that may run on cuBLASLt, in order.
std::vector<const fb::Step *> libraryGemmSteps(const fb::Program &program) {
  std::vector<const fb::Step *> steps;
  for (const fb::Step *step : *program.steps())
    if (step->library_gemm() != nullptr)
      steps.push_back(step);
  return steps;
}

// Launches so far of the kernels of `steps` (each distinct kernel once).
long kernelLaunches(const Engine &engine, const std::vector<const fb::Step *> &steps) {
  std::set<std::string> names;
  for (const fb::Step *step : steps)
    names.insert(engine.plan().module(fb::Target::Sm90a)->functions()->Get(step->kernel())->str());
  long launches = 0;
  for (const std::string &name : names)
    launches += fake<long (*)(const char *)>("fakeCudaLaunchesOf")(name.c_str());
  return launches;
}

// Where the CUDA backend puts synthetic tensor `index` in its weight
// allocation: each tensor at the next multiple of 256 bytes.
uint64_t syntheticOffset(const Plan &plan, uint32_t index) {
  uint64_t total = 0, offset = 0;
  for (uint32_t i = 0; i <= index; ++i) {
    offset = total = alignUp(total, kPlanWeightAlignment);
    total += plan.meta().tensors()->Get(i)->size();
  }
  return offset;
}

// Checks one recorded cublasLtMatmul against `step` run with `rows` rows:
// D^T[rows, N] = X[rows, K] W^T (+ C^T) in column-major terms, with X and Y
// the step's buffers in the arena and W its weight.
void expectStepGemm(const Plan &plan, const fb::Program &program, const fb::Step &step,
                    const test::FakeLtMatmul &m, int64_t rows) {
  const fb::LibraryGemm &g = *step.library_gemm();
  const fb::Buffer &x = *program.buffers()->Get(step.inputs()->Get(0));
  const fb::Buffer &y = *program.buffers()->Get(step.outputs()->Get(0));
  constexpr int kBf16 = 14, kF32 = 0, kCompute32F = 68;
  EXPECT_EQ(m.transA, 1); // W is K x N column-major: transposed
  EXPECT_EQ(m.transB, 0);
  for (const test::FakeLtLayout *l : {&m.a, &m.b, &m.c, &m.d})
    EXPECT_EQ(l->type, kBf16);
  EXPECT_EQ(m.computeType, kCompute32F);
  EXPECT_EQ(m.scaleType, kF32);
  EXPECT_EQ(m.a.rows, uint64_t(g.k()));
  EXPECT_EQ(m.a.cols, uint64_t(g.n()));
  EXPECT_EQ(m.a.ld, g.k());
  EXPECT_EQ(m.b.rows, uint64_t(g.k()));
  EXPECT_EQ(m.b.cols, uint64_t(rows));
  EXPECT_EQ(m.b.ld, x.width());
  EXPECT_EQ(m.d.rows, uint64_t(g.n()));
  EXPECT_EQ(m.d.cols, uint64_t(rows));
  EXPECT_EQ(m.d.ld, y.width());
  EXPECT_TRUE(m.sameCdLayout);
  EXPECT_EQ(m.alpha, step.params_as_LinearParams()->output_scale()); // 1 but in Granite
  EXPECT_EQ(m.beta, step.params_as_LinearParams()->accumulate() ? 1.0f : 0.0f); // Y += X W^T
  // stories260K has no biases: the default epilogue.
  EXPECT_EQ(m.epilogue, 1u);
  // X and Y in the arena at offset_per_token * rows; C is Y (the residual).
  uintptr_t arena = allocationBase(m.pb);
  ASSERT_NE(arena, 0u);
  EXPECT_EQ(allocationBase(m.pd), arena);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.pb) - arena, x.offset_per_token() * rows);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.pd) - arena, y.offset_per_token() * rows);
  EXPECT_EQ(m.pc, m.pd);
  uintptr_t weights = allocationBase(m.pa);
  ASSERT_NE(weights, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.pa) - weights,
            syntheticOffset(plan, static_cast<uint32_t>(step.weights()->Get(0))));
  EXPECT_EQ(m.workspaceBytes, cuda::LtGemms::kWorkspaceBytes);
  EXPECT_NE(m.stream, nullptr);
}

std::unique_ptr<Engine> loadBf16(const std::string &variant, int64_t sequences,
                                 bool cublasLt = true) {
  EngineOptions options;
  options.device = "cuda";
  options.maxSequences = sequences;
  options.gpuMemoryFraction = 0.5;
  options.cublasLt = cublasLt;
  auto engine = Engine::load(plan("cpu,sm_90a,ptx", variant), options);
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

// A prefill step of 37 + 5 rows.
Status prefill(Engine &engine) {
  SequenceId a = engine.addSequence(), b = engine.addSequence();
  return engine.step({{a, std::vector<int32_t>(37, 3)}, {b, {1, 5, 7, 9, 11}}}, false).status();
}
constexpr int64_t kPrefillRows = 42;

class CudaFakeCublasLt : public ::testing::TestWithParam<const char *> {};

TEST_P(CudaFakeCublasLt, PrefillLinearStepsCallCublasLtWithTheirShapesAndBuffers) {
  ASSERT_TRUE(kFakeDriver);
  auto engine = loadBf16(GetParam(), 2);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(cudaBackend(*engine).usesCublasLt()) << cudaBackend(*engine).cublasLtNote();
  EXPECT_NE(engine->backend().description().find("cuBLASLt 13.1.0 (" LLMC_FAKE_LIBCUBLASLT ")"),
            std::string::npos)
      << engine->backend().description();
  const Plan &plan = engine->plan();
  const fb::Program &program = *plan.program(fb::Target::Sm90a, fb::Phase::Prefill);
  std::vector<const fb::Step *> steps = libraryGemmSteps(program);
  ASSERT_FALSE(steps.empty());
  ltReset();
  long kernelsBefore = kernelLaunches(*engine, steps);
  ASSERT_TRUE(prefill(*engine).isOk());
  EXPECT_EQ(fakeError(), "");
  EXPECT_EQ(ltError(), "");
  ASSERT_EQ(ltMatmuls(), static_cast<long>(steps.size()));
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("call " + std::to_string(i));
    expectStepGemm(plan, program, *steps[i], ltMatmul(static_cast<long>(i)), kPrefillRows);
    EXPECT_EQ(ltMatmul(static_cast<long>(i)).workspace, ltMatmul(0).workspace); // one, fixed
    EXPECT_FALSE(ltMatmul(static_cast<long>(i)).captured);
  }
  EXPECT_EQ(kernelLaunches(*engine, steps), kernelsBefore);
  engine.reset();
  EXPECT_EQ(fakeLt<test::FakeLtCount>("fakeLtLiveObjects")(), 0) << "descriptors leaked";
}

INSTANTIATE_TEST_SUITE_P(Bf16, CudaFakeCublasLt, ::testing::Values("bf16", "bf16-O0"),
                         [](const auto &info) {
                           return std::string(info.param) == "bf16" ? "fused" : "O0";
                         });

TEST(CudaFakeCublasLtDecode, BucketsUseTheirGemvsAndAnyTIsCapturedAfterItsHeuristics) {
  const int64_t sequences = 17; // more than the largest bucket: the any-T decode program
  auto engine = loadBf16("bf16", sequences);
  ASSERT_NE(engine, nullptr);
  std::vector<SequenceTokens> batch;
  for (int64_t s = 0; s < sequences; ++s)
    batch.push_back({engine->addSequence(), {1, 3}});
  ASSERT_TRUE(engine->step(batch, false).isOk());
  ltReset();
  std::vector<SequenceTokens> two = {{batch[0].sequence, {4}}, {batch[1].sequence, {5}}};
  ASSERT_TRUE(engine->step(two, false).isOk());
  EXPECT_EQ(ltMatmuls(), 0) << "a decode bucket called cuBLASLt";
  for (auto &b : batch)
    b.tokens = {6};
  const fb::Program &anyT = *engine->plan().program(fb::Target::Sm90a, fb::Phase::Decode, 17);
  ASSERT_EQ(anyT.max_tokens(), 0);
  std::vector<const fb::Step *> steps = libraryGemmSteps(anyT);
  ASSERT_FALSE(steps.empty());
  long graphsBefore = fakeCount("fakeCudaGraphsCaptured");
  ASSERT_TRUE(engine->step(batch, false).isOk());
  EXPECT_EQ(fakeCount("fakeCudaGraphsCaptured"), graphsBefore + 1);
  EXPECT_EQ(ltError(), ""); // no descriptor or heuristic work during the capture
  ASSERT_EQ(ltMatmuls(), static_cast<long>(steps.size()));
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("call " + std::to_string(i));
    EXPECT_TRUE(ltMatmul(static_cast<long>(i)).captured);
    expectStepGemm(engine->plan(), anyT, *steps[i], ltMatmul(static_cast<long>(i)), sequences);
  }
  ASSERT_TRUE(engine->step(batch, false).isOk()); // replays the graph
  EXPECT_EQ(ltMatmuls(), static_cast<long>(steps.size()));
  EXPECT_EQ(fakeError(), "");
}

// Each way cuBLASLt is not used leaves the steps' kernels, and says why.
void expectKernelsRunThePrefill(Engine &engine, const std::string &why) {
  EXPECT_NE(engine.backend().description().find(why), std::string::npos)
      << engine.backend().description();
  std::vector<const fb::Step *> steps =
      libraryGemmSteps(*engine.plan().program(fb::Target::Sm90a, fb::Phase::Prefill));
  ltReset();
  long kernelsBefore = kernelLaunches(engine, steps);
  ASSERT_TRUE(prefill(engine).isOk());
  EXPECT_EQ(ltMatmuls(), 0);
  EXPECT_EQ(kernelLaunches(engine, steps) - kernelsBefore, static_cast<long>(steps.size()));
  EXPECT_EQ(fakeError(), "");
}

TEST(CudaFakeCublasLtFallback, TurnedOff) {
  auto engine = loadBf16("bf16", 2, /*cublasLt=*/false);
  ASSERT_NE(engine, nullptr);
  expectKernelsRunThePrefill(*engine, "cuBLASLt turned off: every GEMM on llmc kernels");
}

TEST(CudaFakeCublasLtFallback, LibraryMissing) {
  setenv("LLMC_LIBCUBLASLT", "/nonexistent/libcublasLt.so.13", 1);
  auto engine = loadBf16("bf16", 2);
  setenv("LLMC_LIBCUBLASLT", LLMC_FAKE_LIBCUBLASLT, 1);
  ASSERT_NE(engine, nullptr);
  expectKernelsRunThePrefill(
      *engine, "cuBLASLt not used (cannot open cuBLASLt: /nonexistent/libcublasLt.so.13");
}

TEST(CudaFakeCublasLtFallback, NoAlgorithmForTheShape) {
  auto engine = loadBf16("bf16", 2);
  ASSERT_NE(engine, nullptr);
  fakeLt<test::FakeLtSet>("fakeLtSetNoAlgorithm")(1);
  expectKernelsRunThePrefill(*engine, "on cuBLASLt");
  fakeLt<test::FakeLtSet>("fakeLtSetNoAlgorithm")(0);
}

// Granite's residual_multiplier (0.5) is the output_scale of its o_proj and
// down_proj Linear steps. In f32, bf16, int4 and int8 plans every such
// step's kernel carries the scale (a literal in its source, `_os3f000000`
// in its name), the scaled kernels launch in the prefill and in the decode
// GEMVs, and a bf16 plan's prefill hands the scale to cuBLASLt as alpha.
struct GraniteVariant {
  const char *name, *dtype, *quantize;
};

class CudaFakeDriverGranite : public ::testing::TestWithParam<GraniteVariant> {};

TEST_P(CudaFakeDriverGranite, OutputScaleReachesEveryScaledLaunch) {
  ASSERT_TRUE(kFakeDriver);
  const GraniteVariant &variant = GetParam();
  BuildOptions options;
  options.input = test::testDataPath("hf/granite");
  options.output = test::scratchDir(std::string("cuda-fake-granite-") + variant.name) + "/x.plan";
  options.targets = "cpu,sm_90a";
  options.dtype = variant.dtype;
  options.quantize = variant.quantize;
  options.groupSize = 32;
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status built = runBuild(options, quiet);
  ASSERT_TRUE(built.isOk()) << built.message();

  auto engine = loadCuda(options.output, 2);
  ASSERT_NE(engine, nullptr);
  const Plan &plan = engine->plan();
  const fb::KernelModule *module = plan.module(fb::Target::Sm90a);
  ASSERT_NE(module, nullptr);
  std::set<std::string> prefillKernels, decodeKernels;
  long prefillLibrarySteps = 0;
  for (const fb::Program *program : *plan.meta().programs()) {
    if (program->target() != fb::Target::Sm90a)
      continue;
    for (const fb::Step *step : *program->steps()) {
      const fb::LinearParams *p = step->params_as_LinearParams();
      if (p == nullptr || p->output_scale() == 1.0f)
        continue;
      EXPECT_EQ(p->output_scale(), 0.5f);
      const std::string kernel = module->functions()->Get(step->kernel())->str();
      EXPECT_NE(kernel.find("_os3f000000"), std::string::npos) << kernel;
      (program->phase() == fb::Phase::Prefill ? prefillKernels : decodeKernels).insert(kernel);
      if (step->library_gemm() != nullptr) {
        EXPECT_EQ(step->library_gemm()->alpha(), 0.5f);
        prefillLibrarySteps += program->phase() == fb::Phase::Prefill;
      }
    }
  }
  ASSERT_FALSE(prefillKernels.empty());
  ASSERT_FALSE(decodeKernels.empty());
  const bool bf16 = std::string(variant.dtype) == "bf16" && *variant.quantize == '\0';
  EXPECT_EQ(prefillLibrarySteps > 0, bf16) << "cuBLASLt takes the plain bf16 GEMMs only";

  auto launches = [&](const std::set<std::string> &kernels) {
    long n = 0;
    for (const std::string &k : kernels)
      n += fakeCountOf(k.c_str());
    return n;
  };
  const long prefillBefore = launches(prefillKernels), decodeBefore = launches(decodeKernels);
  ltReset();
  GenerateOptions generate;
  generate.maxNewTokens = 4;
  generate.ignoreEos = true;
  auto out = generateBatch(*engine, {{0, 3, 4, 5, 3}, {0, 4}}, generate);
  ASSERT_TRUE(out.isOk()) << out.message();
  EXPECT_EQ(fakeError(), "");
  EXPECT_EQ(ltError(), "");
  EXPECT_GT(launches(decodeKernels), decodeBefore) << "no scaled decode GEMV launched";
  long alphaCalls = 0;
  for (long i = 0; i < ltMatmuls(); ++i)
    alphaCalls += ltMatmul(i).alpha == 0.5f;
  if (bf16) { // the prefill's scaled GEMMs on cuBLASLt, with the scale as alpha
    EXPECT_EQ(alphaCalls, prefillLibrarySteps);
    EXPECT_EQ(launches(prefillKernels), prefillBefore);
  } else {
    EXPECT_EQ(alphaCalls, 0);
    EXPECT_GT(launches(prefillKernels), prefillBefore) << "no scaled prefill GEMM launched";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaFakeDriverGranite,
                         ::testing::Values(GraniteVariant{"f32", "f32", ""},
                                           GraniteVariant{"bf16", "bf16", ""},
                                           GraniteVariant{"int4", "f32", "rtn"},
                                           GraniteVariant{"int8", "f32", "int8"}),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(CudaFakeCublasLtFallback, F32PlansHaveNoLibraryGemms) {
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 1);
  ASSERT_NE(engine, nullptr);
  EXPECT_FALSE(cudaBackend(*engine).usesCublasLt());
  EXPECT_NE(engine->backend().description().find("no GEMM of this plan suits cuBLASLt"),
            std::string::npos);
}

} // namespace
} // namespace llmc
