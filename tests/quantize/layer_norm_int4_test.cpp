// `llmc build --quantize rtn` on each LayerNorm family's reference checkpoint
// (tests/data/hf: StableLM, Starcoder2, Cohere, Phi, GPT-NeoX), and of the
// families read under their publishers' tensor names (EXAONE 3.x, InternLM2):
// every projection becomes an int4 GEMM (GPT-NeoX's and InternLM2's split
// q/k/v parts included, their biases kept), the plan runs on the CPU engine, and its prefill logits
// move from the float plan's no more than those of the Llama-layout
// references (qwen2, llama-plain) do under the same RTN: a dropped bias or a
// wrong split moves them by far more.
#include "common/test_paths.h"
#include "driver/build.h"
#include "engine/engine.h"
#include "prefill_logits.h"
#include "plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <string>
#include <vector>

namespace llmc {
namespace {

using test::prefillLogits;

struct Family {
  const char *name;
  int linearsPerLayer; // projections that become int4 GEMMs
};

Status build(const BuildOptions &options) {
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  return runBuild(options, quiet);
}

int q4Linears(const std::string &path) {
  auto plan = Plan::open(path);
  EXPECT_TRUE(plan.isOk()) << plan.message();
  if (!plan.isOk())
    return -1;
  int count = 0;
  for (const fb::Step *step : *plan->meta().programs()->Get(0)->steps())
    if (const fb::LinearParams *p = step->params_as_LinearParams())
      count += p->weights() == fb::WeightFormat::Q4;
  return count;
}

TEST(LayerNormInt4, RtnPlansOfEveryFamilyRunNearTheFloatModel) {
  // Fused (-O1): q/k/v become one GEMM per layer, gate/up one.
  // The Llama-layout references first: their RTN error is the yardstick (the
  // tiny random models' logits move by 0.3-0.4 of their spread under RTN at
  // G = 32, W4A8, whatever the layout).
  const Family families[] = {{"qwen2", 4},
                             {"llama-plain", 4},
                             {"stablelm", 1 + 1 + 2},   // qkv, o, gate+up, down
                             {"starcoder2", 1 + 1 + 2}, // qkv, o, c_fc, c_proj
                             {"cohere", 1 + 1 + 2},     // qkv, o, gate+up, down
                             {"phi", 1 + 1 + 2},        // qkv, dense, fc1, fc2
                             {"gpt-neox", 1 + 1 + 2},   // qkv parts, dense, h_to_4h, 4h_to_h
                             // Llama under published names: the renamed tensors.
                             {"exaone3", 1 + 1 + 2},    // q/k/v, out_proj, c_fc_0+1, c_proj
                             {"internlm2", 1 + 1 + 2},  // wqkv parts, wo, w1+w3, w2
                             {"internlm2-bias", 1 + 1 + 2}};
  double yardstick = 0;
  for (const Family &f : families) {
    SCOPED_TRACE(f.name);
    const std::string dir = test::scratchDir(std::string("ln-int4-") + f.name);
    BuildOptions options;
    options.input = test::testDataPath(std::string("hf/") + f.name);
    options.dtype = "f32";
    options.targets = "cpu";
    options.output = dir + "/float.plan";
    Status status = build(options);
    ASSERT_TRUE(status.isOk()) << status.message();
    options.output = dir + "/rtn.plan";
    options.quantize = "rtn";
    options.groupSize = 32;
    status = build(options);
    ASSERT_TRUE(status.isOk()) << status.message();
    EXPECT_EQ(q4Linears(options.output), 2 * f.linearsPerLayer); // 2 layers

    std::vector<float> exact = prefillLogits(dir + "/float.plan");
    std::vector<float> rtn = prefillLogits(options.output);
    ASSERT_EQ(rtn.size(), exact.size());
    ASSERT_FALSE(rtn.empty());
    double mean = 0, spread = 0, err = 0;
    for (float v : exact)
      mean += v;
    mean /= static_cast<double>(exact.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      ASSERT_TRUE(std::isfinite(rtn[i])) << "logit " << i;
      spread += (exact[i] - mean) * (exact[i] - mean);
      err += (rtn[i] - exact[i]) * (rtn[i] - exact[i]);
    }
    const double relative = std::sqrt(err / spread);
    std::printf("%s: RTN g32 logits rms error %.3g of the float logits' spread\n", f.name,
                relative);
    EXPECT_GT(relative, 0.0); // the weights did change
    if (f.name == std::string("qwen2") || f.name == std::string("llama-plain"))
      yardstick = std::max(yardstick, relative);
    else
      EXPECT_LT(relative, 1.5 * yardstick) << "the Llama-layout references moved by " << yardstick;
  }
}

// A build whose "quantize: ..." line is kept: AWQ and GPTQ report their
// output error against RTN's on the calibration rows there.
Status buildReporting(const BuildOptions &options, std::string *quantizeLine) {
  BuildReporter reporter;
  reporter.warning = reporter.verbose = reporter.ir = [](const std::string &) {};
  reporter.info = [quantizeLine](const std::string &line) {
    if (line.rfind("quantize: ", 0) == 0)
      *quantizeLine = line;
  };
  return runBuild(options, reporter);
}

// "... output error A (RTN B) ...": {A, B}.
std::pair<double, double> outputErrors(const std::string &line) {
  const size_t at = line.find("output error ");
  if (at == std::string::npos)
    return {-1, -1};
  double error = -1, rtn = -1;
  std::sscanf(line.c_str() + at, "output error %lf (RTN %lf)", &error, &rtn);
  return {error, rtn};
}

double relativeError(const std::vector<float> &got, const std::vector<float> &exact) {
  double mean = 0, spread = 0, err = 0;
  for (float v : exact)
    mean += v;
  mean /= static_cast<double>(exact.size());
  for (size_t i = 0; i < exact.size(); ++i) {
    if (!std::isfinite(got[i]))
      return INFINITY;
    spread += (exact[i] - mean) * (exact[i] - mean);
    err += (got[i] - exact[i]) * (got[i] - exact[i]);
  }
  return std::sqrt(err / spread);
}

std::string calibrationText() {
  const std::string path = test::scratchDir("ln-calib") + "/calib.txt";
  std::FILE *f = std::fopen(path.c_str(), "w");
  for (int i = 0; f != nullptr && i < 40; ++i)
    std::fprintf(f, "The quick brown fox %d jumps over the lazy dog; a cat naps in the sun. ", i);
  if (f != nullptr)
    std::fclose(f);
  return path;
}

// AWQ and GPTQ calibrate on the CPU executor, so they run for the LayerNorm
// families too (parallel attention + MLP blocks, whose q/k/v and fc1 read
// one input, included): on the calibration rows AWQ's and GPTQ's output
// error is below RTN's, and their plans' prefill logits (of a prompt that
// is not the calibration text) stay about as near the float plan's as RTN's:
// within 1.6x of the family's RTN error and below 0.6 of the logits'
// spread. (Measured: AWQ 0.84-1.09x RTN, GPTQ 1.01-1.42x; on these tiny
// random models GPTQ also reads 1.04x RTN for qwen2, whose calibration the
// HF logits test covers: it fits the calibration rows, not this prompt.)
TEST(LayerNormInt4, AwqAndGptqPlansOfEveryFamilyRunNearTheFloatModel) {
  const std::string calib = calibrationText();
  for (const char *family :
       {"stablelm", "starcoder2", "cohere", "phi", "gpt-neox", "exaone3", "internlm2"}) {
    SCOPED_TRACE(family);
    const std::string dir = test::scratchDir(std::string("ln-calibrated-") + family);
    BuildOptions options;
    options.input = test::testDataPath(std::string("hf/") + family);
    options.dtype = "f32";
    options.targets = "cpu";
    options.output = dir + "/float.plan";
    ASSERT_TRUE(build(options).isOk());
    const std::vector<float> exact = prefillLogits(options.output);
    options.groupSize = 32;
    options.output = dir + "/rtn.plan";
    options.quantize = "rtn";
    ASSERT_TRUE(build(options).isOk());
    const double rtn = relativeError(prefillLogits(options.output), exact);
    for (const char *method : {"awq", "gptq"}) {
      SCOPED_TRACE(method);
      options.quantize = method;
      options.calibFile = calib;
      options.output = dir + "/" + method + ".plan";
      std::string line;
      Status status = buildReporting(options, &line);
      ASSERT_TRUE(status.isOk()) << status.message();
      EXPECT_EQ(q4Linears(options.output), 8); // 2 layers of 4 int4 GEMMs (-O1)
      const std::vector<float> logits = prefillLogits(options.output);
      ASSERT_EQ(logits.size(), exact.size());
      const double relative = relativeError(logits, exact);
      std::printf("%s %s: logits rms error %.3g of the spread (RTN %.3g)\n", family, method,
                  relative, rtn);
      EXPECT_GT(relative, 0.0);
      EXPECT_LT(relative, 1.6 * rtn);
      EXPECT_LT(relative, 0.6);
      const auto [error, rtnError] = outputErrors(line);
      ASSERT_GT(rtnError, 0.0) << line;
      EXPECT_LT(error, rtnError) << line;
    }
  }
}

} // namespace
} // namespace llmc
