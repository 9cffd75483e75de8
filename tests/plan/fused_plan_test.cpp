// The loader's checks of the fused op kinds (engine.fbs: RmsNormLinear,
// LinearSwiGlu, RmsNormLinearSwiGlu, RopeAttention, RopeColumns, LmHead): a
// tiny valid fused plan loads, and each corruption is rejected with a
// message naming the file, the step and what is wrong.
#include "common/test_paths.h"
#include "plan_fixture.h"

namespace llmc {
namespace {

using test::buffer;
using test::kHidden;
using test::kInter;
using test::kVocab;
using test::rewriteMetadata;
using test::step;
using test::tensor;

// One layer as the fusion passes leave it: embedding, the q/k/v GEMM with a
// norm prologue into a packed buffer, a RoPE of q's columns, attention over
// the packed buffer, o_proj and down_proj accumulating into the residual,
// the SwiGLU GEMMs with and without a norm, and the LM head.
test::TinyPlan makeFusedPlan() {
  test::TinyPlan tiny = test::makeTinyPlan(); // model: 2 heads, 1 kv head of 4
  fb::PlanT &meta = tiny.contents.meta;
  meta.tensors.clear();
  tiny.storage.clear();
  tiny.contents.sources.clear();
  const int64_t qkv = 2 * 4 + 2 * 4;
  for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"embed", {kVocab, kHidden}},       // 0
           {"norm", {kHidden}},                // 1
           {"q+k+v", {qkv, kHidden}},          // 2
           {"o", {kHidden, kHidden}},          // 3
           {"gate+up", {2 * kInter, kHidden}}, // 4
           {"down", {kHidden, kInter}},        // 5
           {"bq+bk+bv", {qkv}}}) {             // 6
    meta.tensors.push_back(tensor(name, shape));
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    tiny.storage.emplace_back(n, 0.01f);
  }
  for (const auto &values : tiny.storage)
    tiny.contents.sources.push_back(
        {reinterpret_cast<const uint8_t *>(values.data()), DType::F32, values.size()});
  auto program = std::make_unique<fb::ProgramT>();
  program->target = fb::Target::Cpu;
  for (auto [dtype, width] :
       std::vector<std::pair<fb::DType, int64_t>>{{fb::DType::I32, 1},       // 0 tokens
                                                  {fb::DType::F32, kHidden}, // 1 residual stream
                                                  {fb::DType::F32, qkv},     // 2 packed q/k/v
                                                  {fb::DType::F32, kHidden}, // 3 attention out
                                                  {fb::DType::F32, kInter},  // 4 SwiGLU out
                                                  {fb::DType::F32, kVocab},  // 5 logits
                                                  {fb::DType::I32, 1}})      // 6 greedy ids
    program->buffers.push_back(buffer(dtype, width));
  uint64_t offset = 0;
  for (auto &b : program->buffers) {
    b->offset_per_token = offset;
    offset += b->width * 4;
  }
  program->arena_bytes_per_token = offset;
  program->token_buffer = 0;
  program->logits_buffer = 5;
  using K = fb::OpKind;
  program->steps.push_back(step(K::Embedding, {0}, {1}, {0}));
  program->steps.push_back(step(K::RmsNormLinear, {1}, {2}, {1, 2, 6}, {0}, {1e-5}));
  program->steps.push_back(step(K::RopeColumns, {2}, {2}, {}, {2, 4, 0}));
  program->steps.push_back(
      step(K::RopeAttention, {2, 2, 2}, {3}, {}, {0, 2, 1, 4, 0, 8, 12, 1}, {0.5}));
  program->steps.push_back(step(K::Linear, {3}, {1}, {3}, {1}));
  program->steps.push_back(step(K::RmsNormLinearSwiGlu, {1}, {4}, {1, 4}, {}, {1e-5}));
  program->steps.push_back(step(K::LinearSwiGlu, {1}, {4}, {4}));
  program->steps.push_back(step(K::Linear, {4}, {1}, {5}, {1}));
  program->steps.push_back(step(K::LmHead, {1}, {5, 6}, {1, 0}, {}, {1e-5}));
  auto decode = std::make_unique<fb::ProgramT>(*program);
  decode->phase = fb::Phase::Decode;
  meta.programs.clear();
  meta.programs.push_back(std::move(program));
  meta.programs.push_back(std::move(decode));
  return tiny;
}

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

} // namespace
} // namespace llmc
