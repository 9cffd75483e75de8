// CUDA codegen without a GPU: every kernel instance of a stories260K-shape
// f32 plan and of a Llama-3-8B-shape bf16 plan compiles for sm_90a and ptx,
// the loader accepts the result and rejects corrupt GPU fields, NVRTC
// errors name the kernel, ptxas spills are found, the cache is used.
#include "cuda/gpu_programs.h"
#include "cuda/kernel_abi.h"
#include "cuda/model_dirs.h"
#include "driver/build.h"
#include "ops/op_table.h"
#include "plan/plan.h"
#include "plan/plan_format.h"

#include <nvJitLink.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>

namespace llmc {
namespace {

struct Built {
  std::string path;
  std::vector<std::string> warnings;
};

// Builds (once per test binary) a synthetic plan for every target; `tweak`
// adjusts the options (-O0, --quantize).
const Built &buildPlan(const std::string &name, const char *config, const std::string &dtype,
                       const std::function<void(BuildOptions &)> &tweak = nullptr) {
  static std::map<std::string, Built> built;
  auto it = built.find(name);
  if (it != built.end())
    return it->second;
  Built &b = built[name];
  std::string dir = test::writeModelDir("cuda-" + name, config);
  BuildOptions options;
  options.input = dir;
  options.output = dir + "/" + name + ".plan";
  options.dtype = dtype;
  options.syntheticSeed = 7;
  options.targets = "cpu,sm_90a,ptx";
  if (tweak)
    tweak(options);
  BuildReporter reporter;
  reporter.info = reporter.verbose = reporter.ir = [](const std::string &) {};
  reporter.warning = [&b](const std::string &line) { b.warnings.push_back(line); };
  Status status = runBuild(options, reporter);
  EXPECT_TRUE(status.isOk()) << status.message();
  b.path = options.output;
  return b;
}

// Checks what every GPU plan must hold: both modules, all programs, every
// step's kernel a function of its target's module.
void expectCompleteGpuPlan(const std::string &path) {
  auto plan = Plan::open(path);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  for (fb::Target target : {fb::Target::Sm90a, fb::Target::Ptx}) {
    const fb::KernelModule *module = plan->module(target);
    ASSERT_NE(module, nullptr) << fb::EnumNameTarget(target);
    EXPECT_GT(module->image()->size(), 1000u);
    std::set<std::string> names;
    for (const auto *f : *module->functions()) {
      EXPECT_EQ(f->str().rfind("llmc_", 0), 0u) << f->str();
      EXPECT_TRUE(names.insert(f->str()).second) << "duplicate " << f->str();
    }
    EXPECT_TRUE(names.count("llmc_synthetic_fill_bf16") && names.count("llmc_argmax_f32"));
    ASSERT_NE(plan->program(target, fb::Phase::Prefill), nullptr);
    for (int64_t t : {1, 3, 16, 17, 64}) {
      const fb::Program *decode = plan->program(target, fb::Phase::Decode, t);
      ASSERT_NE(decode, nullptr);
      EXPECT_TRUE(decode->max_tokens() == 0 || decode->max_tokens() >= t);
      for (const fb::Step *step : *decode->steps())
        EXPECT_LT(static_cast<uint32_t>(step->kernel()), module->functions()->size());
    }
  }
  EXPECT_EQ(plan->program(fb::Target::Sm90a, fb::Phase::Decode, 3)->max_tokens(), 4);
  EXPECT_EQ(plan->program(fb::Target::Sm90a, fb::Phase::Decode, 17)->max_tokens(), 0);
  ASSERT_NE(plan->program(fb::Target::Cpu, fb::Phase::Decode), nullptr);
}

TEST(CudaCodegen, Stories260kShapeF32CompilesForBothTargets) {
  const Built &b = buildPlan("stories-shape", test::kStories260kShape, "f32");
  expectCompleteGpuPlan(b.path);
  EXPECT_TRUE(b.warnings.empty()) << b.warnings.front();
  auto plan = Plan::open(b.path);
  ASSERT_TRUE(plan.isOk());
  // f32 plans run f32 kernels (exactness tests).
  for (const fb::Buffer *buffer : *plan->program(fb::Target::Sm90a, fb::Phase::Prefill)->buffers())
    EXPECT_NE(buffer->dtype(), fb::DType::BF16);
}

// Without fusion: the unfused families (RoPE, attention, point-wise, logits).
TEST(CudaCodegen, Stories260kShapeUnfusedCompilesForBothTargets) {
  const Built &b = buildPlan("stories-shape-O0", test::kStories260kShape, "f32",
                             [](BuildOptions &o) { o.optimizationLevel = 0; });
  expectCompleteGpuPlan(b.path);
  EXPECT_TRUE(b.warnings.empty()) << b.warnings.front();
  auto plan = Plan::open(b.path);
  ASSERT_TRUE(plan.isOk());
  std::set<std::string> families;
  for (const auto *f : *plan->module(fb::Target::Ptx)->functions())
    families.insert(f->str().substr(0, f->str().find('_', 5)));
  for (const char *family : {"llmc_rope", "llmc_attention", "llmc_silu", "llmc_mul", "llmc_add",
                             "llmc_logits", "llmc_rms", "llmc_linear", "llmc_embedding"})
    EXPECT_TRUE(families.count(family)) << family;
}

// int4 weights (RTN, groups of 32): the W4A16 GEMV and the dequantizing GEMM.
TEST(CudaCodegen, Stories260kShapeInt4CompilesForBothTargets) {
  const Built &b =
      buildPlan("stories-shape-q4", test::kStories260kShape, "f32", [](BuildOptions &o) {
        o.quantize = "rtn";
        o.groupSize = 32;
      });
  expectCompleteGpuPlan(b.path);
  auto plan = Plan::open(b.path);
  ASSERT_TRUE(plan.isOk());
  int q4 = 0;
  for (const auto *f : *plan->module(fb::Target::Sm90a)->functions())
    q4 += f->str().find("_wq4g32_") != std::string::npos;
  EXPECT_GE(q4, 6) << "GEMV buckets and the GEMM of the int4 linear layers";
}

TEST(CudaCodegen, Llama3_8bShapeBf16CompilesForBothTargetsWithoutSpills) {
  const Built &b = buildPlan("llama3-8b-shape", test::kLlama3_8bShape, "bf16");
  expectCompleteGpuPlan(b.path);
  for (const std::string &w : b.warnings)
    ADD_FAILURE() << w;
  auto plan = Plan::open(b.path);
  ASSERT_TRUE(plan.isOk());
  // 32 layers repeat the same shapes: the distinct kernels stay few.
  EXPECT_LT(plan->module(fb::Target::Sm90a)->functions()->size(), 60u);
  const fb::Program *prefill = plan->program(fb::Target::Sm90a, fb::Phase::Prefill);
  int bf16 = 0;
  for (const fb::Buffer *buffer : *prefill->buffers())
    bf16 += buffer->dtype() == fb::DType::BF16;
  EXPECT_GT(bf16, 90); // fused: 162 steps, ~100 buffers
  EXPECT_EQ(prefill->buffers()->Get(prefill->logits_buffer())->dtype(), fb::DType::F32);
  // Kernels named by their specialization key: the batch-1 GEMV of o_proj
  // with the residual add fused, the prefill gate/up GEMM with the norm
  // prologue and SwiGLU epilogue.
  std::set<std::string> names;
  for (const auto *f : *plan->module(fb::Target::Sm90a)->functions())
    names.insert(f->str());
  EXPECT_TRUE(names.count("llmc_linear_gemv_bf16_n4096_k4096_t1_acc"));
  EXPECT_TRUE(names.count("llmc_norm_linear_swiglu_gemm_mma_bf16_n14336_k4096_eps3727c5ac"));
}

// The int4 (AWQ layout, group 128) 8B-shape plan: with synthetic weights the
// int4 parts are generated at load time, so it builds in seconds; every
// kernel, the W4A16 GEMVs and GEMMs and the int4 fill included, compiles.
TEST(CudaCodegen, Llama3_8bShapeInt4CompilesForBothTargetsWithoutSpills) {
  const Built &b =
      buildPlan("llama3-8b-shape-q4", test::kLlama3_8bShape, "bf16", [](BuildOptions &o) {
        o.quantize = "rtn";
        o.groupSize = 128;
      });
  expectCompleteGpuPlan(b.path);
  for (const std::string &w : b.warnings)
    ADD_FAILURE() << w;
  auto plan = Plan::open(b.path);
  ASSERT_TRUE(plan.isOk());
  EXPECT_TRUE(plan->meta().synthetic());
  EXPECT_EQ(plan->weightsSize(), 0u);
  std::set<std::string> names;
  for (const auto *f : *plan->module(fb::Target::Sm90a)->functions())
    names.insert(f->str());
  EXPECT_TRUE(names.count(abi::kSyntheticFillQ4Kernel));
  int gemv = 0, gemm = 0;
  for (const std::string &n : names) {
    gemv += n.find("_wq4g128_") != std::string::npos && n.find("gemv") != std::string::npos;
    gemm += n.find("_wq4g128_") != std::string::npos && n.find("gemm") != std::string::npos;
  }
  // q/k/v/o, gate/up and down: 4 shapes, each in 5 decode buckets and a GEMM.
  EXPECT_GE(gemv, 4 * 5) << "W4A16 GEMVs";
  EXPECT_GE(gemm, 4) << "int4 GEMMs";
}

// Source of a kernel that cannot compile.
cuda::KernelInstance brokenKernel() {
  cuda::KernelInstance k;
  k.name = "llmc_broken_test_kernel";
  k.source = "#include \"llmc/common.cuh\"\n"
             "extern \"C\" __global__ void llmc_broken_test_kernel(float *x) {\n"
             "  x[0] = undeclared_identifier;\n}\n";
  return k;
}

TEST(CudaCodegen, CompileErrorsNameTheKernelAndCarryTheLog) {
  for (fb::Target target : {fb::Target::Sm90a, fb::Target::Ptx}) {
    auto compiled = cuda::compileKernel(brokenKernel(), target, "-");
    ASSERT_FALSE(compiled.isOk());
    EXPECT_NE(compiled.message().find("llmc_broken_test_kernel"), std::string::npos);
    EXPECT_NE(compiled.message().find("undeclared_identifier"), std::string::npos)
        << compiled.message();
  }
  cuda::CompileOptions options;
  options.cacheDir = "-";
  auto all = cuda::compileKernels({cuda::argmaxKernel(), brokenKernel()}, fb::Target::Ptx, options);
  ASSERT_FALSE(all.isOk());
  EXPECT_NE(all.message().find("llmc_broken_test_kernel"), std::string::npos);
}

TEST(CudaCodegen, PtxasReportFindsSpills) {
  // 64 live values per thread under a 32-register cap (1024 threads x 2 blocks).
  cuda::KernelInstance k;
  k.name = "llmc_spill_test_kernel";
  k.source = R"(extern "C" __global__ void __launch_bounds__(1024, 2)
llmc_spill_test_kernel(float *x, const int *index) {
  float v[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) v[i] = x[index[i] + threadIdx.x];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += v[i] * v[63 - i] * x[index[64 + i]];
  x[threadIdx.x] = s;
})";
  auto compiled = cuda::compileKernel(k, fb::Target::Sm90a, "-");
  ASSERT_TRUE(compiled.isOk()) << compiled.message();
  EXPECT_GT(compiled->usage.registers, 0);
  EXPECT_LE(compiled->usage.registers, 32);
  EXPECT_TRUE(compiled->usage.spills()) << compiled->log;
  auto clean = cuda::compileKernel(cuda::argmaxKernel(), fb::Target::Sm90a, "-");
  ASSERT_TRUE(clean.isOk());
  EXPECT_FALSE(clean->usage.spills());
  EXPECT_GT(clean->usage.registers, 0);
}

TEST(CudaCodegen, SecondCompileComesFromTheCache) {
  std::string cache = test::scratchDir("cuda-cache");
  auto first = cuda::compileKernel(cuda::argmaxKernel(), fb::Target::Ptx, cache);
  auto second = cuda::compileKernel(cuda::argmaxKernel(), fb::Target::Ptx, cache);
  ASSERT_TRUE(first.isOk() && second.isOk());
  EXPECT_FALSE(first->fromCache);
  EXPECT_TRUE(second->fromCache);
  EXPECT_EQ(first->image, second->image);
  cuda::KernelInstance changed = cuda::argmaxKernel();
  changed.source += "\n// a different source\n";
  auto third = cuda::compileKernel(changed, fb::Target::Ptx, cache);
  ASSERT_TRUE(third.isOk());
  EXPECT_FALSE(third->fromCache);
}

// The merged PTX of kernels that each carry the math library's tables
// (sinf/cosf) assembles as one module for sm_80.
TEST(CudaCodegen, MergedPtxAssemblesForSm80) {
  std::vector<cuda::KernelInstance> kernels = {cuda::syntheticFillKernel(DType::F32),
                                               cuda::syntheticFillKernel(DType::BF16),
                                               cuda::argmaxKernel()};
  cuda::CompileOptions options;
  auto compiled = cuda::compileKernels(kernels, fb::Target::Ptx, options);
  ASSERT_TRUE(compiled.isOk()) << compiled.message();
  auto image = cuda::linkModule(*compiled, fb::Target::Ptx);
  ASSERT_TRUE(image.isOk()) << image.message();
  nvJitLinkHandle handle;
  const char *arch[] = {"-arch=sm_80"};
  ASSERT_EQ(nvJitLinkCreate(&handle, 1, arch), NVJITLINK_SUCCESS);
  EXPECT_EQ(nvJitLinkAddData(handle, NVJITLINK_INPUT_PTX, image->data(), image->size(), "merged"),
            NVJITLINK_SUCCESS);
  nvJitLinkResult linked = nvJitLinkComplete(handle);
  size_t logSize = 0;
  nvJitLinkGetErrorLogSize(handle, &logSize);
  std::string log(logSize, '\0');
  if (logSize > 0)
    nvJitLinkGetErrorLog(handle, &log[0]);
  EXPECT_EQ(linked, NVJITLINK_SUCCESS) << log;
  nvJitLinkDestroy(&handle);
}

TEST(CudaCodegen, MergePtxRejectsTwoDefinitionsOfOneKernel) {
  std::string ptx = ".version 9.0\n.target sm_80\n.address_size 64\n"
                    ".visible .entry llmc_k(\n.param .u64 p\n)\n{\nret;\n}\n";
  auto merged = cuda::mergePtx({ptx, ptx});
  ASSERT_FALSE(merged.isOk());
  EXPECT_NE(merged.message().find("llmc_k"), std::string::npos);
  auto single = cuda::mergePtx({ptx});
  ASSERT_TRUE(single.isOk()) << single.message();
}

// Plain bf16 Linear steps of the programs for any T carry the form cuBLASLt
// runs them in (engine.fbs, LibraryGemm); decode buckets (GEMVs), fused
// kinds and f32 plans do not.
TEST(CudaCodegen, PlainBf16LinearStepsOfAnyTProgramsMayRunOnCublasLt) {
  const int64_t layers = 5;
  struct Expect {
    const char *name, *dtype;
    int optimization;
    int64_t perProgram; // library GEMMs in each any-T GPU program
  } expects[] = {{"stories-shape-bf16-O0", "bf16", 0, 7 * layers}, // q, k, v, o, gate, up, down
                 {"stories-shape-bf16", "bf16", 1, 2 * layers},    // o and down, with residual
                 {"stories-shape", "f32", 1, 0}};
  for (const Expect &e : expects) {
    SCOPED_TRACE(e.name);
    const Built &b = buildPlan(e.name, test::kStories260kShape, e.dtype, [&](BuildOptions &o) {
      if (e.optimization == 0)
        o.optimizationLevel = 0;
    });
    auto plan = Plan::open(b.path);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    for (const fb::Program *program : *plan->meta().programs()) {
      bool anyT = program->target() != fb::Target::Cpu && program->max_tokens() == 0;
      int64_t marked = 0;
      for (const fb::Step *step : *program->steps()) {
        const fb::LibraryGemm *g = step->library_gemm();
        if (g == nullptr)
          continue;
        ++marked;
        EXPECT_EQ(ops::stepVariant(*step).rfind("Linear", 0), 0u);
        EXPECT_EQ(step->params_as_LinearParams()->prologue(), nullptr);
        const fb::Buffer &x = *program->buffers()->Get(step->inputs()->Get(0));
        const fb::Buffer &y = *program->buffers()->Get(step->outputs()->Get(0));
        EXPECT_EQ(g->k(), x.width());
        EXPECT_EQ(g->n(), y.width());
        EXPECT_EQ(g->lda(), g->k());
        EXPECT_EQ(g->ldb(), x.width());
        EXPECT_EQ(g->ldc(), y.width());
        EXPECT_EQ(g->beta(), step->params_as_LinearParams()->accumulate() ? 1.0f : 0.0f);
        EXPECT_FALSE(g->bias());
        EXPECT_NE(step->kernel(), -1); // the kernel stays: the fallback
      }
      EXPECT_EQ(marked, anyT ? e.perProgram : 0)
          << fb::EnumNameTarget(program->target()) << " " << fb::EnumNamePhase(program->phase())
          << " max_tokens " << program->max_tokens();
    }
  }
}

// --- The loader on corrupt GPU fields: one case per rule. ---

// Rewrites a stories-shape plan (f32 fused, or bf16 fused with `bf16`) with
// `mutate` applied to its metadata and returns the loader's verdict.
Status loadMutated(const std::function<void(fb::PlanT &)> &mutate, bool bf16 = false) {
  const Built &b = bf16 ? buildPlan("stories-shape-bf16", test::kStories260kShape, "bf16")
                        : buildPlan("stories-shape", test::kStories260kShape, "f32");
  auto plan = Plan::open(b.path);
  if (!plan)
    return plan.status();
  PlanContents contents;
  plan->meta().UnPackTo(&contents.meta);
  for (const auto &t : contents.meta.tensors) {
    uint64_t elements = t->size / dtypeSize(static_cast<DType>(t->dtype));
    contents.sources.push_back({nullptr, static_cast<DType>(t->dtype), elements, {}});
  }
  mutate(contents.meta);
  std::string path = test::scratchDir("cuda-mutated") + "/mutated.plan";
  auto written = writePlan(path, contents);
  if (!written)
    return written.status();
  return Plan::open(path).status();
}

fb::ProgramT &firstGpuProgram(fb::PlanT &p) {
  for (auto &program : p.programs)
    if (program->target == fb::Target::Sm90a)
      return *program;
  return *p.programs.front();
}

TEST(CudaCodegenLoader, RejectsCorruptGpuFieldsNamingThem) {
  struct Case {
    const char *expect;
    std::function<void(fb::PlanT &)> mutate;
  };
  std::vector<Case> cases = {
      {"kernel index", [](fb::PlanT &p) { firstGpuProgram(p).steps[0]->kernel = 100000; }},
      {"empty image", [](fb::PlanT &p) { p.modules[0]->image.clear(); }},
      {"second module", [](fb::PlanT &p) { p.modules[1]->target = p.modules[0]->target; }},
      {"3 dimensions", [](fb::PlanT &p) { firstGpuProgram(p).steps[0]->grid.pop_back(); }},
      {"CUDA limits",
       [](fb::PlanT &p) {
         firstGpuProgram(p).steps[0]->block = {2048, 1, 1};
       }},
      {"shared memory", [](fb::PlanT &p) { firstGpuProgram(p).steps[0]->shared_bytes = 1 << 20; }},
      {"grid_token_axis", [](fb::PlanT &p) { firstGpuProgram(p).steps[0]->grid_token_axis = 4; }},
      {"tokens_per_block", [](fb::PlanT &p) { firstGpuProgram(p).steps[0]->tokens_per_block = 0; }},
      {"NUL-terminated",
       [](fb::PlanT &p) {
         for (auto &m : p.modules)
           if (m->target == fb::Target::Ptx)
             m->image.back() = ' ';
       }},
      {"logits buffer must be F32",
       [](fb::PlanT &p) {
         fb::ProgramT &g = firstGpuProgram(p);
         g.buffers[g.logits_buffer]->dtype = fb::DType::BF16;
       }},
      {"max_tokens", [](fb::PlanT &p) { p.programs[0]->max_tokens = 4; }},
      {"output buffer must be F32", // CPU programs compute in f32
       [](fb::PlanT &p) {
         for (auto &b : p.programs[0]->buffers)
           if (b->dtype == fb::DType::F32 && b->width == 64)
             b->dtype = fb::DType::BF16;
       }},
  };
  for (const Case &c : cases) {
    Status status = loadMutated(c.mutate);
    ASSERT_FALSE(status.isOk()) << "accepted a plan that should fail with: " << c.expect;
    EXPECT_NE(status.message().find(c.expect), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("mutated.plan"), std::string::npos) << status.message();
  }
  // GPU programs may hold bf16 activations.
  Status bf16 = loadMutated([](fb::PlanT &p) {
    for (auto &program : p.programs)
      if (program->target != fb::Target::Cpu)
        for (auto &b : program->buffers)
          if (b->dtype == fb::DType::F32 && b->width == 64)
            b->dtype = fb::DType::BF16;
  });
  EXPECT_TRUE(bf16.isOk()) << bf16.message();
}

// The first step with a LibraryGemm in the sm_90a program of `phase` for
// any T, and where the loader names it.
struct MarkedStep {
  fb::ProgramT *program = nullptr;
  fb::StepT *step = nullptr;
  std::string where;
};
MarkedStep firstLibraryGemm(fb::PlanT &p, fb::Phase phase) {
  for (size_t i = 0; i < p.programs.size(); ++i) {
    fb::ProgramT &program = *p.programs[i];
    if (program.target != fb::Target::Sm90a || program.phase != phase || program.max_tokens != 0)
      continue;
    for (size_t s = 0; s < program.steps.size(); ++s)
      if (program.steps[s]->library_gemm != nullptr)
        return {&program, program.steps[s].get(),
                "program " + std::to_string(i) + " step " + std::to_string(s) + ": library_gemm"};
  }
  return {};
}

TEST(CudaCodegenLoader, RejectsLibraryGemmsThatDisagreeWithTheirStepNamingTheField) {
  struct Case {
    const char *expect;
    std::function<void(fb::LibraryGemmT &)> mutate;
  };
  std::vector<Case> cases = {
      {"n = 65, expected 64", [](fb::LibraryGemmT &g) { g.n += 1; }},
      {"k = 63, expected 64", [](fb::LibraryGemmT &g) { g.k -= 1; }},
      {"lda = 128, expected 64", [](fb::LibraryGemmT &g) { g.lda = 128; }},
      {"ldb = 7, expected", [](fb::LibraryGemmT &g) { g.ldb = 7; }},
      {"ldc = 0, expected", [](fb::LibraryGemmT &g) { g.ldc = 0; }},
      {"beta = 0.500000, expected 1.000000", [](fb::LibraryGemmT &g) { g.beta = 0.5f; }},
      {"bias = true but the step has no bias", [](fb::LibraryGemmT &g) { g.bias = true; }},
      {"alpha = 2.000000, expected 1.000000 (LinearParams.output_scale)",
       [](fb::LibraryGemmT &g) { g.alpha = 2.0f; }},
  };
  std::string where;
  for (const Case &c : cases) {
    Status status = loadMutated(
        [&](fb::PlanT &p) {
          MarkedStep marked = firstLibraryGemm(p, fb::Phase::Decode);
          ASSERT_NE(marked.step, nullptr);
          where = marked.where;
          c.mutate(*marked.step->library_gemm);
        },
        /*bf16=*/true);
    ASSERT_FALSE(status.isOk()) << "accepted a plan that should fail with: " << c.expect;
    EXPECT_NE(status.message().find(where + ": " + c.expect), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("mutated.plan"), std::string::npos) << status.message();
  }
}

TEST(CudaCodegenLoader, RejectsLibraryGemmsWhereTheyDoNotBelong) {
  // A copy of a valid LibraryGemm onto a step that may not have one.
  auto copyTo = [](std::function<fb::StepT *(fb::PlanT &)> target) {
    return [target](fb::PlanT &p) {
      MarkedStep marked = firstLibraryGemm(p, fb::Phase::Prefill);
      fb::StepT *step = target(p);
      if (marked.step != nullptr && step != nullptr)
        step->library_gemm = std::make_unique<fb::LibraryGemmT>(*marked.step->library_gemm);
    };
  };
  // The first Linear step with (fused) or without (plain) a norm prologue.
  enum Form { kPlain, kNorm };
  auto firstStepOf = [](fb::PlanT &p, fb::Target target, int64_t maxTokens, Form form) {
    for (auto &program : p.programs)
      if (program->target == target && program->max_tokens == maxTokens)
        for (auto &step : program->steps)
          if (const fb::LinearParamsT *l = step->params.AsLinearParams())
            if ((l->prologue != nullptr) == (form == kNorm) && !l->gated)
              return step.get();
    return static_cast<fb::StepT *>(nullptr);
  };
  struct Case {
    const char *expect;
    std::function<void(fb::PlanT &)> mutate;
    bool bf16;
  } cases[] = {
      {"library_gemm: set on a Linear step of a Cpu program",
       copyTo([&](fb::PlanT &p) { return firstStepOf(p, fb::Target::Cpu, 0, kPlain); }),
       true},
      {"library_gemm: set on a Linear step of a Sm90a program with max_tokens 4",
       copyTo(
           [&](fb::PlanT &p) { return firstStepOf(p, fb::Target::Sm90a, 4, kPlain); }),
       true},
      {"library_gemm: set on a Linear (fused) step", copyTo([&](fb::PlanT &p) {
         return firstStepOf(p, fb::Target::Sm90a, 0, kNorm);
       }),
       true},
      {"library_gemm: input, output and weight must be BF16, got F32, F32, F32",
       [&](fb::PlanT &p) {
         fb::StepT *step = firstStepOf(p, fb::Target::Sm90a, 0, kPlain);
         ASSERT_NE(step, nullptr);
         step->library_gemm = std::make_unique<fb::LibraryGemmT>();
       },
       false},
  };
  for (const Case &c : cases) {
    Status status = loadMutated(c.mutate, c.bf16);
    ASSERT_FALSE(status.isOk()) << "accepted a plan that should fail with: " << c.expect;
    EXPECT_NE(status.message().find(c.expect), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("mutated.plan"), std::string::npos) << status.message();
  }
}

TEST(CudaCodegen, TargetListIsChecked) {
  std::string dir = test::writeModelDir("cuda-targets", test::kStories260kShape);
  BuildOptions options;
  options.input = dir;
  options.output = dir + "/x.plan";
  options.syntheticSeed = 1;
  options.targets = "cpu,sm_80";
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("'sm_80'"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("cpu, sm_90a, ptx"), std::string::npos);
}

} // namespace
} // namespace llmc
