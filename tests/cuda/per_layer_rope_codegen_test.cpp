// Per-layer RoPE reaches the CUDA kernels without a GPU: each Attention
// step's generator bakes the inverse frequencies of that step's own
// RopeParams, so Gemma3's sliding layers (base 10000) and global layers
// (base 1e6) get different tables, and EXAONE 4's NoPE global layers
// (RopeParams null) get the kernel that rotates nothing. Built from the HF
// references' plans (CPU programs; their per-head q/k norms have no CUDA
// kernel yet, so a whole-plan GPU build is refused by the norm generator),
// each step's kernel is generated alone and compiled for sm_90a.
#include "common/test_paths.h"
#include "cuda/kernel_gen.h"
#include "cuda/nvrtc_compiler.h"
#include "driver/build.h"
#include "plan/plan.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace llmc {
namespace {

std::unique_ptr<fb::PlanT> cpuPlan(const std::string &fixture) {
  BuildOptions options;
  options.input = test::testDataPath("hf/" + fixture);
  options.output = test::scratchDir("per-layer-rope-" + fixture) + "/x.plan";
  options.targets = "cpu";
  BuildReporter reporter;
  reporter.info = reporter.verbose = reporter.ir = reporter.warning = [](const std::string &) {};
  Status status = runBuild(options, reporter);
  EXPECT_TRUE(status.isOk()) << status.message();
  if (!status.isOk())
    return nullptr;
  auto plan = Plan::open(options.output);
  EXPECT_TRUE(plan.isOk()) << plan.message();
  return plan.isOk() ? std::unique_ptr<fb::PlanT>(plan->meta().UnPack()) : nullptr;
}

struct AttentionKernel {
  int64_t layer;
  bool rope;
  cuda::KernelInstance kernel;
};

// The prefill program's Attention steps by layer, each with its kernel.
std::vector<AttentionKernel> attentionKernels(const fb::PlanT &plan) {
  std::vector<AttentionKernel> found;
  for (const auto &program : plan.programs) {
    if (program->phase != fb::Phase::Prefill)
      continue;
    for (const auto &step : program->steps) {
      const fb::AttentionParamsT *p = step->params.AsAttentionParams();
      if (step->op != fb::OpKind::Attention || p == nullptr)
        continue;
      cuda::ProgramShape shape; // f32 activations, any rows: the prefill kernel
      auto kernel = cuda::kernelForStep(plan, *program, *step, shape);
      EXPECT_TRUE(kernel.isOk()) << "layer " << p->layer << ": " << kernel.message();
      if (kernel.isOk())
        found.push_back({p->layer, p->rope != nullptr, std::move(*kernel)});
    }
  }
  return found;
}

void expectCompilesForSm90a(const cuda::KernelInstance &kernel) {
  auto compiled = cuda::compileKernel(kernel, fb::Target::Sm90a, "-");
  ASSERT_TRUE(compiled.isOk()) << kernel.name << ": " << compiled.message();
  EXPECT_FALSE(compiled->image.empty()) << kernel.name;
}

TEST(CudaPerLayerRope, Gemma3SlidingAndGlobalLayersBakeTheirOwnBases) {
  std::unique_ptr<fb::PlanT> plan = cpuPlan("gemma3");
  ASSERT_NE(plan, nullptr);
  std::vector<AttentionKernel> kernels = attentionKernels(*plan);
  ASSERT_EQ(kernels.size(), 6u);
  std::set<std::string> sliding, global;
  for (const AttentionKernel &k : kernels) {
    EXPECT_TRUE(k.rope) << "layer " << k.layer;
    // layer_types: two sliding layers, then a global one.
    (k.layer % 3 == 2 ? global : sliding).insert(k.kernel.name);
  }
  ASSERT_EQ(global.size(), 1u);
  ASSERT_EQ(sliding.size(), 1u);
  // The name ends in "_rope" and the table's hash: different bases, different tables.
  auto ropeTag = [](const std::string &name) {
    size_t at = name.rfind("_rope");
    return at == std::string::npos ? std::string() : name.substr(at);
  };
  EXPECT_FALSE(ropeTag(*global.begin()).empty()) << *global.begin();
  EXPECT_FALSE(ropeTag(*sliding.begin()).empty()) << *sliding.begin();
  EXPECT_NE(ropeTag(*global.begin()), ropeTag(*sliding.begin()));
  for (const AttentionKernel &k : kernels)
    if (k.layer == 0 || k.layer == 2)
      expectCompilesForSm90a(k.kernel);
}

TEST(CudaPerLayerRope, Exaone4NopeLayersGetTheKernelThatRotatesNothing) {
  std::unique_ptr<fb::PlanT> plan = cpuPlan("exaone4");
  ASSERT_NE(plan, nullptr);
  std::vector<AttentionKernel> kernels = attentionKernels(*plan);
  ASSERT_EQ(kernels.size(), 4u);
  for (const AttentionKernel &k : kernels) {
    SCOPED_TRACE("layer " + std::to_string(k.layer) + ": " + k.kernel.name);
    const bool nope = k.layer == 3; // layer_types: 3 sliding, then global
    EXPECT_EQ(k.rope, !nope);
    EXPECT_EQ(k.kernel.name.find("_rope") == std::string::npos, nope);
    EXPECT_EQ(k.kernel.source.find("RoPE on the fly") == std::string::npos, nope);
  }
  expectCompilesForSm90a(kernels[0].kernel);
  expectCompilesForSm90a(kernels[3].kernel);
}

} // namespace
} // namespace llmc
