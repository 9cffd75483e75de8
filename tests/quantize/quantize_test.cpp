// The quantizer's parts without the driver: round-to-nearest int4 packing
// (bounds, pad nibbles, ragged groups), the linear groups and scale sinks
// the quantize pass and the AWQ search share, and the calibration model
// (the CPU executor on the -O0 lowering) against transformers' logits of a
// tiny Qwen2 (tests/data/hf), its slices and weight overrides.
#include "common/compare.h"
#include "common/test_paths.h"
#include "tiny_qwen2.h"
#include "frontend/model_spec.h"
#include "frontend/weight_check.h"
#include "kernels/common/q4_layout.h"
#include "models/llama_graph.h"
#include "passes/Quantize.h"
#include "quantize/calibration_model.h"
#include "quantize/q4_quantize.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/MLIRContext.h>
#include <mlir/Parser/Parser.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

namespace llmc {
namespace {

std::vector<float> randomMatrix(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> w(n);
  for (float &v : w)
    v = dist(rng);
  return w;
}

TEST(QuantizeRtn, StaysWithinHalfAStepAndPadsWithZeroPoints) {
  ThreadPool pool(2);
  for (auto [rows, cols, group] : {std::tuple<int64_t, int64_t, int64_t>{7, 172, 32},
                                   {5, 172, 64},
                                   {3, 64, 128},
                                   {2, 33, 32}}) {
    std::vector<float> w = randomMatrix(rows * cols, static_cast<uint32_t>(cols + group));
    w[5] = 0.5f; // an outlier widens its group's step
    quant::Q4Tensor q = quant::quantizeQ4(pool, w.data(), rows, cols, group);
    const int64_t words = hd::q4WordsPerRow(cols), groups = hd::q4NumGroups(cols, group);
    ASSERT_EQ(static_cast<int64_t>(q.qweight.size()), rows * words);
    ASSERT_EQ(static_cast<int64_t>(q.scales.size()), rows * groups);
    std::vector<float> back = quant::dequantizeQ4(q);
    std::vector<float> fake(cols);
    for (int64_t n = 0; n < rows; ++n) {
      quant::fakeQuantizeRow(w.data() + n * cols, cols, group, fake.data());
      for (int64_t k = 0; k < cols; ++k) {
        float step = hd::f16ToF32(q.scales[n * groups + k / group]);
        ASSERT_LE(std::fabs(back[n * cols + k] - w[n * cols + k]), 0.51f * step)
            << "row " << n << " column " << k << " of " << cols << ", group " << group;
        ASSERT_EQ(fake[k], back[n * cols + k]) << "fake quantization differs from the stored";
      }
      // Columns past K dequantize to exactly zero.
      for (int64_t k = cols; k < words * 8; ++k)
        ASSERT_EQ(hd::q4At(q.qweight.data() + n * words, k),
                  static_cast<int>(hd::f16ToF32(q.zeros[n * groups + groups - 1])));
    }
  }
}

// AWQ's formula without 0 in the range would give 15 * 1e-5 / 15 here.
TEST(QuantizeRtn, ConstantGroupsKeepTheirValue) {
  ThreadPool pool(1);
  std::vector<float> w(64, 0.25f);
  quant::Q4Tensor q = quant::quantizeQ4(pool, w.data(), 1, 64, 32);
  for (float v : quant::dequantizeQ4(q)) // 15 f16 steps: f16's relative precision, 2^-11
    EXPECT_NEAR(v, 0.25f, 0.25f / 2048);
}

// One GQA layer with a v bias (as the lit test quantize.mlir).
constexpr const char *kLayer = R"mlir(
func.func @forward(%tokens: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  %emb = llm.weight "embed" : tensor<128x64xf32>
  %h0 = llm.embedding %tokens, %emb : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>
  %g1 = llm.weight "ln1" : tensor<64xf32>
  %x = llm.rms_norm %h0, %g1 eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %wq = llm.weight "q.weight" : tensor<64x64xf32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wk = llm.weight "k.weight" : tensor<32x64xf32>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %wv = llm.weight "v.weight" : tensor<32x64xf32>
  %bv = llm.weight "v.bias" : tensor<32xf32>
  %v = llm.linear %x, %wv, %bv : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %kr = llm.rope %k, %pos num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
  %att = llm.attention %qr, %kr, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  %wo = llm.weight "o.weight" : tensor<64x64xf32>
  %o = llm.linear %att, %wo : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h1 = llm.add %h0, %o : tensor<?x64xf32>
  %g2 = llm.weight "ln2" : tensor<64xf32>
  %y = llm.rms_norm %h1, %g2 eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %wg = llm.weight "gate.weight" : tensor<48x64xf32>
  %gate = llm.linear %y, %wg : tensor<?x64xf32>, tensor<48x64xf32> -> tensor<?x48xf32>
  %wu = llm.weight "up.weight" : tensor<48x64xf32>
  %up = llm.linear %y, %wu : tensor<?x64xf32>, tensor<48x64xf32> -> tensor<?x48xf32>
  %act = llm.silu %gate : tensor<?x48xf32>
  %prod = llm.mul %act, %up : tensor<?x48xf32>
  %wd = llm.weight "down.weight" : tensor<64x48xf32>
  %down = llm.linear %prod, %wd : tensor<?x48xf32>, tensor<64x48xf32> -> tensor<?x64xf32>
  %h2 = llm.add %h1, %down : tensor<?x64xf32>
  return %h2 : tensor<?x64xf32>
}
)mlir";

std::string weightOf(llm::LinearOp linear) {
  return linear.getWeight().getDefiningOp<llm::WeightOp>().getName().str();
}

TEST(LinearGroups, FindTheFourGroupsOfALayerAndWhereTheirScalesFold) {
  mlir::MLIRContext context;
  context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kLayer, &context);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  std::vector<LinearGroup> groups = findLinearGroups(forward);
  ASSERT_EQ(groups.size(), 4u);

  EXPECT_EQ(groups[0].label(), "{q,k,v}");
  EXPECT_EQ(groups[0].sink, ScaleSink::RmsNorm);
  EXPECT_EQ(groups[0].sinkChannels, 64);
  EXPECT_TRUE(feedsAttentionScores(groups[0].linears[0]));  // q
  EXPECT_TRUE(feedsAttentionScores(groups[0].linears[1]));  // k
  EXPECT_FALSE(feedsAttentionScores(groups[0].linears[2])); // v

  // o_proj: v's rows absorb the scales, tied over the 2 query heads per kv head.
  EXPECT_EQ(groups[1].label(), "o");
  ASSERT_EQ(groups[1].sink, ScaleSink::Linear);
  EXPECT_EQ(weightOf(llvm::cast<llm::LinearOp>(groups[1].sinkOp)), "v.weight");
  EXPECT_EQ(groups[1].sinkChannels, 32);
  EXPECT_EQ(groups[1].headsPerKvHead, 2);
  EXPECT_EQ(groups[1].sinkChannel(5), 5);       // head 0 -> kv head 0
  EXPECT_EQ(groups[1].sinkChannel(16 + 5), 5);  // head 1 -> kv head 0
  EXPECT_EQ(groups[1].sinkChannel(32 + 5), 21); // head 2 -> kv head 1

  EXPECT_EQ(groups[2].label(), "{gate,up}");
  EXPECT_EQ(groups[2].sink, ScaleSink::RmsNorm);
  EXPECT_EQ(groups[3].label(), "down");
  ASSERT_EQ(groups[3].sink, ScaleSink::Linear);
  EXPECT_EQ(weightOf(llvm::cast<llm::LinearOp>(groups[3].sinkOp)), "up.weight");
  EXPECT_EQ(groups[3].sinkChannel(47), 47);
}

TEST(LinearGroups, NoSinkWhenTheInputHasAnotherUser) {
  mlir::MLIRContext context;
  context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
func.func @forward(%h: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = llm.weight "n" : tensor<64xf32>
  %x = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %w = llm.weight "w" : tensor<64x64xf32>
  %y = llm.linear %x, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %s = llm.add %x, %y : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}
)mlir",
                                                        &context);
  ASSERT_TRUE(module);
  std::vector<LinearGroup> groups =
      findLinearGroups(module->lookupSymbol<mlir::func::FuncOp>("forward"));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].sink, ScaleSink::None);
}

// The tiny Qwen2 of tests/data/hf as the quantizer sees it: its @forward,
// its weights in a table (views of the safetensors).
struct TinyQwen2 : test::TinyQwen2Graph {
  quant::WeightTable table;
  std::vector<int32_t> ids;
  std::vector<float> expected; // transformers' logits [ids, 512]

  TinyQwen2() {
    if (!module)
      return;
    for (const auto &[name, t] : weights->all())
      table.addView(name, t.data, t.dtype, t.shape);
    auto json = readTextFile(dir + "/logits.json");
    auto ref = json.isOk() ? parseJson(*json, "logits.json") : Expected<nlohmann::json>(json.status());
    EXPECT_TRUE(ref.isOk());
    if (!ref.isOk())
      return;
    ids = (*ref)["ids"].get<std::vector<int32_t>>();
    auto golden = MappedFile::open(dir + "/logits.f32");
    EXPECT_TRUE(golden.isOk());
    if (golden.isOk()) {
      const float *f = reinterpret_cast<const float *>(golden->data());
      expected.assign(f, f + golden->size() / sizeof(float));
    }
  }
};

// The calibration model (the CPU executor on the -O0 lowering) runs the
// tiny Qwen2 (GQA, q/k/v biases, tied embeddings) as transformers does:
// every logit within 1e-4; one step per op of @forward.
TEST(CalibrationModel, MatchesTransformersOnATinyQwen2) {
  TinyQwen2 m;
  ASSERT_TRUE(m.module);
  ThreadPool pool(2);
  auto model = quant::CalibrationModel::create(m.forward(), m.table, pool, 64);
  ASSERT_TRUE(model.isOk()) << model.message();
  int64_t ops = 0;
  for (mlir::Operation &op : m.forward().getBody().front())
    ops += !llvm::isa<llm::WeightOp, mlir::func::ReturnOp>(op);
  EXPECT_EQ((*model)->numSteps(), ops);
  auto logits = (*model)->run(m.ids);
  ASSERT_TRUE(logits.isOk()) << logits.message();
  ASSERT_EQ(logits->size(), m.ids.size() * 512);
  ASSERT_GE(m.expected.size(), logits->size()); // then the decode steps' logits
  EXPECT_TRUE(test::allClose(logits->data(), m.expected.data(), logits->size(), 1e-4));
  auto tooLong = (*model)->run(std::vector<int32_t>(65, 1));
  EXPECT_FALSE(tooLong.isOk());
  auto badId = (*model)->run({1, 100000});
  ASSERT_FALSE(badId.isOk());
  EXPECT_NE(badId.message().find("outside the vocabulary of 512"), std::string::npos);
}

// What the observer reports of each group's input is what the group's
// linears read, and a slice from it reproduces the run's values downstream:
// for layer 0's q/k/v group, attention through o_proj on two sequences of
// the prompt's rows (each a fresh sequence at positions 0 ..), bit for bit
// with what the whole run computed for the first; an override of q_proj
// changes the result, and none gives it back.
TEST(CalibrationModel, SlicesReproduceTheRunAndOverridesChangeThem) {
  TinyQwen2 m;
  ASSERT_TRUE(m.module);
  ThreadPool pool(2);
  auto model = quant::CalibrationModel::create(m.forward(), m.table, pool, 64);
  ASSERT_TRUE(model.isOk()) << model.message();
  std::vector<LinearGroup> groups = findLinearGroups(m.forward());
  ASSERT_GE(groups.size(), 4u);
  LinearGroup &qkv = groups[0];
  LinearGroup &o = groups[1];
  ASSERT_EQ(qkv.linears.size(), 3u);
  ASSERT_EQ(o.linears.size(), 1u);
  mlir::Value target = o.linears[0].getResult();
  llvm::DenseMap<mlir::Value, std::vector<float>> seen;
  auto logits = (*model)->run(m.ids, [&](mlir::Value v, const float *data, int64_t rows,
                                         int64_t width) {
    seen[v].assign(data, data + rows * width);
  });
  ASSERT_TRUE(logits.isOk()) << logits.message();
  ASSERT_TRUE(seen.count(qkv.input) && seen.count(target) && seen.count(o.input));
  // observe() reports exactly the values asked for, once, as run() saw them.
  std::vector<mlir::Value> inputs;
  for (const LinearGroup &group : groups)
    inputs.push_back(group.input);
  llvm::DenseMap<mlir::Value, int> reported;
  Status observed = (*model)->observe(
      m.ids, inputs, [&](mlir::Value v, const float *data, int64_t rows, int64_t width) {
        ++reported[v];
        ASSERT_TRUE(seen.count(v));
        EXPECT_TRUE(std::equal(data, data + rows * width, seen[v].begin()));
      });
  ASSERT_TRUE(observed.isOk()) << observed.message();
  EXPECT_EQ(reported.size(), groups.size());
  for (const LinearGroup &group : groups)
    EXPECT_EQ(reported.lookup(group.input), 1);
  const int64_t T = static_cast<int64_t>(m.ids.size()), K = qkv.cols;
  std::vector<float> x = seen[qkv.input];
  x.insert(x.end(), seen[qkv.input].begin(), seen[qkv.input].end()); // two sequences
  auto y = (*model)->runSlice(qkv.input, x.data(), 2 * T, {T, T}, target);
  ASSERT_TRUE(y.isOk()) << y.message();
  const std::vector<float> &want = seen[target];
  ASSERT_EQ(y->size(), 2 * want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), y->begin()));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), y->begin() + want.size()));
  std::vector<float> zeros(qkv.linears[0].getResult().getType().cast<mlir::RankedTensorType>()
                               .getDimSize(1) * K, 0.0f);
  const std::string q = qkv.linears[0].getWeight().getDefiningOp<llm::WeightOp>().getName().str();
  auto changed = (*model)->runSlice(
      qkv.input, x.data(), 2 * T, {T, T}, target,
      {{q, {zeros.data(), DType::F32, static_cast<int64_t>(zeros.size()) / K, K}}});
  ASSERT_TRUE(changed.isOk()) << changed.message();
  EXPECT_FALSE(std::equal(want.begin(), want.end(), changed->begin()));
  auto again = (*model)->runSlice(qkv.input, x.data(), T, {T}, target);
  ASSERT_TRUE(again.isOk()) << again.message();
  EXPECT_EQ(*again, want);
  // Backwards, or lengths that are not the rows: errors, not reads.
  EXPECT_FALSE((*model)->runSlice(o.input, seen[o.input].data(), T, {T}, qkv.input).isOk());
  EXPECT_FALSE((*model)->runSlice(qkv.input, x.data(), T, {T - 1}, target).isOk());
}

} // namespace
} // namespace llmc
