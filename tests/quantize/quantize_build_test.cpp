// `llmc build --quantize` end to end through the driver and the CPU engine,
// on the tiny Qwen2 of tests/data/hf (GQA 4/2, q/k/v biases, intermediate
// 96: a ragged last group at G = 64): folding AWQ's scales leaves the
// function unchanged, int4 plans hold the documented tensors and compute
// the float model with their dequantized weights, and bad options are named.
#include "common/compare.h"
#include "common/test_paths.h"
#include "cpu/backend/loaded_weights.h"
#include "cpu/bf16_coded.h"
#include "cpu/matmul_q4.h"
#include "cpu/q4_panels.h"
#include "driver/build.h"
#include "engine/engine.h"
#include "frontend/model_spec.h"
#include "frontend/weight_check.h"
#include "ir/LlmOps.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/synthetic.h"
#include "lower_to_plan.h"
#include "models/llama_graph.h"
#include "ops/op_table.h"
#include "ops/operands.h"
#include "plan/plan.h"
#include "plan/plan_fixture.h"
#include "prefill_logits.h"
#include "quantize/calibration_model.h"
#include "quantize/q4_quantize.h"
#include "support/mapped_file.h"
#include "tiny_qwen2.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/MLIRContext.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

namespace llmc {
namespace {

using test::prefillLogits;

std::string calibrationFile() {
  static const std::string path = test::calibrationTextFile("quantize-calib");
  return path;
}

BuildOptions qwen2(const std::string &plan) { return test::tinyQwen2Build("quantize", plan); }

Status build(const BuildOptions &options) {
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  return runBuild(options, quiet);
}

std::vector<float> tensorValues(const std::string &planPath, const std::string &name) {
  auto plan = Plan::open(planPath);
  EXPECT_TRUE(plan.isOk()) << plan.message();
  int index = plan.isOk() ? plan->findTensor(name) : -1;
  EXPECT_GE(index, 0) << name;
  if (index < 0)
    return {};
  const fb::Tensor *t = plan->meta().tensors()->Get(index);
  const float *data = reinterpret_cast<const float *>(plan->tensorData(index));
  return std::vector<float>(data, data + t->size() / 4);
}

TEST(QuantizeBuild, FoldingAwqScalesKeepsTheFunction) {
  BuildOptions reference = qwen2("f32");
  ASSERT_TRUE(build(reference).isOk());
  BuildOptions folded = qwen2("awq-scales-only");
  folded.quantize = "awq";
  folded.calibFile = calibrationFile();
  folded.awqScalesOnly = true;
  folded.awqFixedAlpha = 0.5f; // scales far from 1, whatever the search would pick
  Status status = build(folded);
  ASSERT_TRUE(status.isOk()) << status.message();

  // The scales did change the weights: the norm was divided by them.
  std::vector<float> norm = tensorValues(reference.output, "model.layers.0.input_layernorm.weight");
  std::vector<float> scaled =
      tensorValues(folded.output, "model.layers.0.input_layernorm.weight.awq_scaled");
  ASSERT_EQ(norm.size(), scaled.size());
  ASSERT_TRUE(test::allFinite(scaled.data(), scaled.size()));
  std::vector<double> ratio(norm.size()), one(norm.size(), 1.0);
  for (size_t i = 0; i < norm.size(); ++i)
    ratio[i] = double(scaled[i]) / norm[i];
  EXPECT_GT(test::maxAbsDiff(ratio, one).maxAbs, 0.1);
  EXPECT_TRUE(test::allFinite(ratio.data(), ratio.size()));

  std::vector<float> a = prefillLogits(reference.output), b = prefillLogits(folded.output);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(test::allClose(a, b, 1e-5))
      << "largest logit " << test::maxAbsDiff(a, std::vector<float>(a.size(), 0.0f)).maxAbs;
}

// Calibration runs every family the CPU executor runs, so AWQ folds scales
// in Gemma (whose (1 + w) norms are no sinks: (1 + w) / s is no 1 + w / s;
// o_proj's and down_proj's scales fold into v_proj and up_proj) and in Phi
// (LayerNorm, a parallel attention + MLP block, biased v_proj), and in the
// families whose tensors are renamed or split at import (EXAONE 3.x's norm,
// an alias of the checkpoint's ln_1; InternLM2's v_proj bias, cut out of
// wqkv's): the folded float plans compute the same logits.
TEST(QuantizeBuild, FoldingAwqScalesKeepsTheFunctionOfGemmaAndPhi) {
  for (auto [family, scaled] :
       {std::pair<const char *, const char *>{"gemma", "model.layers.0.self_attn.v_proj.weight"},
        {"phi", "model.layers.0.self_attn.v_proj.bias"},
        {"exaone3", "model.layers.0.input_layernorm.weight"},
        {"internlm2-bias", "model.layers.0.self_attn.v_proj.bias"}}) {
    SCOPED_TRACE(family);
    BuildOptions reference = qwen2(std::string(family) + "-f32");
    reference.input = test::testDataPath(std::string("hf/") + family);
    reference.optimizationLevel = 0; // unfused: the plan keeps the checkpoint's tensors
    ASSERT_TRUE(build(reference).isOk());
    BuildOptions folded = reference;
    folded.output = test::scratchDir(std::string("quantize-folded-") + family) + "/folded.plan";
    folded.quantize = "awq";
    folded.calibFile = calibrationFile();
    folded.awqScalesOnly = true;
    folded.awqFixedAlpha = 0.5f;
    Status status = build(folded);
    ASSERT_TRUE(status.isOk()) << status.message();
    std::vector<float> original = tensorValues(reference.output, scaled);
    std::vector<float> divided = tensorValues(folded.output, std::string(scaled) + ".awq_scaled");
    ASSERT_EQ(original.size(), divided.size());
    ASSERT_FALSE(original.empty());
    EXPECT_NE(original, divided);
    std::vector<float> a = prefillLogits(reference.output), b = prefillLogits(folded.output);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(test::allClose(a, b, 1e-5))
        << "largest logit " << test::maxAbsDiff(a, std::vector<float>(a.size(), 0.0f)).maxAbs;
  }
}

// A whole-row LayerNorm absorbs AWQ's scales as w / s and b / s (StableLM,
// Starcoder2, Cohere without a bias, Phi's parallel block, GPT-NeoX's two
// norms of one residual): the groups they feed get scales far from 1, the
// weight and the bias of a norm divide by the same s, and the folded float
// plans compute the same logits.
TEST(QuantizeBuild, FoldingAwqScalesIntoLayerNormsKeepsTheFunction) {
  struct Family {
    const char *name;
    std::vector<std::string> norms; // layer 0's LayerNorms, each "<prefix>.weight"
    bool bias;
  };
  const Family families[] = {
      {"stablelm",
       {"model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm"},
       true},
      {"starcoder2",
       {"model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm"},
       true},
      {"cohere", {"model.layers.0.input_layernorm"}, false},
      {"phi", {"model.layers.0.input_layernorm"}, true},
      {"gpt-neox",
       {"gpt_neox.layers.0.input_layernorm", "gpt_neox.layers.0.post_attention_layernorm"},
       true}};
  for (const Family &family : families) {
    SCOPED_TRACE(family.name);
    BuildOptions reference = qwen2(std::string("ln-") + family.name + "-f32");
    reference.input = test::testDataPath(std::string("hf/") + family.name);
    reference.optimizationLevel = 0; // unfused: the plan keeps the checkpoint's tensors
    ASSERT_TRUE(build(reference).isOk());
    BuildOptions folded = reference;
    folded.output = test::scratchDir(std::string("quantize-ln-folded-") + family.name) +
                    "/folded.plan";
    folded.quantize = "awq";
    folded.calibFile = calibrationFile();
    folded.awqScalesOnly = true;
    folded.awqFixedAlpha = 0.5f;
    Status status = build(folded);
    ASSERT_TRUE(status.isOk()) << status.message();
    for (const std::string &norm : family.norms) {
      SCOPED_TRACE(norm);
      std::vector<float> w = tensorValues(reference.output, norm + ".weight");
      std::vector<float> ws = tensorValues(folded.output, norm + ".weight.awq_scaled");
      ASSERT_EQ(w.size(), ws.size());
      ASSERT_FALSE(w.empty());
      ASSERT_TRUE(test::allFinite(ws.data(), ws.size()));
      // s = w / w_scaled per channel: far from 1 somewhere.
      std::vector<double> s(w.size()), one(w.size(), 1.0);
      for (size_t i = 0; i < w.size(); ++i)
        s[i] = double(w[i]) / ws[i];
      EXPECT_TRUE(test::allFinite(s.data(), s.size()));
      EXPECT_GT(test::maxAbsDiff(s, one).maxAbs, 0.1);
      if (!family.bias)
        continue;
      std::vector<float> b = tensorValues(reference.output, norm + ".bias");
      std::vector<float> bs = tensorValues(folded.output, norm + ".bias.awq_scaled");
      ASSERT_EQ(b.size(), bs.size());
      ASSERT_EQ(b.size(), w.size());
      // The bias divides by the same s: b_scaled * s == b.
      std::vector<double> restored(b.size()), original(b.begin(), b.end());
      for (size_t i = 0; i < b.size(); ++i)
        restored[i] = double(bs[i]) * s[i];
      EXPECT_TRUE(test::allClose(restored, original, 1e-6));
      EXPECT_NE(b, bs);
    }
    std::vector<float> a = prefillLogits(reference.output), c = prefillLogits(folded.output);
    ASSERT_EQ(a.size(), c.size());
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(test::allClose(a, c, 1e-5))
        << "largest logit " << test::maxAbsDiff(a, std::vector<float>(a.size(), 0.0f)).maxAbs;
  }
}

// The float model of tests/data/hf/qwen2 with the weights an int4 plan
// holds: each "<p>.qweight/.scales/.zeros" dequantized as "<p>.weight", each
// "<name>.awq_scaled" as "<name>". Logits [prompt, V] by the calibration
// model.
std::vector<float> dequantizedModelLogits(const std::string &planPath, int64_t groupSize) {
  auto spec = loadModelSpec(test::testDataPath("hf/qwen2"));
  auto weights = openModelWeights(*spec);
  auto plan = Plan::open(planPath);
  EXPECT_TRUE(spec.isOk() && weights.isOk() && plan.isOk());
  if (!spec.isOk() || !weights.isOk() || !plan.isOk())
    return {};
  quant::WeightTable table;
  for (const auto &[name, t] : weights->all())
    table.addView(name, t.data, t.dtype, t.shape);
  const auto &tensors = *plan->meta().tensors();
  auto data = [&](const std::string &name) { return plan->tensorData(plan->findTensor(name)); };
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    llvm::StringRef name = tensors.Get(i)->name()->string_view();
    if (name.consume_back(".awq_scaled")) {
      const float *v = reinterpret_cast<const float *>(plan->tensorData(i));
      table.addOwned(name.str(), std::vector<float>(v, v + tensors.Get(i)->shape()->Get(0)),
                     {tensors.Get(i)->shape()->Get(0)});
    } else if (name.consume_back(".qweight")) {
      const std::string base = name.str();
      const std::vector<int64_t> shape = weights->find(base + ".weight")->shape;
      quant::Q4Tensor q;
      q.rows = shape[0];
      q.cols = shape[1];
      int64_t groups =
          plan->meta().tensors()->Get(plan->findTensor(base + ".scales"))->shape()->Get(1);
      q.groupSize = groupSize;
      const int64_t words = hd::q4WordsPerRow(q.cols);
      const uint32_t *w = reinterpret_cast<const uint32_t *>(data(base + ".qweight"));
      const uint16_t *sc = reinterpret_cast<const uint16_t *>(data(base + ".scales"));
      const uint16_t *z = reinterpret_cast<const uint16_t *>(data(base + ".zeros"));
      q.qweight.assign(w, w + q.rows * words);
      q.scales.assign(sc, sc + q.rows * groups);
      q.zeros.assign(z, z + q.rows * groups);
      table.addOwned(base + ".weight", quant::dequantizeQ4(q), shape);
    }
  }
  mlir::MLIRContext context;
  context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>();
  auto module =
      buildLlamaGraph(context, spec->config, GraphOptions{mlir::Float32Type::get(&context)});
  ThreadPool pool(2);
  auto model = quant::CalibrationModel::create(
      (*module)->lookupSymbol<mlir::func::FuncOp>("forward"), table, pool, 64);
  EXPECT_TRUE(model.isOk()) << model.message();
  if (!model.isOk())
    return {};
  auto logits = (*model)->run(test::kQuantizePrompt);
  EXPECT_TRUE(logits.isOk()) << logits.message();
  return logits.isOk() ? *logits : std::vector<float>();
}

// The plan stores int4 linears as qweight/scales/zeros in the documented
// shapes, and the engine's int4 path computes what the float model does
// with the dequantized weights (and, for AWQ, the scaled norms and biases).
// Unfused (-O0): one LinearQ4 per checkpoint projection.
TEST(QuantizeBuild, Int4PlansComputeTheDequantizedModel) {
  for (auto [method, group] : {std::pair<const char *, int64_t>{"rtn", 32},
                               {"awq", 64},
                               {"gptq", 32},
                               {"gptq-act-order", 64}}) {
    BuildOptions options = qwen2(std::string(method) + std::to_string(group));
    options.quantize = method;
    if (options.quantize == "gptq-act-order") {
      options.quantize = "gptq";
      options.gptqActOrder = true;
    }
    options.groupSize = group;
    options.optimizationLevel = 0;
    if (options.quantize != "rtn")
      options.calibFile = calibrationFile();
    Status status = build(options);
    ASSERT_TRUE(status.isOk()) << status.message();

    auto plan = Plan::open(options.output);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    // down_proj: [64, 96], so 96 = 64 + 32 columns at G = 64.
    const std::string down = "model.layers.1.mlp.down_proj";
    int q = plan->findTensor(down + ".qweight"), s = plan->findTensor(down + ".scales");
    ASSERT_GE(q, 0);
    ASSERT_GE(s, 0);
    EXPECT_EQ(plan->meta().tensors()->Get(q)->shape()->Get(1), hd::q4WordsPerRow(96));
    EXPECT_EQ(plan->meta().tensors()->Get(s)->shape()->Get(1), hd::q4NumGroups(96, group));
    EXPECT_EQ(plan->findTensor(down + ".weight"), -1);
    int linearQ4 = 0;
    for (const fb::Step *step : *plan->meta().programs()->Get(0)->steps())
      linearQ4 += step->params_as_LinearParams() != nullptr &&
                  step->params_as_LinearParams()->weights() == fb::WeightFormat::Q4;
    EXPECT_EQ(linearQ4, 2 * 7) << method; // q, k, v, o, gate, up, down per layer

    // f32 x in the int4 kernels (W4A16), as in the float model; their
    // default int8 x is checked in tests/cpu/matmul_q4_test.cpp.
    cpu::setQ4ExactActivationsForTesting(true);
    std::vector<float> got = prefillLogits(options.output);
    cpu::setQ4ExactActivationsForTesting(false);
    std::vector<float> expected = dequantizedModelLogits(options.output, group);
    ASSERT_EQ(got.size(), expected.size());
    ASSERT_FALSE(got.empty());
    EXPECT_TRUE(test::allClose(got, expected, 1e-4)) << method << " group " << group;
  }
}

// Fusion takes int4 GEMMs too: q/k/v concatenated (int4 parts stacked),
// gate/up with the SwiGLU epilogue and the norm prologue, o/down with the
// residual add; the fused plan computes exactly what the -O0 plan does.
TEST(QuantizeBuild, FusedInt4PlansMatchTheUnfusedOnes) {
  for (auto [method, group] :
       {std::pair<const char *, int64_t>{"rtn", 32}, {"awq", 64}, {"gptq", 64}}) {
    const std::string name = std::string(method) + std::to_string(group);
    BuildOptions fused = qwen2("fused-" + name), unfused = qwen2("O0-" + name);
    for (BuildOptions *o : {&fused, &unfused}) {
      o->quantize = method;
      o->groupSize = group;
      if (o->quantize != "rtn")
        o->calibFile = calibrationFile();
    }
    unfused.optimizationLevel = 0;
    ASSERT_TRUE(build(fused).isOk());
    ASSERT_TRUE(build(unfused).isOk());
    auto plan = Plan::open(fused.output);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    std::map<std::string, int> kinds;
    for (const fb::Step *step : *plan->meta().programs()->Get(0)->steps())
      ++kinds[ops::stepVariant(*step)];
    // Per layer: q/k/v as one int4 Linear with the norm prologue and Qwen2's
    // biases (five weights: the CPU adds the bias after the norm prologue,
    // bit for bit as the unfused steps), o and down with the residual,
    // gate/up with norm and SwiGLU.
    EXPECT_EQ(kinds["Linear[norm,q4,bias]"], 2) << name;
    EXPECT_EQ(kinds["Linear[q4,accumulate]"], 2 * 2) << name;
    EXPECT_EQ(kinds["Linear[norm,gated-silu,q4]"], 2) << name;
    for (const fb::Step *step : *plan->meta().programs()->Get(0)->steps())
      if (ops::stepVariant(*step) == "Linear[norm,q4,bias]")
        EXPECT_EQ(step->weights()->size(), 5u) << name << ": gamma, qweight, scales, zeros, bias";
    EXPECT_EQ(plan->findTensor("model.layers.0.self_attn.q_proj+model.layers.0.self_attn.k_proj+"
                               "model.layers.0.self_attn.v_proj.qweight"),
              plan->findTensor("model.layers.0.self_attn.q_proj+model.layers.0.self_attn.k_proj+"
                               "model.layers.0.self_attn.v_proj.scales") -
                  1);
    std::vector<float> a = prefillLogits(fused.output), b = prefillLogits(unfused.output);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(test::allClose(a, b, 0.0)) << name;
  }
}

// --quantize int8 (W8A16): every Linear matrix of the lowered plan becomes
// int8 (per output channel with f32 scales, or in groups with f16 scales),
// the tied embedding stays float, and the logits are far closer to the f32
// plan's than int4's (RTN, G = 32: 16 times coarser steps): under a quarter
// of its error.
TEST(QuantizeBuild, Int8PlansAreNearTheFloatPlan) {
  BuildOptions reference = qwen2("int8-reference");
  ASSERT_TRUE(build(reference).isOk());
  const std::vector<float> want = prefillLogits(reference.output);
  ASSERT_FALSE(want.empty());
  auto relativeError = [&](const std::vector<float> &got) {
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
    return std::sqrt(err / norm);
  };
  BuildOptions rtn = qwen2("int8-vs-rtn32");
  rtn.quantize = "rtn";
  rtn.groupSize = 32;
  ASSERT_TRUE(build(rtn).isOk());
  const std::vector<float> int4 = prefillLogits(rtn.output);
  ASSERT_EQ(int4.size(), want.size());
  const double int4Error = relativeError(int4);
  EXPECT_GT(int4Error, 0.0);
  for (int64_t group : {0, 32}) {
    BuildOptions options = qwen2("int8-g" + std::to_string(group));
    options.quantize = "int8";
    options.groupSize = group;
    Status status = build(options);
    ASSERT_TRUE(status.isOk()) << status.message();
    auto plan = Plan::open(options.output);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    int q8 = 0, dense = 0;
    for (const fb::Step *step : *plan->meta().programs()->Get(0)->steps())
      if (const fb::LinearParams *p = step->params_as_LinearParams()) {
        ++(p->weights() == fb::WeightFormat::Q8 ? q8 : dense);
        EXPECT_EQ(p->group_size(), p->weights() == fb::WeightFormat::Q8 ? group : 0);
      }
    EXPECT_EQ(dense, 0) << "group " << group;
    EXPECT_GT(q8, 0);
    const int scales = plan->findTensor("model.layers.0.mlp.down_proj.weight.q8scales");
    ASSERT_GE(scales, 0);
    EXPECT_EQ(plan->meta().tensors()->Get(scales)->dtype(),
              group > 0 ? fb::DType::F16 : fb::DType::F32);
    const int embed = plan->findTensor("model.embed_tokens.weight");
    ASSERT_GE(embed, 0);
    EXPECT_EQ(plan->meta().tensors()->Get(embed)->dtype(), fb::DType::F32);
    std::vector<float> got = prefillLogits(options.output);
    ASSERT_EQ(got.size(), want.size());
    for (float v : got)
      ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(relativeError(got), 0.25 * int4Error) << "group " << group;
  }
  BuildOptions bad = qwen2("int8-bad");
  bad.quantize = "int8";
  bad.groupSize = 48;
  Status refused = build(bad);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.message().find("--group-size 48 for int8"), std::string::npos)
      << refused.message();
}

// --synthetic-weights --quantize rtn keeps the plan synthetic (no weight
// bytes, nothing materialized at build time): the runtime generates each
// int4 part, and generates exactly what RTN stores for the float weights the
// same plan would generate, ragged last group and pad nibbles included.
TEST(QuantizeBuild, SyntheticRtnPlansGenerateWhatRtnStores) {
  BuildOptions options = qwen2("synthetic-rtn64");
  options.syntheticSeed = 11;
  options.quantize = "rtn";
  options.groupSize = 64;
  options.optimizationLevel = 0; // every int4 weight under its own name
  Status status = build(options);
  ASSERT_TRUE(status.isOk()) << status.message();
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  EXPECT_TRUE(plan->meta().synthetic());
  EXPECT_EQ(plan->weightsSize(), 0u);
  ThreadPool pool(2);
  auto loaded = LoadedWeights::load(*plan, pool);
  ASSERT_TRUE(loaded.isOk()) << loaded.message();

  int checked = 0;
  const auto &tensors = *plan->meta().tensors();
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    llvm::StringRef name = tensors.Get(i)->name()->string_view();
    if (!name.consume_back(".qweight"))
      continue;
    const std::string base = name.str();
    const fb::SyntheticInit *init = tensors.Get(i)->synthetic();
    ASSERT_NE(init, nullptr) << base;
    EXPECT_EQ(init->kind(), fb::SyntheticKind::Q4Weight);
    const int64_t rows = tensors.Get(i)->shape()->Get(0), cols = init->cols();
    // The float weight as a synthetic plan without --quantize would hold it.
    fb::SyntheticInitT floatInit = syntheticInitFor(base + ".weight", 2, 11);
    EXPECT_EQ(init->seed(), floatInit.seed) << base;
    EXPECT_EQ(init->std(), floatInit.std) << base;
    std::vector<float> w(rows * cols);
    for (size_t k = 0; k < w.size(); ++k)
      w[k] = floatInit.std * hd::syntheticNormal(floatInit.seed, k);
    quant::Q4Tensor want = quant::quantizeQ4(pool, w.data(), rows, cols, 64);
    auto same = [&](const std::string &part, const void *expected, size_t bytes) {
      int index = plan->findTensor(base + part);
      ASSERT_GE(index, 0) << base + part;
      EXPECT_EQ(std::memcmp(loaded->data(index), expected, bytes), 0) << base + part;
    };
    same(".qweight", want.qweight.data(), want.qweight.size() * 4);
    same(".scales", want.scales.data(), want.scales.size() * 2);
    // The runtime holds the zero points packed to nibbles (cpu/matmul_q4.h).
    const std::vector<uint8_t> packed =
        *cpu::packQ4Zeros(want.zeros.data(), rows, hd::q4NumGroups(cols, 64), base);
    same(".zeros", packed.data(), packed.size());
    ++checked;
  }
  EXPECT_EQ(checked, 2 * 7);
  // Once packed, the generated f16 zeros are freed: what stays generated is
  // every tensor, each zeros tensor at its packed size, and where the
  // kernels read 16-row panels (cpu/q4_panels.h), each int4 matrix's panels.
  uint64_t kept = 0;
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const llvm::StringRef name(tensors.Get(i)->name()->string_view());
    kept += name.ends_with(".zeros")
                ? static_cast<uint64_t>(loaded->shape(i)[0] * loaded->shape(i)[1])
                : tensors.Get(i)->size();
    const bool panels = cpu::q4PanelsUsed() && name.ends_with(".qweight");
    EXPECT_EQ(loaded->q4Panels(i) != nullptr, panels) << name.str();
    if (panels)
      kept += cpu::q4PanelBytes(loaded->shape(i)[0], 8 * loaded->shape(i)[1], 64);
  }
  EXPECT_EQ(loaded->generatedBytes(), kept);
  for (float v : prefillLogits(options.output))
    ASSERT_TRUE(std::isfinite(v));
}

// The logits of a prefill of 40 tokens (the GEMM's path, from 32 on) and of
// the two decode steps after it (the decode tiles'), one after the other.
std::vector<float> prefillAndDecodeLogits(const std::string &plan) {
  auto engine = Engine::load(plan, EngineOptions{});
  EXPECT_TRUE(engine.isOk()) << engine.message();
  if (!engine.isOk())
    return {};
  const int64_t vocab = (*engine)->vocabSize();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i)
    prompt.push_back((i * 37 + 11) % 500);
  SequenceId seq = (*engine)->addSequence();
  std::vector<float> all;
  auto logits = (*engine)->step({{seq, prompt}}, /*allLogits=*/true);
  EXPECT_TRUE(logits.isOk()) << logits.message();
  if (!logits.isOk())
    return {};
  all.assign(*logits, *logits + prompt.size() * vocab);
  for (int32_t id : {7, 301}) {
    auto next = (*engine)->step({{seq, {id}}}, /*allLogits=*/false);
    EXPECT_TRUE(next.isOk()) << next.message();
    if (!next.isOk())
      return {};
    all.insert(all.end(), *next, *next + vocab);
  }
  return all;
}

// The logits `run` gives for `plan` loaded with a load-time layout off,
// then on (`use` switches it: coded bf16 rows, copies on 2 MiB pages): the
// same bits.
void expectLayoutKeepsBits(void (*use)(bool), std::vector<float> (*run)(const std::string &),
                           const std::string &plan) {
  use(false);
  const std::vector<float> off = run(plan);
  use(true);
  const std::vector<float> on = run(plan);
  ASSERT_EQ(off.size(), on.size());
  ASSERT_FALSE(off.empty());
  EXPECT_EQ(std::memcmp(on.data(), off.data(), off.size() * sizeof(float)), 0);
}

// An int4 plan's bf16 head is coded in 12 bits at load where the bf16
// kernels read coded rows (cpu/bf16_coded.h): every word kept, the plan's
// pages of it given back, and the logits' bits those of the plain head.
TEST(QuantizeBuild, Bf16HeadIsCodedAtLoadWithTheSameLogits) {
  BuildOptions options = qwen2("bf16-head-rtn");
  options.dtype = "bf16";
  options.quantize = "rtn";
  ASSERT_TRUE(build(options).isOk());
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  int head = -1;
  for (const fb::Program *program : *plan->meta().programs())
    for (const fb::Step *step : *program->steps())
      if (program->target() == fb::Target::Cpu && step->op() == fb::OpKind::LmHead)
        head = static_cast<int>(
            step->weights()->Get(ops::logitsMatrix(*step->params_as_LogitsParams())));
  ASSERT_GE(head, 0);
  ASSERT_EQ(plan->meta().tensors()->Get(head)->dtype(), fb::DType::BF16);
  const uint64_t headBytes = plan->meta().tensors()->Get(head)->size();
  std::vector<uint16_t> words(headBytes / 2);
  std::memcpy(words.data(), plan->tensorData(head), headBytes);

  ThreadPool pool(2);
  auto loaded = LoadedWeights::load(*plan, pool);
  ASSERT_TRUE(loaded.isOk()) << loaded.message();
  const cpu::WeightMatrix w = loaded->matrix(head);
  if (!cpu::codedBf16Used()) {
    EXPECT_EQ(w.coded.table, nullptr);
    GTEST_SKIP() << "this CPU lacks AVX512-BF16 or AVX512-VBMI: no coded bf16 rows";
  }
  ASSERT_NE(w.coded.table, nullptr);
  for (int64_t i = 0; i < w.rows * w.cols; ++i)
    ASSERT_EQ(cpu::codedBf16Word(w.coded, w.cols, i / w.cols, i % w.cols), words[i]) << i;
  EXPECT_GE(loaded->releasedPlanBytes(), headBytes - 2 * 4096);

  expectLayoutKeepsBits(cpu::setCodedBf16ForTesting, prefillLogits, options.output);
  // llmrun bench counts the head's bytes as decode streams them.
  auto engine = Engine::load(options.output, EngineOptions{});
  ASSERT_TRUE(engine.isOk()) << engine.message();
  EXPECT_EQ((*engine)->backend().streamedWeightBytes(head, headBytes),
            loaded->codedBf16Bytes(head));
  EXPECT_LE(loaded->codedBf16Bytes(head) * 5, headBytes * 4);
  EXPECT_GT(loaded->codedBf16Bytes(head), headBytes / 2); // 12 bits of 16, and the table
}

// A bf16 plan has every matrix it multiplies by coded in 12 bits at load
// where the bf16 kernels read coded rows: the Linear steps' and the head,
// not an embedding table only gathered from; the plan's pages of them given
// back; prefill (the GEMM) and decode give the plain rows' bits.
TEST(QuantizeBuild, Bf16PlanCodesEveryMatrixAtLoadWithTheSameLogits) {
  BuildOptions options = qwen2("bf16-coded");
  options.dtype = "bf16";
  ASSERT_TRUE(build(options).isOk());
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  std::vector<int> multiplied, gathered;
  for (const fb::Program *program : *plan->meta().programs()) {
    if (program->target() != fb::Target::Cpu)
      continue;
    for (const fb::Step *step : *program->steps()) {
      if (step->op() == fb::OpKind::Linear)
        multiplied.push_back(
            step->weights()->Get(ops::linearOperands(*step->params_as_LinearParams()).matrix));
      else if (step->op() == fb::OpKind::LmHead || step->op() == fb::OpKind::Logits)
        multiplied.push_back(
            step->weights()->Get(ops::logitsMatrix(*step->params_as_LogitsParams())));
      else if (step->op() == fb::OpKind::Embedding)
        gathered.push_back(step->weights()->Get(0));
    }
  }
  std::sort(multiplied.begin(), multiplied.end()); // each program reads them
  multiplied.erase(std::unique(multiplied.begin(), multiplied.end()), multiplied.end());
  ASSERT_GE(multiplied.size(), 2u * 4 + 1); // q/k/v (fused or not), o, gate/up, down; the head

  ThreadPool pool(2);
  auto loaded = LoadedWeights::load(*plan, pool);
  ASSERT_TRUE(loaded.isOk()) << loaded.message();
  if (!cpu::codedBf16Used()) {
    for (int index : multiplied)
      EXPECT_EQ(loaded->matrix(index).coded.table, nullptr);
    GTEST_SKIP() << "this CPU lacks AVX512-BF16 or AVX512-VBMI: no coded bf16 rows";
  }
  uint64_t plainBytes = 0;
  for (int index : multiplied) {
    const cpu::WeightMatrix w = loaded->matrix(index);
    ASSERT_EQ(w.dtype, DType::BF16);
    ASSERT_NE(w.coded.table, nullptr) << plan->meta().tensors()->Get(index)->name()->str();
    EXPECT_LE(loaded->codedBf16Bytes(index) * 5, static_cast<uint64_t>(w.rows * w.cols * 2) * 4);
    plainBytes += static_cast<uint64_t>(w.rows * w.cols * 2);
  }
  for (int index : gathered)
    if (std::count(multiplied.begin(), multiplied.end(), index) == 0)
      EXPECT_EQ(loaded->matrix(index).coded.table, nullptr) << "an embedding table was coded";
  // Page-aligned: each matrix may keep a partial page at both ends.
  EXPECT_GE(loaded->releasedPlanBytes() + 2 * 4096 * multiplied.size(), plainBytes);

  expectLayoutKeepsBits(cpu::setCodedBf16ForTesting, prefillAndDecodeLogits, options.output);
}

// The tensors a Linear, Logits or LmHead step of the CPU programs reads.
std::vector<uint32_t> matmulOperands(const Plan &plan) {
  std::vector<uint32_t> operands;
  for (const fb::Program *program : *plan.meta().programs())
    if (program->target() == fb::Target::Cpu)
      for (const fb::Step *step : *program->steps())
        if (step->op() == fb::OpKind::Linear || step->op() == fb::OpKind::LmHead ||
            step->op() == fb::OpKind::Logits)
          for (const int32_t index : *step->weights())
            operands.push_back(static_cast<uint32_t>(index));
  std::sort(operands.begin(), operands.end());
  operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
  return operands;
}

// A float plan's matrices, biases and norms that Linear and head steps read
// are copied at load out of the plan's mapping, byte for byte, the plan's
// pages of them given back (this model ties its embedding to the head,
// so its gather reads the copy too); prefill and decode give the in-place
// bits. An int4 plan copies
// only what no other layout replaced: its panels' words and scales and its
// coded head stay where they are.
TEST(QuantizeBuild, StreamedWeightsAreCopiedOutOfThePlanWithTheSameLogits) {
  for (const std::string dtype : {"f32", "f16", "int4"}) {
    SCOPED_TRACE(dtype);
    BuildOptions options = qwen2("copied-" + dtype);
    options.dtype = dtype == "int4" ? "bf16" : dtype;
    if (dtype == "int4")
      options.quantize = "rtn";
    ASSERT_TRUE(build(options).isOk());
    auto plan = Plan::open(options.output);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    auto inPlan = [&](const LoadedWeights &w, uint32_t index) {
      return w.data(index) == plan->tensorData(index);
    };
    ThreadPool pool(2);
    LoadedWeights::setCopyWeightsForTesting(false);
    auto inPlace = LoadedWeights::load(*plan, pool);
    LoadedWeights::setCopyWeightsForTesting(true);
    auto copied = LoadedWeights::load(*plan, pool);
    ASSERT_TRUE(inPlace.isOk()) << inPlace.message();
    ASSERT_TRUE(copied.isOk()) << copied.message();
    uint64_t copiedBytes = 0;
    int copies = 0;
    for (uint32_t index : matmulOperands(*plan)) {
      const fb::Tensor &t = *plan->meta().tensors()->Get(index);
      const std::string name = t.name()->str();
      const bool replaced = !inPlan(*inPlace, index) || inPlace->q4Panels(index) != nullptr ||
                            inPlace->matrix(index).coded.table != nullptr ||
                            (llvm::StringRef(name).ends_with(".scales") && cpu::q4PanelsUsed());
      if (replaced) {
        EXPECT_EQ(inPlan(*copied, index), inPlan(*inPlace, index)) << name << " was copied";
        continue;
      }
      ASSERT_FALSE(inPlan(*copied, index)) << name << " is still read from the plan";
      EXPECT_EQ(std::memcmp(copied->data(index), plan->tensorData(index), t.size()), 0) << name;
      copiedBytes += t.size();
      ++copies;
    }
    if (dtype == "int4") {
      EXPECT_GT(copies, 0); // the biases, norms; the words and scales without panels
    } else {
      EXPECT_GE(copies, 2 * 4 + 1); // q/k/v (fused or not), o, gate/up, down; the head
    }
    EXPECT_GE(copied->releasedPlanBytes() - inPlace->releasedPlanBytes() + 2 * 4096 * copies,
              copiedBytes);
    expectLayoutKeepsBits(LoadedWeights::setCopyWeightsForTesting, prefillAndDecodeLogits,
                          options.output);
  }
}

// Int4 matrices with rows longer than kQ4PanelMaxCols stay row-major at load
// (cpu/q4_panels.h: long panels decoded slower than the row-major kernel):
// no panels, their words and scales copied out of the plan like any other
// streamed tensor, and prefill and decode logits with the bits of the
// panels (the threshold lowered so that the tiny model's rows count as long).
TEST(QuantizeBuild, LongInt4RowsStayRowMajorWithTheSameLogits) {
  if (!cpu::q4PanelsUsed())
    GTEST_SKIP() << "this CPU lacks AVX-512 VNNI: no int4 panels";
  BuildOptions options = qwen2("long-rows-rtn");
  options.quantize = "rtn";
  ASSERT_TRUE(build(options).isOk());
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  ThreadPool pool(2);
  cpu::setQ4PanelMaxColsForTesting(0);
  auto rowMajor = LoadedWeights::load(*plan, pool);
  cpu::setQ4PanelMaxColsForTesting(cpu::kQ4PanelMaxCols);
  auto panels = LoadedWeights::load(*plan, pool);
  ASSERT_TRUE(rowMajor.isOk()) << rowMajor.message();
  ASSERT_TRUE(panels.isOk()) << panels.message();
  int matrices = 0;
  const auto &tensors = *plan->meta().tensors();
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const llvm::StringRef name(tensors.Get(i)->name()->string_view());
    if (name.ends_with(".scales")) { // read beside the words, not from the panels
      if (LoadedWeights::copiesWeights())
        EXPECT_NE(rowMajor->data(i), plan->tensorData(i)) << name.str() << " was not copied";
      EXPECT_EQ(panels->data(i), plan->tensorData(i)) << name.str() << " was copied";
    }
    if (!name.ends_with(".qweight"))
      continue;
    EXPECT_EQ(rowMajor->q4Panels(i), nullptr) << name.str();
    EXPECT_NE(panels->q4Panels(i), nullptr) << name.str();
    if (LoadedWeights::copiesWeights())
      EXPECT_NE(rowMajor->data(i), plan->tensorData(i)) << name.str() << " was not copied";
    EXPECT_EQ(std::memcmp(rowMajor->data(i), plan->tensorData(i), tensors.Get(i)->size()), 0)
        << name.str();
    ++matrices;
  }
  EXPECT_GT(matrices, 0);
  expectLayoutKeepsBits(
      [](bool use) { cpu::setQ4PanelMaxColsForTesting(use ? cpu::kQ4PanelMaxCols : 0); },
      prefillAndDecodeLogits, options.output);
  cpu::setQ4PanelMaxColsForTesting(cpu::kQ4PanelMaxCols);
}

// The loader checks the int4 init rules against the tensors they fill.
TEST(QuantizeBuild, CorruptSyntheticInt4RulesAreNamed) {
  BuildOptions options = qwen2("synthetic-rtn32");
  options.syntheticSeed = 3;
  options.quantize = "rtn";
  options.groupSize = 32;
  ASSERT_TRUE(build(options).isOk());
  auto corrupt = [&](const std::string &name,
                     const std::function<void(fb::SyntheticInitT &)> &edit) {
    std::string path = test::scratchDir("quantize-corrupt-" + name) + "/plan.plan";
    std::filesystem::copy_file(options.output, path,
                               std::filesystem::copy_options::overwrite_existing);
    test::rewriteMetadata(path, [&](fb::PlanT &m) {
      for (auto &t : m.tensors)
        if (t->name == "model.layers.0.mlp.down_proj.scales")
          edit(*t->synthetic);
    });
    auto plan = Plan::open(path);
    EXPECT_FALSE(plan.isOk()) << name << " was accepted";
    return plan.isOk() ? std::string() : plan.message();
  };
  auto expectContains = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  };
  const std::string where = "'model.layers.0.mlp.down_proj.scales': synthetic Q4Scales init ";
  expectContains(corrupt("group", [](fb::SyntheticInitT &i) { i.group_size = 48; }),
                 where + "has cols 96 and group_size 48");
  expectContains(corrupt("cols", [](fb::SyntheticInitT &i) { i.cols = 0; }), where + "has cols 0");
  expectContains(corrupt("shape", [](fb::SyntheticInitT &i) { i.cols = 200; }),
                 where + "for 200 columns in groups of 32 needs a [rows, 7] F16 tensor");
  expectContains(
      corrupt("kind", [](fb::SyntheticInitT &i) { i.kind = fb::SyntheticKind::Q4Weight; }),
      "synthetic Q4Weight init for 96 columns in groups of 32 needs a [rows, 12] I32");
  expectContains(
      corrupt("unknown", [](fb::SyntheticInitT &i) { i.kind = static_cast<fb::SyntheticKind>(9); }),
      "unknown synthetic init kind 9");
}

// AWQ on synthetic weights must materialize them: a clear error instead of
// running out of memory when they would not fit.
TEST(QuantizeBuild, SyntheticAwqThatWouldNotFitInMemoryIsRefused) {
  BuildOptions options = qwen2("synthetic-awq-limit");
  options.syntheticSeed = 1;
  options.quantize = "awq";
  options.calibFile = calibrationFile();
  options.materializeLimitBytes = 1000;
  std::string message = build(options).message();
  EXPECT_NE(message.find("--synthetic-weights --quantize awq generates the float weights"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--quantize rtn builds the same int4 layout"), std::string::npos);
  options.materializeLimitBytes = 0; // this machine: the tiny model fits
  options.output = test::scratchDir("quantize-synthetic-awq") + "/awq.plan";
  Status fits = build(options);
  EXPECT_TRUE(fits.isOk()) << fits.message();
}

TEST(QuantizeBuild, GptqWhoseHessiansWouldNotFitInMemoryIsRefused) {
  BuildOptions options = qwen2("gptq-limit");
  options.quantize = "gptq";
  options.calibFile = calibrationFile();
  options.materializeLimitBytes = 1000;
  std::string message = build(options).message();
  EXPECT_NE(message.find("--quantize gptq keeps X^T X per linear group"), std::string::npos)
      << message;
  EXPECT_NE(message.find("use --quantize awq or rtn"), std::string::npos) << message;
}

TEST(QuantizeBuild, OptionErrorsNameTheOption) {
  auto failure = [](const std::function<void(BuildOptions &)> &edit) {
    BuildOptions options = qwen2("bad");
    edit(options);
    return build(options).message();
  };
  EXPECT_NE(failure([](BuildOptions &o) { o.quantize = "awq"; }).find("--calib FILE"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "rtn";
              o.groupSize = 48;
            }).find("--group-size 48 is not a positive multiple of 32"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) { o.quantize = "nf4"; }).find("--quantize 'nf4'"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) { o.quantize = "gptq"; }).find("gptq needs calibration"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "awq";
              o.calibFile = "x.txt";
              o.gptqActOrder = true;
            }).find("--gptq-act-order, --no-gptq-range-search and --no-gptq-refit apply to "
                    "--quantize gptq only"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "awq";
              o.calibFile = "x.txt";
              o.awqClip = o.noAwqClip = true;
            }).find("contradict"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "gptq";
              o.calibFile = "x.txt";
              o.noAwqClip = true;
            }).find("--no-awq-clip apply to --quantize awq only"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "gptq";
              o.calibFile = "x.txt";
              o.noAwqScales = true;
            }).find("--no-awq-scales applies to --quantize awq only"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "awq";
              o.calibFile = "x.txt";
              o.noAwqScales = o.noAwqClip = true;
            }).find("use --quantize rtn"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "gptq";
              o.calibFile = "x.txt";
              o.awqNormScales = true;
            }).find("--awq-norm-scales applies to --quantize awq only"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "awq";
              o.calibFile = "x.txt";
              o.noAwqScales = o.awqNormScales = true;
            }).find("--no-awq-scales and --awq-norm-scales contradict"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "awq";
              o.calibFile = "x.txt";
              o.gptqDampening = 0.01;
            }).find("--gptq-dampening applies to --quantize gptq only"),
            std::string::npos);
  for (double bad : {0.0, -0.1, 1.5, std::nan("")})
    EXPECT_NE(failure([bad](BuildOptions &o) {
                o.quantize = "gptq";
                o.calibFile = "x.txt";
                o.gptqDampening = bad;
              }).find("is not in (0, 1]"),
              std::string::npos)
        << bad;
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "int8";
              o.gptqDampening = 0.01;
            }).find("do not apply to --quantize int8"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) { o.awqNormScales = true; }).find("need --quantize awq"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) { o.noAwqScales = true; }).find("need --quantize awq"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) { o.calibFile = "x.txt"; }).find("need --quantize awq"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "rtn";
              o.noGptqRangeSearch = true;
            }).find("--no-gptq-range-search and --no-gptq-refit apply to --quantize gptq only"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "awq";
              o.calibFile = "x.txt";
              o.noGptqRefit = true;
            }).find("--no-gptq-refit apply to --quantize gptq only"),
            std::string::npos);
  EXPECT_NE(failure([](BuildOptions &o) {
              o.quantize = "awq";
              o.calibFile = "/nonexistent/calib.txt";
            }).find("/nonexistent/calib.txt"),
            std::string::npos);
}

// --sequential-calib (quantize/awq.h, calibrateAndQuantize): AWQ and GPTQ
// build with it, each a plan other than without it (layer 1 is calibrated
// on the int4 layer 0); with RTN, int8 or no --quantize it is an error that
// names the option.
TEST(QuantizeBuild, SequentialCalibrationAppliesToAwqAndGptq) {
  for (const std::string method : {"awq", "gptq"}) {
    std::vector<std::string> plans;
    for (bool sequential : {false, true}) {
      BuildOptions options = qwen2(method + (sequential ? "-sequential" : "-float-inputs"));
      options.quantize = method;
      options.calibFile = calibrationFile();
      options.sequentialCalibration = sequential;
      Status built = build(options);
      ASSERT_TRUE(built.isOk()) << built.message();
      plans.push_back(options.output);
    }
    auto a = readTextFile(plans[0]), b = readTextFile(plans[1]);
    ASSERT_TRUE(a.isOk() && b.isOk());
    EXPECT_EQ(a->size(), b->size());
    EXPECT_NE(*a, *b) << method;
  }
  for (const std::string method : {"rtn", "int8", ""}) {
    BuildOptions options = qwen2("sequential-" + method);
    options.quantize = method;
    options.sequentialCalibration = true;
    EXPECT_NE(build(options).message().find("--sequential-calib and --no-sequential-calib apply "
                                            "to --quantize awq or gptq only"),
              std::string::npos)
        << method;
  }
}

} // namespace
} // namespace llmc
