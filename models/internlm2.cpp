#include "models/internlm2.h"

#include "models/config_fields.h"
#include "models/llama.h"

namespace llmc {
namespace {

std::string layerTensor(int64_t layer, std::string_view suffix) {
  return "model.layers." + std::to_string(layer) + "." + std::string(suffix);
}

// InternLM2Config accepts rope_scaling null or {"type": "linear" |
// "dynamic", "factor": >= 1} (its _rope_scaling_validation; its model
// reads rope_scaling["type"]); anything else fails there.
Status checkRopeScaling(const Json &hf, const std::string &source, const ModelConfig &config) {
  using Kind = RopeScaling::Kind;
  const Json *scaling = findField(hf, "rope_scaling");
  if (scaling == nullptr || scaling->is_null()) {
    if (config.ropeScaling.kind != Kind::None)
      return Status::error(source +
                           ": field 'rope_parameters': InternLM2's code reads "
                           "rope_scaling only; write rope_scaling {\"type\": \"linear\" or "
                           "\"dynamic\", \"factor\": ...} (or null)");
    return Status::ok();
  }
  const Kind kind = config.ropeScaling.kind;
  if (kind != Kind::Linear && kind != Kind::Dynamic)
    return Status::error(source +
                         ": field 'rope_scaling.type': InternLM2ForCausalLM supports "
                         "\"linear\" and \"dynamic\" only, as configuration_internlm2.py does");
  if (findField(*scaling, "type") == nullptr)
    return Status::error(source +
                         ": field 'rope_scaling.type': missing; InternLM2's code reads "
                         "rope_scaling[\"type\"] (\"rope_type\" alone is not read), write "
                         "\"type\": \"" +
                         std::string(kind == Kind::Linear ? "linear" : "dynamic") + "\"");
  if (config.ropeScaling.factor < 1.0)
    return Status::error(source + ": field 'rope_scaling.factor': expected a number >= 1, got " +
                         std::to_string(config.ropeScaling.factor));
  return Status::ok();
}

// Its attention takes head_dim = hidden_size / num_attention_heads and
// rotates all of it; a config saying otherwise is not what its code runs.
Status checkHeads(const Json &hf, const std::string &source, const ModelConfig &config) {
  if (config.hiddenSize % config.numHeads != 0 ||
      config.headDim != config.hiddenSize / config.numHeads)
    return Status::error(source +
                         ": field 'head_dim': InternLM2 computes the head size as "
                         "hidden_size / num_attention_heads (" +
                         std::to_string(config.hiddenSize) + " / " +
                         std::to_string(config.numHeads) + "), got " +
                         std::to_string(config.headDim) + "; drop head_dim");
  if (config.rotaryDim != config.headDim)
    return Status::error(source + ": field 'partial_rotary_factor': InternLM2 rotates every "
                                  "feature of a head; drop the field");
  return Status::ok();
}

// Rows of wqkv for Llama's q, k or v: per kv head h, a block of G + 2
// heads (G = num_attention_heads / num_key_value_heads): G query heads,
// then its k head, then its v head. `first`/`count`: heads within a block.
DerivedTensor fromPacked(std::string name, const std::string &packed, const ModelConfig &c,
                         int64_t first, int64_t count, bool vector) {
  const int64_t groups = c.numHeads / c.numKvHeads, d = c.headDim;
  DerivedTensor t;
  t.name = std::move(name);
  t.shape = {c.numKvHeads * count * d};
  if (!vector)
    t.shape.push_back(c.hiddenSize);
  for (int64_t h = 0; h < c.numKvHeads; ++h)
    t.pieces.push_back({packed, (h * (groups + 2) + first) * d, count * d});
  return t;
}

// Llama's name of a tensor stored whole under InternLM2's.
DerivedTensor renamed(std::string llamaName, const std::string &stored,
                      std::vector<int64_t> shape) {
  const int64_t rows = shape[0];
  return {std::move(llamaName), std::move(shape), {{stored, 0, rows}}};
}

class InternLm2 final : public Architecture {
public:
  std::string_view name() const override { return "InternLM2ForCausalLM"; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    LLMC_ASSIGN_OR_RETURN(bool bias, optionalBool(hf, "bias", true, source));
    config.attentionBias = config.attentionOutputBias = bias;
    config.mlpBias = false;
    LLMC_ASSIGN_OR_RETURN(config.mlpActivation,
                          readMlpActivation(hf, "hidden_act", "silu", false, source));
    LLMC_RETURN_IF_ERROR(checkHeads(hf, source, config));
    return checkRopeScaling(hf, source, config);
  }

  std::vector<TensorSpec> expectedTensors(const ModelConfig &c) const override {
    const int64_t h = c.hiddenSize, inter = c.intermediateSize;
    const int64_t q = c.numHeads * c.headDim, qkv = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    std::vector<TensorSpec> specs;
    specs.push_back({"model.tok_embeddings.weight", {c.vocabSize, h}});
    for (int64_t i = 0; i < c.numLayers; ++i) {
      auto add = [&](std::string_view suffix, std::vector<int64_t> shape) {
        specs.push_back({layerTensor(i, suffix), std::move(shape)});
      };
      add("attention_norm.weight", {h});
      add("attention.wqkv.weight", {qkv, h});
      if (c.attentionBias)
        add("attention.wqkv.bias", {qkv});
      add("attention.wo.weight", {h, q});
      if (c.attentionOutputBias)
        add("attention.wo.bias", {h});
      add("ffn_norm.weight", {h});
      add("feed_forward.w1.weight", {inter, h});
      add("feed_forward.w3.weight", {inter, h});
      add("feed_forward.w2.weight", {h, inter});
    }
    specs.push_back({"model.norm.weight", {h}});
    if (!c.tieWordEmbeddings)
      specs.push_back({"output.weight", {c.vocabSize, h}});
    return specs;
  }

  // Llama's tensors: q/k/v split out of wqkv (copied), the rest renamed.
  std::vector<DerivedTensor> derivedTensors(const ModelConfig &c) const override {
    const int64_t h = c.hiddenSize, inter = c.intermediateSize, g = c.numHeads / c.numKvHeads;
    const int64_t q = c.numHeads * c.headDim;
    std::vector<DerivedTensor> derived;
    derived.push_back(
        renamed("model.embed_tokens.weight", "model.tok_embeddings.weight", {c.vocabSize, h}));
    for (int64_t i = 0; i < c.numLayers; ++i) {
      auto llama = [&](std::string_view suffix) { return llamaLayerTensor(i, suffix); };
      auto mine = [&](std::string_view suffix) { return layerTensor(i, suffix); };
      derived.push_back(
          renamed(llama("input_layernorm.weight"), mine("attention_norm.weight"), {h}));
      for (bool vector : {false, true}) {
        if (vector && !c.attentionBias)
          continue;
        const std::string kind = vector ? "bias" : "weight";
        const std::string packed = mine("attention.wqkv." + kind);
        derived.push_back(fromPacked(llama("self_attn.q_proj." + kind), packed, c, 0, g, vector));
        derived.push_back(fromPacked(llama("self_attn.k_proj." + kind), packed, c, g, 1, vector));
        derived.push_back(
            fromPacked(llama("self_attn.v_proj." + kind), packed, c, g + 1, 1, vector));
      }
      derived.push_back(
          renamed(llama("self_attn.o_proj.weight"), mine("attention.wo.weight"), {h, q}));
      if (c.attentionOutputBias)
        derived.push_back(renamed(llama("self_attn.o_proj.bias"), mine("attention.wo.bias"), {h}));
      derived.push_back(
          renamed(llama("post_attention_layernorm.weight"), mine("ffn_norm.weight"), {h}));
      derived.push_back(
          renamed(llama("mlp.gate_proj.weight"), mine("feed_forward.w1.weight"), {inter, h}));
      derived.push_back(
          renamed(llama("mlp.up_proj.weight"), mine("feed_forward.w3.weight"), {inter, h}));
      derived.push_back(
          renamed(llama("mlp.down_proj.weight"), mine("feed_forward.w2.weight"), {h, inter}));
    }
    if (!c.tieWordEmbeddings)
      derived.push_back(renamed("lm_head.weight", "output.weight", {c.vocabSize, h}));
    return derived;
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    if (tensorName == "output.weight" && config.tieWordEmbeddings)
      return "tie_word_embeddings is true, so the output layer reuses model.tok_embeddings.weight";
    if (tensorName.find(".attention.w") != std::string::npos && tensorName.size() > 5 &&
        tensorName.compare(tensorName.size() - 5, 5, ".bias") == 0)
      return "the config says \"bias\": false, so wqkv and wo carry no bias";
    if (tensorName.find("inv_freq") != std::string::npos)
      return "RoPE frequencies are computed from rope_theta and rope_scaling";
    return "";
  }
};

} // namespace

const Architecture &internLm2ForCausalLM() {
  static const InternLm2 arch;
  return arch;
}

} // namespace llmc
