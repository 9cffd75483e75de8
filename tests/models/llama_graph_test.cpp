// The Llama-family graph builder (models/llama_graph.cpp): GQA widths, tied
// embeddings by reference, q/k/v and o_proj biases as each flavor's config
// rules set them (models/llama.cpp), llama3 rope scaling values, and IR that
// verifies and names exactly the tensors the weight check expects.
#include "ir/LlmOps.h"
#include "models/gemma.h"
#include "models/gemma2.h"
#include "models/granite.h"
#include "models/phi3.h"
#include "models/llama.h"
#include "models/llama_graph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace llmc {
namespace {

// H = 128, 8 query heads and 2 kv heads of D = 16 (q 128 wide, k/v 32),
// MLP 256, vocabulary 512, 2 layers, no biases, untied.
ModelConfig gqaConfig() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.modelType = "llama";
  c.hiddenSize = 128;
  c.intermediateSize = 256;
  c.numLayers = 2;
  c.numHeads = 8;
  c.numKvHeads = 2;
  c.headDim = 16;
  c.vocabSize = 512;
  c.maxPositionEmbeddings = 1024;
  c.rmsNormEps = 1e-5;
  c.ropeTheta = 500000.0;
  return c;
}

class LlamaGraphTest : public ::testing::Test {
protected:
  LlamaGraphTest() { context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>(); }

  // Builds `config` with f32 matrices; the builder verifies the module.
  mlir::ModuleOp build(const ModelConfig &config) {
    GraphOptions options{mlir::Float32Type::get(&context)};
    Expected<mlir::OwningOpRef<mlir::ModuleOp>> built = buildLlamaGraph(context, config, options);
    EXPECT_TRUE(built.isOk()) << built.message();
    if (!built.isOk())
      return {};
    module = std::move(*built);
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*module)));
    return *module;
  }

  // Applies an architecture's config rules to the fields of `hf` (e.g. biases).
  ModelConfig withRules(const Architecture &arch, const Json &hf) {
    ModelConfig config = gqaConfig();
    config.architecture = std::string(arch.name());
    Status status = arch.applyConfig(hf, "config.json", config);
    EXPECT_TRUE(status.isOk()) << status.message();
    return config;
  }

  // Every llm.weight by name; a name seen twice fails the test.
  std::map<std::string, llm::WeightOp> weights() {
    std::map<std::string, llm::WeightOp> byName;
    module->walk([&](llm::WeightOp op) {
      EXPECT_TRUE(byName.emplace(op.getName().str(), op).second)
          << "two llm.weight ops named " << op.getName().str();
    });
    return byName;
  }

  template <typename Op> std::vector<Op> ops() {
    std::vector<Op> found;
    module->walk([&](Op op) { found.push_back(op); });
    return found;
  }

  // The llm.linear whose weight operand is the llm.weight named `name`.
  llm::LinearOp linearOf(const std::string &name) {
    for (llm::LinearOp op : ops<llm::LinearOp>())
      if (auto w = op.getWeight().getDefiningOp<llm::WeightOp>(); w && w.getName() == name)
        return op;
    ADD_FAILURE() << "no llm.linear uses " << name;
    return {};
  }

  // The name of the bias of the projection `<layer>.self_attn.<proj>`, "" without one.
  std::string biasName(const std::string &proj) {
    llm::LinearOp op = linearOf("model.layers.0.self_attn." + proj + ".weight");
    if (!op || !op.getBias())
      return "";
    return op.getBias().getDefiningOp<llm::WeightOp>().getName().str();
  }

  static std::vector<int64_t> shapeOf(mlir::Value value) {
    auto shape = value.getType().cast<mlir::ShapedType>().getShape();
    return {shape.begin(), shape.end()};
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(LlamaGraphTest, GroupedQueryAttentionNarrowsKeysAndValues) {
  ASSERT_TRUE(build(gqaConfig()));
  auto w = weights();
  EXPECT_EQ(shapeOf(w.at("model.layers.0.self_attn.q_proj.weight")),
            (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(shapeOf(w.at("model.layers.0.self_attn.k_proj.weight")),
            (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(shapeOf(w.at("model.layers.0.self_attn.v_proj.weight")),
            (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(shapeOf(w.at("model.layers.0.self_attn.o_proj.weight")),
            (std::vector<int64_t>{128, 128}));

  auto attentions = ops<llm::AttentionOp>();
  ASSERT_EQ(attentions.size(), 2u);
  for (int64_t layer = 0; layer < 2; ++layer) {
    llm::AttentionOp att = attentions[layer];
    EXPECT_EQ(att.getLayer(), layer);
    EXPECT_EQ(att.getNumHeads(), 8);
    EXPECT_EQ(att.getNumKvHeads(), 2);
    EXPECT_EQ(att.getHeadDim(), 16);
    EXPECT_DOUBLE_EQ(att.getScale().convertToDouble(), 0.25);
    EXPECT_TRUE(att.getCausal());
    EXPECT_EQ(shapeOf(att.getQ())[1], 128);
    EXPECT_EQ(shapeOf(att.getK())[1], 32);
    EXPECT_EQ(shapeOf(att.getV())[1], 32);
    // RoPE runs per head on q (8 heads) and k (2 heads), never on v.
    auto qRope = att.getQ().getDefiningOp<llm::RopeOp>();
    auto kRope = att.getK().getDefiningOp<llm::RopeOp>();
    ASSERT_TRUE(qRope && kRope);
    EXPECT_EQ(qRope.getNumHeads(), 8);
    EXPECT_EQ(kRope.getNumHeads(), 2);
    EXPECT_TRUE(att.getV().getDefiningOp<llm::LinearOp>());
  }
}

TEST_F(LlamaGraphTest, MultiHeadAttentionKeepsFullWidth) {
  ModelConfig config = gqaConfig();
  config.numKvHeads = config.numHeads;
  ASSERT_TRUE(build(config));
  EXPECT_EQ(shapeOf(weights().at("model.layers.1.self_attn.k_proj.weight")),
            (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(ops<llm::AttentionOp>().front().getNumKvHeads(), 8);
}

TEST_F(LlamaGraphTest, TiedEmbeddingsReuseTheEmbeddingWeight) {
  ModelConfig config = withRules(llamaForCausalLM(), Json{{"tie_word_embeddings", true}});
  ASSERT_TRUE(build(config));
  auto w = weights();
  EXPECT_EQ(w.count("lm_head.weight"), 0u);
  llm::WeightOp embed = w.at("model.embed_tokens.weight");
  // One value, two uses: the gather and the output projection.
  EXPECT_EQ(std::distance(embed->use_begin(), embed->use_end()), 2);
  auto logits = ops<llm::LogitsOp>();
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_EQ(logits.front().getWeight(), embed.getResult());
  EXPECT_EQ(ops<llm::EmbeddingOp>().front().getTable(), embed.getResult());
}

TEST_F(LlamaGraphTest, UntiedEmbeddingsHaveTheirOwnHead) {
  ASSERT_TRUE(build(gqaConfig()));
  auto w = weights();
  ASSERT_EQ(w.count("lm_head.weight"), 1u);
  EXPECT_EQ(ops<llm::LogitsOp>().front().getWeight(), w.at("lm_head.weight").getResult());
  EXPECT_TRUE(w.at("model.embed_tokens.weight")->hasOneUse());
}

TEST_F(LlamaGraphTest, Qwen2BiasesQkvButNotOutput) {
  ASSERT_TRUE(build(withRules(qwen2ForCausalLM(), Json::object())));
  EXPECT_EQ(biasName("q_proj"), "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(biasName("k_proj"), "model.layers.0.self_attn.k_proj.bias");
  EXPECT_EQ(biasName("v_proj"), "model.layers.0.self_attn.v_proj.bias");
  EXPECT_EQ(biasName("o_proj"), "");
  auto w = weights();
  EXPECT_EQ(shapeOf(w.at("model.layers.0.self_attn.q_proj.bias")), (std::vector<int64_t>{128}));
  EXPECT_EQ(shapeOf(w.at("model.layers.0.self_attn.k_proj.bias")), (std::vector<int64_t>{32}));
  // Biases are vectors: f32 whatever the matrix dtype.
  EXPECT_TRUE(w.at("model.layers.1.self_attn.v_proj.bias")
                  .getType()
                  .cast<mlir::ShapedType>()
                  .getElementType()
                  .isF32());
}

TEST_F(LlamaGraphTest, LlamaAttentionBiasAlsoBiasesOutput) {
  ModelConfig config = withRules(llamaForCausalLM(), Json{{"attention_bias", true}});
  ASSERT_TRUE(config.attentionOutputBias);
  ASSERT_TRUE(build(config));
  EXPECT_EQ(biasName("q_proj"), "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(biasName("o_proj"), "model.layers.0.self_attn.o_proj.bias");
  EXPECT_EQ(shapeOf(weights().at("model.layers.1.self_attn.o_proj.bias")),
            (std::vector<int64_t>{128}));
}

TEST_F(LlamaGraphTest, NoBiasByDefault) {
  ASSERT_TRUE(build(withRules(mistralForCausalLM(), Json::object())));
  for (const char *proj : {"q_proj", "k_proj", "v_proj", "o_proj"})
    EXPECT_EQ(biasName(proj), "") << proj;
  for (llm::LinearOp op : ops<llm::LinearOp>())
    EXPECT_FALSE(op.getBias());
}

TEST_F(LlamaGraphTest, Llama3ScalingReachesEveryRope) {
  ModelConfig config = gqaConfig();
  config.ropeScaling.kind = RopeScaling::Kind::Llama3;
  config.ropeScaling.factor = 8.0;
  config.ropeScaling.lowFreqFactor = 1.0;
  config.ropeScaling.highFreqFactor = 4.0;
  config.ropeScaling.originalMaxPositionEmbeddings = 8192;
  ASSERT_TRUE(build(config));
  auto ropes = ops<llm::RopeOp>();
  ASSERT_EQ(ropes.size(), 4u); // q and k in each of 2 layers
  for (llm::RopeOp rope : ropes) {
    EXPECT_DOUBLE_EQ(rope.getTheta().convertToDouble(), 500000.0);
    EXPECT_EQ(rope.getHeadDim(), 16);
    ASSERT_EQ(rope.getScalingKind(), llm::RopeScalingKind::Llama3);
    llm::RopeScalingAttr s = *rope.getScaling();
    EXPECT_DOUBLE_EQ(s.getFactor().convertToDouble(), 8.0);
    EXPECT_DOUBLE_EQ(s.getLowFreqFactor().convertToDouble(), 1.0);
    EXPECT_DOUBLE_EQ(s.getHighFreqFactor().convertToDouble(), 4.0);
    EXPECT_EQ(s.getOriginalMaxPositionEmbeddings(), 8192);
  }
}

TEST_F(LlamaGraphTest, NoScalingMeansNoAttribute) {
  ASSERT_TRUE(build(gqaConfig()));
  for (llm::RopeOp rope : ops<llm::RopeOp>()) {
    EXPECT_EQ(rope.getScalingKind(), llm::RopeScalingKind::None);
    EXPECT_FALSE(rope.getScaling().has_value());
  }
}

TEST_F(LlamaGraphTest, PlainDecoderLeavesEveryGemmaAttributeAtItsDefault) {
  ASSERT_TRUE(build(withRules(llamaForCausalLM(), Json::object())));
  for (llm::RmsNormOp op : ops<llm::RmsNormOp>())
    EXPECT_EQ(op.getOffset().convertToDouble(), 0.0);
  for (llm::EmbeddingOp op : ops<llm::EmbeddingOp>())
    EXPECT_EQ(op.getScale().convertToDouble(), 1.0);
  for (llm::AttentionOp op : ops<llm::AttentionOp>()) {
    EXPECT_EQ(op.getSoftcap().convertToDouble(), 0.0);
    EXPECT_EQ(op.getWindow(), 0u);
    EXPECT_DOUBLE_EQ(op.getScale().convertToDouble(), 0.25); // 16^-0.5
  }
  for (llm::LogitsOp op : ops<llm::LogitsOp>())
    EXPECT_EQ(op.getSoftcap().convertToDouble(), 0.0);
  EXPECT_EQ(ops<llm::SiluOp>().size(), 2u);
  EXPECT_TRUE(ops<llm::GeluOp>().empty());
}

TEST_F(LlamaGraphTest, GemmaScalesEmbeddingsOffsetsNormsAndGatesWithTanhGelu) {
  // The published gemma config says "gelu", which means the tanh form.
  ASSERT_TRUE(build(withRules(gemmaForCausalLM(), Json{{"hidden_act", "gelu"}})));
  auto embeddings = ops<llm::EmbeddingOp>();
  ASSERT_EQ(embeddings.size(), 1u);
  // sqrt(128) rounded to the f32 activations, as HF's normalizer is.
  EXPECT_EQ(embeddings[0].getScale().convertToDouble(),
            static_cast<double>(static_cast<float>(std::sqrt(128.0))));
  auto norms = ops<llm::RmsNormOp>();
  ASSERT_EQ(norms.size(), 2 * 2 + 1u);
  for (llm::RmsNormOp op : norms)
    EXPECT_EQ(op.getOffset().convertToDouble(), 1.0);
  auto gelus = ops<llm::GeluOp>();
  ASSERT_EQ(gelus.size(), 2u);
  for (llm::GeluOp op : gelus) {
    EXPECT_TRUE(op.getTanh());
    // gelu(gate) * up: the product GeGLU fusion looks for.
    ASSERT_TRUE(op->hasOneUse());
    EXPECT_TRUE(mlir::isa<llm::MulOp>(*op->getUsers().begin()));
  }
  EXPECT_TRUE(ops<llm::SiluOp>().empty());
  // Tied by default: the head is the embedding table.
  EXPECT_EQ(weights().count("lm_head.weight"), 0u);
  auto logits = ops<llm::LogitsOp>();
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_EQ(logits[0].getWeight(), embeddings[0].getTable());
}

TEST_F(LlamaGraphTest, MistralSlidingWindowReachesEveryAttention) {
  ModelConfig config = withRules(mistralForCausalLM(), Json{{"sliding_window", 16}});
  ASSERT_TRUE(build(config));
  auto attention = ops<llm::AttentionOp>();
  ASSERT_EQ(attention.size(), 2u);
  for (llm::AttentionOp op : attention)
    EXPECT_EQ(op.getWindow(), 16u);
}

TEST_F(LlamaGraphTest, Qwen2WindowsOnlyFromMaxWindowLayers) {
  ModelConfig config = withRules(
      qwen2ForCausalLM(),
      Json{{"use_sliding_window", true}, {"sliding_window", 16}, {"max_window_layers", 1}});
  ASSERT_TRUE(build(config));
  auto attention = ops<llm::AttentionOp>();
  ASSERT_EQ(attention.size(), 2u);
  EXPECT_EQ(attention[0].getLayer(), 0u);
  EXPECT_EQ(attention[0].getWindow(), 0u);
  EXPECT_EQ(attention[1].getWindow(), 16u);
}

TEST_F(LlamaGraphTest, Gemma2SoftcapsScalesAndAlternatesWindows) {
  ModelConfig config = withRules(
      gemma2ForCausalLM(), Json{{"query_pre_attn_scalar", 24}, {"sliding_window", 8},
                                {"attn_logit_softcapping", 4.0}, {"final_logit_softcapping", 3.0}});
  ASSERT_TRUE(build(config));
  auto attention = ops<llm::AttentionOp>();
  ASSERT_EQ(attention.size(), 2u);
  for (llm::AttentionOp op : attention) {
    EXPECT_DOUBLE_EQ(op.getScale().convertToDouble(), 1.0 / std::sqrt(24.0));
    EXPECT_DOUBLE_EQ(op.getSoftcap().convertToDouble(), 4.0);
  }
  EXPECT_EQ(attention[0].getWindow(), 8u); // layer 0 slides, layer 1 is global
  EXPECT_EQ(attention[1].getWindow(), 0u);
  auto logits = ops<llm::LogitsOp>();
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_DOUBLE_EQ(logits[0].getSoftcap().convertToDouble(), 3.0);
}

// Phi-3's packed qkv_proj and gate_up_proj: the checkpoint check sees the
// packed tensors, the graph reads Llama's names, derived from their rows.
TEST_F(LlamaGraphTest, Phi3GraphReadsTheSplitPackedTensors) {
  ModelConfig config = withRules(phi3ForCausalLM(), Json{{"sliding_window", 8}});
  ASSERT_TRUE(build(config));
  std::map<std::string, std::vector<int64_t>> built, expected;
  for (auto [name, op] : weights())
    built[name] = shapeOf(op.getResult());
  for (const TensorSpec &spec : graphTensors(phi3ForCausalLM(), config))
    expected[spec.name] = spec.shape;
  EXPECT_EQ(built, expected);
  std::map<std::string, std::vector<int64_t>> checkpoint;
  for (const TensorSpec &spec : phi3ForCausalLM().expectedTensors(config))
    checkpoint[spec.name] = spec.shape;
  EXPECT_EQ(checkpoint.count("model.layers.1.self_attn.q_proj.weight"), 0u);
  EXPECT_EQ(checkpoint.at("model.layers.1.self_attn.qkv_proj.weight"),
            (std::vector<int64_t>{128 + 2 * 32, 128}));
  EXPECT_EQ(checkpoint.at("model.layers.1.mlp.gate_up_proj.weight"),
            (std::vector<int64_t>{2 * 256, 128}));
  // q rows [0, 128), k [128, 160), v [160, 192); gate [0, 256), up [256, 512).
  std::map<std::string, DerivedTensor> derived;
  for (DerivedTensor &d : phi3ForCausalLM().derivedTensors(config))
    derived[d.name] = d;
  const DerivedTensor &v = derived.at("model.layers.1.self_attn.v_proj.weight");
  ASSERT_EQ(v.pieces.size(), 1u);
  EXPECT_EQ(v.pieces[0].source, "model.layers.1.self_attn.qkv_proj.weight");
  EXPECT_EQ(v.pieces[0].begin, 160);
  EXPECT_EQ(v.pieces[0].count, 32);
  const DerivedTensor &up = derived.at("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(up.pieces[0].begin, 256);
  EXPECT_EQ(up.shape, (std::vector<int64_t>{256, 128}));
  for (llm::AttentionOp op : ops<llm::AttentionOp>())
    EXPECT_EQ(op.getWindow(), 8u);
}

TEST_F(LlamaGraphTest, PartialRotaryGoesToTheRopeOps) {
  ModelConfig config = gqaConfig();
  config.rotaryDim = 8; // of head_dim 16
  ASSERT_TRUE(build(config));
  auto ropes = ops<llm::RopeOp>();
  ASSERT_EQ(ropes.size(), 4u);
  for (llm::RopeOp op : ropes)
    EXPECT_EQ(op.getRotaryDim(), 8u);
}

TEST_F(LlamaGraphTest, LlamaMlpBiasOnGateUpAndDown) {
  ASSERT_TRUE(build(withRules(llamaForCausalLM(), Json{{"mlp_bias", true}})));
  for (const char *name : {"gate_proj", "up_proj", "down_proj"}) {
    llm::LinearOp linear = linearOf(std::string("model.layers.1.mlp.") + name + ".weight");
    ASSERT_TRUE(linear) << name;
    ASSERT_TRUE(linear.getBias()) << name;
    EXPECT_EQ(linear.getBias().getDefiningOp<llm::WeightOp>().getName(),
              std::string("model.layers.1.mlp.") + name + ".bias");
  }
  EXPECT_FALSE(linearOf("model.layers.1.self_attn.q_proj.weight").getBias());
}

TEST_F(LlamaGraphTest, GraniteMultipliers) {
  ASSERT_TRUE(build(withRules(graniteForCausalLM(),
                              Json{{"embedding_multiplier", 12.0},
                                   {"attention_multiplier", 0.015625},
                                   {"residual_multiplier", 0.22},
                                   {"logits_scaling", 8.0}})));
  auto embedding = ops<llm::EmbeddingOp>();
  ASSERT_EQ(embedding.size(), 1u);
  EXPECT_DOUBLE_EQ(embedding[0].getScale().convertToDouble(), 12.0);
  for (llm::AttentionOp op : ops<llm::AttentionOp>())
    EXPECT_DOUBLE_EQ(op.getScale().convertToDouble(), 0.015625);
  // Only the two projections before residual adds are scaled.
  for (llm::LinearOp linear : ops<llm::LinearOp>()) {
    std::string name = linear.getWeight().getDefiningOp<llm::WeightOp>().getName().str();
    bool beforeAdd = name.find("o_proj") != std::string::npos ||
                     name.find("down_proj") != std::string::npos;
    EXPECT_DOUBLE_EQ(linear.getScale().convertToDouble(), beforeAdd ? 0.22 : 1.0) << name;
  }
  auto logits = ops<llm::LogitsOp>();
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_DOUBLE_EQ(logits[0].getScale().convertToDouble(), 0.125);
}

// The rms_norm whose weight is the llm.weight named `name`.
llm::RmsNormOp normOf(mlir::ModuleOp module, const std::string &name) {
  llm::RmsNormOp found;
  module.walk([&](llm::RmsNormOp op) {
    if (op.getWeight().getDefiningOp<llm::WeightOp>().getName() == name)
      found = op;
  });
  return found;
}

TEST_F(LlamaGraphTest, Gemma2SandwichNormsWrapAttentionAndMlp) {
  ASSERT_TRUE(build(withRules(gemma2ForCausalLM(), Json::object())));
  ASSERT_EQ(ops<llm::RmsNormOp>().size(), 2 * 4 + 1u);
  const std::string p = "model.layers.1.";
  // o_proj -> post_attention_layernorm -> residual add.
  llm::RmsNormOp postAttention = normOf(*module, p + "post_attention_layernorm.weight");
  ASSERT_TRUE(postAttention);
  EXPECT_EQ(postAttention.getX().getDefiningOp(),
            linearOf(p + "self_attn.o_proj.weight").getOperation());
  ASSERT_TRUE(postAttention->hasOneUse());
  auto attnAdd = mlir::dyn_cast<llm::AddOp>(*postAttention->getUsers().begin());
  ASSERT_TRUE(attnAdd);
  // That sum -> pre_feedforward_layernorm -> gate/up.
  llm::RmsNormOp preMlp = normOf(*module, p + "pre_feedforward_layernorm.weight");
  ASSERT_TRUE(preMlp);
  EXPECT_EQ(preMlp.getX(), attnAdd.getResult());
  EXPECT_EQ(linearOf(p + "mlp.gate_proj.weight").getX(), preMlp.getResult());
  // down_proj -> post_feedforward_layernorm -> residual add onto that sum.
  llm::RmsNormOp postMlp = normOf(*module, p + "post_feedforward_layernorm.weight");
  ASSERT_TRUE(postMlp);
  EXPECT_EQ(postMlp.getX().getDefiningOp(),
            linearOf(p + "mlp.down_proj.weight").getOperation());
  ASSERT_TRUE(postMlp->hasOneUse());
  auto mlpAdd = mlir::dyn_cast<llm::AddOp>(*postMlp->getUsers().begin());
  ASSERT_TRUE(mlpAdd);
  EXPECT_TRUE(mlpAdd.getLhs() == attnAdd.getResult() || mlpAdd.getRhs() == attnAdd.getResult());
  for (llm::RmsNormOp op : ops<llm::RmsNormOp>())
    EXPECT_EQ(op.getOffset().convertToDouble(), 1.0);
}

// The builder and the weight check (llamaTensors) must agree tensor for
// tensor, in every flavor, or a valid checkpoint fails to build.
TEST_F(LlamaGraphTest, WeightsMatchTheExpectedTensors) {
  struct Case {
    const Architecture *arch;
    Json hf;
  };
  const std::vector<Case> cases = {
      {&llamaForCausalLM(), Json::object()},
      {&llamaForCausalLM(), Json{{"attention_bias", true}, {"tie_word_embeddings", true}}},
      {&mistralForCausalLM(), Json::object()},
      {&qwen2ForCausalLM(), Json{{"tie_word_embeddings", true}}},
      {&gemmaForCausalLM(), Json::object()},
      {&gemmaForCausalLM(), Json{{"tie_word_embeddings", false}, {"attention_bias", true}}},
      {&gemma2ForCausalLM(), Json::object()},
      {&llamaForCausalLM(), Json{{"mlp_bias", true}}},
      {&graniteForCausalLM(), Json{{"attention_bias", true}, {"mlp_bias", true}}},
      {&graniteForCausalLM(), Json{{"tie_word_embeddings", true}}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.arch->name()) + " " + c.hf.dump());
    ModelConfig config = withRules(*c.arch, c.hf);
    ASSERT_TRUE(build(config));
    std::map<std::string, std::vector<int64_t>> built, expected;
    for (auto [name, op] : weights())
      built[name] = shapeOf(op.getResult());
    for (const TensorSpec &spec : c.arch->expectedTensors(config))
      expected[spec.name] = spec.shape;
    EXPECT_EQ(built, expected);
  }
}

TEST_F(LlamaGraphTest, ForwardSignatureAndMatrixDtype) {
  GraphOptions options{mlir::BFloat16Type::get(&context)};
  auto built = buildLlamaGraph(context, gqaConfig(), options);
  ASSERT_TRUE(built.isOk()) << built.message();
  module = std::move(*built);
  auto func = module->lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(func);
  EXPECT_EQ(func.getNumArguments(), 2u);
  auto result = func.getFunctionType().getResult(0).cast<mlir::ShapedType>();
  EXPECT_TRUE(result.isDynamicDim(0));
  EXPECT_EQ(result.getDimSize(1), 512);
  auto w = weights();
  auto elementOf = [&](const std::string &name) {
    return w.at(name).getType().cast<mlir::ShapedType>().getElementType();
  };
  EXPECT_TRUE(elementOf("model.layers.0.mlp.up_proj.weight").isBF16());
  EXPECT_TRUE(elementOf("model.layers.0.input_layernorm.weight").isF32());
}

TEST_F(LlamaGraphTest, InconsistentHeadsFailVerificationWithTheArchitecture) {
  ModelConfig config = gqaConfig();
  config.numKvHeads = 3; // 8 query heads cannot share 3 kv heads
  std::string diagnostic;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (diagnostic.empty())
      diagnostic = diag.str();
    return mlir::success();
  });
  auto built = buildLlamaGraph(context, config, GraphOptions{mlir::Float32Type::get(&context)});
  ASSERT_FALSE(built.isOk());
  EXPECT_NE(built.message().find("LlamaForCausalLM"), std::string::npos) << built.message();
  EXPECT_NE(diagnostic.find("num_heads 8 is not a multiple of num_kv_heads 3"), std::string::npos)
      << diagnostic;
}

} // namespace
} // namespace llmc
