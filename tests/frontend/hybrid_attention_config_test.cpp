// parseHfConfig on the families with hybrid sliding/global layers whose RoPE
// differs per layer (ModelConfig::layerRopes): Gemma3ForCausalLM (text) in
// both spellings of its two RoPE bases, and Exaone4ForCausalLM with its NoPE
// global layers; their tensors; one error per rejected field.
#include "frontend/model_spec.h"
#include "frontend_test_util.h"
#include "models/architecture.h"

#include <algorithm>
#include <cmath>

namespace llmc {
namespace {

using test::parseError;
using test::parseOk;

// A gemma-3-1b-style config.json in transformers 4.5x's spelling: rope_theta
// for the global layers, rope_local_base_freq for the sliding ones,
// sliding_window_pattern 6, no layer_types.
Json gemma3Config() {
  return Json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "attention_bias": false,
    "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 2,
    "cache_implementation": "hybrid", "eos_token_id": [1, 106], "final_logit_softcapping": null,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
    "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
    "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
    "use_cache": true, "vocab_size": 262144})");
}

// The same in transformers 5's spelling: rope_parameters keyed by layer type.
Json gemma3Transformers5Config() {
  Json json = gemma3Config();
  for (const char *key : {"rope_local_base_freq", "rope_scaling", "rope_theta"})
    json.erase(key);
  json["rope_parameters"] = Json::parse(R"({
    "full_attention": {"rope_theta": 1000000.0, "rope_type": "linear", "factor": 8.0},
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}})");
  return json;
}

// An EXAONE-4.0-style config.json with hybrid attention: 3 sliding layers
// per global one, in 8 layers.
Json exaone4Config() {
  return Json::parse(R"({
    "architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", "bos_token_id": 1,
    "eos_token_id": 361, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
    "intermediate_size": 27392, "max_position_embeddings": 131072, "num_attention_heads": 40,
    "num_hidden_layers": 8, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 1000000, "sliding_window": 4096, "sliding_window_pattern": 4,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 102400})");
}

bool isGlobalEvery(int64_t layer, int64_t pattern) { return (layer + 1) % pattern == 0; }

TEST(HfConfig, ParsesGemma3WithLocalAndGlobalRopeBases) {
  ModelConfig c = parseOk(gemma3Config());
  EXPECT_EQ(c.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(c.mlpActivation, MlpActivation::GeluTanh);
  EXPECT_DOUBLE_EQ(c.normOffset, 1.0);
  EXPECT_DOUBLE_EQ(c.embeddingScale, std::sqrt(1152.0));
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_TRUE(c.sandwichNorms);
  EXPECT_FALSE(c.postNormsOnly);
  EXPECT_EQ(c.qkNorm, QkNorm::PerHead);
  EXPECT_DOUBLE_EQ(c.attentionScale, 1.0 / 16.0); // query_pre_attn_scalar 256
  EXPECT_DOUBLE_EQ(c.attentionSoftcap, 0.0);
  EXPECT_DOUBLE_EQ(c.finalLogitSoftcap, 0.0);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 1000000.0);
  ASSERT_EQ(c.layerWindows.size(), 26u);
  ASSERT_EQ(c.layerRopes.size(), 26u);
  for (int64_t i = 0; i < 26; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const bool global = isGlobalEvery(i, 6); // layers 5, 11, 17, 23
    EXPECT_EQ(c.layerWindows[i], global ? 0 : 512);
    EXPECT_TRUE(c.layerRopes[i].rotates);
    EXPECT_DOUBLE_EQ(c.layerRopes[i].theta, global ? 1000000.0 : 10000.0);
    EXPECT_EQ(c.layerRopes[i].scaling.kind, RopeScaling::Kind::None);
  }
}

TEST(HfConfig, Gemma3RopeScalingReachesOnlyTheGlobalLayers) {
  Json json = gemma3Config();
  json["rope_scaling"] = Json{{"rope_type", "linear"}, {"factor", 8.0}};
  ModelConfig c = parseOk(json);
  for (int64_t i = 0; i < 26; ++i) {
    const bool global = isGlobalEvery(i, 6);
    EXPECT_EQ(c.layerRopes[i].scaling.kind,
              global ? RopeScaling::Kind::Linear : RopeScaling::Kind::None)
        << "layer " << i;
  }
  EXPECT_DOUBLE_EQ(c.layerRopes[5].scaling.factor, 8.0);
}

TEST(HfConfig, Gemma3RopeParametersKeyedByLayerType) {
  ModelConfig c = parseOk(gemma3Transformers5Config());
  ASSERT_EQ(c.layerRopes.size(), 26u);
  EXPECT_DOUBLE_EQ(c.layerRopes[0].theta, 10000.0);
  EXPECT_EQ(c.layerRopes[0].scaling.kind, RopeScaling::Kind::None);
  EXPECT_DOUBLE_EQ(c.layerRopes[5].theta, 1000000.0);
  EXPECT_EQ(c.layerRopes[5].scaling.kind, RopeScaling::Kind::Linear);
  EXPECT_DOUBLE_EQ(c.layerRopes[5].scaling.factor, 8.0);
}

TEST(HfConfig, Gemma3LayerTypesWinOverThePattern) {
  Json json = gemma3Config();
  json["num_hidden_layers"] = 3;
  json["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerWindows, (std::vector<int64_t>{0, 512, 0}));
  EXPECT_DOUBLE_EQ(c.layerRopes[0].theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c.layerRopes[1].theta, 10000.0);
}

// Gemma3TextConfig's defaults: rope_theta 1e6, rope_local_base_freq 1e4,
// pattern 6, window 4096, query_pre_attn_scalar 256; a saved config's
// `_sliding_window_pattern` is read as the pattern too.
TEST(HfConfig, Gemma3Defaults) {
  Json json = gemma3Config();
  for (const char *key : {"rope_local_base_freq", "rope_theta", "sliding_window_pattern",
                          "sliding_window", "query_pre_attn_scalar", "attn_logit_softcapping",
                          "final_logit_softcapping", "rope_scaling"})
    json.erase(key);
  json["num_hidden_layers"] = 8;
  json["_sliding_window_pattern"] = 4;
  ModelConfig c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.attentionScale, 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(c.finalLogitSoftcap, 0.0);
  EXPECT_EQ(c.layerWindows, (std::vector<int64_t>{4096, 4096, 4096, 0, 4096, 4096, 4096, 0}));
  EXPECT_DOUBLE_EQ(c.layerRopes[3].theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c.layerRopes[0].theta, 10000.0);
  // A keyed rope_parameters without thetas takes the same defaults.
  json.erase("_sliding_window_pattern");
  json["rope_parameters"] = Json{{"full_attention", {{"rope_type", "default"}}},
                                 {"sliding_attention", {{"rope_type", "default"}}}};
  c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.layerRopes[5].theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c.layerRopes[0].theta, 10000.0);
}

TEST(HfConfig, Gemma3SoftcapsWhenGiven) {
  Json json = gemma3Config();
  json["attn_logit_softcapping"] = 50.0;
  json["final_logit_softcapping"] = 30.0;
  ModelConfig c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.attentionSoftcap, 50.0);
  EXPECT_DOUBLE_EQ(c.finalLogitSoftcap, 30.0);
}

TEST(HfConfigError, Gemma3BadFields) {
  Json json = gemma3Config();
  json["use_bidirectional_attention"] = true;
  parseError(json, "'use_bidirectional_attention'");
  json = gemma3Config();
  json["sliding_window_pattern"] = 0;
  parseError(json, "'sliding_window_pattern'");
  json = gemma3Config();
  json["rope_local_base_freq"] = -1;
  parseError(json, "'rope_local_base_freq'");
  json = gemma3Config();
  json["hidden_activation"] = "silu";
  parseError(json, "'hidden_activation'");
  json = gemma3Config();
  json["query_pre_attn_scalar"] = 0;
  parseError(json, "'query_pre_attn_scalar'");
  // One rope_parameters object for all layers is not Gemma3's spelling.
  json = gemma3Config();
  json.erase("rope_scaling");
  json["rope_parameters"] = Json{{"rope_type", "default"}, {"rope_theta", 10000.0}};
  parseError(json, "'rope_parameters'");
}

TEST(HfConfigError, RopeParametersKeyedByLayerTypeBadEntries) {
  Json json = gemma3Transformers5Config();
  json["rope_parameters"]["chunked_attention"] = Json::object();
  parseError(json, "'chunked_attention'");
  json = gemma3Transformers5Config();
  json["rope_parameters"]["sliding_attention"] = "default";
  parseError(json, "rope_parameters.sliding_attention");
  json = gemma3Transformers5Config();
  json["rope_parameters"]["full_attention"]["rope_type"] = "ntk";
  parseError(json, "rope_parameters.full_attention");
  json = gemma3Transformers5Config();
  json["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 0.5;
  parseError(json, "'partial_rotary_factor'");
  json = gemma3Transformers5Config();
  json["rope_scaling"] = Json{{"rope_type", "linear"}, {"factor", 2.0}};
  parseError(json, "'rope_scaling'");
}

// Only a family that reads per-layer-type RoPE accepts it.
TEST(HfConfigError, RopeParametersKeyedByLayerTypeOnLlama) {
  Json json = test::llama2Config();
  json.erase("rope_theta");
  json["rope_parameters"] = gemma3Transformers5Config()["rope_parameters"];
  std::string message = parseError(json, "'rope_parameters'");
  EXPECT_NE(message.find("LlamaForCausalLM does not read"), std::string::npos) << message;
}

TEST(HfConfig, ParsesExaone4WithNopeGlobalLayers) {
  ModelConfig c = parseOk(exaone4Config());
  EXPECT_EQ(c.architecture, "Exaone4ForCausalLM");
  EXPECT_TRUE(c.postNormsOnly);
  EXPECT_FALSE(c.sandwichNorms);
  EXPECT_EQ(c.qkNorm, QkNorm::PerHead);
  EXPECT_DOUBLE_EQ(c.normOffset, 0.0);
  EXPECT_DOUBLE_EQ(c.embeddingScale, 1.0);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_EQ(c.mlpActivation, MlpActivation::Silu);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_DOUBLE_EQ(c.attentionScale, 0.0); // head_dim^-0.5
  ASSERT_EQ(c.layerWindows.size(), 8u);
  ASSERT_EQ(c.layerRopes.size(), 8u);
  for (int64_t i = 0; i < 8; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const bool global = isGlobalEvery(i, 4); // layers 3 and 7
    EXPECT_EQ(c.layerWindows[i], global ? 0 : 4096);
    EXPECT_EQ(c.layerRopes[i].rotates, !global);
    EXPECT_DOUBLE_EQ(c.layerRopes[i].theta, 1000000.0);
    EXPECT_EQ(c.layerRopes[i].scaling.kind, RopeScaling::Kind::Llama3);
  }
}

// sliding_window null: no layer slides and every layer is rotated, whatever
// layer_types says (transformers applies RoPE when sliding_window is None).
TEST(HfConfig, Exaone4WithoutSlidingWindowRotatesEveryLayer) {
  Json json = exaone4Config();
  json["sliding_window"] = nullptr;
  json["sliding_window_pattern"] = nullptr;
  json["layer_types"] = std::vector<std::string>(8, "full_attention");
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerWindows, std::vector<int64_t>(8, 0));
  for (const LayerRope &rope : c.layerRopes)
    EXPECT_TRUE(rope.rotates);
}

// layer_types decides; a string pattern beside it ("LLLG", as EXAONE 4.0
// writes) is then unused, as in transformers.
TEST(HfConfig, Exaone4LayerTypesWithAStringPattern) {
  Json json = exaone4Config();
  json["num_hidden_layers"] = 4;
  json["sliding_window_pattern"] = "LLLG";
  json["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                         "full_attention"};
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerWindows, (std::vector<int64_t>{4096, 0, 4096, 0}));
  EXPECT_TRUE(c.layerRopes[0].rotates);
  EXPECT_FALSE(c.layerRopes[1].rotates);
}

// A window as long as the context excludes nothing, but the global layers
// stay NoPE: that depends on sliding_window being set, not on its length.
TEST(HfConfig, Exaone4WindowAsLongAsTheContextKeepsNope) {
  Json json = exaone4Config();
  json["sliding_window"] = 131072;
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerWindows, std::vector<int64_t>(8, 0));
  EXPECT_FALSE(c.layerRopes[3].rotates);
  EXPECT_TRUE(c.layerRopes[2].rotates);
}

TEST(HfConfig, Exaone4Defaults) {
  Json json = exaone4Config();
  for (const char *key : {"sliding_window", "sliding_window_pattern", "rms_norm_eps",
                          "tie_word_embeddings", "hidden_act"})
    json.erase(key);
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerWindows, (std::vector<int64_t>{4096, 4096, 4096, 0, 4096, 4096, 4096, 0}));
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_EQ(c.mlpActivation, MlpActivation::Silu);
}

TEST(HfConfigError, Exaone4BadFields) {
  Json json = exaone4Config();
  json["sliding_window_pattern"] = "LLLG"; // without layer_types
  std::string message = parseError(json, "'sliding_window_pattern'");
  EXPECT_NE(message.find("layer_types"), std::string::npos) << message;
  json = exaone4Config();
  json["sliding_window_pattern"] = 0;
  parseError(json, "'sliding_window_pattern'");
  json = exaone4Config();
  json["sliding_window"] = 0;
  parseError(json, "'sliding_window'");
  json = exaone4Config();
  json["hidden_act"] = "relu";
  parseError(json, "'hidden_act'");
  json = exaone4Config();
  json["layer_types"] = {"sliding_attention"};
  parseError(json, "'layer_types'");
}

const TensorSpec *findSpec(const std::vector<TensorSpec> &specs, const std::string &name) {
  auto it =
      std::find_if(specs.begin(), specs.end(), [&](const TensorSpec &s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

TEST(Architecture, Gemma3TensorsAddPerHeadQkNormsToGemma2s) {
  ModelConfig c = parseOk(gemma3Config());
  auto specs = findArchitecture(c.architecture)->expectedTensors(c);
  EXPECT_EQ(specs.size(), 1 + 26 * 13 + 1u);
  for (const char *norm : {"input_layernorm", "post_attention_layernorm",
                           "pre_feedforward_layernorm", "post_feedforward_layernorm"})
    EXPECT_EQ(findSpec(specs, "model.layers.25." + std::string(norm) + ".weight")->shape,
              std::vector<int64_t>{1152})
        << norm;
  for (const char *norm : {"q_norm", "k_norm"})
    EXPECT_EQ(findSpec(specs, "model.layers.25.self_attn." + std::string(norm) + ".weight")->shape,
              std::vector<int64_t>{256})
        << norm;
  EXPECT_EQ(findSpec(specs, "lm_head.weight"), nullptr);
}

TEST(Architecture, Exaone4TensorsHavePostNormsOnlyAndPerHeadQkNorms) {
  ModelConfig c = parseOk(exaone4Config());
  auto specs = findArchitecture(c.architecture)->expectedTensors(c);
  EXPECT_EQ(specs.size(), 1 + 8 * 11 + 2u);
  EXPECT_EQ(findSpec(specs, "model.layers.0.input_layernorm.weight"), nullptr);
  EXPECT_EQ(findSpec(specs, "model.layers.0.pre_feedforward_layernorm.weight"), nullptr);
  EXPECT_EQ(findSpec(specs, "model.layers.7.post_feedforward_layernorm.weight")->shape,
            std::vector<int64_t>{5120});
  EXPECT_EQ(findSpec(specs, "model.layers.7.self_attn.k_norm.weight")->shape,
            std::vector<int64_t>{128});
  EXPECT_EQ(findSpec(specs, "lm_head.weight")->shape, (std::vector<int64_t>{102400, 5120}));
}

} // namespace
} // namespace llmc
