// The real stories260K (../shared) builds for every target: each kernel
// instance compiles for sm_90a and ptx, and the loader accepts the plan.
#include "common/test_paths.h"
#include "driver/build.h"
#include "plan/plan.h"

namespace llmc {
namespace {

TEST(CudaCodegenGolden, Stories260kBuildsForEveryTarget) {
  LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
  std::string dir = test::scratchDir("cuda-golden");
  BuildOptions options;
  options.input = test::sharedPath("models/stories260k");
  options.output = dir + "/stories260k.plan";
  options.targets = "cpu,sm_90a,ptx";
  std::vector<std::string> warnings;
  BuildReporter reporter;
  reporter.info = reporter.verbose = reporter.ir = [](const std::string &) {};
  reporter.warning = [&](const std::string &line) { warnings.push_back(line); };
  Status status = runBuild(options, reporter);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  for (fb::Target target : {fb::Target::Cpu, fb::Target::Sm90a, fb::Target::Ptx}) {
    ASSERT_NE(plan->program(target, fb::Phase::Prefill), nullptr) << fb::EnumNameTarget(target);
    ASSERT_NE(plan->program(target, fb::Phase::Decode, 1), nullptr);
  }
  EXPECT_NE(plan->module(fb::Target::Sm90a), nullptr);
  EXPECT_NE(plan->module(fb::Target::Ptx), nullptr);
}

} // namespace
} // namespace llmc
