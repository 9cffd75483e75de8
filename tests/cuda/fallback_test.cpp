// llmrun without a usable GPU: --device auto falls back to the CPU and says
// why in one line; --device cuda is an error. The driver is steered with
// $LLMC_LIBCUDA: a missing library (no driver) and the toolkit's stub
// libcuda (every entry point resolves, cuInit reports the stub), which also
// checks the versioned symbol names the backend looks up.
#include "cuda/model_dirs.h"
#include "driver/build.h"

#include <array>
#include <cstdio>
#include <sstream>
#include <sys/wait.h>

namespace llmc {
namespace {

struct LlmrunResult {
  int exitCode;
  std::string stderrText;
};

// Runs llmrun with `env` in front, returning its exit code and stderr.
LlmrunResult llmrun(const std::string &env, const std::string &args) {
  std::string command = env + " '" LLMC_BINARY_DIR "/tools/llmrun' " + args + " 2>&1 >/dev/null";
  FILE *pipe = popen(command.c_str(), "r");
  std::string text;
  std::array<char, 4096> chunk;
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe))
    text.append(chunk.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

std::string planWithTargets(const std::string &targets) {
  std::string dir = test::writeModelDir("cuda-fallback-" + targets, test::kStories260kShape);
  BuildOptions options;
  options.input = dir;
  options.output = dir + "/plan.plan";
  options.syntheticSeed = 3;
  options.targets = targets;
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  return options.output;
}

int countLines(const std::string &text, const std::string &needle) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line))
    n += line.find(needle) != std::string::npos;
  return n;
}

TEST(CudaFallback, NoDriverFallsBackToTheCpuInOneLine) {
  std::string plan = planWithTargets("cpu,sm_90a,ptx");
  LlmrunResult run = llmrun("LLMC_LIBCUDA=/nonexistent/libcuda.so.1", "'" + plan + "' -p ab -n 3");
  EXPECT_EQ(run.exitCode, 0) << run.stderrText;
  EXPECT_EQ(countLines(run.stderrText, "no usable GPU"), 1) << run.stderrText;
  EXPECT_EQ(countLines(run.stderrText, "no NVIDIA driver"), 1) << run.stderrText;
  EXPECT_EQ(countLines(run.stderrText, "running on the CPU"), 1) << run.stderrText;
}

TEST(CudaFallback, StubDriverResolvesEveryEntryPointAndReportsNoGpu) {
  std::string stub = std::string(LLMC_CUDA_STUB_DIR) + "/libcuda.so";
  if (!std::filesystem::exists(stub))
    GTEST_SKIP() << "no CUDA toolkit stub library at " << stub;
  std::string plan = planWithTargets("cpu,sm_90a,ptx");
  LlmrunResult run = llmrun("LLMC_LIBCUDA='" + stub + "'", "'" + plan + "' -p ab -n 3");
  EXPECT_EQ(run.exitCode, 0) << run.stderrText;
  EXPECT_EQ(countLines(run.stderrText, "no usable GPU"), 1) << run.stderrText;
  EXPECT_EQ(run.stderrText.find("lacks"), std::string::npos) << run.stderrText; // all resolved
  EXPECT_NE(run.stderrText.find("cuInit"), std::string::npos) << run.stderrText;
}

TEST(CudaFallback, DeviceCudaWithoutAGpuIsAClearError) {
  std::string plan = planWithTargets("cpu,sm_90a,ptx");
  LlmrunResult run =
      llmrun("LLMC_LIBCUDA=/nonexistent/libcuda.so.1", "'" + plan + "' -p ab -n 3 --device cuda");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.stderrText.rfind("error: --device cuda: no NVIDIA driver", 0), 0u)
      << run.stderrText;
}

TEST(CudaFallback, CpuOnlyPlanSaysItHasNoGpuPrograms) {
  std::string plan = planWithTargets("cpu");
  LlmrunResult run = llmrun("", "'" + plan + "' -p ab -n 3");
  EXPECT_EQ(run.exitCode, 0) << run.stderrText;
  EXPECT_EQ(countLines(run.stderrText, "has no GPU programs"), 1) << run.stderrText;
  LlmrunResult cuda = llmrun("", "'" + plan + "' -p ab -n 3 --device cuda");
  EXPECT_EQ(cuda.exitCode, 1);
  EXPECT_NE(cuda.stderrText.find("has no GPU programs"), std::string::npos) << cuda.stderrText;
}

} // namespace
} // namespace llmc
