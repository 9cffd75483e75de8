// AWQ and GPTQ on stories260K (../shared): calibrated on the TinyStories
// train excerpt, AWQ must beat round-to-nearest in NLL on the validation
// excerpt at group sizes 32 and 64 (the perplexity protocol of
// ../shared/README.md), and at G = 128 f32 < GPTQ < AWQ <= RTN, GPTQ
// keeping the share of RTN's loss docs/quantization.md reports,
// and folding AWQ's scales without quantizing must leave the logits equal
// within 1e-5 (real weights, GQA 8/4: the o_proj scales are tied per kv head).
#include "common/compare.h"
#include "common/test_paths.h"
#include "cpu/isa.h"
#include "driver/build.h"
#include "engine/engine.h"
#include "support/mapped_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace llmc {
namespace {

// The calibration's forward passes and the perplexities run on the CPU
// kernels, whose f32 summation order is the ISA's, and the searches' close
// calls follow it: on AVX-512 the G = 128 AWQ share measured 50.8% where
// AVX2 gives the 51.2% below. The figures here are AVX2's (docs/quantization.md),
// so x86-64 machines with AVX-512 run this file on AVX2 too.
class MeasuredIsa : public ::testing::Environment {
  void SetUp() override {
    if (cpu::isaSupported(cpu::Isa::Avx2))
      cpu::setIsaForTesting(cpu::Isa::Avx2);
  }
};
[[maybe_unused]] const ::testing::Environment *const kIsa =
    ::testing::AddGlobalTestEnvironment(new MeasuredIsa);

BuildOptions stories(const std::string &plan) {
  BuildOptions options;
  options.input = test::sharedPath("models/stories260k");
  options.output = test::scratchDir("quantize-golden-" + plan) + "/" + plan + ".plan";
  options.targets = "cpu";
  return options;
}

BuildOptions quantized(const std::string &method, int64_t group) {
  BuildOptions options = stories(method + std::to_string(group));
  options.quantize = method;
  options.groupSize = group;
  if (method != "rtn") {
    options.calibFile = test::sharedPath("text/tinystories_train_excerpt.txt");
    options.calibTokens = 32768; // as docs/quantization.md; cheap for a 260K model
  }
  return options;
}

std::unique_ptr<Engine> buildAndLoad(const BuildOptions &options) {
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  if (!status.isOk())
    return nullptr;
  auto engine = Engine::load(options.output, EngineOptions{});
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

// Mean NLL of the validation excerpt: windows of 511 ids fed as [BOS] +
// window, every window id predicted (llmrun perplexity --ctx 512).
double validationNll(Engine &engine) {
  auto text = readTextFile(test::sharedPath("text/tinystories_valid_excerpt_small.txt"));
  EXPECT_TRUE(text.isOk()) << text.message();
  if (!text.isOk())
    return -1.0; // the failure above fails the test
  std::vector<int32_t> ids = engine.tokenizer().encode(*text, false);
  const int64_t vocab = engine.vocabSize();
  double total = 0;
  int64_t predicted = 0;
  for (size_t begin = 0; begin < ids.size(); begin += 511) {
    size_t end = std::min(ids.size(), begin + 511);
    if (end - begin < 2 && begin > 0)
      break;
    std::vector<int32_t> input{*engine.tokenizer().bosId()};
    input.insert(input.end(), ids.begin() + begin, ids.begin() + end - 1);
    SequenceId seq = engine.addSequence();
    auto logits = engine.step({{seq, input}}, /*allLogits=*/true);
    EXPECT_TRUE(logits.isOk()) << logits.message();
    (void)engine.releaseSequence(seq);
    if (!logits.isOk())
      return 0;
    for (size_t i = begin; i < end; ++i) {
      const float *row = *logits + (i - begin) * vocab;
      double top = *std::max_element(row, row + vocab), sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp(double(row[v]) - top);
      total += std::log(sum) + top - row[ids[i]];
    }
    predicted += static_cast<int64_t>(end - begin);
  }
  return total / predicted;
}

TEST(QuantizeGolden, AwqBeatsRoundToNearestOnStories260k) {
  LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
  LLMC_REQUIRE_SHARED("text/tinystories_train_excerpt.txt");
  LLMC_REQUIRE_SHARED("text/tinystories_valid_excerpt_small.txt");
  auto f32 = buildAndLoad(stories("f32"));
  ASSERT_NE(f32, nullptr);
  const double reference = validationNll(*f32);
  EXPECT_NEAR(reference, 1.7599, 5e-4); // ../shared/README.md
  for (int64_t group : {32, 64}) {
    auto rtn = buildAndLoad(quantized("rtn", group));
    auto awq = buildAndLoad(quantized("awq", group));
    ASSERT_NE(rtn, nullptr);
    ASSERT_NE(awq, nullptr);
    double rtnNll = validationNll(*rtn), awqNll = validationNll(*awq);
    std::printf("group %lld: NLL f32 %.4f, RTN %.4f, AWQ %.4f\n", static_cast<long long>(group),
                reference, rtnNll, awqNll);
    EXPECT_LT(awqNll, rtnNll) << "group " << group;
    EXPECT_GT(awqNll, reference);
  }
}

// At G = 128 (one group per row but down_proj's for this 64-wide model)
// RTN loses 0.115 NLL; docs/quantization.md has the figures.
TEST(QuantizeGolden, Group128OrderingOnStories260k) {
  LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
  LLMC_REQUIRE_SHARED("text/tinystories_train_excerpt.txt");
  LLMC_REQUIRE_SHARED("text/tinystories_valid_excerpt_small.txt");
  auto f32 = buildAndLoad(stories("f32-128"));
  auto rtn = buildAndLoad(quantized("rtn", 128));
  auto awq = buildAndLoad(quantized("awq", 128));
  BuildOptions gptqOptions = quantized("gptq", 128); // 32768 tokens (the whole excerpt,
  auto gptq = buildAndLoad(gptqOptions);             // 100,707, reads 56.5%: 3x the work)
  BuildOptions actOrderOptions = quantized("gptq", 128);
  actOrderOptions.output = test::scratchDir("quantize-golden-gptq-act") + "/gptq-act.plan";
  actOrderOptions.gptqActOrder = true;
  auto actOrder = buildAndLoad(actOrderOptions);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(rtn, nullptr);
  ASSERT_NE(awq, nullptr);
  ASSERT_NE(gptq, nullptr);
  ASSERT_NE(actOrder, nullptr);
  const double f = validationNll(*f32), r = validationNll(*rtn), a = validationNll(*awq),
               g = validationNll(*gptq), o = validationNll(*actOrder);
  // As the issue counts it: the share of RTN's perplexity increase removed.
  const double recovered = (std::exp(r) - std::exp(g)) / (std::exp(r) - std::exp(f));
  std::printf("group 128: NLL f32 %.4f, RTN %.4f, AWQ %.4f, GPTQ %.4f (%.1f%% of RTN's "
              "perplexity loss recovered; 32768 tokens), GPTQ act-order %.4f\n",
              f, r, a, g, 100 * recovered, o);
  EXPECT_LT(f, g);
  EXPECT_LT(g, a);
  EXPECT_LE(a, r);
  EXPECT_LT(o, r);
  EXPECT_GE(recovered, 0.565); // measured 56.69% (56.60% without the scale refit)
}

// Issue 19's goal at the default options (8192 calibration tokens, G =
// 128; docs/quantization.md, "AWQ's scales where they fold into a linear"):
// measured AWQ 51.2% of RTN's perplexity loss recovered, GPTQ 51.4% (51.0%
// before its scale refit), the clipping search alone 47.5%, the reference
// recipe (--awq-norm-scales) 42.7%; before, AWQ 39.7% and GPTQ 45.1%.
TEST(QuantizeGolden, DefaultsRecoverHalfOfRtnLossOnStories260k) {
  LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
  LLMC_REQUIRE_SHARED("text/tinystories_train_excerpt.txt");
  LLMC_REQUIRE_SHARED("text/tinystories_valid_excerpt_small.txt");
  auto f32 = buildAndLoad(stories("f32-clip"));
  auto rtn = buildAndLoad(quantized("rtn", 128));
  BuildOptions awqOptions = quantized("awq", 128);
  awqOptions.calibTokens = 8192;
  awqOptions.output = test::scratchDir("quantize-golden-awq-8k") + "/awq.plan";
  auto awq = buildAndLoad(awqOptions);
  BuildOptions clipOptions = awqOptions;
  clipOptions.noAwqScales = true;
  clipOptions.output = test::scratchDir("quantize-golden-awq-clip") + "/awq-clip.plan";
  auto clipOnly = buildAndLoad(clipOptions);
  BuildOptions referenceOptions = awqOptions;
  referenceOptions.awqNormScales = true;
  referenceOptions.output = test::scratchDir("quantize-golden-awq-norm") + "/awq-norm.plan";
  auto reference = buildAndLoad(referenceOptions);
  BuildOptions gptqOptions = quantized("gptq", 128);
  gptqOptions.calibTokens = 8192;
  gptqOptions.output = test::scratchDir("quantize-golden-gptq-8k") + "/gptq.plan";
  auto gptq = buildAndLoad(gptqOptions);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(rtn, nullptr);
  ASSERT_NE(awq, nullptr);
  ASSERT_NE(clipOnly, nullptr);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(gptq, nullptr);
  const double f = std::exp(validationNll(*f32)), r = std::exp(validationNll(*rtn));
  const double a = std::exp(validationNll(*awq)), c = std::exp(validationNll(*clipOnly));
  const double n = std::exp(validationNll(*reference)), g = std::exp(validationNll(*gptq));
  auto share = [&](double ppl) { return (r - ppl) / (r - f); };
  std::printf("group 128, 8192 tokens: PPL f32 %.4f, RTN %.4f, AWQ %.4f (%.1f%%), clipping only "
              "%.4f (%.1f%%), AWQ --awq-norm-scales %.4f (%.1f%%), GPTQ %.4f (%.1f%%)\n",
              f, r, a, 100 * share(a), c, 100 * share(c), n, 100 * share(n), g, 100 * share(g));
  EXPECT_GE(share(a), 0.51);
  EXPECT_GE(share(g), 0.514);
  EXPECT_LE(g, a); // GPTQ at least as much as AWQ (issue 19), by 0.0018 PPL here
  EXPECT_GE(share(c), 0.47);
  EXPECT_LT(a, c); // the scales that fold into a linear help ...
  EXPECT_LT(a, n); // ... and those after an RMSNorm do not, here
}

TEST(QuantizeGolden, FoldedScalesKeepStories260kLogits) {
  LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
  LLMC_REQUIRE_SHARED("text/tinystories_train_excerpt.txt");
  auto f32 = buildAndLoad(stories("f32-fold"));
  BuildOptions options = quantized("awq", 32);
  options.output = test::scratchDir("quantize-golden-fold") + "/fold.plan";
  options.awqScalesOnly = true;
  options.awqFixedAlpha = 0.5f;
  auto folded = buildAndLoad(options);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(folded, nullptr);
  std::vector<int32_t> prompt = f32->tokenizer().encode("Once upon a time, there was a", true);
  // ASSERT inside a void helper: a failed step fails here instead of
  // dereferencing an error.
  auto logitsOf = [&](Engine &engine, std::vector<float> &out) {
    SequenceId seq = engine.addSequence();
    auto logits = engine.step({{seq, prompt}}, /*allLogits=*/true);
    ASSERT_TRUE(logits.isOk()) << logits.message();
    out.assign(*logits, *logits + prompt.size() * engine.vocabSize());
  };
  std::vector<float> a, b;
  ASSERT_NO_FATAL_FAILURE(logitsOf(*f32, a));
  ASSERT_NO_FATAL_FAILURE(logitsOf(*folded, b));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(test::allClose(a, b, 1e-5));
}

} // namespace
} // namespace llmc
