#include "models/exaone.h"

#include "models/config_fields.h"
#include "models/llama.h"

#include <array>
#include <utility>

namespace llmc {
namespace {

// ExaoneConfig's defaults (transformers 5.24) where they differ from the
// shared reader's.
constexpr double kDefaultRopeTheta = 500000.0;
constexpr double kDefaultRmsNormEps = 1e-5;

// ExaoneConfig.attribute_map: published name -> transformers' own.
constexpr std::array<ConfigAlias, 3> kAliases = {{
    {"num_layers", "num_hidden_layers"},
    {"layer_norm_epsilon", "rms_norm_eps"},
    {"activation_function", "hidden_act"},
}};

// Llama prefix or infix -> EXAONE 3.x, applied in order (o_proj before the
// self_attn it sits under). The inverse of transformers' WeightRenaming list
// for "exaone".
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kRenames = {{
    {"model.embed_tokens.", "transformer.wte."},
    {"model.layers.", "transformer.h."},
    {"model.norm.", "transformer.ln_f."},
    {".self_attn.o_proj.", ".attn.attention.out_proj."},
    {".self_attn.", ".attn.attention."},
    {".input_layernorm.", ".ln_1."},
    {".post_attention_layernorm.", ".ln_2."},
    {".mlp.gate_proj.", ".mlp.c_fc_0."},
    {".mlp.up_proj.", ".mlp.c_fc_1."},
    {".mlp.down_proj.", ".mlp.c_proj."},
}};

// A config that gives both spellings of one field must give one value.
Status checkAliasesAgree(const Json &hf, const std::string &source) {
  for (const ConfigAlias &alias : kAliases) {
    const Json *published = findField(hf, alias.published);
    const Json *canonical = findField(hf, alias.canonical);
    if (published != nullptr && canonical != nullptr && *published != *canonical)
      return Status::error(source + ": fields '" + alias.published + "' (" + published->dump() +
                           ") and '" + alias.canonical + "' (" + canonical->dump() +
                           ") are one setting and disagree; give one of them");
  }
  return Status::ok();
}

// rope_theta as ExaoneConfig defaults it: 500000 when neither the top level
// nor rope_parameters gives one.
bool hasRopeTheta(const Json &hf) {
  const Json *params = findField(hf, "rope_parameters");
  return findField(hf, "rope_theta") != nullptr ||
         (params != nullptr && params->is_object() && findField(*params, "rope_theta") != nullptr);
}

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

class Exaone final : public Architecture {
public:
  std::string_view name() const override { return "ExaoneForCausalLM"; }

  std::vector<ConfigAlias> configAliases() const override {
    return {kAliases.begin(), kAliases.end()};
  }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_RETURN_IF_ERROR(checkAliasesAgree(hf, source));
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    LLMC_ASSIGN_OR_RETURN(bool bias, optionalBool(hf, "attention_bias", false, source));
    config.attentionBias = config.attentionOutputBias = bias;
    LLMC_ASSIGN_OR_RETURN(config.mlpBias, optionalBool(hf, "mlp_bias", false, source));
    const std::string act = configKey(*this, hf, "hidden_act");
    LLMC_ASSIGN_OR_RETURN(config.mlpActivation,
                          readMlpActivation(hf, act.c_str(), "silu", false, source));
    if (findField(hf, "layer_norm_epsilon") == nullptr && findField(hf, "rms_norm_eps") == nullptr)
      config.rmsNormEps = kDefaultRmsNormEps;
    if (!hasRopeTheta(hf))
      config.ropeTheta = kDefaultRopeTheta;
    return Status::ok();
  }

  std::vector<TensorSpec> expectedTensors(const ModelConfig &config) const override {
    std::vector<TensorSpec> specs = llamaTensors(config);
    for (TensorSpec &spec : specs)
      spec.name = exaoneTensorName(spec.name);
    return specs;
  }

  // Every renamed tensor is its published tensor whole, under Llama's name.
  std::vector<DerivedTensor> derivedTensors(const ModelConfig &config) const override {
    std::vector<DerivedTensor> derived;
    for (TensorSpec &spec : llamaTensors(config)) {
      std::string published = exaoneTensorName(spec.name);
      if (published == spec.name)
        continue;
      const int64_t rows = spec.shape[0];
      derived.push_back({std::move(spec.name), std::move(spec.shape), {{published, 0, rows}}});
    }
    return derived;
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    if (tensorName == "lm_head.weight" && config.tieWordEmbeddings)
      return "tie_word_embeddings is true, so the output layer reuses transformer.wte.weight";
    if (endsWith(tensorName, ".bias"))
      return "the config declares no bias on this projection (attention_bias / mlp_bias)";
    if (endsWith(tensorName, "inv_freq"))
      return "RoPE frequencies are computed from rope_theta and rope_scaling";
    return "";
  }
};

} // namespace

std::string exaoneTensorName(const std::string &llamaName) {
  std::string name = llamaName;
  for (const auto &[llama, exaone] : kRenames) {
    const size_t at = name.find(llama);
    if (at != std::string::npos)
      name.replace(at, llama.size(), exaone);
  }
  return name;
}

const Architecture &exaoneForCausalLM() {
  static const Exaone arch;
  return arch;
}

} // namespace llmc
