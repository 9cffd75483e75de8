// The LayerNorm families' graph builder (models/layer_norm_graph.cpp): the
// IR names exactly the tensors the weight check and the import's derived
// tensors give (every family and flag), LayerNorm with and without bias,
// sequential and parallel blocks (one shared norm or two), gated and plain
// MLPs, per-head q/k norms, and the lm_head's bias and logit scale.
#include "ir/LlmOps.h"
#include "models/layer_norm_family.h"
#include "models/layer_norm_graph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace llmc {
namespace {

// H = 64, 4 query heads and 2 kv heads of D = 16, MLP 128, vocabulary 256,
// 2 layers.
ModelConfig tinyConfig(const Architecture &arch) {
  ModelConfig c;
  c.architecture = std::string(arch.name());
  c.hiddenSize = 64;
  c.intermediateSize = 128;
  c.numLayers = 2;
  c.numHeads = 4;
  c.numKvHeads = 2;
  c.headDim = 16;
  c.vocabSize = 256;
  c.maxPositionEmbeddings = 512;
  c.ropeTheta = 10000.0;
  c.rotaryDim = c.headDim; // the frontend's default: every feature rotates
  return c;
}

class LayerNormGraphTest : public ::testing::Test {
protected:
  LayerNormGraphTest() { context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>(); }

  // The family's config rules applied to `hf` on top of tinyConfig.
  ModelConfig withRules(const Architecture &arch, const Json &hf) {
    ModelConfig config = tinyConfig(arch);
    if (arch.name() == "GPTNeoXForCausalLM")
      config.numKvHeads = config.numHeads;
    Status status = arch.applyConfig(hf, "config.json", config);
    EXPECT_TRUE(status.isOk()) << status.message();
    return config;
  }

  mlir::ModuleOp build(const ModelConfig &config) {
    GraphOptions options{mlir::Float32Type::get(&context)};
    auto built = buildLayerNormGraph(context, config, options);
    EXPECT_TRUE(built.isOk()) << built.message();
    if (!built.isOk())
      return {};
    module = std::move(*built);
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*module)));
    return *module;
  }

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

  static std::string weightName(mlir::Value v) {
    auto w = v ? v.getDefiningOp<llm::WeightOp>() : llm::WeightOp();
    return w ? w.getName().str() : "";
  }

  // The op whose weight operand is the llm.weight `name`.
  llm::LinearOp linearOf(const std::string &name) {
    for (llm::LinearOp op : ops<llm::LinearOp>())
      if (weightName(op.getWeight()) == name)
        return op;
    ADD_FAILURE() << "no llm.linear uses " << name;
    return {};
  }
  llm::LayerNormOp normOf(const std::string &weight) {
    for (llm::LayerNormOp op : ops<llm::LayerNormOp>())
      if (weightName(op.getWeight()) == weight)
        return op;
    ADD_FAILURE() << "no llm.layer_norm uses " << weight;
    return {};
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(LayerNormGraphTest, WeightsMatchTheGraphTensors) {
  struct Case {
    const Architecture *arch;
    Json hf;
  };
  const std::vector<Case> cases = {
      {&stableLmForCausalLM(), Json::object()},
      {&stableLmForCausalLM(),
       Json{{"use_qkv_bias", true}, {"qk_layernorm", true}, {"use_parallel_residual", true}}},
      {&starcoder2ForCausalLM(), Json::object()},
      {&starcoder2ForCausalLM(), Json{{"use_bias", false}, {"tie_word_embeddings", false}}},
      {&cohereForCausalLM(), Json::object()},
      {&cohereForCausalLM(), Json{{"use_qk_norm", true}, {"attention_bias", true}}},
      {&phiForCausalLM(), Json::object()},
      {&phiForCausalLM(), Json{{"qk_layernorm", true}, {"tie_word_embeddings", true}}},
      {&gptNeoXForCausalLM(), Json::object()},
      {&gptNeoXForCausalLM(), Json{{"use_parallel_residual", false}, {"attention_bias", false}}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.arch->name()) + " " + c.hf.dump());
    ModelConfig config = withRules(*c.arch, c.hf);
    ASSERT_TRUE(build(config));
    std::map<std::string, std::vector<int64_t>> built, expected;
    for (auto [name, op] : weights()) {
      auto shape = op.getResult().getType().cast<mlir::ShapedType>().getShape();
      built[name] = std::vector<int64_t>(shape.begin(), shape.end());
    }
    for (const TensorSpec &spec : graphTensors(*c.arch, config))
      expected[spec.name] = spec.shape;
    EXPECT_EQ(built, expected);
  }
}

TEST_F(LayerNormGraphTest, SequentialBlockNormsBeforeAttentionAndMlp) {
  ASSERT_TRUE(build(withRules(starcoder2ForCausalLM(), Json::object())));
  // 2 per layer and the final one, each with its bias.
  auto norms = ops<llm::LayerNormOp>();
  ASSERT_EQ(norms.size(), 5u);
  for (llm::LayerNormOp n : norms) {
    EXPECT_TRUE(n.getBias());
    EXPECT_EQ(n.getGroupWidth(), 64);
    EXPECT_DOUBLE_EQ(n.getEps().convertToDouble(), 1e-5);
  }
  // c_fc reads post_attention_layernorm; plain MLP: gelu(c_fc) feeds c_proj.
  llm::LinearOp fc = linearOf("model.layers.0.mlp.c_fc.weight");
  ASSERT_TRUE(fc);
  EXPECT_EQ(weightName(fc.getX().getDefiningOp<llm::LayerNormOp>().getWeight()),
            "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(weightName(fc.getBias()), "model.layers.0.mlp.c_fc.bias");
  llm::LinearOp proj = linearOf("model.layers.0.mlp.c_proj.weight");
  auto gelu = proj.getX().getDefiningOp<llm::GeluOp>();
  ASSERT_TRUE(gelu);
  EXPECT_TRUE(gelu.getTanh());
  EXPECT_EQ(gelu.getX().getDefiningOp(), fc.getOperation());
  // Sliding window 4096 >= max_position_embeddings 512: no window; the tied
  // head reads the embedding table.
  for (llm::AttentionOp a : ops<llm::AttentionOp>())
    EXPECT_EQ(a.getWindowAttr().getInt(), 0);
  auto logits = ops<llm::LogitsOp>();
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_EQ(weightName(logits[0].getWeight()), "model.embed_tokens.weight");
  EXPECT_TRUE(logits[0].isPlainProjection());
}

TEST_F(LayerNormGraphTest, Starcoder2SlidingWindowOnEveryLayer) {
  ASSERT_TRUE(build(withRules(starcoder2ForCausalLM(), Json{{"sliding_window", 16}})));
  auto attention = ops<llm::AttentionOp>();
  ASSERT_EQ(attention.size(), 2u);
  for (llm::AttentionOp a : attention)
    EXPECT_EQ(a.getWindowAttr().getInt(), 16);
}

// x + attn(n(x)) + mlp(n(x)): q_proj and the MLP read the same norm's output,
// and the block's two adds sum the residual with both branches.
TEST_F(LayerNormGraphTest, CohereParallelBlockSharesOneNorm) {
  ASSERT_TRUE(build(withRules(cohereForCausalLM(), Json{{"logit_scale", 0.25}})));
  llm::LinearOp q = linearOf("model.layers.1.self_attn.q_proj.weight");
  llm::LinearOp gate = linearOf("model.layers.1.mlp.gate_proj.weight");
  llm::LinearOp up = linearOf("model.layers.1.mlp.up_proj.weight");
  ASSERT_TRUE(q && gate && up);
  EXPECT_EQ(q.getX(), gate.getX());
  EXPECT_EQ(q.getX(), up.getX());
  auto norm = q.getX().getDefiningOp<llm::LayerNormOp>();
  ASSERT_TRUE(norm);
  EXPECT_FALSE(norm.getBias());
  EXPECT_EQ(ops<llm::LayerNormOp>().size(), 3u); // one per layer and the final norm
  llm::LinearOp down = linearOf("model.layers.1.mlp.down_proj.weight");
  ASSERT_TRUE(down && down->hasOneUse());
  auto outerAdd = llvm::dyn_cast<llm::AddOp>(*down->getUsers().begin());
  ASSERT_TRUE(outerAdd);
  auto innerAdd = outerAdd.getLhs().getDefiningOp<llm::AddOp>();
  ASSERT_TRUE(innerAdd);
  EXPECT_EQ(innerAdd.getLhs(), norm.getX()); // the block's input
  EXPECT_EQ(innerAdd.getRhs().getDefiningOp(),
            linearOf("model.layers.1.self_attn.o_proj.weight").getOperation());
  auto logits = ops<llm::LogitsOp>();
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_DOUBLE_EQ(logits[0].getScale().convertToDouble(), 0.25);
  EXPECT_FALSE(logits[0].getBias());
}

// GPT-NeoX's parallel residual: attention reads input_layernorm, the MLP
// post_attention_layernorm, both of the block's input.
TEST_F(LayerNormGraphTest, GptNeoXParallelBlockHasTwoNorms) {
  ASSERT_TRUE(build(withRules(gptNeoXForCausalLM(), Json::object())));
  llm::LayerNormOp ln1 = normOf("gpt_neox.layers.0.input_layernorm.weight");
  llm::LayerNormOp ln2 = normOf("gpt_neox.layers.0.post_attention_layernorm.weight");
  ASSERT_TRUE(ln1 && ln2);
  EXPECT_EQ(ln1.getX(), ln2.getX());
  llm::LinearOp k = linearOf("gpt_neox.layers.0.attention.query_key_value.weight:k");
  ASSERT_TRUE(k);
  EXPECT_EQ(k.getX(), ln1.getResult());
  EXPECT_EQ(weightName(k.getBias()), "gpt_neox.layers.0.attention.query_key_value.bias:k");
  EXPECT_EQ(linearOf("gpt_neox.layers.0.mlp.dense_h_to_4h.weight").getX(), ln2.getResult());
  auto gelu = linearOf("gpt_neox.layers.0.mlp.dense_4h_to_h.weight").getX().getDefiningOp<llm::GeluOp>();
  ASSERT_TRUE(gelu);
  EXPECT_FALSE(gelu.getTanh()); // hidden_act "gelu" is exact
  for (llm::AttentionOp a : ops<llm::AttentionOp>())
    EXPECT_EQ(a.getNumKvHeads(), 4u);
}

TEST_F(LayerNormGraphTest, PhiBiasesAndSharedQkNorm) {
  ASSERT_TRUE(build(withRules(phiForCausalLM(), Json{{"qk_layernorm", true}})));
  llm::LayerNormOp qn = normOf("model.layers.0.self_attn.q_layernorm.weight");
  ASSERT_TRUE(qn);
  EXPECT_EQ(qn.getGroupWidth(), 16);
  EXPECT_EQ(weightName(qn.getBias()), "model.layers.0.self_attn.q_layernorm.bias");
  EXPECT_EQ(qn.getX().getDefiningOp(),
            linearOf("model.layers.0.self_attn.q_proj.weight").getOperation());
  // The normalized q is what RoPE rotates.
  ASSERT_TRUE(qn->hasOneUse());
  EXPECT_TRUE(llvm::isa<llm::RopeOp>(*qn->getUsers().begin()));
  EXPECT_EQ(weightName(linearOf("model.layers.0.self_attn.dense.weight").getBias()),
            "model.layers.0.self_attn.dense.bias");
  auto logits = ops<llm::LogitsOp>();
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_EQ(weightName(logits[0].getBias()), "lm_head.bias");
  EXPECT_EQ(weightName(logits[0].getX().getDefiningOp<llm::LayerNormOp>().getWeight()),
            "model.final_layernorm.weight");
}

TEST_F(LayerNormGraphTest, PerHeadQkNormsReadHeadsByHeadDim) {
  ASSERT_TRUE(build(withRules(cohereForCausalLM(), Json{{"use_qk_norm", true}})));
  llm::LayerNormOp kn = normOf("model.layers.0.self_attn.k_norm.weight:heads");
  ASSERT_TRUE(kn);
  EXPECT_EQ(kn.getGroupWidth(), 16);
  EXPECT_FALSE(kn.getBias());
  EXPECT_EQ(kn.getWeight().getType().cast<mlir::ShapedType>().getShape(),
            (llvm::ArrayRef<int64_t>{2 * 16}));
  ASSERT_TRUE(build(withRules(stableLmForCausalLM(), Json{{"qk_layernorm", true}})));
  llm::LayerNormOp qn = normOf("model.layers.1.self_attn.q_layernorm.norms.weight:heads");
  ASSERT_TRUE(qn);
  EXPECT_EQ(qn.getWeight().getType().cast<mlir::ShapedType>().getShape(),
            (llvm::ArrayRef<int64_t>{4 * 16}));
}

// StableLM rotates a quarter of each head, Cohere interleaves its pairs.
TEST_F(LayerNormGraphTest, PartialAndInterleavedRotary) {
  ModelConfig stable = withRules(stableLmForCausalLM(), Json::object());
  stable.rotaryDim = 4;
  ASSERT_TRUE(build(stable));
  auto ropes = ops<llm::RopeOp>();
  ASSERT_EQ(ropes.size(), 4u);
  for (llm::RopeOp r : ropes) {
    EXPECT_EQ(r.getRotatedFeatures(), 4);
    EXPECT_FALSE(r.getInterleaved());
  }
  ModelConfig cohere = withRules(cohereForCausalLM(), Json::object());
  cohere.rotaryDim = cohere.headDim;
  ASSERT_TRUE(build(cohere));
  for (llm::RopeOp r : ops<llm::RopeOp>()) {
    EXPECT_EQ(r.getRotatedFeatures(), 16);
    EXPECT_TRUE(r.getInterleaved());
  }
}

TEST_F(LayerNormGraphTest, RefusesOtherFamilies) {
  ModelConfig config = tinyConfig(stableLmForCausalLM());
  config.architecture = "LlamaForCausalLM";
  GraphOptions options{mlir::Float32Type::get(&context)};
  auto built = buildLayerNormGraph(context, config, options);
  ASSERT_FALSE(built.isOk());
  EXPECT_NE(built.message().find("'LlamaForCausalLM' is not a LayerNorm family"),
            std::string::npos)
      << built.message();
}

} // namespace
} // namespace llmc
