// Families whose layers differ in RoPE (ModelConfig::layerRopes): Gemma3's
// local and global bases (and rope_scaling on the global layers only), and
// EXAONE 4's NoPE global layers, whose q and k reach llm.attention
// unrotated. Both also carry per-head q/k norms; their graphs name exactly
// the tensors the weight check expects.
#include "ir/LlmOps.h"
#include "models/exaone4.h"
#include "models/gemma3.h"
#include "models/llama_graph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace llmc {
namespace {

// H 64, 4 query heads and 2 kv heads of D 16, MLP 96, vocabulary 512,
// 6 layers, context 256 (the tests/data/hf/gemma3 sizes).
ModelConfig baseConfig(const Architecture &arch) {
  ModelConfig c;
  c.architecture = std::string(arch.name());
  c.hiddenSize = 64;
  c.intermediateSize = 96;
  c.numLayers = 6;
  c.numHeads = 4;
  c.numKvHeads = 2;
  c.headDim = 16;
  c.rotaryDim = 16;
  c.vocabSize = 512;
  c.maxPositionEmbeddings = 256;
  c.rmsNormEps = 1e-6;
  return c;
}

class PerLayerRopeGraphTest : public ::testing::Test {
protected:
  PerLayerRopeGraphTest() { context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>(); }

  // `arch`'s rules on `hf`, over `config` (which holds what the shared
  // parser reads: ropeTheta, ropeScaling).
  ModelConfig withRules(const Architecture &arch, const Json &hf, ModelConfig config) {
    Status status = arch.applyConfig(hf, "config.json", config);
    EXPECT_TRUE(status.isOk()) << status.message();
    return config;
  }
  ModelConfig withRules(const Architecture &arch, const Json &hf) {
    return withRules(arch, hf, baseConfig(arch));
  }

  mlir::ModuleOp build(const ModelConfig &config) {
    GraphOptions options{mlir::Float32Type::get(&context)};
    auto built = buildLlamaGraph(context, config, options);
    EXPECT_TRUE(built.isOk()) << built.message();
    if (!built.isOk())
      return {};
    module = std::move(*built);
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*module)));
    return *module;
  }

  template <typename Op> std::vector<Op> ops() {
    std::vector<Op> found;
    module->walk([&](Op op) { found.push_back(op); });
    return found;
  }

  // The llm.rope feeding attention operand `operand` (0: q, 1: k), or null.
  static llm::RopeOp ropeOf(llm::AttentionOp attention, unsigned operand) {
    return attention->getOperand(operand).getDefiningOp<llm::RopeOp>();
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(PerLayerRopeGraphTest, Gemma3SlidingLayersUseTheLocalBaseAndGlobalOnesTheScaledTheta) {
  ModelConfig parsed = baseConfig(gemma3ForCausalLM());
  parsed.ropeTheta = 1000000.0; // rope_theta and rope_scaling, as the shared parser reads them
  parsed.ropeScaling.kind = RopeScaling::Kind::Linear;
  parsed.ropeScaling.factor = 8.0;
  ModelConfig config = withRules(gemma3ForCausalLM(),
                                 Json{{"rope_theta", 1000000.0},
                                      {"rope_local_base_freq", 10000.0},
                                      {"sliding_window", 8},
                                      {"query_pre_attn_scalar", 24}},
                                 parsed);
  ASSERT_EQ(config.layerRopes.size(), 6u);
  ASSERT_TRUE(build(config));
  auto attention = ops<llm::AttentionOp>();
  ASSERT_EQ(attention.size(), 6u);
  for (int64_t layer = 0; layer < 6; ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const bool global = layer == 5;
    EXPECT_EQ(attention[layer].getWindow(), global ? 0u : 8u);
    EXPECT_DOUBLE_EQ(attention[layer].getScale().convertToDouble(), 1.0 / std::sqrt(24.0));
    for (unsigned operand : {0u, 1u}) {
      llm::RopeOp rope = ropeOf(attention[layer], operand);
      ASSERT_TRUE(rope);
      EXPECT_DOUBLE_EQ(rope.getTheta().convertToDouble(), global ? 1000000.0 : 10000.0);
      EXPECT_EQ(static_cast<bool>(rope.getScalingAttr()), global);
      // q and k are normalized per head, (1 + w), before RoPE.
      auto norm = rope.getX().getDefiningOp<llm::RmsNormOp>();
      ASSERT_TRUE(norm);
      EXPECT_EQ(norm.getGroup(), 16u);
      EXPECT_EQ(norm.getOffset().convertToDouble(), 1.0);
    }
  }
}

TEST_F(PerLayerRopeGraphTest, Exaone4GlobalLayersAreNope) {
  ModelConfig config =
      withRules(exaone4ForCausalLM(), Json{{"sliding_window", 16}, {"sliding_window_pattern", 3}});
  ASSERT_TRUE(build(config));
  auto attention = ops<llm::AttentionOp>();
  ASSERT_EQ(attention.size(), 6u);
  EXPECT_EQ(ops<llm::RopeOp>().size(), 2u * 4u); // 4 sliding layers, q and k each
  for (int64_t layer = 0; layer < 6; ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const bool global = (layer + 1) % 3 == 0;
    EXPECT_EQ(attention[layer].getWindow(), global ? 0u : 16u);
    for (unsigned operand : {0u, 1u}) {
      llm::RopeOp rope = ropeOf(attention[layer], operand);
      EXPECT_EQ(static_cast<bool>(rope), !global);
      // Unrotated or not, q and k come from their per-head norm, no (1 + w).
      mlir::Value normed = rope ? rope.getX() : attention[layer]->getOperand(operand);
      auto norm = normed.getDefiningOp<llm::RmsNormOp>();
      ASSERT_TRUE(norm);
      EXPECT_EQ(norm.getGroup(), 16u);
      EXPECT_EQ(norm.getOffset().convertToDouble(), 0.0);
    }
  }
}

TEST_F(PerLayerRopeGraphTest, Exaone4WithoutSlidingWindowRotatesEveryLayer) {
  ModelConfig config = withRules(exaone4ForCausalLM(), Json{{"sliding_window", nullptr}});
  ASSERT_TRUE(build(config));
  EXPECT_EQ(ops<llm::RopeOp>().size(), 2u * 6u);
  for (llm::AttentionOp op : ops<llm::AttentionOp>())
    EXPECT_EQ(op.getWindow(), 0u);
}

// Post-norms only: no input norm, the attention and MLP outputs normalized
// before their residual adds (as OLMo2), 2 + 2 q/k norms per layer.
TEST_F(PerLayerRopeGraphTest, Exaone4HasPostNormsOnly) {
  ASSERT_TRUE(build(withRules(exaone4ForCausalLM(), Json::object())));
  EXPECT_EQ(ops<llm::RmsNormOp>().size(), 6u * 4u + 1u);
  module->walk([](llm::WeightOp op) {
    EXPECT_EQ(op.getName().str().find("input_layernorm"), std::string::npos) << op.getName().str();
  });
}

TEST_F(PerLayerRopeGraphTest, WeightsMatchTheExpectedTensors) {
  struct Case {
    const Architecture *arch;
    Json hf;
  };
  const std::vector<Case> cases = {
      {&gemma3ForCausalLM(), Json::object()},
      {&gemma3ForCausalLM(), Json{{"tie_word_embeddings", false}, {"attention_bias", true}}},
      {&exaone4ForCausalLM(), Json::object()},
      {&exaone4ForCausalLM(), Json{{"tie_word_embeddings", true}}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.arch->name()) + " " + c.hf.dump());
    ModelConfig config = withRules(*c.arch, c.hf);
    ASSERT_TRUE(build(config));
    std::map<std::string, std::vector<int64_t>> built, expected;
    module->walk([&](llm::WeightOp op) {
      auto shape = op.getResult().getType().cast<mlir::ShapedType>().getShape();
      EXPECT_TRUE(
          built.emplace(op.getName().str(), std::vector<int64_t>(shape.begin(), shape.end()))
              .second)
          << "two llm.weight ops named " << op.getName().str();
    });
    for (const TensorSpec &spec : c.arch->expectedTensors(config))
      expected[spec.name] = spec.shape;
    EXPECT_EQ(built, expected);
  }
}

TEST_F(PerLayerRopeGraphTest, PerLayerRopesOfTheWrongCountAreAnInternalError) {
  ModelConfig config = withRules(exaone4ForCausalLM(), Json::object());
  config.layerRopes.pop_back();
  GraphOptions options{mlir::Float32Type::get(&context)};
  auto built = buildLlamaGraph(context, config, options);
  ASSERT_FALSE(built.isOk());
  EXPECT_NE(built.message().find("per-layer RoPEs"), std::string::npos) << built.message();
}

} // namespace
} // namespace llmc
