// Tests that codegen/lower_to_plan.cpp turns the `llm` IR of a small
// synthetic Llama (built here from a config, no checkpoint, no ../shared)
// into the program the runtime runs: step order and kinds, buffers that fit
// the arena, no step writing over its own inputs, the fused kinds after the
// fusion passes, weights resolved or refused by name.
#include "frontend/model_spec.h"
#include "ir/LlmOps.h"
#include "lower_to_plan.h"
#include "models/llama_graph.h"
#include "ops/op_table.h"
#include "ops/rope.h"
#include "passes/Passes.h"
#include "plan/plan.h"
#include "support/json.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/MLIRContext.h>
#include <mlir/Pass/PassManager.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

namespace llmc {
namespace {

// H 8, I 12, 2 layers, 2 heads of 4, 1 KV head, vocab 16, context 32.
Json tinyLlama(bool tied = false) {
  Json j = Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32,
    "rms_norm_eps": 1e-05, "vocab_size": 16, "bos_token_id": 1, "eos_token_id": 2,
    "torch_dtype": "float32"})");
  j["tie_word_embeddings"] = tied;
  return j;
}

class Lowering : public ::testing::Test {
protected:
  void SetUp() override {
    context_.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>();
    auto config = parseHfConfig(tinyLlama(), "config.json");
    ASSERT_TRUE(config.isOk()) << config.message();
    config_ = *config;
  }

  mlir::OwningOpRef<mlir::ModuleOp> graph(bool fuse) {
    auto module =
        buildLlamaGraph(context_, config_, GraphOptions{mlir::Float32Type::get(&context_)});
    EXPECT_TRUE(module.isOk()) << module.message();
    if (!module.isOk())
      return {};
    mlir::PassManager pm(&context_);
    pm.addPass(createLlmPrune(nullptr));
    if (fuse)
      for (const FusionPass &pass : fusionPasses())
        pm.addPass(pass.create(nullptr));
    EXPECT_TRUE(mlir::succeeded(pm.run(**module)));
    return std::move(*module);
  }

  LoweringOptions synthetic() {
    LoweringOptions o;
    o.config = &config_;
    o.maxSeqLen = 32;
    o.tokenizerJson = "{}";
    o.syntheticSeed = 7;
    return o;
  }

  mlir::MLIRContext context_;
  ModelConfig config_;
};

// A step of the object API as the runtime reads it (packed).
struct PackedStep {
  explicit PackedStep(const fb::StepT &step) {
    builder.Finish(fb::Step::Pack(builder, &step));
  }
  const fb::Step &operator*() const {
    return *flatbuffers::GetRoot<fb::Step>(builder.GetBufferPointer());
  }
  const fb::Step *operator->() const { return &**this; }
  std::string bytes() const {
    return std::string(reinterpret_cast<const char *>(builder.GetBufferPointer()),
                       builder.GetSize());
  }
  flatbuffers::FlatBufferBuilder builder;
};

// The steps' kinds with their flags (ops::stepVariant: "Linear[norm,gated-silu]").
std::multiset<std::string> kinds(const fb::ProgramT &program) {
  std::multiset<std::string> k;
  for (const auto &step : program.steps)
    k.insert(ops::stepVariant(*PackedStep(*step)));
  return k;
}

// Byte range per token of buffer `b`.
std::pair<uint64_t, uint64_t> range(const fb::ProgramT &p, int b) {
  const fb::BufferT &buf = *p.buffers.at(b);
  uint64_t size = buf.width * dtypeSize(static_cast<DType>(buf.dtype));
  return {buf.offset_per_token, buf.offset_per_token + size};
}

// Checks what the runtime relies on in one program: every buffer index in
// range and inside the arena, and no output sharing bytes with an input of
// the same step unless it is the same buffer (in-place kinds, accumulate).
void expectWellFormed(const fb::ProgramT &p) {
  ASSERT_FALSE(p.steps.empty());
  const int n = static_cast<int>(p.buffers.size());
  ASSERT_GE(p.token_buffer, 0);
  ASSERT_LT(p.token_buffer, n);
  ASSERT_GE(p.logits_buffer, 0);
  ASSERT_LT(p.logits_buffer, n);
  EXPECT_EQ(p.buffers[p.token_buffer]->dtype, fb::DType::I32);
  EXPECT_EQ(p.buffers[p.token_buffer]->width, 1);
  for (int b = 0; b < n; ++b)
    EXPECT_LE(range(p, b).second, p.arena_bytes_per_token) << "buffer " << b;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const fb::StepT &step = *p.steps[s];
    for (int out : step.outputs) {
      ASSERT_GE(out, 0);
      ASSERT_LT(out, n);
      for (int in : step.inputs) {
        ASSERT_GE(in, 0);
        ASSERT_LT(in, n);
        if (in == out)
          continue;
        auto [a0, a1] = range(p, out);
        auto [b0, b1] = range(p, in);
        EXPECT_TRUE(a1 <= b0 || b1 <= a0)
            << "step " << s << " (" << ops::opName(step.op) << "): output buffer " << out
            << " overlaps input buffer " << in;
      }
    }
  }
}

TEST_F(Lowering, UnfusedLlamaLowersToOneStepPerOpInBothPhases) {
  auto module = graph(/*fuse=*/false);
  ASSERT_TRUE(module);
  auto plan = lowerToPlan(*module, synthetic());
  ASSERT_TRUE(plan.isOk()) << plan.message();
  ASSERT_EQ(plan->meta.programs.size(), 2u);
  const fb::ProgramT &prefill = *plan->meta.programs[0], &decode = *plan->meta.programs[1];
  EXPECT_EQ(prefill.phase, fb::Phase::Prefill);
  EXPECT_EQ(decode.phase, fb::Phase::Decode);
  EXPECT_EQ(prefill.steps.size(), decode.steps.size());
  expectWellFormed(prefill);
  // Embedding, per layer: norm, q/k/v, rope q/k, attention, o, residual add,
  // norm, gate/up, silu * up, down, residual add; final norm, logits.
  std::vector<std::string> expected = {"Embedding"};
  for (int layer = 0; layer < 2; ++layer)
    for (const char *kind :
         {"Norm[rms]", "Linear", "Linear", "Linear", "Rope", "Rope", "Attention", "Linear",
          "Elementwise[add]", "Norm[rms]", "Linear", "Linear", "Activation[silu]",
          "Elementwise[mul]", "Linear", "Elementwise[add]"})
      expected.push_back(kind);
  expected.push_back("Norm[rms]");
  expected.push_back("Logits");
  std::vector<std::string> got;
  for (const auto &step : prefill.steps)
    got.push_back(ops::stepVariant(*PackedStep(*step)));
  EXPECT_EQ(got, expected);
  // Attention steps carry their layer, heads and head_dim; RoPE steps the
  // model's theta over whole heads, unscaled.
  int layer = 0;
  for (const auto &step : prefill.steps) {
    if (const fb::AttentionParamsT *a = step->params.AsAttentionParams()) {
      EXPECT_EQ(a->layer, layer++);
      EXPECT_EQ(a->heads, 2);
      EXPECT_EQ(a->kv_heads, 1);
      EXPECT_EQ(a->head_dim, 4);
      EXPECT_EQ(a->rope, nullptr);
    }
    if (const fb::RopeStepParamsT *r = step->params.AsRopeStepParams()) {
      ASSERT_NE(r->rope, nullptr);
      EXPECT_EQ(r->rope->theta, config_.ropeTheta);
      EXPECT_EQ(r->rope->rotary_dim, 4);
      EXPECT_EQ(r->rope->scaling, nullptr);
    }
  }

  // Every tensor synthetic, seeded, stored nowhere; the model and KV geometry.
  EXPECT_TRUE(plan->meta.synthetic);
  EXPECT_EQ(plan->meta.synthetic_seed, 7u);
  ASSERT_EQ(plan->sources.size(), plan->meta.tensors.size());
  for (size_t i = 0; i < plan->meta.tensors.size(); ++i) {
    ASSERT_NE(plan->meta.tensors[i]->synthetic, nullptr) << plan->meta.tensors[i]->name;
    EXPECT_EQ(plan->sources[i].data, nullptr);
  }
  EXPECT_EQ(plan->meta.model->vocab_size, 16);
  EXPECT_EQ(plan->meta.model->max_seq_len, 32);
  EXPECT_EQ(plan->meta.kv_cache->num_layers, 2);
  EXPECT_EQ(plan->meta.kv_cache->num_kv_heads, 1);
  EXPECT_EQ(plan->meta.kv_cache->head_dim, 4);
}

TEST_F(Lowering, FusionPassesGiveTheFusedKindsAndFewerSteps) {
  auto unfused = graph(false), fused = graph(true);
  ASSERT_TRUE(unfused && fused);
  auto a = lowerToPlan(*unfused, synthetic()), b = lowerToPlan(*fused, synthetic());
  ASSERT_TRUE(a.isOk()) << a.message();
  ASSERT_TRUE(b.isOk()) << b.message();
  const fb::ProgramT &p = *b->meta.programs[0];
  expectWellFormed(p);
  EXPECT_LT(p.steps.size(), a->meta.programs[0]->steps.size());
  std::multiset<std::string> k = kinds(p);
  EXPECT_EQ(p.steps.back()->op, fb::OpKind::LmHead);
  EXPECT_EQ(k.count("Linear[norm,gated-silu]"), 2u); // gate/up with norm, per layer
  EXPECT_EQ(k.count("Attention[rope]"), 2u);
  EXPECT_EQ(k.count("Attention") + k.count("Rope"), 0u);
  EXPECT_EQ(k.count("Activation[gated-silu]") + k.count("Logits"), 0u);
  // q/k/v stored as one concatenated tensor per layer.
  int concatenated = 0;
  for (const auto &t : b->meta.tensors)
    concatenated += t->name.find('+') != std::string::npos;
  EXPECT_GE(concatenated, 2);
}

TEST_F(Lowering, ResolvedWeightsPointAtTheirBytes) {
  auto module = graph(false);
  ASSERT_TRUE(module);
  std::map<std::string, std::vector<float>> storage;
  LoweringOptions o = synthetic();
  o.syntheticSeed.reset();
  o.resolveWeight = [&](const std::string &name) -> Expected<WeightSource> {
    (void)name;
    return Status::error("unused");
  };
  // First pass: learn each weight's element count from a refusal-free resolver.
  std::map<std::string, uint64_t> wanted;
  module->walk([&](llm::WeightOp op) {
    if (auto type = mlir::dyn_cast<mlir::RankedTensorType>(op.getType()))
      wanted[op.getName().str()] = type.getNumElements();
  });
  ASSERT_FALSE(wanted.empty());
  o.resolveWeight = [&](const std::string &name) -> Expected<WeightSource> {
    std::vector<float> &v = storage[name];
    v.assign(wanted.at(name), 0.5f);
    return WeightSource{reinterpret_cast<const uint8_t *>(v.data()), DType::F32, v.size(), {}};
  };
  auto plan = lowerToPlan(*module, o);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  EXPECT_FALSE(plan->meta.synthetic);
  for (size_t i = 0; i < plan->meta.tensors.size(); ++i) {
    const std::string &name = plan->meta.tensors[i]->name;
    ASSERT_TRUE(storage.count(name)) << name;
    EXPECT_EQ(plan->sources[i].data, reinterpret_cast<const uint8_t *>(storage[name].data()));
    EXPECT_EQ(plan->sources[i].elements, wanted[name]);
    EXPECT_EQ(plan->meta.tensors[i]->synthetic, nullptr);
  }
}

TEST_F(Lowering, RefusesMissingWeightsAndWrongElementCountsByName) {
  auto module = graph(false);
  ASSERT_TRUE(module);
  LoweringOptions o = synthetic();
  o.syntheticSeed.reset();
  o.resolveWeight = [](const std::string &name) -> Expected<WeightSource> {
    return Status::error("weight '" + name + "' is not in the checkpoint");
  };
  auto missing = lowerToPlan(*module, o);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("is not in the checkpoint"), std::string::npos);

  static const float one = 1.0f;
  o.resolveWeight = [](const std::string &) -> Expected<WeightSource> {
    return WeightSource{reinterpret_cast<const uint8_t *>(&one), DType::F32, 1, {}};
  };
  auto wrong = lowerToPlan(*module, o);
  ASSERT_FALSE(wrong.isOk());
  EXPECT_NE(wrong.message().find("checkpoint has 1 elements, IR expects"), std::string::npos)
      << wrong.message();
}

// Each Gemma-style attribute, set on the first op of its kind in the (fused
// or unfused) Llama graph, reaches the named field of its step's parameter
// table, and only that step changes.
TEST_F(Lowering, GemmaAttributesBecomeTheStepsParameters) {
  struct Case {
    bool fuse;
    const char *op, *attribute;
    std::function<mlir::Attribute(mlir::Builder &)> value;
    const char *variant; // ops::stepVariant of the changed step
    std::function<bool(const fb::Step &)> carried;
  };
  auto f64 = [](double v) {
    return [v](mlir::Builder &b) -> mlir::Attribute { return b.getF64FloatAttr(v); };
  };
  auto i64 = [](int64_t v) {
    return [v](mlir::Builder &b) -> mlir::Attribute { return b.getI64IntegerAttr(v); };
  };
  const Case cases[] = {
      {false, "llm.rms_norm", "offset", f64(1.0), "Norm[rms]",
       [](const fb::Step &s) { return s.params_as_NormParams()->offset() == 1.0; }},
      {false, "llm.embedding", "scale", f64(8.0), "Embedding",
       [](const fb::Step &s) { return s.params_as_EmbeddingParams()->scale() == 8.0; }},
      {false, "llm.logits", "softcap", f64(30.0), "Logits",
       [](const fb::Step &s) { return s.params_as_LogitsParams()->softcap() == 30.0; }},
      {false, "llm.attention", "softcap", f64(50.0), "Attention[softcap]",
       [](const fb::Step &s) {
         return s.params_as_AttentionParams()->softcap() == 50.0 &&
                s.params_as_AttentionParams()->window() == 0;
       }},
      {false, "llm.attention", "window", i64(4), "Attention[window]",
       [](const fb::Step &s) { return s.params_as_AttentionParams()->window() == 4; }},
      {true, "llm.rope_attention", "window", i64(4), "Attention[rope,window]",
       [](const fb::Step &s) { return s.params_as_AttentionParams()->window() == 4; }},
      {true, "llm.lm_head", "softcap", f64(30.0), "LmHead",
       [](const fb::Step &s) {
         return s.params_as_LogitsParams()->softcap() == 30.0 &&
                s.params_as_LogitsParams()->norm()->offset() == 0.0;
       }},
      {true, "llm.fused_linear", "norm_offset", f64(1.0), "Linear[norm]",
       [](const fb::Step &s) {
         return s.params_as_LinearParams()->prologue()->offset() == 1.0;
       }},
      {true, "llm.fused_linear", "activation",
       [](mlir::Builder &b) -> mlir::Attribute {
         return llm::GatedActivationAttr::get(b.getContext(), llm::GatedActivation::GeGluTanh);
       },
       "Linear[norm,gated-gelutanh]",
       [](const fb::Step &s) {
         return s.params_as_LinearParams()->activation() == fb::ActivationKind::GeluTanh;
       }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.op) + " " + c.attribute);
    auto module = graph(c.fuse);
    ASSERT_TRUE(module);
    auto plain = lowerToPlan(*module, synthetic());
    ASSERT_TRUE(plain.isOk()) << plain.message();
    mlir::Builder builder(&context_);
    mlir::Operation *target = nullptr;
    module->walk([&](mlir::Operation *op) {
      if (target || op->getName().getStringRef() != c.op)
        return;
      auto fused = llvm::dyn_cast<llm::FusedLinearOp>(op);
      if (fused && (std::string(c.attribute) == "activation") != fused.isGated())
        return;
      if (fused && !fused.getNorm())
        return;
      target = op;
    });
    ASSERT_NE(target, nullptr);
    target->setAttr(c.attribute, c.value(builder));
    auto plan = lowerToPlan(*module, synthetic());
    ASSERT_TRUE(plan.isOk()) << plan.message();
    const fb::ProgramT &program = *plan->meta.programs.at(0);
    const fb::ProgramT &before = *plain->meta.programs.at(0);
    ASSERT_EQ(program.steps.size(), before.steps.size());
    int carrying = 0;
    for (size_t i = 0; i < program.steps.size(); ++i) {
      PackedStep step(*program.steps[i]);
      if (step.bytes() == PackedStep(*before.steps[i]).bytes())
        continue;
      ++carrying;
      EXPECT_EQ(ops::stepVariant(*step), c.variant);
      EXPECT_TRUE(c.carried(*step));
    }
    EXPECT_EQ(carrying, 1);
  }
}

// The IR's rope attributes (theta, scaling) reach the steps' RopeParams at
// lowering, unfused (llm.rope) and fused (llm.rope_attention) alike.
TEST_F(Lowering, RopeAttributesReachTheStepsRopeParams) {
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    auto module = graph(fuse);
    ASSERT_TRUE(module);
    mlir::Builder builder(&context_);
    auto scaling = llm::RopeScalingAttr::get(&context_, llm::RopeScalingKind::Llama3, 8.0, 1.0,
                                             4.0, 8192);
    module->walk([&](mlir::Operation *op) {
      if (llvm::isa<llm::RopeOp, llm::RopeAttentionOp>(op)) {
        op->setAttr("theta", builder.getF64FloatAttr(500000.0));
        op->setAttr("scaling", scaling);
      }
    });
    auto plan = lowerToPlan(*module, synthetic());
    ASSERT_TRUE(plan.isOk()) << plan.message();
    int ropes = 0;
    for (const auto &step : plan->meta.programs.at(0)->steps) {
      PackedStep packed(*step);
      const fb::RopeParams *rope = ops::stepRope(*packed);
      if (rope == nullptr)
        continue;
      ++ropes;
      EXPECT_EQ(rope->theta(), 500000.0);
      EXPECT_EQ(rope->rotary_dim(), 4);
      ASSERT_NE(rope->scaling(), nullptr);
      EXPECT_EQ(rope->scaling()->kind(), fb::RopeScalingKind::Llama3);
      EXPECT_EQ(rope->scaling()->factor(), 8.0);
      EXPECT_EQ(rope->scaling()->low_freq_factor(), 1.0);
      EXPECT_EQ(rope->scaling()->high_freq_factor(), 4.0);
      EXPECT_EQ(rope->scaling()->original_max_positions(), 8192);
      // One configuration per plan: one cos/sin table on every backend.
      EXPECT_EQ(ops::ropeConfig(*rope).scaling.kind, hd::RopeScalingKind::Llama3);
    }
    EXPECT_EQ(ropes, fuse ? 2 : 2 * 2); // per layer: attention rotating q and k, or rope q, rope k
  }
}

TEST_F(Lowering, RefusesAModuleWithoutForwardOrAConfig) {
  mlir::OwningOpRef<mlir::ModuleOp> empty =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context_));
  auto noForward = lowerToPlan(*empty, synthetic());
  ASSERT_FALSE(noForward.isOk());
  EXPECT_NE(noForward.message().find("no func.func @forward"), std::string::npos);
  auto module = graph(false);
  ASSERT_TRUE(module);
  LoweringOptions o = synthetic();
  o.config = nullptr;
  EXPECT_FALSE(lowerToPlan(*module, o).isOk());
}

} // namespace
} // namespace llmc
