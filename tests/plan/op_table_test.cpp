// The one op table (runtime/ops/): every schema kind has its entry, operand
// layouts follow from the parameter tables, and the CPU backend builds one
// RoPE table per distinct RopeParams of a plan's steps.
#include "common/test_paths.h"
#include "cpu/backend/cpu_executor.h"
#include "ops/op_table.h"
#include "ops/operands.h"
#include "ops/rope.h"
#include "plan_fixture.h"

#include <cmath>

namespace llmc {
namespace {

TEST(OpTable, EveryKindIsNamedAsTheSchemaNamesIt) {
  for (size_t i = 0; i < ops::kNumOps; ++i) {
    const fb::OpKind kind = static_cast<fb::OpKind>(i);
    ASSERT_TRUE(ops::validOp(kind));
    EXPECT_STREQ(ops::opName(kind), fb::EnumNameOpKind(kind));
    EXPECT_LE(ops::opInfo(kind).minInputs, ops::opInfo(kind).maxInputs);
    EXPECT_LE(ops::opInfo(kind).minWeights, ops::opInfo(kind).maxWeights);
    EXPECT_NE(ops::opInfo(kind).params, fb::StepParams::NONE);
  }
  EXPECT_FALSE(ops::validOp(static_cast<fb::OpKind>(ops::kNumOps)));
  EXPECT_STREQ(ops::opName(static_cast<fb::OpKind>(999)), "unknown");
  EXPECT_EQ(ops::opInfo(fb::OpKind::LmHead).params, fb::StepParams::LogitsParams);
}

// Packs a parameter table as the loader sees it.
template <typename T> struct Packed {
  explicit Packed(const typename T::NativeTableType &table) {
    builder.Finish(T::Pack(builder, &table));
  }
  const T &operator*() const { return *flatbuffers::GetRoot<T>(builder.GetBufferPointer()); }
  flatbuffers::FlatBufferBuilder builder;
};

TEST(OpTable, LinearWeightsFollowTheFlags) {
  fb::LinearParamsT plain;
  ops::LinearOperands o = ops::linearOperands(*Packed<fb::LinearParams>(plain));
  EXPECT_EQ(o.matrix, 0);
  EXPECT_EQ(o.parts, 1);
  EXPECT_EQ(o.bias, -1);
  EXPECT_EQ(o.count, 1);
  fb::LinearParamsT fused;
  fused.prologue = std::make_unique<fb::NormParamsT>(test::rms());
  fused.prologue->bias = true; // a LayerNorm prologue with beta
  fused.weights = fb::WeightFormat::Q4;
  fused.group_size = 32;
  fused.bias = true;
  o = ops::linearOperands(*Packed<fb::LinearParams>(fused));
  EXPECT_EQ(o.normGamma, 0);
  EXPECT_EQ(o.normBeta, 1);
  EXPECT_EQ(o.matrix, 2);
  EXPECT_EQ(o.parts, 3);
  EXPECT_EQ(o.bias, 5);
  EXPECT_EQ(o.count, 6);
  EXPECT_EQ(o.count, ops::opInfo(fb::OpKind::Linear).maxWeights);
}

TEST(OpTable, GateKindsMapToTheSharedKernels) {
  EXPECT_EQ(ops::gateKind(fb::ActivationKind::Silu), hd::kGateSilu);
  EXPECT_EQ(ops::gateKind(fb::ActivationKind::GeluTanh), hd::kGateGeluTanh);
  EXPECT_EQ(ops::gateKind(fb::ActivationKind::GeluErf), hd::kGateGeluErf);
  EXPECT_EQ(ops::gateKind(fb::ActivationKind::Relu), hd::kGateRelu);
  EXPECT_EQ(hd::gated(hd::kGateRelu, -2.0f, 3.0f), 0.0f);
  EXPECT_EQ(hd::gated(hd::kGateRelu, 2.0f, 3.0f), 6.0f);
  EXPECT_EQ(hd::activate(hd::kGateRelu, -1.5f), 0.0f);
}

// The unfused fixture rotates q and k in two Rope steps; with k at another
// theta the plan has two RoPE configurations, so two tables, each equal to
// cos/sin of position * theta^(-2i/d).
TEST(OpTable, CpuBuildsOneRopeTablePerDistinctRopeParams) {
  test::TinyPlan tiny = test::makeUnfusedPlan();
  for (auto &program : tiny.contents.meta.programs)
    program->steps[6]->params.AsRopeStepParams()->rope->theta = 500000.0;
  const std::string path = test::scratchDir("op-table") + "/two-ropes.plan";
  ASSERT_TRUE(writePlan(path, tiny.contents).isOk());
  auto plan = Plan::open(path);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const ops::ProgramRopes ropes = ops::programRopes(*plan->meta().programs()->Get(0));
  ASSERT_EQ(ropes.configs.size(), 2u);
  EXPECT_EQ(ropes.stepConfig[5], 0);
  EXPECT_EQ(ropes.stepConfig[6], 1);
  EXPECT_EQ(ropes.stepConfig[7], -1); // attention without rope
  auto tables = CpuRopeTables::build(*plan);
  ASSERT_EQ(tables->tables.size(), 2u);
  const int64_t dim = 4, half = dim / 2, position = 3;
  for (int c = 0; c < 2; ++c) {
    const float theta = c == 0 ? 10000.0f : 500000.0f;
    const float *row = tables->find(ropes.configs[c]) + position * dim;
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(position) * hd::ropeDefaultInvFreq(i, dim, theta);
      EXPECT_FLOAT_EQ(row[i], std::cos(angle)) << c << " " << i;
      EXPECT_FLOAT_EQ(row[half + i], std::sin(angle)) << c << " " << i;
    }
  }
  EXPECT_NE(tables->tables[0], tables->tables[1]);
}

TEST(OpTable, StepVariantsNameTheFlags) {
  test::TinyPlan tiny = test::makeFusedPlan();
  const std::string path = test::scratchDir("op-table") + "/fused.plan";
  ASSERT_TRUE(writePlan(path, tiny.contents).isOk());
  auto plan = Plan::open(path);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  std::vector<std::string> got;
  for (const fb::Step *step : *plan->meta().programs()->Get(0)->steps())
    got.push_back(ops::stepVariant(*step));
  EXPECT_EQ(got, (std::vector<std::string>{"Embedding", "Linear[norm,bias]", "Rope",
                                           "Attention[rope]", "Linear[accumulate]",
                                           "Linear[norm,gated-silu]", "Linear[gated-silu]",
                                           "Linear[accumulate]", "LmHead"}));
}

} // namespace
} // namespace llmc
