// The CUDA backend's host side without a GPU: a fake libcuda
// (fake_libcuda.cpp: host memory, no kernel runs) checks every launch's
// shape and that each StepArgs pointer lies inside an allocation, while the
// engine loads a plan, prefills, decodes (CUDA graphs), decodes greedily
// (ids on the device), grows its arena, and reports bad input. A fake
// libcublasLt (fake_libcublaslt.cpp) records the GEMMs of bf16 plans' plain
// Linear steps: their shapes, strides and buffers, and the fallback to the
// steps' kernels.
#include "cuda/cuda_backend.h"
#include "cuda/fake_cublaslt.h"
#include "cuda/model_dirs.h"
#include "driver/build.h"
#include "engine/generate.h"
#include "plan/plan_format.h"

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
  EXPECT_EQ(o.filled, (std::vector<OutputKind>{OutputKind::Argmax, OutputKind::TopK,
                                               OutputKind::Logits, OutputKind::TopK,
                                               OutputKind::TopK}));
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
  EXPECT_EQ(m.alpha, 1.0f);
  EXPECT_EQ(m.beta, step.int_params()->Get(0) == 1 ? 1.0f : 0.0f); // residual: Y += X W^T
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

TEST(CudaFakeCublasLtFallback, F32PlansHaveNoLibraryGemms) {
  auto engine = loadCuda(plan("cpu,sm_90a,ptx"), 1);
  ASSERT_NE(engine, nullptr);
  EXPECT_FALSE(cudaBackend(*engine).usesCublasLt());
  EXPECT_NE(engine->backend().description().find("no GEMM of this plan suits cuBLASLt"),
            std::string::npos);
}

} // namespace
} // namespace llmc
