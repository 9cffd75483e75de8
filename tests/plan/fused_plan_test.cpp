// The loader's checks of the steps' parameter tables (engine.fbs format 3:
// EmbeddingParams, NormParams, LinearParams, RopeStepParams, RopeParams,
// AttentionParams, ElementwiseParams, ActivationParams, LogitsParams) on a
// tiny valid fused plan: it loads, and each corruption of a field is
// rejected with a message naming the file, the step, the op, the field and
// its value.
#include "common/test_paths.h"
#include "plan_fixture.h"

#include <cmath>

namespace llmc {
namespace {

using test::makeFusedPlan;
using test::rewriteMetadata;

// Fused plan steps: 0 Embedding, 1 Linear[norm,bias] (qkv), 2 Rope (q columns),
// 3 Attention[rope] (q 0, k 8, v 12 of the packed buffer), 4 Linear[accumulate]
// (o), 5 Linear[norm,gated-silu], 6 Linear[gated-silu], 7 Linear[accumulate]
// (down), 8 LmHead.
class FusedPlan : public ::testing::Test {
protected:
  void SetUp() override {
    path_ = test::scratchDir("fused-plan") + "/fused.plan";
    tiny_ = makeFusedPlan();
    auto written = writePlan(path_, tiny_.contents);
    ASSERT_TRUE(written.isOk()) << written.message();
  }

  // Edits step `index` of program 0 and expects the loader to name it and `what`.
  void expectRejected(int index, const std::function<void(fb::StepT &)> &edit,
                      const std::string &what) {
    SCOPED_TRACE(what);
    ASSERT_TRUE(writePlan(path_, tiny_.contents).isOk());
    rewriteMetadata(path_, [&](fb::PlanT &p) { edit(*p.programs[0]->steps[index]); });
    auto plan = Plan::open(path_);
    ASSERT_FALSE(plan.isOk()) << "accepted (expected: " << what << ")";
    EXPECT_NE(plan.message().find(path_ + ": program 0 step " + std::to_string(index) + ": "),
              std::string::npos)
        << plan.message();
    EXPECT_NE(plan.message().find(what), std::string::npos) << plan.message();
  }

  std::string path_;
  test::TinyPlan tiny_;
};

fb::LinearParamsT &linear(fb::StepT &s) { return *s.params.AsLinearParams(); }
fb::AttentionParamsT &attention(fb::StepT &s) { return *s.params.AsAttentionParams(); }
fb::RopeStepParamsT &rope(fb::StepT &s) { return *s.params.AsRopeStepParams(); }
fb::LogitsParamsT &logits(fb::StepT &s) { return *s.params.AsLogitsParams(); }
fb::RopeScalingT &scaling(fb::StepT &s) {
  auto &r = *rope(s).rope;
  if (!r.scaling)
    r.scaling = std::make_unique<fb::RopeScalingT>();
  return *r.scaling;
}

TEST_F(FusedPlan, Loads) {
  auto plan = Plan::open(path_);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  EXPECT_EQ(plan->meta().programs()->Get(0)->steps()->size(), 9u);
}

TEST_F(FusedPlan, LoadsEveryGemmaParameter) {
  test::TinyPlan gemmaPlan = test::makeGemmaFusedPlan();
  ASSERT_TRUE(writePlan(path_, gemmaPlan.contents).isOk());
  auto plan = Plan::open(path_);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const fb::Program &program = *plan->meta().programs()->Get(0);
  auto step = [&](int i) { return program.steps()->Get(i); };
  EXPECT_EQ(step(0)->params_as_EmbeddingParams()->scale(), 2.0);
  EXPECT_EQ(step(1)->params_as_LinearParams()->prologue()->offset(), 1.0);
  EXPECT_EQ(step(3)->params_as_AttentionParams()->window(), 2);
  EXPECT_EQ(step(3)->params_as_AttentionParams()->softcap(), 5.0);
  EXPECT_EQ(step(5)->params_as_LinearParams()->activation(), fb::ActivationKind::GeluTanh);
  EXPECT_EQ(step(6)->params_as_LinearParams()->activation(), fb::ActivationKind::GeluErf);
  EXPECT_EQ(step(8)->params_as_LogitsParams()->norm()->offset(), 1.0);
  EXPECT_EQ(step(8)->params_as_LogitsParams()->softcap(), 3.0);
}

TEST_F(FusedPlan, AttentionWindowsAreReadPerLayer) {
  auto plain = Plan::open(path_);
  ASSERT_TRUE(plain.isOk()) << plain.message();
  EXPECT_EQ(attentionWindows(plain->meta()),
            std::vector<int32_t>(plain->meta().model()->num_layers(), 0));
  test::TinyPlan gemmaPlan = test::makeGemmaFusedPlan();
  ASSERT_TRUE(writePlan(path_, gemmaPlan.contents).isOk());
  auto gemma = Plan::open(path_);
  ASSERT_TRUE(gemma.isOk()) << gemma.message();
  std::vector<int32_t> windows = attentionWindows(gemma->meta());
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows[0], 2);
}

// --- The union: the member must be the kind's, and present. ---
TEST_F(FusedPlan, RejectsParamsOfAnotherKind) {
  expectRejected(
      1, [](fb::StepT &s) { s.params = test::embeddingParams(); },
      "Linear: params is EmbeddingParams, expected LinearParams");
}
TEST_F(FusedPlan, RejectsMissingParams) {
  expectRejected(
      2, [](fb::StepT &s) { s.params.Reset(); }, "Rope: params is NONE, expected RopeStepParams");
}
TEST_F(FusedPlan, RejectsWeightCountsTheParamsDoNotAskFor) {
  expectRejected(
      8, [](fb::StepT &s) { s.weights.push_back(0); },
      "LmHead has 1 inputs and 3 weights; its LogitsParams ask for 1 and 2");
  expectRejected(
      1, [](fb::StepT &s) { linear(s).bias = false; },
      "Linear has 1 inputs and 3 weights; its LinearParams ask for 1 and 2");
}

// --- EmbeddingParams ---
TEST_F(FusedPlan, RejectsBadEmbeddingScales) {
  expectRejected(
      0, [](fb::StepT &s) { s.params.AsEmbeddingParams()->scale = 0.0; },
      "Embedding: EmbeddingParams.scale = 0: must be finite and non-zero");
  expectRejected(
      0, [](fb::StepT &s) { s.params.AsEmbeddingParams()->scale = INFINITY; },
      "EmbeddingParams.scale = inf");
}

// --- NormParams (as a Linear prologue, and LmHead's final norm) ---
TEST_F(FusedPlan, RejectsBadNormFields) {
  expectRejected(
      1, [](fb::StepT &s) { linear(s).prologue->eps = 0.0; },
      "Linear: LinearParams.prologue.eps = 0: must be positive and finite");
  expectRejected(
      1, [](fb::StepT &s) { linear(s).prologue->offset = INFINITY; },
      "LinearParams.prologue.offset = inf: must be finite");
  expectRejected(
      1, [](fb::StepT &s) { linear(s).prologue->kind = static_cast<fb::NormKind>(7); },
      "LinearParams.prologue.kind = 7: not a NormKind");
  expectRejected(
      1, [](fb::StepT &s) { linear(s).prologue->group_width = 3; },
      "LinearParams.prologue.group_width = 3: must be 0 (the whole row) or divide the row "
      "width 8");
  expectRejected(
      8, [](fb::StepT &s) { logits(s).norm->eps = -1.0; }, "LogitsParams.norm.eps = -1");
}
TEST_F(FusedPlan, RejectsNormFeaturesThisRuntimeDoesNotRun) {
  expectRejected(
      1, [](fb::StepT &s) { linear(s).prologue->kind = fb::NormKind::Layer; },
      "LinearParams.prologue.kind = Layer: not run by this runtime yet");
  expectRejected(
      5, [](fb::StepT &s) { linear(s).prologue->group_width = 4; },
      "LinearParams.prologue.group_width = 4: not run by this runtime yet");
  expectRejected(
      8, [](fb::StepT &s) { logits(s).norm->bias = true; },
      "LogitsParams.norm.bias = true: not run by this runtime yet");
}

// --- LinearParams ---
TEST_F(FusedPlan, RejectsBadLinearFields) {
  expectRejected(
      4, [](fb::StepT &s) { linear(s).activation = static_cast<fb::ActivationKind>(99); },
      "LinearParams.activation = 99: not an ActivationKind");
  expectRejected(
      4, [](fb::StepT &s) { linear(s).weights = static_cast<fb::WeightFormat>(9); },
      "LinearParams.weights = 9: not a WeightFormat");
  expectRejected(
      4, [](fb::StepT &s) { linear(s).group_size = 32; },
      "LinearParams.group_size = 32: must be 0 for Dense weights");
  expectRejected(
      4,
      [](fb::StepT &s) {
        linear(s).weights = fb::WeightFormat::Q4;
        linear(s).group_size = 17;
      },
      "LinearParams.group_size = 17: must be a positive multiple of 32 for Q4 weights");
  expectRejected(
      4, [](fb::StepT &s) { linear(s).output_scale = 0.0f; },
      "LinearParams.output_scale = 0: must be finite and non-zero");
  expectRejected(
      6, [](fb::StepT &s) { linear(s).activation = fb::ActivationKind::None; },
      "LinearParams.activation = None: a gated linear needs an activation");
}
TEST_F(FusedPlan, RejectsLinearFeaturesThisRuntimeDoesNotRun) {
  expectRejected(
      4, [](fb::StepT &s) { linear(s).activation = fb::ActivationKind::GeluTanh; },
      "LinearParams.activation = GeluTanh without gating: not run by this runtime yet");
  expectRejected(
      6, [](fb::StepT &s) { linear(s).accumulate = true; },
      "LinearParams.accumulate = true (with gated): not run");
  expectRejected(
      6, [](fb::StepT &s) { linear(s).output_scale = 2.0f; },
      "LinearParams.output_scale = 2 (with gated): not run by this runtime yet");
}
TEST_F(FusedPlan, RejectsLinearShapes) {
  expectRejected(
      1, [](fb::StepT &s) { s.weights[0] = 6; }, "Linear: norm weight 'bq+bk+bv' must be a float [8]");
  expectRejected(
      1, [](fb::StepT &s) { s.weights[1] = 5; }, "weight [N, K] 'down' must be a float [16, 8]");
  expectRejected(
      6, [](fb::StepT &s) { s.outputs = {2}; },
      "weight [2N, K] (gate rows, then up) 'gate+up' must be a float [32, 8]");
  expectRejected(
      1, [](fb::StepT &s) { s.weights[2] = 1; }, "bias 'norm' must be a float [16]");
  expectRejected(
      1,
      [](fb::StepT &s) {
        s.outputs = {1};
        s.weights = {1, 3, 1};
      },
      "input and output must be different buffers");
}

// --- RopeStepParams and RopeParams ---
TEST_F(FusedPlan, RejectsBadRopeStepFields) {
  expectRejected(
      2, [](fb::StepT &s) { rope(s).head_dim = 8; },
      "Rope: RopeStepParams.head_dim = 8: must equal the model's head_dim 4");
  expectRejected(
      2, [](fb::StepT &s) { rope(s).heads = 0; }, "RopeStepParams.heads = 0: must be in [1, ");
  expectRejected(
      2, [](fb::StepT &s) { rope(s).column = 12; },
      "RopeStepParams.column = 12: heads * head_dim features from it must lie inside the "
      "buffer's 16 columns");
  expectRejected(
      2, [](fb::StepT &s) { rope(s).rope.reset(); },
      "RopeStepParams.rope = null: a Rope step needs its RopeParams");
  expectRejected(
      2, [](fb::StepT &s) { s.outputs = {3}; }, "Rope works in place");
}
// Head counts whose product with head_dim overflows int64 (found by fuzz_plan:
// signed overflow in the loader; tests/plan/corpus/rope_heads_overflow.bin).
TEST_F(FusedPlan, RejectsHeadCountsThatOverflow) {
  const int64_t huge = int64_t{1} << 61; // a multiple of the KV heads; x 16 overflows
  expectRejected(
      3, [&](fb::StepT &s) { attention(s).heads = huge; }, "AttentionParams.heads = ");
  expectRejected(
      2, [&](fb::StepT &s) { rope(s).heads = huge; }, "RopeStepParams.heads = ");
}
TEST_F(FusedPlan, RejectsBadRopeFields) {
  expectRejected(
      2, [](fb::StepT &s) { rope(s).rope->theta = 0.0; },
      "Rope: rope.theta = 0: must be positive and finite");
  expectRejected(
      2, [](fb::StepT &s) { rope(s).rope->rotary_dim = 3; },
      "rope.rotary_dim = 3: must be even, in [2, head_dim = 4]");
  expectRejected(
      2, [](fb::StepT &s) { rope(s).rope->rotary_dim = 6; }, "rope.rotary_dim = 6");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).kind = static_cast<fb::RopeScalingKind>(9); },
      "rope.scaling.kind = 9: not a RopeScalingKind");
  expectRejected(
      2,
      [](fb::StepT &s) {
        scaling(s).kind = fb::RopeScalingKind::Linear;
        scaling(s).factor = -2.0;
      },
      "rope.scaling.factor = -2: must be positive and finite");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).low_freq_factor = NAN; }, "rope.scaling.low_freq_factor");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).original_max_positions = -1; },
      "rope.scaling.original_max_positions = -1");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).kind = fb::RopeScalingKind::Llama3; },
      "rope.scaling.original_max_positions = 0: Llama3 scaling needs the original context");
  expectRejected(
      2,
      [](fb::StepT &s) {
        scaling(s).kind = fb::RopeScalingKind::Llama3;
        scaling(s).original_max_positions = 8192;
        scaling(s).high_freq_factor = 1.0;
      },
      "rope.scaling.high_freq_factor = 1: must exceed low_freq_factor 1");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).beta_fast = INFINITY; }, "rope.scaling.beta_fast = inf");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).attention_factor = -1.0; },
      "rope.scaling.attention_factor = -1");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).short_factor = {1.0f, 1.0f}; },
      "rope.scaling.short_factor length = 2: only LongRope has per-pair factors");
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).kind = fb::RopeScalingKind::LongRope; },
      "rope.scaling.short_factor length = 0: LongRope needs rotary_dim / 2 = 2");
  expectRejected(
      2,
      [](fb::StepT &s) {
        scaling(s).kind = fb::RopeScalingKind::LongRope;
        scaling(s).short_factor = {1.0f, 0.0f};
        scaling(s).long_factor = {1.0f, 1.0f};
      },
      "rope.scaling.short_factor = 0: every factor must be positive and finite");
}
TEST_F(FusedPlan, RejectsRopeFeaturesThisRuntimeDoesNotRun) {
  expectRejected(
      2, [](fb::StepT &s) { scaling(s).kind = fb::RopeScalingKind::Dynamic; },
      "rope.scaling.original_max_positions = 0: Dynamic scaling needs the length its "
      "frequencies change at");
  expectRejected(
      2,
      [](fb::StepT &s) {
        scaling(s).kind = fb::RopeScalingKind::Yarn;
        scaling(s).original_max_positions = 0;
      },
      "rope.scaling.original_max_positions = 0: Yarn scaling needs the original context length");
}

// --- AttentionParams ---
TEST_F(FusedPlan, RejectsBadAttentionFields) {
  expectRejected(
      3, [](fb::StepT &s) { attention(s).layer = 5; },
      "Attention: AttentionParams.layer = 5: must be in [0, num_layers = 1)");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).kv_heads = 2; },
      "AttentionParams.kv_heads = 2: must equal the KV cache's 1");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).head_dim = 8; }, "AttentionParams.head_dim = 8");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).heads = 0; },
      "AttentionParams.heads = 0: must be a positive multiple of kv_heads 1");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).v_column = 13; },
      "AttentionParams.v_column = 13: 4 features from it must lie inside input 2's 16 columns");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).q_column = -1; }, "AttentionParams.q_column = -1");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).scale = NAN; },
      "AttentionParams.scale = nan: must be positive and finite");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).softcap = -1.0; },
      "AttentionParams.softcap = -1: must be 0 (off) or positive and finite");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).window = -2; },
      "AttentionParams.window = -2: must be 0 (off) or in [1, 2^31)");
  expectRejected(
      3, [](fb::StepT &s) { attention(s).rope->theta = -1.0; }, "Attention: rope.theta = -1");
}
TEST_F(FusedPlan, RejectsAttentionWritingItsInput) {
  expectRejected(
      3,
      [](fb::StepT &s) {
        s.inputs[0] = 3;
        attention(s).q_column = 0;
      },
      "output must not alias an input");
}

// --- LogitsParams (LmHead) ---
TEST_F(FusedPlan, RejectsBadLogitsFields) {
  expectRejected(
      8, [](fb::StepT &s) { logits(s).norm.reset(); },
      "LmHead: LogitsParams.norm = null: LmHead needs its final norm");
  expectRejected(
      8, [](fb::StepT &s) { logits(s).softcap = -1.0; }, "LogitsParams.softcap = -1");
  expectRejected(
      8, [](fb::StepT &s) { logits(s).scale = 0.0; },
      "LogitsParams.scale = 0: must be positive and finite");
  expectRejected(
      8, [](fb::StepT &s) { logits(s).scale = 2.0; },
      "LogitsParams.scale = 2: not run by this runtime yet");
  expectRejected(
      8,
      [](fb::StepT &s) {
        logits(s).bias = true;
        s.weights.push_back(6);
      },
      "LogitsParams.bias = true: not run by this runtime yet");
}
TEST_F(FusedPlan, RejectsLmHeadShapes) {
  expectRejected(
      8, [](fb::StepT &s) { s.weights = {1, 3}; },
      "LmHead: weight [vocab_size, H] 'o' must be a float [16, 8]");
  expectRejected(
      8, [](fb::StepT &s) { s.outputs[1] = 3; }, "ids output must be I32 with width 1");
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

// --- The unfused kinds: Elementwise, Activation, Norm, Logits (makeUnfusedPlan:
// 1 Norm, 9 Elementwise Add, 12 Activation Silu, 14 Activation gated, 18 Logits).
class UnfusedPlan : public FusedPlan {
protected:
  void SetUp() override {
    path_ = test::scratchDir("unfused-plan") + "/unfused.plan";
    tiny_ = test::makeUnfusedPlan();
  }
};

TEST_F(UnfusedPlan, Loads) {
  ASSERT_TRUE(writePlan(path_, tiny_.contents).isOk());
  auto plan = Plan::open(path_);
  ASSERT_TRUE(plan.isOk()) << plan.message();
}
TEST_F(UnfusedPlan, RejectsBadFields) {
  expectRejected(
      9, [](fb::StepT &s) { s.params.AsElementwiseParams()->op = static_cast<fb::ElementwiseOp>(9); },
      "Elementwise: ElementwiseParams.op = 9: not an ElementwiseOp");
  expectRejected(
      12, [](fb::StepT &s) { s.params.AsActivationParams()->activation = fb::ActivationKind::None; },
      "Activation: ActivationParams.activation = None: an Activation step needs one");
  expectRejected(
      12,
      [](fb::StepT &s) {
        s.params.AsActivationParams()->activation = static_cast<fb::ActivationKind>(42);
      },
      "ActivationParams.activation = 42: not an ActivationKind");
  expectRejected(
      12, [](fb::StepT &s) { s.params.AsActivationParams()->gated = true; },
      "Activation has 1 inputs and 0 weights; its ActivationParams ask for 2 and 0");
  expectRejected(
      1, [](fb::StepT &s) { s.params.AsNormParams()->eps = 0.0; },
      "Norm: NormParams.eps = 0: must be positive and finite");
  expectRejected(
      18,
      [](fb::StepT &s) { s.params.AsLogitsParams()->norm = std::make_unique<fb::NormParamsT>(test::rms()); },
      "Logits: LogitsParams.norm = set (on a Logits step; LmHead has one): not run");
  expectRejected(
      14, [](fb::StepT &s) { s.inputs = {9, 1}; }, "inputs and output must have the same width");
}

} // namespace
} // namespace llmc
