// `llmc build --quantize-lm-head` end to end through the driver and the CPU
// engine, on tests/data/hf checkpoints: the plan's LmHead (or Logits) step
// reads int4 or int8 parts of the vocabulary matrix (int8 in int4 plans too:
// --quantize-lm-head=int8), a tied table keeps its
// float rows for the embedding, the logits stay near those of the float
// head, greedy ids (the LmHead's argmax path) match those logits' argmax,
// and bad option combinations and corrupt parameters are named.
#include "common/test_paths.h"
#include "driver/build.h"
#include "engine/engine.h"
#include "kernels/common/q4_layout.h"
#include "ops/op_table.h"
#include "ops/operands.h"
#include "plan/plan.h"
#include "plan/plan_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace llmc {
namespace {

const std::vector<int32_t> kPrompt = {0, 421, 17, 256, 3, 98, 511, 77, 140, 302, 5, 64, 64, 200};

BuildOptions options(const std::string &model, const std::string &name,
                     const std::string &quantize, bool head, const std::string &headFormat = "") {
  BuildOptions o;
  o.input = test::testDataPath("hf/" + model);
  o.output = test::scratchDir("lm-head-" + model + "-" + name) + "/" + name + ".plan";
  o.dtype = "f32";
  o.targets = "cpu";
  o.quantize = quantize;
  o.groupSize = quantize == "int8" ? 0 : 32;
  o.quantizeLmHead = head;
  o.lmHeadFormat = headFormat;
  return o;
}

Status build(const BuildOptions &o) {
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  return runBuild(o, quiet);
}

// Logits [prompt, V] of one prefill step, and the greedy id after the prompt.
struct PromptRun {
  std::vector<float> logits;
  int32_t greedy = -1;
  int64_t vocab = 0;
};

PromptRun runPrompt(const std::string &plan) {
  PromptRun run;
  for (bool greedy : {false, true}) {
    auto engine = Engine::load(plan, EngineOptions{});
    EXPECT_TRUE(engine.isOk()) << engine.message();
    if (!engine.isOk())
      return run;
    run.vocab = (*engine)->vocabSize();
    SequenceId seq = (*engine)->addSequence();
    if (greedy) {
      auto ids = (*engine)->stepGreedy({{seq, kPrompt}});
      EXPECT_TRUE(ids.isOk()) << ids.message();
      if (ids.isOk())
        run.greedy = (*ids)[0];
    } else {
      auto logits = (*engine)->step({{seq, kPrompt}}, /*allLogits=*/true);
      EXPECT_TRUE(logits.isOk()) << logits.message();
      if (logits.isOk())
        run.logits.assign(*logits, *logits + kPrompt.size() * run.vocab);
    }
  }
  return run;
}

// The plan's head step (LmHead or Logits) of its first program.
const fb::Step *headStep(const Plan &plan) {
  for (const fb::Step *step : *plan.meta().programs()->Get(0)->steps())
    if (step->op() == fb::OpKind::LmHead || step->op() == fb::OpKind::Logits)
      return step;
  return nullptr;
}

// ||a - b|| / ||b||: how far the quantized head moved the logits (NaN-safe:
// a NaN makes it NaN, which fails every bound).
double relativeError(const std::vector<float> &a, const std::vector<float> &b) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

struct Case {
  const char *model, *quantize;
  fb::WeightFormat format;
  const char *firstPart; // the head matrix's first tensor
  bool tied;
  double bound; // the most the head may move the logits (relative RMS); int4's
                // rounding noise is about 0.085 of a weight's spread at G = 32
  const char *headFormat = ""; // --quantize-lm-head=...: "" the plan's
  int64_t headGroup = -1;      // the head's LogitsParams.group_size; -1: --group-size's
};

TEST(QuantizeLmHead, PlansHoldAQuantizedHeadNearTheFloatLogits) {
  const Case cases[] = {
      {"qwen2", "rtn", fb::WeightFormat::Q4, "model.embed_tokens.qweight", true, 0.12},
      {"llama-plain", "rtn", fb::WeightFormat::Q4, "lm_head.qweight", false, 0.12},
      {"phi", "rtn", fb::WeightFormat::Q4, "lm_head.qweight", false, 0.12}, // Logits + bias
      {"qwen2", "int8", fb::WeightFormat::Q8, "model.embed_tokens.q8weight", true, 0.015},
      {"llama-plain", "int8", fb::WeightFormat::Q8, "lm_head.q8weight", false, 0.015},
      // --quantize-lm-head=int8 in int4 plans: a scale per output channel.
      {"qwen2", "rtn", fb::WeightFormat::Q8, "model.embed_tokens.q8weight", true, 0.015, "int8", 0},
      {"llama-plain", "rtn", fb::WeightFormat::Q8, "lm_head.q8weight", false, 0.015, "int8", 0},
      {"phi", "rtn", fb::WeightFormat::Q8, "lm_head.q8weight", false, 0.015, "int8", 0},
      // =int4 names the plan's own default.
      {"llama-plain", "rtn", fb::WeightFormat::Q4, "lm_head.qweight", false, 0.12, "int4"},
  };
  for (const Case &c : cases) {
    const std::string name = std::string(c.quantize) + (*c.headFormat ? "-" : "") + c.headFormat;
    SCOPED_TRACE(std::string(c.model) + " " + name);
    BuildOptions floatHead = options(c.model, name + "-float", c.quantize, false);
    BuildOptions quantHead = options(c.model, name + "-head", c.quantize, true, c.headFormat);
    Status a = build(floatHead), b = build(quantHead);
    ASSERT_TRUE(a.isOk()) << a.message();
    ASSERT_TRUE(b.isOk()) << b.message();

    auto plan = Plan::open(quantHead.output);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    const fb::Step *head = headStep(*plan);
    ASSERT_NE(head, nullptr);
    const fb::LogitsParams &p = *head->params_as_LogitsParams();
    EXPECT_EQ(p.weights(), c.format);
    EXPECT_EQ(p.group_size(), c.headGroup >= 0 ? c.headGroup : quantHead.groupSize);
    const int first = head->weights()->Get(ops::logitsMatrix(p));
    if (c.format == fb::WeightFormat::Q8) // f32 scales per channel, f16 per group
      EXPECT_EQ(plan->meta().tensors()->Get(head->weights()->Get(ops::logitsMatrix(p) + 1))->dtype(),
                p.group_size() == 0 ? fb::DType::F32 : fb::DType::F16);
    EXPECT_EQ(plan->meta().tensors()->Get(first)->name()->str(), c.firstPart);
    EXPECT_EQ(plan->meta().tensors()->Get(first)->dtype(),
              c.format == fb::WeightFormat::Q4 ? fb::DType::I32 : fb::DType::I8);
    // The embedding reads a float table: the checkpoint's, tied or not.
    const fb::Step *embedding = plan->meta().programs()->Get(0)->steps()->Get(0);
    ASSERT_EQ(embedding->op(), fb::OpKind::Embedding);
    const fb::Tensor *table = plan->meta().tensors()->Get(embedding->weights()->Get(0));
    EXPECT_EQ(table->dtype(), fb::DType::F32);
    EXPECT_EQ(table->name()->str(), "model.embed_tokens.weight");
    EXPECT_EQ(plan->findTensor("lm_head.weight") >= 0, false) << "untied float head left behind";

    PromptRun want = runPrompt(floatHead.output), got = runPrompt(quantHead.output);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    ASSERT_FALSE(got.logits.empty());
    const double error = relativeError(got.logits, want.logits);
    EXPECT_LT(error, c.bound);
    std::printf("%s %s: logits moved by %.4f (relative RMS)\n", c.model, name.c_str(), error);
    EXPECT_GT(error, 0.0) << "the head's weights did not change: not quantized?";
    // Greedy (LmHead's argmax over the quantized logits) = argmax of its logits.
    const float *last = got.logits.data() + (kPrompt.size() - 1) * got.vocab;
    EXPECT_EQ(got.greedy, std::max_element(last, last + got.vocab) - last);
  }
}

TEST(QuantizeLmHead, BadOptionsAreNamed) {
  BuildOptions alone = options("qwen2", "alone", "", true);
  Status status = build(alone);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("--quantize-lm-head"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("give --quantize"), std::string::npos) << status.message();

  BuildOptions synthetic = options("qwen2", "synthetic-int8", "int8", true);
  synthetic.syntheticSeed = 1;
  status = build(synthetic);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("--synthetic-weights"), std::string::npos) << status.message();

  BuildOptions syntheticInt8Head = options("qwen2", "synthetic-int8-head", "rtn", true, "int8");
  syntheticInt8Head.syntheticSeed = 1;
  status = build(syntheticInt8Head);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("--quantize-lm-head=int8 needs checkpoint weights, not "
                                  "--synthetic-weights"),
            std::string::npos)
      << status.message();

  BuildOptions badFormat = options("qwen2", "int9", "rtn", true, "int9");
  status = build(badFormat);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("--quantize-lm-head=int9: the head's format must be int4 or "
                                  "int8"),
            std::string::npos)
      << status.message();

  // An int4 head in an int8 plan takes its groups from --group-size (0 here).
  BuildOptions int4InInt8 = options("qwen2", "int4-in-int8", "int8", true, "int4");
  status = build(int4InInt8);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("which is 0; give --group-size 32, 64 or 128"),
            std::string::npos)
      << status.message();
}

// The CLI: `--quantize-lm-head=int8` in an int4 plan, the bare flag keeping
// its meaning, a bad value named; `llmrun inspect` shows the head's storage
// and the provenance the format.
TEST(QuantizeLmHead, CliChoosesTheHeadFormatAndInspectShowsIt) {
  const std::string bin = std::string(LLMC_BINARY_DIR) + "/tools/";
  const std::string dir = test::scratchDir("lm-head-cli");
  auto run = [&](const std::string &command, std::string &out) {
    const std::string log = dir + "/out.txt";
    const int status = std::system((command + " >'" + log + "' 2>&1").c_str());
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    out = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const std::string model = test::testDataPath("hf/llama-plain");
  struct Want {
    std::string flag, info, inspect, options;
  };
  const Want wants[] = {
      {"--quantize-lm-head=int8", "lm_head int8 per output channel", "lm head     int8 per output "
       "channel, 34816 B", "--quantize-lm-head=int8"},
      {"--quantize-lm-head", "lm_head int4 RTN", "lm head     int4 in groups of 32, 20480 B",
       "--quantize-lm-head\n"},
      {"", "", "lm head     F32, 131072 B", "--group-size 32\n"},
  };
  for (const Want &w : wants) {
    SCOPED_TRACE(w.flag);
    const std::string plan = dir + "/head.plan";
    std::string out;
    ASSERT_EQ(run(bin + "llmc build '" + model + "' --target cpu --dtype f32 --quantize rtn "
                        "--group-size 32 " + w.flag + " -o '" + plan + "'",
                  out),
              0)
        << out;
    EXPECT_NE(out.find(w.info), std::string::npos) << out;
    ASSERT_EQ(run(bin + "llmrun inspect '" + plan + "'", out), 0) << out;
    EXPECT_NE(out.find(w.inspect), std::string::npos) << out;
    EXPECT_NE(out.find(w.options), std::string::npos) << out;
  }
  std::string out;
  EXPECT_NE(run(bin + "llmc build '" + model + "' --target cpu --quantize rtn "
                      "--quantize-lm-head=int2 -o '" + dir + "/bad.plan'",
                out),
            0);
  EXPECT_NE(out.find("error: --quantize-lm-head=int2: the head's format must be int4 or int8"),
            std::string::npos)
      << out;
}

// --synthetic-weights: the int4 head's parts carry synthetic Q4 rules coding
// the generated matrix, so the plan loads and runs with no stored weights.
TEST(QuantizeLmHead, SyntheticPlansGetSyntheticInt4Parts) {
  BuildOptions o = options("llama-plain", "synthetic", "rtn", true);
  o.syntheticSeed = 7;
  Status status = build(o);
  ASSERT_TRUE(status.isOk()) << status.message();
  auto plan = Plan::open(o.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const fb::Step *head = headStep(*plan);
  ASSERT_NE(head, nullptr);
  const fb::LogitsParams &p = *head->params_as_LogitsParams();
  ASSERT_EQ(p.weights(), fb::WeightFormat::Q4);
  const fb::SyntheticKind kinds[] = {fb::SyntheticKind::Q4Weight, fb::SyntheticKind::Q4Scales,
                                     fb::SyntheticKind::Q4Zeros};
  for (int i = 0; i < 3; ++i) {
    const fb::Tensor *t = plan->meta().tensors()->Get(head->weights()->Get(ops::logitsMatrix(p) + i));
    ASSERT_NE(t->synthetic(), nullptr) << t->name()->str();
    EXPECT_EQ(t->synthetic()->kind(), kinds[i]);
    EXPECT_EQ(t->synthetic()->cols(), 64);
  }
  PromptRun run = runPrompt(o.output);
  ASSERT_FALSE(run.logits.empty());
  for (float v : run.logits)
    ASSERT_TRUE(std::isfinite(v));
}

TEST(QuantizeLmHead, CorruptHeadParametersAreNamed) {
  BuildOptions o = options("qwen2", "corrupt", "rtn", true);
  ASSERT_TRUE(build(o).isOk());
  auto expectRejected = [&](const std::string &name, const std::function<void(fb::PlanT &)> &edit,
                            const std::string &part) {
    std::string path = test::scratchDir("lm-head-corrupt-" + name) + "/bad.plan";
    std::filesystem::copy_file(o.output, path, std::filesystem::copy_options::overwrite_existing);
    test::rewriteMetadata(path, edit);
    auto plan = Plan::open(path);
    ASSERT_FALSE(plan.isOk()) << name << " was accepted";
    EXPECT_NE(plan.message().find(part), std::string::npos) << plan.message();
  };
  auto headParams = [](fb::PlanT &m) {
    for (auto &step : m.programs[0]->steps)
      if (auto *p = step->params.AsLogitsParams())
        return p;
    return static_cast<fb::LogitsParamsT *>(nullptr);
  };
  expectRejected(
      "group", [&](fb::PlanT &m) { headParams(m)->group_size = 48; },
      "LogitsParams.group_size = 48: must be a positive multiple of 32 for Q4 weights");
  expectRejected(
      "dense", [&](fb::PlanT &m) { headParams(m)->weights = fb::WeightFormat::Dense; },
      "LogitsParams.group_size = 32: must be 0 for Dense weights");
  expectRejected(
      "q8", [&](fb::PlanT &m) { headParams(m)->weights = fb::WeightFormat::Q8; },
      "weights; its LogitsParams ask for");
}

} // namespace
} // namespace llmc
