// parseHfConfig and the tensor lists of the families read under their
// publishers' own names: ExaoneForCausalLM (EXAONE 3.x: Llama under
// transformer.h.N.* and ExaoneConfig's attribute_map names) and
// InternLM2ForCausalLM (packed wqkv grouped per kv head); their derived
// tensors on the reference checkpoints; one error per rejected field.
#include "common/test_paths.h"
#include "frontend/derived_tensors.h"
#include "frontend/model_spec.h"
#include "frontend/weight_check.h"
#include "frontend_test_util.h"
#include "models/architecture.h"
#include "models/exaone.h"
#include "models/llama.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace llmc {
namespace {

using test::parseError;
using test::parseOk;

std::map<std::string, std::vector<int64_t>> byName(const std::vector<TensorSpec> &specs) {
  std::map<std::string, std::vector<int64_t>> map;
  for (const TensorSpec &s : specs)
    EXPECT_TRUE(map.emplace(s.name, s.shape).second) << "twice: " << s.name;
  return map;
}

// --- EXAONE 3.x ---

// LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct's config.json, as published.
Json exaone3Config() {
  return Json::parse(R"({
    "activation_function": "silu", "architectures": ["ExaoneForCausalLM"],
    "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_exaone.ExaoneConfig",
                 "AutoModelForCausalLM": "modeling_exaone.ExaoneForCausalLM",
                 "AutoModelForSequenceClassification":
                     "modeling_exaone.ExaoneForSequenceClassification"},
    "bos_token_id": 1, "embed_dropout": 0.0, "eos_token_id": 361, "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "layer_norm_epsilon": 1e-05,
    "max_position_embeddings": 4096, "model_type": "exaone", "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_layers": 32, "pad_token_id": 0, "rope_scaling": null,
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "float32",
    "transformers_version": "4.41.0.dev0", "use_cache": true, "vocab_size": 102400})");
}

// LGAI-EXAONE/EXAONE-3.5-2.4B-Instruct's: llama3 RoPE scaling, tied.
Json exaone35Config() {
  return Json::parse(R"({
    "activation_function": "silu", "architectures": ["ExaoneForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 1, "embed_dropout": 0.0, "eos_token_id": 361,
    "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 7168,
    "layer_norm_epsilon": 1e-05, "max_position_embeddings": 32768, "model_type": "exaone",
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_layers": 30, "pad_token_id": 0,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "use_cache": true, "vocab_size": 102400})");
}

TEST(HfConfig, ParsesExaone3) {
  ModelConfig c = parseOk(exaone3Config());
  EXPECT_EQ(c.architecture, "ExaoneForCausalLM");
  EXPECT_EQ(c.numLayers, 32);
  EXPECT_EQ(c.hiddenSize, 4096);
  EXPECT_EQ(c.intermediateSize, 14336);
  EXPECT_EQ(c.numHeads, 32);
  EXPECT_EQ(c.numKvHeads, 8);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_EQ(c.mlpActivation, MlpActivation::Silu);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::None);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_FALSE(c.attentionOutputBias);
  EXPECT_FALSE(c.mlpBias);
  EXPECT_EQ(c.eosTokenIds, std::vector<int64_t>{361});
}

TEST(HfConfig, ParsesExaone35WithLlama3RopeAndTiedEmbeddings) {
  ModelConfig c = parseOk(exaone35Config());
  EXPECT_EQ(c.numLayers, 30);
  EXPECT_EQ(c.headDim, 80);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 1e6);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::Llama3);
  EXPECT_DOUBLE_EQ(c.ropeScaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.ropeScaling.lowFreqFactor, 1.0);
  EXPECT_DOUBLE_EQ(c.ropeScaling.highFreqFactor, 4.0);
  EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 8192);
}

// transformers' save_pretrained writes the attribute_map targets instead:
// the same model.
TEST(HfConfig, ExaoneReadsTransformersSpellingsToo) {
  Json json = exaone3Config();
  json.erase("num_layers");
  json.erase("layer_norm_epsilon");
  json.erase("activation_function");
  json["num_hidden_layers"] = 32;
  json["rms_norm_eps"] = 2e-5;
  json["hidden_act"] = "gelu";
  ModelConfig c = parseOk(json);
  EXPECT_EQ(c.numLayers, 32);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 2e-5);
  EXPECT_EQ(c.mlpActivation, MlpActivation::GeluErf);
  // Both spellings with one value are one field.
  json["num_layers"] = 32;
  EXPECT_EQ(parseOk(json).numLayers, 32);
}

TEST(HfConfig, ExaoneDefaultsAreExaoneConfigs) {
  Json json = exaone3Config();
  for (const char *key : {"layer_norm_epsilon", "activation_function", "rope_theta", "rope_scaling",
                          "tie_word_embeddings", "num_key_value_heads"})
    json.erase(key);
  ModelConfig c = parseOk(json);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_EQ(c.mlpActivation, MlpActivation::Silu);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_EQ(c.numKvHeads, 32);
  // transformers 5's rope_parameters carry their own theta.
  json["rope_parameters"] = Json::parse(R"({"rope_type": "default", "rope_theta": 10000.0})");
  EXPECT_DOUBLE_EQ(parseOk(json).ropeTheta, 10000.0);
}

TEST(HfConfigError, ExaoneBadFields) {
  Json json = exaone3Config();
  json.erase("num_layers");
  parseError(json, "'num_layers'");
  json = exaone3Config();
  json["num_layers"] = 0;
  parseError(json, "'num_layers'");
  json = exaone3Config();
  json["num_hidden_layers"] = 30;
  std::string both = parseError(json, "'num_layers' (32)");
  EXPECT_NE(both.find("'num_hidden_layers' (30)"), std::string::npos) << both;
  json = exaone3Config();
  json["layer_norm_epsilon"] = -1.0;
  parseError(json, "'layer_norm_epsilon'");
  json = exaone3Config();
  json["activation_function"] = "swish-ish";
  parseError(json, "'activation_function'");
  json = exaone3Config();
  json["attention_bias"] = "yes";
  parseError(json, "'attention_bias'");
  json = exaone3Config();
  json["mlp_bias"] = 1;
  parseError(json, "'mlp_bias'");
  json = exaone3Config();
  json["rope_scaling"] = Json::parse(R"({"rope_type": "ntk-by-parts", "factor": 2.0})");
  parseError(json, "'rope_type'");
  json = exaone3Config();
  json["head_dim"] = 3;
  parseError(json, "'head_dim'");
}

TEST(Architecture, ExaoneTensorsHaveThePublishedNames) {
  ModelConfig c = parseOk(exaone3Config());
  const Architecture &arch = *findArchitecture(c.architecture);
  auto specs = byName(arch.expectedTensors(c));
  EXPECT_EQ(specs.size(), 1 + 32 * 9 + 2u);
  EXPECT_EQ(specs["transformer.wte.weight"], (std::vector<int64_t>{102400, 4096}));
  EXPECT_EQ(specs["transformer.h.31.ln_1.weight"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs["transformer.h.31.ln_2.weight"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs["transformer.h.0.attn.attention.q_proj.weight"],
            (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(specs["transformer.h.0.attn.attention.k_proj.weight"],
            (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(specs["transformer.h.0.attn.attention.v_proj.weight"],
            (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(specs["transformer.h.0.attn.attention.out_proj.weight"],
            (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(specs["transformer.h.0.mlp.c_fc_0.weight"], (std::vector<int64_t>{14336, 4096}));
  EXPECT_EQ(specs["transformer.h.0.mlp.c_fc_1.weight"], (std::vector<int64_t>{14336, 4096}));
  EXPECT_EQ(specs["transformer.h.0.mlp.c_proj.weight"], (std::vector<int64_t>{4096, 14336}));
  EXPECT_EQ(specs["transformer.ln_f.weight"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs["lm_head.weight"], (std::vector<int64_t>{102400, 4096}));
  // Tied: no lm_head; the unused one is explained.
  ModelConfig tied = parseOk(exaone35Config());
  EXPECT_EQ(byName(arch.expectedTensors(tied)).count("lm_head.weight"), 0u);
  EXPECT_NE(arch.explainUnusedTensor(tied, "lm_head.weight").find("transformer.wte.weight"),
            std::string::npos);
}

TEST(Architecture, ExaoneBiasesFollowAttentionBiasAndMlpBias) {
  Json json = exaone3Config();
  json["attention_bias"] = true;
  json["mlp_bias"] = true;
  ModelConfig c = parseOk(json);
  auto specs = byName(findArchitecture(c.architecture)->expectedTensors(c));
  EXPECT_EQ(specs.size(), 1 + 32 * 16 + 2u);
  EXPECT_EQ(specs["transformer.h.3.attn.attention.k_proj.bias"], std::vector<int64_t>{1024});
  EXPECT_EQ(specs["transformer.h.3.attn.attention.out_proj.bias"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs["transformer.h.3.mlp.c_fc_0.bias"], std::vector<int64_t>{14336});
  EXPECT_EQ(specs["transformer.h.3.mlp.c_proj.bias"], std::vector<int64_t>{4096});
}

// The graph reads exactly Llama's tensors (names and shapes), each the
// published tensor of the same shape renamed.
TEST(Architecture, ExaoneGraphReadsLlamasTensors) {
  for (Json json : {exaone3Config(), exaone35Config()}) {
    json["attention_bias"] = true;
    ModelConfig c = parseOk(json);
    const Architecture &arch = *findArchitecture(c.architecture);
    EXPECT_EQ(byName(graphTensors(arch, c)), byName(llamaTensors(c)));
    for (const DerivedTensor &d : arch.derivedTensors(c)) {
      ASSERT_EQ(d.pieces.size(), 1u) << d.name;
      EXPECT_EQ(d.pieces[0].source, exaoneTensorName(d.name));
      EXPECT_EQ(d.pieces[0].begin, 0);
      EXPECT_EQ(d.pieces[0].count, d.shape[0]);
    }
  }
}

// On the reference checkpoint the renamed tensors are the published bytes,
// not copies of them.
TEST(DerivedTensors, ExaoneRenamesShareTheCheckpointsBytes) {
  const std::string dir = test::testDataPath("hf/exaone3");
  auto spec = loadModelSpec(dir, SpecOptions{});
  ASSERT_TRUE(spec.isOk()) << spec.message();
  auto weights = openModelWeights(*spec);
  ASSERT_TRUE(weights.isOk()) << weights.message();
  std::vector<std::string> warnings;
  ASSERT_TRUE(checkWeights(spec->config, *weights, &warnings).isOk());
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(addDerivedTensors(spec->config, *weights).isOk());
  for (const char *name : {"model.embed_tokens.weight", "model.layers.1.self_attn.o_proj.weight",
                           "model.layers.0.mlp.up_proj.weight", "model.norm.weight"}) {
    const TensorView *derived = weights->find(name);
    const TensorView *stored = weights->find(exaoneTensorName(name));
    ASSERT_NE(derived, nullptr) << name;
    ASSERT_NE(stored, nullptr) << name;
    EXPECT_EQ(derived->data, stored->data) << name;
    EXPECT_EQ(derived->byteSize, stored->byteSize) << name;
    EXPECT_EQ(derived->shape, stored->shape) << name;
  }
}

// --- InternLM2 ---

// internlm/internlm2_5-7b-chat's config.json, as published.
Json internLm2Config() {
  return Json::parse(R"({
    "architectures": ["InternLM2ForCausalLM"], "attn_implementation": "eager",
    "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                 "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM",
                 "AutoModel": "modeling_internlm2.InternLM2ForCausalLM"},
    "bias": false, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "internlm2", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "pad_token_id": 2, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": {"type": "dynamic", "factor": 2.0},
    "rope_theta": 1000000, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.41.0", "use_cache": true, "vocab_size": 92544})");
}

TEST(HfConfig, ParsesInternLm25) {
  ModelConfig c = parseOk(internLm2Config());
  EXPECT_EQ(c.architecture, "InternLM2ForCausalLM");
  EXPECT_EQ(c.numLayers, 32);
  EXPECT_EQ(c.numHeads, 32);
  EXPECT_EQ(c.numKvHeads, 8);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_EQ(c.rotaryDim, 128);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 1e6);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::Dynamic);
  EXPECT_DOUBLE_EQ(c.ropeScaling.factor, 2.0);
  EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 32768);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_FALSE(c.attentionOutputBias);
  EXPECT_FALSE(c.mlpBias);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_EQ(c.mlpActivation, MlpActivation::Silu);
}

// InternLM2Config's defaults: biases on, eps 1e-6, theta 10000, MHA, no
// scaling, untied.
TEST(HfConfig, InternLm2DefaultsAreInternLm2Configs) {
  Json json = internLm2Config();
  for (const char *key : {"bias", "rms_norm_eps", "rope_theta", "num_key_value_heads",
                          "rope_scaling", "tie_word_embeddings", "hidden_act"})
    json.erase(key);
  ModelConfig c = parseOk(json);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_TRUE(c.attentionOutputBias);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-6);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 10000.0);
  EXPECT_EQ(c.numKvHeads, 32);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::None);
  EXPECT_FALSE(c.tieWordEmbeddings);
  json["rope_scaling"] = Json::parse(R"({"type": "linear", "factor": 4.0})");
  EXPECT_EQ(parseOk(json).ropeScaling.kind, RopeScaling::Kind::Linear);
}

TEST(HfConfigError, InternLm2BadFields) {
  Json json = internLm2Config();
  json["rope_scaling"] = Json::parse(R"({"type": "yarn", "factor": 2.0})");
  std::string m = parseError(json, "'rope_scaling.type'");
  EXPECT_NE(m.find("\"linear\" and \"dynamic\""), std::string::npos) << m;
  json = internLm2Config();
  json["rope_scaling"] = Json::parse(R"({"rope_type": "dynamic", "factor": 2.0})");
  parseError(json, "'rope_scaling.type'");
  json = internLm2Config();
  json["rope_scaling"] = Json::parse(R"({"type": "dynamic", "factor": 0.5})");
  parseError(json, "'rope_scaling.factor'");
  json = internLm2Config();
  json.erase("rope_scaling");
  json["rope_parameters"] = Json::parse(R"({"rope_type": "linear", "factor": 2.0})");
  parseError(json, "'rope_parameters'");
  json = internLm2Config();
  json["bias"] = "no";
  parseError(json, "'bias'");
  json = internLm2Config();
  json["head_dim"] = 64;
  parseError(json, "'head_dim'");
  json = internLm2Config();
  json["partial_rotary_factor"] = 0.5;
  parseError(json, "'partial_rotary_factor'");
  json = internLm2Config();
  json["hidden_act"] = "swish-ish";
  parseError(json, "'hidden_act'");
  json = internLm2Config();
  json["num_key_value_heads"] = 5;
  parseError(json, "'num_key_value_heads'");
}

TEST(Architecture, InternLm2TensorsArePackedAsPublished) {
  ModelConfig c = parseOk(internLm2Config());
  const Architecture &arch = *findArchitecture(c.architecture);
  auto specs = byName(arch.expectedTensors(c));
  EXPECT_EQ(specs.size(), 1 + 32 * 7 + 2u);
  EXPECT_EQ(specs["model.tok_embeddings.weight"], (std::vector<int64_t>{92544, 4096}));
  EXPECT_EQ(specs["model.layers.31.attention.wqkv.weight"],
            (std::vector<int64_t>{(32 + 2 * 8) * 128, 4096}));
  EXPECT_EQ(specs["model.layers.31.attention.wo.weight"], (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(specs["model.layers.31.attention_norm.weight"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs["model.layers.31.ffn_norm.weight"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs["model.layers.31.feed_forward.w1.weight"], (std::vector<int64_t>{14336, 4096}));
  EXPECT_EQ(specs["model.layers.31.feed_forward.w3.weight"], (std::vector<int64_t>{14336, 4096}));
  EXPECT_EQ(specs["model.layers.31.feed_forward.w2.weight"], (std::vector<int64_t>{4096, 14336}));
  EXPECT_EQ(specs["model.norm.weight"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs["output.weight"], (std::vector<int64_t>{92544, 4096}));
  // bias true: packed and output biases; tied: no output.weight.
  Json json = internLm2Config();
  json["bias"] = true;
  json["tie_word_embeddings"] = true;
  ModelConfig biased = parseOk(json);
  specs = byName(arch.expectedTensors(biased));
  EXPECT_EQ(specs.size(), 1 + 32 * 9 + 1u);
  EXPECT_EQ(specs["model.layers.0.attention.wqkv.bias"], std::vector<int64_t>{48 * 128});
  EXPECT_EQ(specs["model.layers.0.attention.wo.bias"], std::vector<int64_t>{4096});
  EXPECT_EQ(specs.count("output.weight"), 0u);
  EXPECT_NE(arch.explainUnusedTensor(biased, "output.weight").find("tok_embeddings"),
            std::string::npos);
  EXPECT_NE(arch.explainUnusedTensor(c, "model.layers.0.attention.wo.bias").find("bias"),
            std::string::npos);
}

TEST(Architecture, InternLm2GraphReadsLlamasTensors) {
  for (bool bias : {false, true}) {
    Json json = internLm2Config();
    json["bias"] = bias;
    json["tie_word_embeddings"] = bias;
    ModelConfig c = parseOk(json);
    EXPECT_EQ(byName(graphTensors(*findArchitecture(c.architecture), c)), byName(llamaTensors(c)))
        << "bias " << bias;
  }
}

// The reference checkpoints (GQA 4/2 without biases; MQA 4/1 with biases):
// q, k and v hold the rows of wqkv that modeling_internlm2.py's
// rearrange("b q (h gs d) -> b q h gs d", gs = 2 + G) gives them, the
// renamed tensors share the checkpoint's bytes.
TEST(DerivedTensors, InternLm2SplitFollowsTheGroupedLayout) {
  for (const char *fixture : {"internlm2", "internlm2-bias"}) {
    SCOPED_TRACE(fixture);
    auto spec = loadModelSpec(test::testDataPath(std::string("hf/") + fixture), SpecOptions{});
    ASSERT_TRUE(spec.isOk()) << spec.message();
    const ModelConfig &c = spec->config;
    auto weights = openModelWeights(*spec);
    ASSERT_TRUE(weights.isOk()) << weights.message();
    std::vector<std::string> warnings;
    ASSERT_TRUE(checkWeights(c, *weights, &warnings).isOk());
    EXPECT_TRUE(warnings.empty());
    ASSERT_TRUE(addDerivedTensors(c, *weights).isOk());
    const int64_t d = c.headDim, g = c.numHeads / c.numKvHeads, hidden = c.hiddenSize;
    for (int64_t layer = 0; layer < c.numLayers; ++layer) {
      const std::string at = "model.layers." + std::to_string(layer) + ".";
      const TensorView *packed = weights->find(at + "attention.wqkv.weight");
      const TensorView *packedBias = weights->find(at + "attention.wqkv.bias");
      ASSERT_NE(packed, nullptr);
      ASSERT_EQ(packedBias != nullptr, c.attentionBias);
      const float *w = reinterpret_cast<const float *>(packed->data);
      // {Llama projection, first head of it in a kv block, heads per block}
      const std::tuple<const char *, int64_t, int64_t> parts[] = {
          {"q_proj", 0, g}, {"k_proj", g, 1}, {"v_proj", g + 1, 1}};
      for (const auto &[part, first, count] : parts) {
        const TensorView *split = weights->find(at + "self_attn." + part + ".weight");
        ASSERT_NE(split, nullptr) << part;
        ASSERT_EQ(split->shape, (std::vector<int64_t>{c.numKvHeads * count * d, hidden}));
        const float *s = reinterpret_cast<const float *>(split->data);
        const TensorView *splitBias = weights->find(at + "self_attn." + part + ".bias");
        ASSERT_EQ(splitBias != nullptr, c.attentionBias) << part;
        for (int64_t h = 0; h < c.numKvHeads; ++h)
          for (int64_t r = 0; r < count * d; ++r) {
            const int64_t row = (h * count * d) + r, packedRow = (h * (g + 2) + first) * d + r;
            EXPECT_EQ(std::memcmp(s + row * hidden, w + packedRow * hidden, hidden * 4), 0)
                << part << " kv head " << h << " row " << r;
            if (splitBias != nullptr)
              EXPECT_EQ(reinterpret_cast<const float *>(splitBias->data)[row],
                        reinterpret_cast<const float *>(packedBias->data)[packedRow])
                  << part << " kv head " << h << " row " << r;
          }
      }
      const TensorView *wo = weights->find(at + "attention.wo.weight");
      const TensorView *oProj = weights->find(at + "self_attn.o_proj.weight");
      ASSERT_NE(oProj, nullptr);
      EXPECT_EQ(oProj->data, wo->data);
    }
    const TensorView *lmHead = weights->find("lm_head.weight");
    ASSERT_EQ(lmHead != nullptr, !c.tieWordEmbeddings);
    if (lmHead != nullptr)
      EXPECT_EQ(lmHead->data, weights->find("output.weight")->data);
  }
}

// A checkpoint of the published layout that lacks or misshapes a tensor is
// refused naming the published tensor (what the user's files hold), never
// the Llama name it is read as.
TEST(WeightCheck, PublishedLayoutsNameThePublishedTensors) {
  struct Case {
    Json config;
    std::string missing, misshaped;
  };
  Json exaone = exaone3Config(), internlm = internLm2Config();
  for (Json *json : {&exaone, &internlm}) {
    (*json)["hidden_size"] = 64;
    (*json)["intermediate_size"] = 32;
    (*json)["num_attention_heads"] = 4;
    (*json)["num_key_value_heads"] = 2;
    (*json)["vocab_size"] = 96;
    (*json)["bos_token_id"] = 1;
    (*json)["eos_token_id"] = 2;
    (*json)["pad_token_id"] = 0;
  }
  exaone["num_layers"] = 2;
  internlm["num_hidden_layers"] = 2;
  const Case cases[] = {
      {exaone, "transformer.h.1.ln_2.weight", "transformer.h.0.attn.attention.k_proj.weight"},
      {internlm, "model.layers.1.ffn_norm.weight", "model.layers.0.attention.wqkv.weight"}};
  const std::string dir = test::scratchDir("published-weight-check");
  for (const Case &c : cases) {
    ModelConfig config = parseOk(c.config);
    SCOPED_TRACE(config.architecture);
    const Architecture &arch = *findArchitecture(config.architecture);
    for (bool misshape : {false, true}) {
      std::vector<test::FakeTensor> tensors;
      for (const TensorSpec &spec : arch.expectedTensors(config)) {
        if (!misshape && spec.name == c.missing)
          continue;
        std::vector<int64_t> shape = spec.shape;
        if (misshape && spec.name == c.misshaped)
          shape[0] += 1;
        tensors.push_back({spec.name, shape});
      }
      const std::string path = dir + "/" + config.architecture + ".safetensors";
      test::writeSafetensors(path, tensors);
      auto weights = WeightSet::openFiles({path});
      ASSERT_TRUE(weights.isOk()) << weights.message();
      Status status = checkWeights(config, *weights, nullptr, "config.json");
      ASSERT_FALSE(status.isOk());
      const std::string &named = misshape ? c.misshaped : c.missing;
      EXPECT_NE(status.message().find(named), std::string::npos) << status.message();
    }
  }
}

} // namespace
} // namespace llmc
