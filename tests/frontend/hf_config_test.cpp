// parseHfConfig on the config.json of each supported family, and one test per
// malformed field: every error names the file and the field.
#include "frontend/model_spec.h"
#include "frontend_test_util.h"

#include <cmath>

namespace llmc {
namespace {

using test::expectNames;

using test::parseError;
using test::parseOk;

TEST(HfConfig, ParsesLlama2) {
  ModelConfig c = parseOk(test::llama2Config());
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.modelType, "llama");
  EXPECT_EQ(c.hiddenSize, 4096);
  EXPECT_EQ(c.intermediateSize, 11008);
  EXPECT_EQ(c.numLayers, 32);
  EXPECT_EQ(c.numHeads, 32);
  EXPECT_EQ(c.numKvHeads, 32);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_EQ(c.vocabSize, 32000);
  EXPECT_EQ(c.maxPositionEmbeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 10000.0);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::None);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_FALSE(c.attentionOutputBias);
  EXPECT_EQ(c.hiddenAct, "silu");
  EXPECT_EQ(c.torchDtype, "float16");
  EXPECT_EQ(c.bosTokenIds, std::vector<int64_t>{1});
  EXPECT_EQ(c.eosTokenIds, std::vector<int64_t>{2});
}

TEST(HfConfig, ParsesLlama3WithLlama3RopeScaling) {
  ModelConfig c = parseOk(test::llama3Config());
  EXPECT_EQ(c.numKvHeads, 8);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::Llama3);
  EXPECT_DOUBLE_EQ(c.ropeScaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.ropeScaling.lowFreqFactor, 1.0);
  EXPECT_DOUBLE_EQ(c.ropeScaling.highFreqFactor, 4.0);
  EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 8192);
  EXPECT_EQ(c.bosTokenIds, std::vector<int64_t>{128000});
  EXPECT_EQ(c.eosTokenIds, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.torchDtype, "bfloat16");
}

TEST(HfConfig, ParsesMistral) {
  ModelConfig c = parseOk(test::mistralConfig());
  EXPECT_EQ(c.architecture, "MistralForCausalLM");
  EXPECT_EQ(c.numKvHeads, 8);
  EXPECT_EQ(c.vocabSize, 32768);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_FALSE(c.tieWordEmbeddings);
  // A window covering the whole context is plain full attention.
  Json json = test::mistralConfig();
  json["sliding_window"] = 32768;
  EXPECT_EQ(parseOk(json).maxPositionEmbeddings, 32768);
}

TEST(HfConfig, ParsesQwen2WithQkvBiasAndTiedEmbeddings) {
  ModelConfig c = parseOk(test::qwen2Config());
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.headDim, 64);
  EXPECT_EQ(c.numKvHeads, 2);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_FALSE(c.attentionOutputBias);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-6);
}

TEST(HfConfig, AppliesDefaults) {
  Json json = test::llama2Config();
  for (const char *key : {"num_key_value_heads", "rope_theta", "rope_scaling", "hidden_act",
                          "tie_word_embeddings", "attention_bias", "bos_token_id", "torch_dtype"})
    json.erase(key);
  json["eos_token_id"] = nullptr;
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.numKvHeads, 32);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 10000.0);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::None);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_TRUE(c.bosTokenIds.empty());
  EXPECT_TRUE(c.eosTokenIds.empty());
  EXPECT_EQ(c.torchDtype, "");
}

TEST(HfConfig, LlamaAttentionBiasCoversOutputProjection) {
  Json json = test::llama2Config();
  json["attention_bias"] = true;
  ModelConfig c = parseOk(json);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_TRUE(c.attentionOutputBias);
}

TEST(HfConfig, ExplicitHeadDimNeedNotDivideHidden) {
  Json json = test::llama2Config();
  json["hidden_size"] = 4000;
  json["head_dim"] = 128;
  EXPECT_EQ(parseOk(json).headDim, 128);
  json["head_dim"] = nullptr; // null means absent; 4000 / 32 = 125 is odd
  parseError(json, "head_dim");
}

TEST(HfConfig, AcceptsLinearScalingWithLegacyTypeKey) {
  Json json = test::llama2Config();
  json["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::Linear);
  EXPECT_DOUBLE_EQ(c.ropeScaling.factor, 2.0);
  json["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parseOk(json).ropeScaling.kind, RopeScaling::Kind::None);
}

TEST(HfConfig, ReadsTransformers5RopeParametersAndDtypeKey) {
  Json json = test::llama3Config();
  json["rope_parameters"] = json["rope_scaling"];
  json["rope_parameters"]["rope_theta"] = 500000.0;
  json.erase("rope_scaling");
  json.erase("rope_theta");
  json["dtype"] = json["torch_dtype"];
  json.erase("torch_dtype");
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::Llama3);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  EXPECT_EQ(c.torchDtype, "bfloat16");
}

// --- Malformed configs: one field each. ---

TEST(HfConfigError, TopLevelNotAnObject) { parseError(Json::array({1, 2}), "top level"); }

TEST(HfConfigError, UnknownArchitectureListsSupported) {
  Json json = test::llama2Config();
  json["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_EQ(parseError(json, "architectures[0]"),
            "config.json: architectures[0] 'GPT2LMHeadModel' is not supported; supported: "
            "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GemmaForCausalLM, "
            "Gemma2ForCausalLM, Gemma3ForCausalLM, Qwen3ForCausalLM, Olmo2ForCausalLM, "
            "Exaone4ForCausalLM, StableLmForCausalLM, "
            "Starcoder2ForCausalLM, CohereForCausalLM, PhiForCausalLM, GPTNeoXForCausalLM, "
            "GraniteForCausalLM, Phi3ForCausalLM, ExaoneForCausalLM, InternLM2ForCausalLM");
}

TEST(HfConfigError, ArchitecturesMustHaveOneElement) {
  Json json = test::llama2Config();
  json["architectures"] = {"LlamaForCausalLM", "MistralForCausalLM"};
  EXPECT_NE(parseError(json, "architectures").find("2 elements"), std::string::npos);
  json.erase("architectures");
  parseError(json, "architectures");
}

TEST(HfConfigError, MissingHiddenSize) {
  Json json = test::llama2Config();
  json.erase("hidden_size");
  EXPECT_NE(parseError(json, "'hidden_size'").find("missing"), std::string::npos);
}

TEST(HfConfigError, HiddenSizeOfWrongType) {
  Json json = test::llama2Config();
  json["hidden_size"] = "4096";
  EXPECT_NE(parseError(json, "'hidden_size'").find("expected an integer, got string"),
            std::string::npos);
}

TEST(HfConfigError, LayersAsHugeFloat) {
  Json json = test::llama2Config();
  json["num_hidden_layers"] = 1e21; // found by fuzz_config: must not overflow the cast
  EXPECT_NE(parseError(json, "'num_hidden_layers'").find("expected an integer, got number"),
            std::string::npos);
}

TEST(HfConfigError, ZeroLayers) {
  Json json = test::llama2Config();
  json["num_hidden_layers"] = 0;
  parseError(json, "'num_hidden_layers'");
}

TEST(HfConfigError, HeadsNotDividingHiddenSize) {
  Json json = test::llama2Config();
  json["num_attention_heads"] = 30;
  json["num_key_value_heads"] = 30;
  EXPECT_NE(parseError(json, "'num_attention_heads'").find("does not divide hidden_size 4096"),
            std::string::npos);
}

TEST(HfConfigError, KvHeadsNotDividingHeads) {
  Json json = test::llama2Config();
  json["num_key_value_heads"] = 5;
  EXPECT_NE(parseError(json, "'num_key_value_heads'").find("does not divide"), std::string::npos);
}

TEST(HfConfigError, NonPositiveRmsNormEps) {
  Json json = test::llama2Config();
  json["rms_norm_eps"] = 0.0;
  parseError(json, "'rms_norm_eps'");
}

TEST(HfConfigError, UnsupportedRopeScalingType) {
  Json json = test::llama2Config();
  json["rope_scaling"] = {{"rope_type", "mrope"}, {"factor", 4.0}};
  std::string message = parseError(json, "rope_scaling");
  EXPECT_NE(message.find("'mrope' is not supported; supported: default, linear, llama3, dynamic, "
                         "yarn, longrope"),
            std::string::npos)
      << message;
}

TEST(HfConfig, DynamicRopeGrowsPastMaxPositionEmbeddings) {
  for (const char *key : {"rope_type", "type"}) {
    Json json = test::llama2Config();
    json["rope_scaling"] = {{key, "dynamic"}, {"factor", 2.0}};
    ModelConfig c = parseOk(json);
    EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::Dynamic) << key;
    EXPECT_DOUBLE_EQ(c.ropeScaling.factor, 2.0);
    EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, c.maxPositionEmbeddings);
  }
}

TEST(HfConfig, YarnInBothSpellingsWithItsDefaults) {
  for (const char *key : {"rope_type", "type"}) {
    Json json = test::llama2Config();
    json["rope_scaling"] = {{key, "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}};
    ModelConfig c = parseOk(json);
    EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::Yarn) << key;
    EXPECT_DOUBLE_EQ(c.ropeScaling.factor, 4.0);
    EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 1024);
    EXPECT_DOUBLE_EQ(c.ropeScaling.betaFast, 32.0);
    EXPECT_DOUBLE_EQ(c.ropeScaling.betaSlow, 1.0);
    EXPECT_TRUE(c.ropeScaling.truncate);
    // get_mscale(4) = 0.1 ln 4 + 1.
    EXPECT_DOUBLE_EQ(c.ropeScaling.attentionFactor, 0.1 * std::log(4.0) + 1.0);
  }
}

TEST(HfConfig, YarnAttentionFactorFromConfigOrMscale) {
  Json json = test::llama2Config();
  json["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}, {"attention_factor", 1.5},
                          {"truncate", false}, {"beta_fast", 16}, {"beta_slow", 2}};
  ModelConfig c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.ropeScaling.attentionFactor, 1.5);
  EXPECT_FALSE(c.ropeScaling.truncate);
  EXPECT_DOUBLE_EQ(c.ropeScaling.betaFast, 16.0);
  // Without original_max_position_embeddings it is max_position_embeddings.
  EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, c.maxPositionEmbeddings);
  json["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}, {"mscale", 0.707},
                          {"mscale_all_dim", 1.0}};
  c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.ropeScaling.attentionFactor,
                   (0.1 * 0.707 * std::log(8.0) + 1.0) / (0.1 * std::log(8.0) + 1.0));
}

Json longRopeConfig(const char *type) {
  Json json = test::llama2Config(); // head_dim 128: 64 pairs
  json["max_position_embeddings"] = 131072;
  json["original_max_position_embeddings"] = 4096;
  json["rope_scaling"] = {{"type", type},
                          {"short_factor", std::vector<double>(64, 1.0)},
                          {"long_factor", std::vector<double>(64, 2.5)}};
  return json;
}

TEST(HfConfig, LongRopeAndPhi3sSuSpelling) {
  for (const char *type : {"longrope", "su"}) {
    ModelConfig c = parseOk(longRopeConfig(type));
    EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::LongRope) << type;
    EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 4096);
    EXPECT_DOUBLE_EQ(c.ropeScaling.factor, 32.0);
    EXPECT_DOUBLE_EQ(c.ropeScaling.attentionFactor,
                     std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));
    ASSERT_EQ(c.ropeScaling.longFactor.size(), 64u);
    EXPECT_FLOAT_EQ(c.ropeScaling.longFactor[63], 2.5f);
    EXPECT_FLOAT_EQ(c.ropeScaling.shortFactor[0], 1.0f);
  }
}

TEST(HfConfigError, LongRopeFactorsOfTheWrongLength) {
  Json json = longRopeConfig("longrope");
  json["rope_scaling"]["long_factor"] = std::vector<double>(63, 1.0);
  std::string message = parseError(json, "'long_factor'");
  EXPECT_NE(message.find("expected 64 entries"), std::string::npos) << message;
  json = longRopeConfig("longrope");
  json["rope_scaling"]["short_factor"][3] = -1.0;
  parseError(json, "'short_factor'");
  json = longRopeConfig("longrope");
  json["rope_scaling"].erase("short_factor");
  parseError(json, "'short_factor'");
}

TEST(HfConfig, PartialRotaryFromEachSpelling) {
  Json json = test::llama2Config(); // head_dim 128
  EXPECT_EQ(parseOk(json).rotaryDim, 128);
  json["partial_rotary_factor"] = 0.25;
  EXPECT_EQ(parseOk(json).rotaryDim, 32);
  json.erase("partial_rotary_factor");
  json["rotary_pct"] = 0.5;
  EXPECT_EQ(parseOk(json).rotaryDim, 64);
  json.erase("rotary_pct");
  json["rotary_dim"] = 96;
  EXPECT_EQ(parseOk(json).rotaryDim, 96);
  json.erase("rotary_dim");
  json["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4},
                             {"partial_rotary_factor", 0.75}};
  EXPECT_EQ(parseOk(json).rotaryDim, 96);
}

TEST(HfConfigError, PartialRotaryOutOfRange) {
  Json json = test::llama2Config();
  json["partial_rotary_factor"] = 1.5;
  parseError(json, "'partial_rotary_factor'");
  json["partial_rotary_factor"] = 0.001; // int(128 * 0.001) = 0 features
  parseError(json, "'rotary_dim'");
  json.erase("partial_rotary_factor");
  json["rotary_dim"] = 256;
  parseError(json, "'rotary_dim'");
}

TEST(HfConfigError, Llama3WithoutOriginalMaxPositions) {
  Json json = test::llama2Config();
  json["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}};
  parseError(json, "'original_max_position_embeddings'");
}

TEST(HfConfigError, DynamicRopeWithoutFactor) {
  Json json = test::llama2Config();
  json["rope_scaling"] = {{"rope_type", "dynamic"}};
  parseError(json, "'factor'");
}

TEST(HfConfigError, RopeScalingOfWrongType) {
  Json json = test::llama2Config();
  json["rope_scaling"] = "linear";
  parseError(json, "rope_scaling");
}

TEST(HfConfigError, RopeScalingTypeKeysDisagree) {
  Json json = test::llama2Config();
  json["rope_scaling"] = {{"rope_type", "linear"}, {"type", "llama3"}, {"factor", 2.0}};
  parseError(json, "rope_scaling");
}

TEST(HfConfigError, Llama3ScalingMissingLowFreqFactor) {
  Json json = test::llama3Config();
  json["rope_scaling"].erase("low_freq_factor");
  std::string message = parseError(json, "'low_freq_factor'");
  EXPECT_NE(message.find("rope_scaling"), std::string::npos) << message;
}

TEST(HfConfigError, Llama3ScalingMissingOriginalContext) {
  Json json = test::llama3Config();
  json["rope_scaling"].erase("original_max_position_embeddings");
  parseError(json, "'original_max_position_embeddings'");
}

TEST(HfConfigError, Llama3ScalingHighNotAboveLow) {
  Json json = test::llama3Config();
  json["rope_scaling"]["high_freq_factor"] = 1.0;
  parseError(json, "'high_freq_factor'");
}

TEST(HfConfigError, LinearScalingMissingFactor) {
  Json json = test::llama2Config();
  json["rope_scaling"] = {{"type", "linear"}};
  parseError(json, "'factor'");
}

TEST(HfConfig, MistralSlidingWindowOnEveryLayer) {
  Json json = test::mistralConfig();
  json["sliding_window"] = 4096;
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerWindows, std::vector<int64_t>(32, 4096));
}

TEST(HfConfig, MistralWindowAsLongAsTheContextIsFullAttention) {
  Json json = test::mistralConfig();
  json["sliding_window"] = 32768; // == max_position_embeddings: excludes nothing
  EXPECT_EQ(parseOk(json).layerWindows, std::vector<int64_t>(32, 0));
  EXPECT_TRUE(parseOk(test::mistralConfig()).layerWindows.empty()); // null
}

TEST(HfConfigError, MistralSlidingWindowNotPositive) {
  Json json = test::mistralConfig();
  json["sliding_window"] = 0;
  EXPECT_NE(parseError(json, "'sliding_window'").find("got 0"), std::string::npos);
}

TEST(HfConfig, Qwen2UseSlidingWindowSlidesLayersFromMaxWindowLayers) {
  Json json = test::qwen2Config();
  json["use_sliding_window"] = true;
  json["sliding_window"] = 4096;
  json["max_window_layers"] = 21;
  ModelConfig c = parseOk(json);
  ASSERT_EQ(c.layerWindows.size(), 24u);
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(c.layerWindows[i], i >= 21 ? 4096 : 0) << "layer " << i;
}

TEST(HfConfig, Qwen2MaxWindowLayersAtLeastLayersIsFullAttention) {
  // Was refused before; HF slides no layer here.
  Json json = test::qwen2Config();
  json["use_sliding_window"] = true;
  json["sliding_window"] = 4096;
  EXPECT_EQ(parseOk(json).layerWindows, std::vector<int64_t>(24, 0)); // max_window_layers 24
}

TEST(HfConfig, Qwen2SlidingWindowWithoutUseIsIgnored) {
  Json json = test::qwen2Config();
  json["sliding_window"] = 16;
  json["max_window_layers"] = 0;
  EXPECT_TRUE(parseOk(json).layerWindows.empty());
}

TEST(HfConfig, LayerTypesDecideWhichLayersSlide) {
  Json json = test::qwen2Config();
  json["use_sliding_window"] = true;
  json["sliding_window"] = 16;
  json["layer_types"] = Json::array();
  for (int i = 0; i < 24; ++i)
    json["layer_types"].push_back(i % 3 == 0 ? "full_attention" : "sliding_attention");
  ModelConfig c = parseOk(json);
  ASSERT_EQ(c.layerWindows.size(), 24u);
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(c.layerWindows[i], i % 3 == 0 ? 0 : 16) << "layer " << i;
}

TEST(HfConfigError, LayerTypesOfWrongLength) {
  Json json = test::mistralConfig();
  json["sliding_window"] = 16;
  json["layer_types"] = {"sliding_attention"};
  EXPECT_NE(parseError(json, "'layer_types'").find("32 entries"), std::string::npos);
}

TEST(HfConfigError, LayerTypeUnknown) {
  Json json = test::mistralConfig();
  json["sliding_window"] = 16;
  json["layer_types"] = Json::array();
  for (int i = 0; i < 32; ++i)
    json["layer_types"].push_back(i == 5 ? "chunked_attention" : "full_attention");
  EXPECT_NE(parseError(json, "'layer_types[5]'").find("chunked_attention"), std::string::npos);
}

TEST(HfConfigError, Qwen2NegativeMaxWindowLayers) {
  Json json = test::qwen2Config();
  json["use_sliding_window"] = true;
  json["max_window_layers"] = -1;
  parseError(json, "'max_window_layers'");
}

TEST(HfConfig, HiddenActGeluAndSwish) {
  Json json = test::llama2Config();
  json["hidden_act"] = "gelu";
  EXPECT_EQ(parseOk(json).mlpActivation, MlpActivation::GeluErf);
  json["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_EQ(parseOk(json).mlpActivation, MlpActivation::GeluTanh);
  json["hidden_act"] = "swish"; // ACT2FN's swish is silu
  EXPECT_EQ(parseOk(json).mlpActivation, MlpActivation::Silu);
}

TEST(HfConfigError, HiddenActRelu) {
  Json json = test::llama2Config();
  json["hidden_act"] = "relu";
  EXPECT_NE(parseError(json, "'hidden_act'").find("'relu' is not supported; supported: silu"),
            std::string::npos);
}

TEST(HfConfig, ParsesGemma) {
  ModelConfig c = parseOk(test::gemmaConfig());
  EXPECT_EQ(c.architecture, "GemmaForCausalLM");
  EXPECT_EQ(c.headDim, 256);
  EXPECT_EQ(c.numKvHeads, 1);
  EXPECT_EQ(c.mlpActivation, MlpActivation::GeluTanh); // "gelu" means tanh for Gemma
  EXPECT_DOUBLE_EQ(c.normOffset, 1.0);
  EXPECT_DOUBLE_EQ(c.embeddingScale, std::sqrt(2048.0));
  EXPECT_TRUE(c.tieWordEmbeddings); // Gemma's default; the config omits it
  EXPECT_FALSE(c.attentionBias);
  EXPECT_FALSE(c.sandwichNorms);
  EXPECT_TRUE(c.layerWindows.empty());
  EXPECT_DOUBLE_EQ(c.finalLogitSoftcap, 0.0);
}

TEST(HfConfigError, GemmaActivationNotGelu) {
  Json json = test::gemmaConfig();
  json["hidden_activation"] = "silu";
  EXPECT_NE(parseError(json, "'hidden_activation'").find("GeGLU"), std::string::npos);
}

TEST(HfConfig, ParsesGemma2) {
  ModelConfig c = parseOk(test::gemma2Config());
  EXPECT_EQ(c.architecture, "Gemma2ForCausalLM");
  EXPECT_EQ(c.mlpActivation, MlpActivation::GeluTanh);
  EXPECT_DOUBLE_EQ(c.normOffset, 1.0);
  EXPECT_DOUBLE_EQ(c.embeddingScale, std::sqrt(2304.0));
  EXPECT_TRUE(c.sandwichNorms);
  EXPECT_DOUBLE_EQ(c.attentionScale, 1.0 / 16.0); // query_pre_attn_scalar 256
  EXPECT_DOUBLE_EQ(c.attentionSoftcap, 50.0);
  EXPECT_DOUBLE_EQ(c.finalLogitSoftcap, 30.0);
  ASSERT_EQ(c.layerWindows.size(), 26u);
  for (int64_t i = 0; i < 26; ++i)
    EXPECT_EQ(c.layerWindows[i], i % 2 == 0 ? 4096 : 0) << "layer " << i;
  EXPECT_EQ(c.eosTokenIds, (std::vector<int64_t>{1, 107}));
}

TEST(HfConfig, Gemma2NullSoftcapsAreOffAndAbsentOnesHfDefaults) {
  Json json = test::gemma2Config();
  json["attn_logit_softcapping"] = nullptr;
  json.erase("final_logit_softcapping");
  json["query_pre_attn_scalar"] = 144;
  ModelConfig c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.attentionSoftcap, 0.0);
  EXPECT_DOUBLE_EQ(c.finalLogitSoftcap, 30.0);
  EXPECT_DOUBLE_EQ(c.attentionScale, 1.0 / 12.0);
}

TEST(HfConfig, Gemma2HiddenActivationGeluIsExact) {
  Json json = test::gemma2Config();
  json["hidden_activation"] = "gelu";
  EXPECT_EQ(parseOk(json).mlpActivation, MlpActivation::GeluErf);
}

TEST(HfConfigError, Gemma2BadFields) {
  Json json = test::gemma2Config();
  json["attn_logit_softcapping"] = -1.0;
  parseError(json, "'attn_logit_softcapping'");
  json = test::gemma2Config();
  json["final_logit_softcapping"] = "30";
  parseError(json, "'final_logit_softcapping'");
  json = test::gemma2Config();
  json["query_pre_attn_scalar"] = 0;
  parseError(json, "'query_pre_attn_scalar'");
  json = test::gemma2Config();
  json["hidden_activation"] = "silu";
  parseError(json, "'hidden_activation'");
  json = test::gemma2Config();
  json["sliding_window"] = -5;
  parseError(json, "'sliding_window'");
}

TEST(HfConfigError, EosTokenAsString) {
  Json json = test::llama2Config();
  json["eos_token_id"] = "</s>";
  EXPECT_NE(parseError(json, "'eos_token_id'").find("got string"), std::string::npos);
}

TEST(HfConfigError, EosTokenOutsideVocabulary) {
  Json json = test::llama2Config();
  json["eos_token_id"] = {2, 32000};
  parseError(json, "'eos_token_id'");
}

TEST(HfConfig, LlamaMlpBiasAddsGateUpDownBiases) {
  Json json = test::llama2Config();
  EXPECT_FALSE(parseOk(json).mlpBias);
  json["mlp_bias"] = true;
  ModelConfig c = parseOk(json);
  EXPECT_TRUE(c.mlpBias);
  EXPECT_FALSE(c.attentionBias);
}

TEST(HfConfigError, LlamaMlpBiasOfWrongType) {
  Json json = test::llama2Config();
  json["mlp_bias"] = "yes";
  EXPECT_NE(parseError(json, "'mlp_bias'").find("got string"), std::string::npos);
}

TEST(HfConfig, MistralIgnoresMlpBias) {
  // MistralConfig has no mlp_bias: a stray field changes nothing.
  Json json = test::mistralConfig();
  json["mlp_bias"] = true;
  EXPECT_FALSE(parseOk(json).mlpBias);
}

TEST(HfConfig, ParsesGranite) {
  ModelConfig c = parseOk(test::graniteConfig());
  EXPECT_EQ(c.architecture, "GraniteForCausalLM");
  EXPECT_DOUBLE_EQ(c.embeddingScale, 12.0);
  EXPECT_DOUBLE_EQ(c.attentionScale, 0.015625);
  EXPECT_DOUBLE_EQ(c.residualScale, 0.22);
  EXPECT_DOUBLE_EQ(c.logitScale, 1.0 / 8.0);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_FALSE(c.mlpBias);
  EXPECT_EQ(c.mlpActivation, MlpActivation::Silu);
  EXPECT_EQ(c.numKvHeads, 8);
  EXPECT_EQ(c.headDim, 64);
}

TEST(HfConfig, GraniteMultipliersDefaultToOne) {
  // GraniteConfig's defaults: 1.0 each, so attention scores are q.k * 1.0.
  Json json = test::graniteConfig();
  for (const char *key :
       {"embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling"})
    json.erase(key);
  json["attention_bias"] = true;
  json["mlp_bias"] = true;
  ModelConfig c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.embeddingScale, 1.0);
  EXPECT_DOUBLE_EQ(c.attentionScale, 1.0);
  EXPECT_DOUBLE_EQ(c.residualScale, 1.0);
  EXPECT_DOUBLE_EQ(c.logitScale, 1.0);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_TRUE(c.attentionOutputBias);
  EXPECT_TRUE(c.mlpBias);
}

TEST(HfConfig, ParsesPhi3) {
  ModelConfig c = parseOk(test::phi3Config());
  EXPECT_EQ(c.architecture, "Phi3ForCausalLM");
  EXPECT_EQ(c.headDim, 96);
  EXPECT_EQ(c.rotaryDim, 96);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_FALSE(c.mlpBias);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::LongRope);
  EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 4096);
  ASSERT_EQ(c.ropeScaling.longFactor.size(), 48u);
  EXPECT_FLOAT_EQ(c.ropeScaling.longFactor[47], 48.0f);
  // A window of 262144 covers the whole 131072-token context: no window.
  for (int64_t window : c.layerWindows)
    EXPECT_EQ(window, 0);
  Json mini4k = test::phi3Config();
  mini4k["sliding_window"] = 2047; // Phi-3-mini-4k's
  c = parseOk(mini4k);
  ASSERT_EQ(c.layerWindows.size(), 32u);
  EXPECT_EQ(c.layerWindows[0], 2047);
  EXPECT_EQ(c.layerWindows[31], 2047);
}

TEST(HfConfig, Phi3NullWindowAndPartialRotary) {
  Json json = test::phi3Config();
  json["sliding_window"] = nullptr;
  json["partial_rotary_factor"] = 0.75;
  json["rope_scaling"]["short_factor"] = std::vector<double>(36, 1.0);
  json["rope_scaling"]["long_factor"] = std::vector<double>(36, 2.0);
  ModelConfig c = parseOk(json);
  EXPECT_TRUE(c.layerWindows.empty());
  EXPECT_EQ(c.rotaryDim, 72);
  json.erase("rope_scaling");
  json.erase("partial_rotary_factor");
  EXPECT_EQ(parseOk(json).ropeScaling.kind, RopeScaling::Kind::None);
}

TEST(HfConfigError, Phi3RopeTypes) {
  Json json = test::phi3Config();
  json["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0},
                          {"original_max_position_embeddings", 4096}};
  EXPECT_NE(parseError(json, "'rope_scaling.rope_type'").find("read by Phi3Config as longrope"),
            std::string::npos);
  json["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  EXPECT_NE(parseError(json, "'rope_scaling.rope_type'").find("default and longrope"),
            std::string::npos);
  json = test::phi3Config();
  json["sliding_window"] = 0;
  parseError(json, "'sliding_window'");
}

TEST(HfConfigError, GraniteMultipliers) {
  for (const char *key :
       {"embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling"}) {
    for (Json bad : {Json(0.0), Json(-2.0)}) {
      Json json = test::graniteConfig();
      json[key] = bad;
      std::string message = parseError(json, std::string("'") + key + "'");
      EXPECT_NE(message.find("expected a finite number > 0"), std::string::npos) << message;
      EXPECT_NE(message.find("omit it for 1.0"), std::string::npos) << message;
    }
    Json json = test::graniteConfig();
    json[key] = "12";
    EXPECT_NE(parseError(json, std::string("'") + key + "'").find("got string"),
              std::string::npos);
  }
}

TEST(HfConfigError, TieWordEmbeddingsOfWrongType) {
  Json json = test::qwen2Config();
  json["tie_word_embeddings"] = 1;
  parseError(json, "'tie_word_embeddings'");
}

TEST(HfConfigError, AbsurdVocabSize) {
  Json json = test::llama2Config();
  json["vocab_size"] = int64_t(1) << 40;
  parseError(json, "'vocab_size'");
}

} // namespace
} // namespace llmc
