// The architecture registry, the expected-tensor lists, and checkWeights on
// checkpoints the tests write.
#include "common/test_paths.h"
#include "frontend/weight_check.h"
#include "frontend_test_util.h"
#include "models/architecture.h"
#include "models/llama.h"

#include <algorithm>
#include <filesystem>

namespace llmc {
namespace {

using test::FakeTensor;

ModelConfig parse(const Json &json) {
  auto config = parseHfConfig(json, "config.json");
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : ModelConfig{};
}

const TensorSpec *findSpec(const std::vector<TensorSpec> &specs, const std::string &name) {
  auto it =
      std::find_if(specs.begin(), specs.end(), [&](const TensorSpec &s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

TEST(Architecture, RegistryNamesEveryFamily) {
  EXPECT_EQ(supportedArchitectureList(),
            "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GemmaForCausalLM, "
            "Gemma2ForCausalLM, Gemma3ForCausalLM, Qwen3ForCausalLM, Olmo2ForCausalLM, "
            "Exaone4ForCausalLM, StableLmForCausalLM, "
            "Starcoder2ForCausalLM, CohereForCausalLM, PhiForCausalLM, GPTNeoXForCausalLM, "
            "GraniteForCausalLM, Phi3ForCausalLM, ExaoneForCausalLM, InternLM2ForCausalLM");
  for (const std::string &name : supportedArchitectureNames())
    EXPECT_EQ(findArchitecture(name)->name(), name);
  EXPECT_EQ(findArchitecture("GPT2LMHeadModel"), nullptr);
}

TEST(Architecture, Llama3TensorsHaveGqaShapes) {
  ModelConfig c = parse(test::llama3Config());
  auto specs = findArchitecture(c.architecture)->expectedTensors(c);
  EXPECT_EQ(specs.size(), 1 + 32 * 9 + 2u);
  EXPECT_EQ(findSpec(specs, "model.embed_tokens.weight")->shape,
            (std::vector<int64_t>{128256, 4096}));
  EXPECT_EQ(findSpec(specs, "model.layers.31.self_attn.q_proj.weight")->shape,
            (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(findSpec(specs, "model.layers.31.self_attn.k_proj.weight")->shape,
            (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(findSpec(specs, "model.layers.0.mlp.down_proj.weight")->shape,
            (std::vector<int64_t>{4096, 14336}));
  EXPECT_EQ(findSpec(specs, "lm_head.weight")->shape, (std::vector<int64_t>{128256, 4096}));
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.q_proj.bias"), nullptr);
}

TEST(Architecture, Qwen2TensorsHaveQkvBiasesAndNoLmHead) {
  ModelConfig c = parse(test::qwen2Config());
  auto specs = findArchitecture(c.architecture)->expectedTensors(c);
  EXPECT_EQ(specs.size(), 1 + 24 * 12 + 1u);
  EXPECT_EQ(findSpec(specs, "model.layers.3.self_attn.k_proj.bias")->shape,
            std::vector<int64_t>{128});
  EXPECT_EQ(findSpec(specs, "model.layers.3.self_attn.o_proj.bias"), nullptr);
  EXPECT_EQ(findSpec(specs, "lm_head.weight"), nullptr);
}

TEST(Architecture, LlamaAttentionBiasAddsOutputBias) {
  Json json = test::llama2Config();
  json["attention_bias"] = true;
  ModelConfig c = parse(json);
  auto specs = llamaTensors(c);
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.o_proj.bias")->shape,
            std::vector<int64_t>{4096});
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.v_proj.bias")->shape,
            std::vector<int64_t>{4096});
}

TEST(Architecture, GemmaTensorsAreLlamasWithoutLmHead) {
  ModelConfig c = parse(test::gemmaConfig());
  auto specs = findArchitecture(c.architecture)->expectedTensors(c);
  EXPECT_EQ(specs.size(), 1 + 18 * 9 + 1u); // tied: no lm_head.weight
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.q_proj.weight")->shape,
            (std::vector<int64_t>{8 * 256, 2048}));
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.k_proj.weight")->shape,
            (std::vector<int64_t>{256, 2048}));
  EXPECT_EQ(findSpec(specs, "model.layers.17.mlp.down_proj.weight")->shape,
            (std::vector<int64_t>{2048, 16384}));
  EXPECT_EQ(findSpec(specs, "lm_head.weight"), nullptr);
  EXPECT_EQ(findSpec(specs, "model.layers.0.pre_feedforward_layernorm.weight"), nullptr);
}

TEST(Architecture, Gemma2TensorsAddTheSandwichNorms) {
  ModelConfig c = parse(test::gemma2Config());
  auto specs = findArchitecture(c.architecture)->expectedTensors(c);
  EXPECT_EQ(specs.size(), 1 + 26 * 11 + 1u);
  for (const char *norm : {"input_layernorm", "post_attention_layernorm",
                           "pre_feedforward_layernorm", "post_feedforward_layernorm"})
    EXPECT_EQ(findSpec(specs, "model.layers.25." + std::string(norm) + ".weight")->shape,
              std::vector<int64_t>{2304})
        << norm;
  EXPECT_EQ(findSpec(specs, "lm_head.weight"), nullptr);
}

class WeightCheckTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = test::scratchDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Every tensor `config` needs, as F32.
  static std::vector<FakeTensor> complete(const ModelConfig &config) {
    std::vector<FakeTensor> tensors;
    for (const TensorSpec &spec : llamaTensors(config))
      tensors.push_back({spec.name, spec.shape});
    return tensors;
  }
  WeightSet open(const std::vector<FakeTensor> &tensors) {
    std::string path = dir_ + "/model.safetensors";
    test::writeSafetensors(path, tensors);
    auto weights = WeightSet::openFiles({path});
    // An error is a failure here, never dereferenced: the test goes on with
    // an empty set (and fails its own checks too).
    if (!weights.isOk()) {
      ADD_FAILURE() << weights.message();
      return WeightSet();
    }
    return std::move(weights).value();
  }
  static void erase(std::vector<FakeTensor> &tensors, const std::string &name) {
    tensors.erase(std::find_if(tensors.begin(), tensors.end(),
                               [&](const FakeTensor &t) { return t.name == name; }));
  }
  static FakeTensor &get(std::vector<FakeTensor> &tensors, const std::string &name) {
    return *std::find_if(tensors.begin(), tensors.end(),
                         [&](const FakeTensor &t) { return t.name == name; });
  }

  std::string dir_;
};

TEST_F(WeightCheckTest, CompleteCheckpointPasses) {
  ModelConfig config = parse(test::tinyConfig());
  std::vector<std::string> warnings;
  Status status = checkWeights(config, open(complete(config)), &warnings, "config.json");
  EXPECT_TRUE(status.isOk()) << status.message();
  EXPECT_TRUE(warnings.empty());
}

TEST_F(WeightCheckTest, HalfPrecisionDtypesPass) {
  ModelConfig config = parse(test::tinyConfig());
  auto tensors = complete(config);
  get(tensors, "model.norm.weight").dtype = "BF16";
  get(tensors, "lm_head.weight").dtype = "F16";
  Status status = checkWeights(config, open(tensors), nullptr, "config.json");
  EXPECT_TRUE(status.isOk()) << status.message();
}

TEST_F(WeightCheckTest, ReportsEveryProblemAtOnce) {
  ModelConfig config = parse(test::tinyConfig());
  auto tensors = complete(config);
  erase(tensors, "model.layers.1.mlp.up_proj.weight");
  erase(tensors, "lm_head.weight");
  get(tensors, "model.norm.weight").shape = {4};
  get(tensors, "model.layers.0.self_attn.k_proj.weight").dtype = "I32";
  Status status = checkWeights(config, open(tensors), nullptr, "config.json");
  ASSERT_FALSE(status.isOk());
  const std::string &m = status.message();
  EXPECT_EQ(m.rfind(dir_ + "/model.safetensors: 4 tensors do not match config.json: ", 0), 0u) << m;
  for (const char *part :
       {"missing model.layers.1.mlp.up_proj.weight", "missing lm_head.weight",
        "model.norm.weight has shape [4] but config.json needs [8]",
        "model.layers.0.self_attn.k_proj.weight has dtype I32 but must be F32, F16 or BF16"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
}

TEST_F(WeightCheckTest, ExtrasAreWarnings) {
  Json json = test::tinyConfig();
  json["tie_word_embeddings"] = true;
  ModelConfig config = parse(json);
  auto tensors = complete(config);
  tensors.push_back({"lm_head.weight", {16, 8}});
  tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {2}});
  std::vector<std::string> warnings;
  Status status = checkWeights(config, open(tensors), &warnings, "config.json");
  EXPECT_TRUE(status.isOk()) << status.message();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("tensor 'lm_head.weight' is not used by LlamaForCausalLM: "
                             "tie_word_embeddings is true"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[1].find("rotary_emb.inv_freq"), std::string::npos) << warnings[1];
  EXPECT_EQ(warnings[0].rfind(dir_ + "/model.safetensors: ", 0), 0u) << warnings[0];
}

TEST_F(WeightCheckTest, ManyExtrasAreSummarized) {
  ModelConfig config = parse(test::tinyConfig());
  auto tensors = complete(config);
  for (int i = 0; i < 20; ++i)
    tensors.push_back({"extra." + std::to_string(i), {1}});
  std::vector<std::string> warnings;
  EXPECT_TRUE(checkWeights(config, open(tensors), &warnings).isOk());
  ASSERT_EQ(warnings.size(), kMaxListedUnusedTensors + 1);
  EXPECT_NE(warnings.back().find("12 more tensors are not used"), std::string::npos)
      << warnings.back();
}

TEST_F(WeightCheckTest, ForeignCheckpointGetsAHint) {
  ModelConfig config = parse(test::tinyConfig());
  std::vector<FakeTensor> tensors = {{"transformer.wte.weight", {16, 8}}};
  for (int i = 0; i < 50; ++i)
    tensors.push_back({"transformer.h." + std::to_string(i) + ".attn.c_attn.weight", {1}});
  Status status = checkWeights(config, open(tensors), nullptr, "config.json");
  ASSERT_FALSE(status.isOk());
  const std::string &m = status.message();
  EXPECT_NE(m.find("21 tensors do not match"), std::string::npos) << m;
  EXPECT_NE(m.find("none of the 21 expected tensors is present"), std::string::npos) << m;
  EXPECT_NE(m.find("'transformer.h.0.attn.c_attn.weight'"), std::string::npos) << m;
}

TEST_F(WeightCheckTest, LongProblemListsAreCapped) {
  Json json = test::tinyConfig();
  json["num_hidden_layers"] = 8; // 1 + 8 * 9 + 2 = 75 tensors, all missing
  ModelConfig config = parse(json);
  Status status = checkWeights(config, open({{"unrelated", {1}}}), nullptr, "config.json");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("75 tensors do not match"), std::string::npos);
  EXPECT_NE(status.message().find("; ... and 35 more"), std::string::npos) << status.message();
}

TEST_F(WeightCheckTest, OpenModelWeightsFollowsTheSpec) {
  ModelConfig config = parse(test::tinyConfig());
  test::writeSafetensors(dir_ + "/a.safetensors", complete(config));
  ModelSpec spec;
  spec.weightFiles = {dir_ + "/a.safetensors"};
  auto weights = openModelWeights(spec);
  ASSERT_TRUE(weights.isOk()) << weights.message();
  EXPECT_NE(weights->find("lm_head.weight"), nullptr);
}

} // namespace
} // namespace llmc
