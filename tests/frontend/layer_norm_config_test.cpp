// The LayerNorm families' config rules (models/{stablelm,starcoder2,cohere,
// phi,gpt_neox}.cpp): each published config parsed field by field, one error
// per rejected field or value (naming config.json and the field), the tensor
// lists, and GPT-NeoX's packed query_key_value split at import on the
// committed reference checkpoint.
#include "common/test_paths.h"
#include "frontend/derived_tensors.h"
#include "frontend/model_spec.h"
#include "frontend/weight_check.h"
#include "frontend_test_util.h"
#include "models/layer_norm_family.h"

#include <algorithm>
#include <cstring>

namespace llmc {
namespace {

using test::expectNames;
using QkNorm = LayerNormBlock::QkNorm;

// stabilityai/stablelm-2-1_6b's config.json.
Json stableLmConfig() {
  return Json::parse(R"({
    "architectures": ["StableLmForCausalLM"], "model_type": "stablelm",
    "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
    "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
    "layer_norm_eps": 1e-05, "vocab_size": 100352, "rope_theta": 10000,
    "partial_rotary_factor": 0.25, "use_qkv_bias": true, "qk_layernorm": false,
    "use_parallel_residual": false, "tie_word_embeddings": false, "hidden_act": "silu",
    "bos_token_id": 100257, "eos_token_id": 100257, "torch_dtype": "float16"})");
}

// bigcode/starcoder2-3b's config.json.
Json starcoder2Config() {
  return Json::parse(R"({
    "architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2",
    "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
    "num_attention_heads": 24, "num_key_value_heads": 2, "max_position_embeddings": 16384,
    "norm_epsilon": 1e-05, "vocab_size": 49152, "rope_theta": 999999.4420358813,
    "sliding_window": 4096, "use_bias": true, "hidden_act": "gelu_pytorch_tanh",
    "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "bfloat16"})");
}

// CohereForAI/c4ai-command-r-v01's config.json.
Json cohereConfig() {
  return Json::parse(R"({
    "architectures": ["CohereForCausalLM"], "model_type": "cohere",
    "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40,
    "num_attention_heads": 64, "num_key_value_heads": 64, "max_position_embeddings": 8192,
    "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "vocab_size": 256000,
    "rope_theta": 8000000.0, "use_qk_norm": false, "hidden_act": "silu",
    "bos_token_id": 5, "eos_token_id": 255001, "torch_dtype": "float16"})");
}

// microsoft/phi-2's config.json.
Json phiConfig() {
  return Json::parse(R"({
    "architectures": ["PhiForCausalLM"], "model_type": "phi",
    "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 2048,
    "layer_norm_eps": 1e-05, "vocab_size": 51200, "hidden_act": "gelu_new",
    "partial_rotary_factor": 0.4, "rope_theta": 10000.0, "qk_layernorm": false,
    "tie_word_embeddings": false, "bos_token_id": 50256, "eos_token_id": 50256,
    "torch_dtype": "float16"})");
}

// EleutherAI/pythia-160m's config.json.
Json pythiaConfig() {
  return Json::parse(R"({
    "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox",
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
    "num_attention_heads": 12, "max_position_embeddings": 2048, "layer_norm_eps": 1e-05,
    "vocab_size": 50304, "rotary_pct": 0.25, "rotary_emb_base": 10000,
    "use_parallel_residual": true, "tie_word_embeddings": false, "hidden_act": "gelu",
    "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float16"})");
}

using test::parseError;
using test::parseOk;

const TensorSpec *findSpec(const std::vector<TensorSpec> &specs, const std::string &name) {
  auto it =
      std::find_if(specs.begin(), specs.end(), [&](const TensorSpec &s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

std::vector<TensorSpec> tensorsOf(const ModelConfig &c) {
  return findArchitecture(c.architecture)->expectedTensors(c);
}

TEST(LayerNormConfig, ParsesStableLm) {
  ModelConfig c = parseOk(stableLmConfig());
  EXPECT_EQ(c.architecture, "StableLmForCausalLM");
  EXPECT_EQ(c.headDim, 64);
  EXPECT_EQ(c.rotaryDim, 16); // partial_rotary_factor 0.25
  EXPECT_FALSE(c.ropeInterleaved);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_FALSE(c.attentionOutputBias);
  EXPECT_EQ(c.mlpActivation, MlpActivation::Silu);
  const LayerNormBlock &b = c.layerNorm;
  EXPECT_DOUBLE_EQ(b.eps, 1e-5);
  EXPECT_TRUE(b.normBias);
  EXPECT_FALSE(b.parallel);
  EXPECT_TRUE(b.gatedMlp);
  EXPECT_FALSE(b.mlpBias);
  EXPECT_EQ(b.qkNorm, QkNorm::None);
  EXPECT_FALSE(b.lmHeadBias);
  EXPECT_DOUBLE_EQ(b.logitScale, 1.0);
}

TEST(LayerNormConfig, StableLmParallelResidualSharesTheInputNorm) {
  Json json = stableLmConfig();
  json["use_parallel_residual"] = true;
  ModelConfig c = parseOk(json);
  EXPECT_TRUE(c.layerNorm.parallel);
  EXPECT_TRUE(c.layerNorm.sharedNorm);
  auto specs = tensorsOf(c);
  EXPECT_EQ(findSpec(specs, "model.layers.0.post_attention_layernorm.weight"), nullptr);
  EXPECT_EQ(specs.size(), 1 + 24 * 12 + 3u);
}

TEST(LayerNormConfig, StableLmTensors) {
  ModelConfig c = parseOk(stableLmConfig());
  auto specs = tensorsOf(c);
  // Per layer: 2 norms x 2, q/k/v weight + bias, o, gate/up/down; then
  // embeddings, the final norm's weight and bias, lm_head.
  EXPECT_EQ(specs.size(), 1 + 24 * 14 + 3u);
  EXPECT_EQ(findSpec(specs, "model.layers.0.input_layernorm.bias")->shape,
            std::vector<int64_t>{2048});
  EXPECT_EQ(findSpec(specs, "model.layers.23.self_attn.v_proj.bias")->shape,
            std::vector<int64_t>{2048});
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.o_proj.bias"), nullptr);
  EXPECT_EQ(findSpec(specs, "model.norm.bias")->shape, std::vector<int64_t>{2048});
  EXPECT_EQ(findSpec(specs, "lm_head.weight")->shape, (std::vector<int64_t>{100352, 2048}));
}

TEST(LayerNormConfig, StableLmQkLayerNormIsOneTensorPerHead) {
  Json json = stableLmConfig();
  json["qk_layernorm"] = true;
  json["num_key_value_heads"] = 8;
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerNorm.qkNorm, QkNorm::PerHead);
  auto specs = tensorsOf(c);
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.q_layernorm.norms.31.weight")->shape,
            std::vector<int64_t>{64});
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.k_layernorm.norms.7.weight")->shape,
            std::vector<int64_t>{64});
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.k_layernorm.norms.8.weight"), nullptr);
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.q_layernorm.norms.0.bias"), nullptr);
  // The graph reads them stacked, one [heads * head_dim] vector per norm.
  auto graph = graphTensors(*findArchitecture(c.architecture), c);
  EXPECT_EQ(findSpec(graph, "model.layers.0.self_attn.q_layernorm.norms.weight:heads")->shape,
            (std::vector<int64_t>{32 * 64}));
  EXPECT_EQ(findSpec(graph, "model.layers.0.self_attn.k_layernorm.norms.weight:heads")->shape,
            (std::vector<int64_t>{8 * 64}));
  EXPECT_EQ(findSpec(graph, "model.layers.0.self_attn.q_layernorm.norms.0.weight"), nullptr);
}

TEST(LayerNormConfig, ParsesStarcoder2) {
  ModelConfig c = parseOk(starcoder2Config());
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_TRUE(c.attentionOutputBias);
  EXPECT_EQ(c.mlpActivation, MlpActivation::GeluTanh);
  const LayerNormBlock &b = c.layerNorm;
  EXPECT_TRUE(b.normBias);
  EXPECT_FALSE(b.parallel);
  EXPECT_FALSE(b.gatedMlp);
  EXPECT_TRUE(b.mlpBias);
  EXPECT_EQ(c.layerWindows, std::vector<int64_t>(30, 4096));
  auto specs = tensorsOf(c);
  EXPECT_EQ(specs.size(), 1 + 30 * 16 + 2u); // tied: no lm_head
  EXPECT_EQ(findSpec(specs, "model.layers.29.mlp.c_fc.bias")->shape,
            std::vector<int64_t>{12288});
  EXPECT_EQ(findSpec(specs, "model.layers.0.mlp.c_proj.weight")->shape,
            (std::vector<int64_t>{3072, 12288}));
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.k_proj.weight")->shape,
            (std::vector<int64_t>{256, 3072}));
  EXPECT_EQ(findSpec(specs, "lm_head.weight"), nullptr);
}

TEST(LayerNormConfig, Starcoder2WithoutBiasesKeepsTheNormBiases) {
  Json json = starcoder2Config();
  json["use_bias"] = false;
  json["sliding_window"] = nullptr;
  ModelConfig c = parseOk(json);
  EXPECT_FALSE(c.attentionBias || c.attentionOutputBias || c.layerNorm.mlpBias);
  EXPECT_TRUE(c.layerWindows.empty());
  auto specs = tensorsOf(c);
  EXPECT_EQ(findSpec(specs, "model.layers.0.mlp.c_fc.bias"), nullptr);
  EXPECT_NE(findSpec(specs, "model.layers.0.input_layernorm.bias"), nullptr);
}

TEST(LayerNormConfig, ParsesCohere) {
  ModelConfig c = parseOk(cohereConfig());
  EXPECT_TRUE(c.tieWordEmbeddings); // CohereConfig's default
  EXPECT_FALSE(c.attentionBias);
  const LayerNormBlock &b = c.layerNorm;
  EXPECT_FALSE(b.normBias);
  EXPECT_TRUE(b.parallel);
  EXPECT_TRUE(b.sharedNorm);
  EXPECT_TRUE(b.gatedMlp);
  EXPECT_DOUBLE_EQ(b.logitScale, 0.0625);
  EXPECT_TRUE(c.ropeInterleaved);
  EXPECT_EQ(c.rotaryDim, 128);
  auto specs = tensorsOf(c);
  EXPECT_EQ(specs.size(), 1 + 40 * 8 + 1u);
  EXPECT_EQ(findSpec(specs, "model.norm.bias"), nullptr);
  EXPECT_EQ(findSpec(specs, "model.layers.0.post_attention_layernorm.weight"), nullptr);
}

TEST(LayerNormConfig, CohereDefaultsLogitScaleAndReadsQkNorm) {
  Json json = cohereConfig();
  json.erase("logit_scale");
  json["use_qk_norm"] = true;
  json["num_key_value_heads"] = 8;
  ModelConfig c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.layerNorm.logitScale, 0.0625);
  EXPECT_EQ(c.layerNorm.qkNorm, QkNorm::PerHead);
  auto specs = tensorsOf(c);
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.q_norm.weight")->shape,
            (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.k_norm.weight")->shape,
            (std::vector<int64_t>{8, 128}));
  auto graph = graphTensors(*findArchitecture(c.architecture), c);
  EXPECT_EQ(findSpec(graph, "model.layers.0.self_attn.k_norm.weight:heads")->shape,
            std::vector<int64_t>{8 * 128});
  EXPECT_EQ(findSpec(graph, "model.layers.0.self_attn.k_norm.weight"), nullptr);
}

TEST(LayerNormConfig, ParsesPhi) {
  ModelConfig c = parseOk(phiConfig());
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_TRUE(c.attentionOutputBias);
  EXPECT_EQ(c.mlpActivation, MlpActivation::GeluTanh); // gelu_new
  EXPECT_EQ(c.rotaryDim, 32);                          // int(80 * 0.4)
  const LayerNormBlock &b = c.layerNorm;
  EXPECT_TRUE(b.parallel);
  EXPECT_TRUE(b.sharedNorm);
  EXPECT_FALSE(b.gatedMlp);
  EXPECT_TRUE(b.mlpBias);
  EXPECT_TRUE(b.lmHeadBias);
  EXPECT_EQ(b.qkNorm, QkNorm::None);
  auto specs = tensorsOf(c);
  EXPECT_EQ(specs.size(), 1 + 32 * 14 + 4u);
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.dense.bias")->shape,
            std::vector<int64_t>{2560});
  EXPECT_EQ(findSpec(specs, "model.layers.0.mlp.fc1.weight")->shape,
            (std::vector<int64_t>{10240, 2560}));
  EXPECT_EQ(findSpec(specs, "model.final_layernorm.bias")->shape, std::vector<int64_t>{2560});
  EXPECT_EQ(findSpec(specs, "lm_head.bias")->shape, std::vector<int64_t>{51200});
}

TEST(LayerNormConfig, PhiQkLayerNormIsSharedByTheHeads) {
  Json json = phiConfig();
  json["qk_layernorm"] = true;
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.layerNorm.qkNorm, QkNorm::Shared);
  auto specs = tensorsOf(c);
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.q_layernorm.weight")->shape,
            std::vector<int64_t>{80});
  EXPECT_EQ(findSpec(specs, "model.layers.0.self_attn.k_layernorm.bias")->shape,
            std::vector<int64_t>{80});
}

TEST(LayerNormConfig, ParsesPythia) {
  ModelConfig c = parseOk(pythiaConfig());
  EXPECT_EQ(c.numKvHeads, 12);
  EXPECT_EQ(c.rotaryDim, 16); // rotary_pct 0.25 of 64
  EXPECT_TRUE(c.attentionBias);
  EXPECT_TRUE(c.attentionOutputBias);
  EXPECT_EQ(c.mlpActivation, MlpActivation::GeluErf);
  const LayerNormBlock &b = c.layerNorm;
  EXPECT_TRUE(b.parallel);
  EXPECT_FALSE(b.sharedNorm);
  EXPECT_FALSE(b.gatedMlp);
  EXPECT_TRUE(b.mlpBias);
  auto specs = tensorsOf(c);
  EXPECT_EQ(specs.size(), 1 + 12 * 12 + 3u);
  EXPECT_EQ(findSpec(specs, "gpt_neox.embed_in.weight")->shape,
            (std::vector<int64_t>{50304, 768}));
  EXPECT_EQ(findSpec(specs, "gpt_neox.layers.11.attention.query_key_value.weight")->shape,
            (std::vector<int64_t>{3 * 768, 768}));
  EXPECT_EQ(findSpec(specs, "gpt_neox.layers.0.attention.query_key_value.bias")->shape,
            std::vector<int64_t>{3 * 768});
  EXPECT_EQ(findSpec(specs, "gpt_neox.final_layer_norm.bias")->shape, std::vector<int64_t>{768});
  EXPECT_EQ(findSpec(specs, "embed_out.weight")->shape, (std::vector<int64_t>{50304, 768}));
}

TEST(LayerNormConfig, GptNeoXReadsRotaryEmbBaseWhenNoThetaIsGiven) {
  Json json = pythiaConfig();
  json["rotary_emb_base"] = 500000;
  EXPECT_DOUBLE_EQ(parseOk(json).ropeTheta, 500000.0);
  json["rope_theta"] = 20000;
  EXPECT_DOUBLE_EQ(parseOk(json).ropeTheta, 20000.0);
  json.erase("rope_theta");
  json["rotary_emb_base"] = -1;
  parseError(json, "rotary_emb_base");
}

TEST(LayerNormConfig, GptNeoXGraphReadsQkvSplitPerHead) {
  ModelConfig c = parseOk(pythiaConfig());
  auto derived = findArchitecture(c.architecture)->derivedTensors(c);
  ASSERT_EQ(derived.size(), 12 * 6u); // q, k, v of each weight and bias
  const DerivedTensor &k = derived[1];
  EXPECT_EQ(k.name, "gpt_neox.layers.0.attention.query_key_value.weight:k");
  EXPECT_EQ(k.shape, (std::vector<int64_t>{768, 768}));
  ASSERT_EQ(k.pieces.size(), 12u);
  // Head h's k rows follow its 64 q rows: [3 * 64 * h + 64, + 64).
  EXPECT_EQ(k.pieces[2].source, "gpt_neox.layers.0.attention.query_key_value.weight");
  EXPECT_EQ(k.pieces[2].begin, 3 * 64 * 2 + 64);
  EXPECT_EQ(k.pieces[2].count, 64);
  auto graph = graphTensors(*findArchitecture(c.architecture), c);
  EXPECT_EQ(findSpec(graph, "gpt_neox.layers.0.attention.query_key_value.weight"), nullptr);
  EXPECT_EQ(findSpec(graph, "gpt_neox.layers.0.attention.query_key_value.bias:v")->shape,
            std::vector<int64_t>{768});
}

TEST(LayerNormConfig, GptNeoXSequentialBlock) {
  Json json = pythiaConfig();
  json["use_parallel_residual"] = false;
  json["attention_bias"] = false;
  ModelConfig c = parseOk(json);
  EXPECT_FALSE(c.layerNorm.parallel);
  auto specs = tensorsOf(c);
  EXPECT_EQ(findSpec(specs, "gpt_neox.layers.0.attention.query_key_value.bias"), nullptr);
  EXPECT_EQ(findSpec(specs, "gpt_neox.layers.0.attention.dense.bias"), nullptr);
  EXPECT_NE(findSpec(specs, "gpt_neox.layers.0.mlp.dense_h_to_4h.bias"), nullptr);
}

TEST(LayerNormConfigError, GptNeoXNeedsOneKvHeadPerQueryHead) {
  Json json = pythiaConfig();
  json["num_key_value_heads"] = 4;
  std::string m = parseError(json, "num_key_value_heads");
  EXPECT_NE(m.find("4 differs from num_attention_heads 12"), std::string::npos) << m;
  EXPECT_NE(m.find("remove the field"), std::string::npos) << m;
}

TEST(LayerNormConfigError, CohereLogitScaleNullOrZero) {
  Json json = cohereConfig();
  json["logit_scale"] = nullptr;
  EXPECT_NE(parseError(json, "logit_scale").find("null is not supported"), std::string::npos);
  json["logit_scale"] = 0;
  EXPECT_NE(parseError(json, "logit_scale").find("finite non-zero number, got 0"),
            std::string::npos);
  json["logit_scale"] = "0.0625";
  parseError(json, "logit_scale");
}

TEST(LayerNormConfigError, EpsMustBePositive) {
  Json json = phiConfig();
  json["layer_norm_eps"] = 0;
  EXPECT_NE(parseError(json, "layer_norm_eps").find("finite number > 0"), std::string::npos);
  Json star = starcoder2Config();
  star["norm_epsilon"] = -1e-5;
  parseError(star, "norm_epsilon");
}

TEST(LayerNormConfigError, UnsupportedActivationIsNamed) {
  Json json = starcoder2Config();
  json["hidden_act"] = "quick_gelu";
  std::string m = parseError(json, "hidden_act");
  EXPECT_NE(m.find("'quick_gelu' is not supported; supported: "), std::string::npos) << m;
}

TEST(LayerNormConfigError, Starcoder2SlidingWindowMustBePositive) {
  Json json = starcoder2Config();
  json["sliding_window"] = 0;
  parseError(json, "sliding_window");
}

TEST(LayerNormConfigError, PhiQkLayerNormNeedsTheDefaultHeadDim) {
  Json json = phiConfig();
  json["qk_layernorm"] = true;
  json["head_dim"] = 40; // 16 rotated features at partial_rotary_factor 0.4
  std::string m = parseError(json, "qk_layernorm");
  EXPECT_NE(m.find("head_dim (40) = hidden_size / num_attention_heads (80)"), std::string::npos)
      << m;
}

TEST(LayerNormConfigError, FlagsMustBeBooleans) {
  Json json = stableLmConfig();
  json["use_parallel_residual"] = "yes";
  parseError(json, "use_parallel_residual");
  json = cohereConfig();
  json["use_qk_norm"] = 1;
  parseError(json, "use_qk_norm");
}

// The reference checkpoint of tests/data/hf/gpt-neox (4 heads of 16): the
// derived q, k, v hold exactly the rows of query_key_value that transformers'
// view(..., heads, 3 * head_dim).chunk(3) gives each.
TEST(DerivedTensors, GptNeoXSplitMatchesTheHeadInterleavedLayout) {
  const std::string dir = test::testDataPath("hf/gpt-neox");
  auto spec = loadModelSpec(dir, SpecOptions{});
  ASSERT_TRUE(spec.isOk()) << spec.message();
  auto weights = openModelWeights(*spec);
  ASSERT_TRUE(weights.isOk()) << weights.message();
  ASSERT_TRUE(checkWeights(spec->config, *weights, nullptr).isOk());
  ASSERT_TRUE(addDerivedTensors(spec->config, *weights).isOk());
  const std::string base = "gpt_neox.layers.1.attention.query_key_value.";
  const TensorView *packed = weights->find(base + "weight");
  const TensorView *packedBias = weights->find(base + "bias");
  ASSERT_NE(packed, nullptr);
  ASSERT_NE(packedBias, nullptr);
  const float *w = reinterpret_cast<const float *>(packed->data);
  const float *b = reinterpret_cast<const float *>(packedBias->data);
  const int64_t heads = 4, d = 16, hidden = 64;
  const char *parts[] = {"q", "k", "v"};
  for (int part = 0; part < 3; ++part) {
    const TensorView *split = weights->find(base + "weight:" + parts[part]);
    const TensorView *splitBias = weights->find(base + "bias:" + parts[part]);
    ASSERT_NE(split, nullptr) << parts[part];
    ASSERT_NE(splitBias, nullptr) << parts[part];
    EXPECT_EQ(split->shape, (std::vector<int64_t>{heads * d, hidden}));
    ASSERT_EQ(split->byteSize, static_cast<uint64_t>(heads * d * hidden * 4));
    const float *s = reinterpret_cast<const float *>(split->data);
    const float *sb = reinterpret_cast<const float *>(splitBias->data);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < d; ++r) {
        const int64_t packedRow = h * 3 * d + part * d + r;
        EXPECT_EQ(std::memcmp(s + (h * d + r) * hidden, w + packedRow * hidden, hidden * 4), 0)
            << parts[part] << " head " << h << " row " << r;
        EXPECT_EQ(sb[h * d + r], b[packedRow]) << parts[part] << " head " << h << " row " << r;
      }
  }
}

TEST(DerivedTensors, MissingSourceIsNamed) {
  ModelConfig c = parseOk(pythiaConfig());
  WeightSet empty;
  Status status = addDerivedTensors(c, empty);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("derived tensor "
                                  "'gpt_neox.layers.0.attention.query_key_value.weight:q': "
                                  "source 'gpt_neox.layers.0.attention.query_key_value.weight' "
                                  "is not in the checkpoint"),
            std::string::npos)
      << status.message();
}

} // namespace
} // namespace llmc
