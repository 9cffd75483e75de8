// int8 linear steps in plans (LinearParams.weights = Q8, W8A16; layout:
// kernels/common/q8_layout.h): a tiny plan whose projection is int8 (per
// output channel, and in groups with f16 scales) loads and computes on the
// CPU what the same plan with the dequantized float weights computes; each
// corruption of its tensors or parameters is rejected, naming the tensor
// and what the layout expects.
#include "common/test_paths.h"
#include "cpu/backend/cpu_backend.h"
#include "engine/engine.h"
#include "kernels/common/q8_layout.h"
#include "kv/block_pool.h"
#include "ops/op_table.h"
#include "plan/plan_fixture.h"

#include <cmath>

namespace llmc {
namespace {

using test::kHidden;

// The fixture's plan with its [8, 8] projection (tensor 2) in int8: q and
// scales made up, and `dequantized` what they stand for.
struct Q8Plan {
  test::TinyPlan tiny;
  std::vector<int8_t> qweight;
  std::vector<float> scales;
  std::vector<uint16_t> halfScales;
  std::vector<float> dequantized; // [8, 8]
};

std::unique_ptr<Q8Plan> makeQ8Plan(bool half) {
  auto p = std::make_unique<Q8Plan>();
  p->tiny = test::makeTinyPlan();
  fb::PlanT &meta = p->tiny.contents.meta;
  const int64_t rowBytes = hd::q8RowBytes(kHidden);
  p->qweight.assign(kHidden * rowBytes, 0);
  p->dequantized.assign(kHidden * kHidden, 0.0f);
  for (int64_t n = 0; n < kHidden; ++n) {
    p->scales.push_back(0.0005f * static_cast<float>(n + 1));
    p->halfScales.push_back(hd::f32ToF16(p->scales.back()));
    const float s = half ? hd::f16ToF32(p->halfScales.back()) : p->scales.back();
    for (int64_t c = 0; c < kHidden; ++c) {
      const int q = static_cast<int>((n * kHidden + c) * 37 % 255) - 127;
      p->qweight[n * rowBytes + c] = static_cast<int8_t>(q);
      p->dequantized[n * kHidden + c] = static_cast<float>(q) * s;
    }
  }
  meta.tensors[2] = test::tensor("proj.qweight", {kHidden, rowBytes});
  meta.tensors[2]->dtype = fb::DType::I8;
  meta.tensors[2]->size = static_cast<uint64_t>(kHidden * rowBytes);
  meta.tensors.push_back(test::tensor("proj.scales", {kHidden, 1}));
  meta.tensors[3]->dtype = half ? fb::DType::F16 : fb::DType::F32;
  meta.tensors[3]->size = static_cast<uint64_t>(kHidden * (half ? 2 : 4));
  auto &sources = p->tiny.contents.sources;
  sources[2] = {reinterpret_cast<const uint8_t *>(p->qweight.data()), DType::I8,
                p->qweight.size(), {}};
  if (half)
    sources.push_back(
        {reinterpret_cast<const uint8_t *>(p->halfScales.data()), DType::F16, kHidden, {}});
  else
    sources.push_back({reinterpret_cast<const uint8_t *>(p->scales.data()), DType::F32, kHidden, {}});
  for (auto &program : meta.programs) {
    fb::StepT &linear = *program->steps[2];
    linear.weights = {2, 3};
    linear.params = test::linearParams();
    linear.params.AsLinearParams()->weights = fb::WeightFormat::Q8;
  }
  return p;
}

std::string writeTiny(const std::string &name, PlanContents &contents) {
  std::string path = test::scratchDir("q8-plan-" + name) + "/tiny.plan";
  auto written = writePlan(path, contents);
  EXPECT_TRUE(written.isOk()) << written.message();
  return path;
}

// The logits of the last row of a 5-token prefill on the CPU.
std::vector<float> lastLogits(const std::string &path) {
  auto plan = Plan::open(path);
  EXPECT_TRUE(plan.isOk()) << plan.message();
  if (!plan)
    return {};
  EngineOptions options;
  options.threads = 1;
  options.kvCacheTokens = 8;
  auto backend = CpuBackend::create(*plan, options);
  EXPECT_TRUE(backend.isOk()) << backend.message();
  if (!backend)
    return {};
  kv::BlockTable blocks((*backend)->blockSize());
  EXPECT_TRUE(blocks.reserve((*backend)->blockPool(), 5).isOk());
  std::vector<int32_t> tokens = {1, 4, 2, 7, 3}, positions = {0, 1, 2, 3, 4};
  StepInput input;
  input.tokens = tokens.data();
  input.positions = positions.data();
  input.numTokens = 5;
  input.sequences.push_back({0, 5, blocks.blocks().data()});
  input.outputs = {OutputRequest{4, OutputKind::Logits}};
  StepOutput output;
  output.reset(1);
  output.vocab = plan->meta().model()->vocab_size();
  Status ran = (*backend)->run(input, output);
  EXPECT_TRUE(ran.isOk()) << ran.message();
  const float *logits = ran ? output.logitsOf(0) : nullptr;
  EXPECT_NE(logits, nullptr);
  std::vector<float> values = logits ? std::vector<float>(logits, logits + output.vocab)
                                     : std::vector<float>{};
  EXPECT_TRUE(blocks.releaseAll((*backend)->blockPool()).isOk());
  return values;
}

TEST(Q8Plan, LoadsAndComputesTheDequantizedWeights) {
  for (bool half : {false, true}) {
    auto q8 = makeQ8Plan(half);
    const std::string path = writeTiny(half ? "f16" : "f32", q8->tiny.contents);
    auto plan = Plan::open(path);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    EXPECT_EQ(ops::stepVariant(*plan->meta().programs()->Get(0)->steps()->Get(2)), "Linear[q8]");
    // The same plan with the float weights the int8 ones stand for.
    test::TinyPlan dense = test::makeTinyPlan();
    dense.storage[2] = q8->dequantized;
    dense.contents.sources[2] = {reinterpret_cast<const uint8_t *>(dense.storage[2].data()),
                                 DType::F32, dense.storage[2].size(), {}};
    std::vector<float> got = lastLogits(path), want = lastLogits(writeTiny("dense", dense.contents));
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(got.empty());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << i;
  }
}

// Opens the plan after `mutate` edited its metadata; returns the error.
std::string corrupt(const std::string &name, const std::function<void(fb::PlanT &)> &mutate) {
  auto q8 = makeQ8Plan(false);
  std::string path = writeTiny(name, q8->tiny.contents);
  test::rewriteMetadata(path, mutate);
  auto plan = Plan::open(path);
  EXPECT_FALSE(plan.isOk()) << name << " was accepted";
  std::string message = plan.isOk() ? "" : plan.message();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  return message;
}

void expectContains(const std::string &message, const std::string &part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST(Q8Plan, CorruptionsAreNamed) {
  expectContains(corrupt("qweight-dtype",
                         [](fb::PlanT &m) {
                           m.tensors[2]->dtype = fb::DType::U8;
                         }),
                 "step 2: Linear: tensor 'proj.qweight' (int8 weights) must be I8 [8, 32] for "
                 "K = 8, got U8 [8, 32]");
  expectContains(corrupt("scales-shape",
                         [](fb::PlanT &m) {
                           m.tensors[3]->shape = {4, 2};
                         }),
                 "tensor 'proj.scales' (int8 scales) must be F32 or F16 [8, 1] for K = 8 per "
                 "output channel, got F32 [4, 2]");
  expectContains(corrupt("group-size",
                         [](fb::PlanT &m) {
                           for (auto &p : m.programs)
                             p->steps[2]->params.AsLinearParams()->group_size = 48;
                         }),
                 "LinearParams.group_size = 48: must be 0 (per output channel) or a positive "
                 "multiple of 32 for Q8 weights");
  expectContains(corrupt("grouped-scales",
                         [](fb::PlanT &m) {
                           for (auto &p : m.programs)
                             p->steps[2]->params.AsLinearParams()->group_size = 32;
                           m.tensors[3]->shape = {8, 2};
                           m.tensors[3]->size = 8 * 2 * 4;
                         }),
                 "must be F32 or F16 [8, 1] for K = 8 in groups of 32 (1 groups), got F32 [8, 2]");
}

} // namespace
} // namespace llmc
