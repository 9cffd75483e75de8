// The loader's checks of the fused op kinds (engine.fbs: RmsNormLinear,
// LinearSwiGlu, RmsNormLinearSwiGlu, RopeAttention, RopeColumns, LmHead): a
// tiny valid fused plan loads, and each corruption is rejected with a
// message naming the file, the step and what is wrong.
#include "common/test_paths.h"
#include "kernels/common/activations.h"
#include "plan_fixture.h"

#include <cmath>

namespace llmc {
namespace {

using test::makeFusedPlan;
using test::rewriteMetadata;

class FusedPlan : public ::testing::Test {
protected:
  void SetUp() override {
    path_ = test::scratchDir("fused-plan") + "/fused.plan";
    tiny_ = makeFusedPlan();
    auto written = writePlan(path_, tiny_.contents);
    ASSERT_TRUE(written.isOk()) << written.message();
  }

  // Edits step `index` of program 0 and expects the loader to name it.
  void expectRejected(int index, const std::function<void(fb::StepT &)> &edit,
                      const std::string &what) {
    rewriteMetadata(path_, [&](fb::PlanT &p) { edit(*p.programs[0]->steps[index]); });
    auto plan = Plan::open(path_);
    ASSERT_FALSE(plan.isOk()) << "accepted (expected: " << what << ")";
    EXPECT_NE(plan.message().find(path_ + ": program 0 step " + std::to_string(index)),
              std::string::npos)
        << plan.message();
    EXPECT_NE(plan.message().find(what), std::string::npos) << plan.message();
  }

  std::string path_;
  test::TinyPlan tiny_;
};

TEST_F(FusedPlan, Loads) {
  auto plan = Plan::open(path_);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  EXPECT_EQ(plan->meta().programs()->Get(0)->steps()->size(), 9u);
}

TEST_F(FusedPlan, RejectsNormWeightOfTheWrongSize) {
  expectRejected(
      1, [](fb::StepT &s) { s.weights[0] = 6; }, "RmsNormLinear: norm weight must be [K]");
}
TEST_F(FusedPlan, RejectsNonPositiveEps) {
  expectRejected(
      5, [](fb::StepT &s) { s.float_params[0] = 0.0; }, "eps must be positive");
}
TEST_F(FusedPlan, RejectsGemmWeightOfTheWrongWidth) {
  expectRejected(
      1, [](fb::StepT &s) { s.weights[1] = 5; }, "weight must be [N, K]");
}
TEST_F(FusedPlan, RejectsSwigluOutputThatIsNotHalfTheRows) {
  expectRejected(
      6, [](fb::StepT &s) { s.outputs = {2}; }, "LinearSwiGlu: output width 16");
}
TEST_F(FusedPlan, RejectsBiasOfTheWrongSize) {
  expectRejected(
      1, [](fb::StepT &s) { s.weights[2] = 1; }, "bias must be [N]");
}
TEST_F(FusedPlan, RejectsAccumulateOtherThan0Or1) {
  expectRejected(
      1, [](fb::StepT &s) { s.int_params[0] = 2; }, "accumulate must be 0 or 1");
}
TEST_F(FusedPlan, RejectsGemmWritingItsInput) {
  expectRejected(
      1,
      [](fb::StepT &s) {
        s.outputs = {1};
        s.weights = {1, 3};
      },
      "input and output must be different buffers");
}
TEST_F(FusedPlan, RejectsRopeColumnsOutsideTheBuffer) {
  expectRejected(
      2, [](fb::StepT &s) { s.int_params[2] = 12; },
      "RopeColumns: must rotate heads of head_dim inside its buffer");
}
TEST_F(FusedPlan, RejectsAttentionHeadsThatDisagreeWithTheCache) {
  expectRejected(
      3, [](fb::StepT &s) { s.int_params[2] = 2; },
      "RopeAttention: head counts or head dim disagree");
}
TEST_F(FusedPlan, RejectsAttentionColumnsOutsideTheirBuffers) {
  expectRejected(
      3, [](fb::StepT &s) { s.int_params[6] = 13; }, "q/k/v columns lie outside");
}
// Head counts whose product with head_dim overflows int64 (found by fuzz_plan:
// signed overflow in the loader; tests/plan/corpus/rope_heads_overflow.bin).
TEST_F(FusedPlan, RejectsHeadCountsThatOverflow) {
  const int64_t huge = int64_t{1} << 61; // a multiple of the KV heads; x 16 overflows
  expectRejected(
      3, [&](fb::StepT &s) { s.int_params[1] = huge; }, "q/k/v columns lie outside");
  expectRejected(
      2, [&](fb::StepT &s) { s.int_params[0] = huge; }, "RopeColumns: must rotate heads");
}
TEST_F(FusedPlan, RejectsRopeFlagOtherThan0Or1) {
  expectRejected(
      3, [](fb::StepT &s) { s.int_params[7] = 3; }, "rope must be 0 or 1");
}
TEST_F(FusedPlan, RejectsAttentionWritingItsInput) {
  expectRejected(
      3,
      [](fb::StepT &s) {
        s.inputs[0] = 3;
        s.int_params[4] = 0;
      },
      "output must not alias an input");
}
TEST_F(FusedPlan, RejectsAttentionLayerOutOfRange) {
  expectRejected(
      3, [](fb::StepT &s) { s.int_params[0] = 5; }, "attention layer 5 out of range");
}
TEST_F(FusedPlan, RejectsLmHeadWeightsOfTheWrongShape) {
  expectRejected(
      8,
      [](fb::StepT &s) {
        s.weights = {1, 3};
      },
      "LmHead: weights must be gamma [H] and [vocab_size, H]");
}
TEST_F(FusedPlan, RejectsLmHeadIdsThatAreNotI32) {
  expectRejected(
      8, [](fb::StepT &s) { s.outputs[1] = 3; }, "ids output must be I32 with width 1");
}
TEST_F(FusedPlan, RejectsLmHeadLogitsThatAreNotF32) {
  expectRejected(
      8, [](fb::StepT &s) { s.outputs[0] = 0; }, "output buffer must be F32");
}
TEST_F(FusedPlan, RejectsLmHeadThatIsNotTheLastStep) {
  rewriteMetadata(path_, [](fb::PlanT &p) {
    auto &steps = p.programs[1]->steps;
    std::swap(steps[7], steps[8]);
  });
  auto plan = Plan::open(path_);
  ASSERT_FALSE(plan.isOk());
  EXPECT_NE(plan.message().find(path_ + ": program 1 step 7: LmHead must be the last step"),
            std::string::npos)
      << plan.message();
}

// --- The optional trailing parameters (engine.fbs: offset, scale, softcap,
// window, gate): accepted with valid values, refused out of range or past
// the kind's last slot.
TEST_F(FusedPlan, LoadsEveryOptionalParameter) {
  test::TinyPlan gemmaPlan = test::makeGemmaFusedPlan();
  ASSERT_TRUE(writePlan(path_, gemmaPlan.contents).isOk());
  auto plan = Plan::open(path_);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const fb::Program &program = *plan->meta().programs()->Get(0);
  EXPECT_EQ(stepExtras(*program.steps()->Get(0)).embeddingScale, 2.0);
  EXPECT_EQ(stepExtras(*program.steps()->Get(1)).normOffset, 1.0);
  EXPECT_EQ(stepExtras(*program.steps()->Get(3)).window, 2);
  EXPECT_EQ(stepExtras(*program.steps()->Get(3)).softcap, 5.0);
  EXPECT_EQ(stepExtras(*program.steps()->Get(5)).gate, hd::kGateGeluTanh);
  EXPECT_EQ(stepExtras(*program.steps()->Get(6)).gate, hd::kGateGeluErf);
  EXPECT_EQ(stepExtras(*program.steps()->Get(8)).normOffset, 1.0);
  EXPECT_EQ(stepExtras(*program.steps()->Get(8)).softcap, 3.0);
}
TEST_F(FusedPlan, AttentionWindowsAreReadPerLayer) {
  auto plain = Plan::open(path_);
  ASSERT_TRUE(plain.isOk()) << plain.message();
  EXPECT_EQ(attentionWindows(plain->meta()), std::vector<int32_t>(
                                                 plain->meta().model()->num_layers(), 0));
  test::TinyPlan gemmaPlan = test::makeGemmaFusedPlan();
  ASSERT_TRUE(writePlan(path_, gemmaPlan.contents).isOk());
  auto gemma = Plan::open(path_);
  ASSERT_TRUE(gemma.isOk()) << gemma.message();
  std::vector<int32_t> windows = attentionWindows(gemma->meta());
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows[0], 2);
}
TEST_F(FusedPlan, RejectsAnUnknownGatedActivation) {
  expectRejected(
      6, [](fb::StepT &s) { s.int_params = {3}; }, "gated activation 3 is not 0 (silu)");
}
TEST_F(FusedPlan, RejectsANegativeAttentionWindow) {
  expectRejected(
      3, [](fb::StepT &s) { s.int_params.push_back(-2); }, "attention window -2");
}
TEST_F(FusedPlan, RejectsANegativeSoftcap) {
  expectRejected(
      8, [](fb::StepT &s) { s.float_params = {1e-5, 0.0, -1.0}; }, "softcap -1");
}
TEST_F(FusedPlan, RejectsANonFiniteNormOffset) {
  expectRejected(
      1, [](fb::StepT &s) { s.float_params = {1e-5, INFINITY}; }, "norm offset inf");
}
TEST_F(FusedPlan, RejectsAZeroEmbeddingScale) {
  expectRejected(
      0, [](fb::StepT &s) { s.float_params = {0.0}; }, "embedding scale 0");
}
TEST_F(FusedPlan, RejectsParametersPastTheKindsLastSlot) {
  expectRejected(
      8, [](fb::StepT &s) { s.float_params = {1e-5, 0.0, 0.0, 0.0}; },
      "wrong number of inputs, outputs, weights or parameters");
  expectRejected(
      4, [](fb::StepT &s) { s.int_params = {1, 0}; },
      "wrong number of inputs, outputs, weights or parameters");
}

} // namespace
} // namespace llmc
