// The Gemma-style step parameters (engine.fbs: embedding scale, (1 + w)
// norms, GeGLU, logit and attention soft-capping, sliding windows) reach the
// CUDA kernels without a GPU: a tiny fused plan carrying all of them gets
// GPU programs whose kernels are the parameterized variants (named for
// them), and every one compiles for sm_90a through NVRTC.
#include "../plan/plan_fixture.h"
#include "common/test_paths.h"
#include "cuda/gpu_programs.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace llmc {
namespace {

std::set<std::string> functionNames(const fb::PlanT &plan, fb::Target target) {
  std::set<std::string> names;
  for (const auto &module : plan.modules)
    if (module->target == target)
      names.insert(module->functions.begin(), module->functions.end());
  return names;
}

bool anyContains(const std::set<std::string> &names, const std::string &prefix,
                 const std::string &part) {
  for (const std::string &name : names)
    if (name.rfind(prefix, 0) == 0 && name.find(part) != std::string::npos)
      return true;
  return false;
}

TEST(CudaGemmaCodegen, EveryParameterizedVariantCompilesForSm90a) {
  test::TinyPlan tiny = test::makeGemmaFusedPlan();
  cuda::GpuBuildOptions options;
  options.targets = {fb::Target::Sm90a};
  options.compile.cacheDir = "-";
  cuda::GpuBuildSummary summary;
  Status status = cuda::addGpuTargets(tiny.contents, options, &summary);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_TRUE(summary.skipped.empty()) << summary.skipped;
  const std::set<std::string> names = functionNames(tiny.contents.meta, fb::Target::Sm90a);
  ASSERT_FALSE(names.empty());
  // Embedding x 2, the norm prologues with offset 1 (0x3f800000), GeGLU tanh
  // and erf, the LmHead's softcap 3, attention's window 2 and softcap 5.
  EXPECT_TRUE(anyContains(names, "llmc_embedding_", "_x40000000"));
  EXPECT_TRUE(anyContains(names, "llmc_norm_linear_", "_off3f800000"));
  EXPECT_TRUE(anyContains(names, "llmc_norm_linear_swiglu_", "_gate1"));
  EXPECT_TRUE(anyContains(names, "llmc_linear_swiglu_", "_gate2"));
  EXPECT_TRUE(anyContains(names, "llmc_lm_head_", "_cap40400000"));
  EXPECT_TRUE(anyContains(names, "llmc_attention_", "_w2"));
  EXPECT_TRUE(anyContains(names, "llmc_attention_", "_cap40a00000"));
  // The plan the loader sees accepts every GPU step it now holds.
  const std::string path = test::scratchDir("gemma-codegen") + "/gemma.plan";
  ASSERT_TRUE(writePlan(path, tiny.contents).isOk());
  auto plan = Plan::open(path);
  ASSERT_TRUE(plan.isOk()) << plan.message();
}

} // namespace
} // namespace llmc
