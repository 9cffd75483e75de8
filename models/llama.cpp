#include "models/llama.h"

#include "models/config_fields.h"

namespace llmc {
namespace {

// How a flavor decides which projections carry biases.
enum class BiasRule {
  None,       // Mistral: no biases anywhere
  FromConfig, // Llama: `attention_bias` (default false) on q, k, v and o
  QkvAlways,  // Qwen2: q, k and v always, never o
};

// How a flavor asks for sliding-window attention.
enum class WindowRule {
  None,             // Llama: no such field
  SlidingWindow,    // Mistral: `sliding_window` on every layer (null: full attention)
  UseSlidingWindow, // Qwen2: `use_sliding_window` switches `sliding_window` (HF default
                    // 4096) on for the layers >= `max_window_layers`
};

struct Flavor {
  std::string_view name;
  BiasRule bias;
  WindowRule window;
  bool readsMlpBias; // Llama has `mlp_bias` (biases on gate/up/down_proj)
  QkNorm qkNorm = QkNorm::None;
  bool postNormsOnly = false;     // OLMo2
  double defaultRmsNormEps = 1e-6; // when config.json omits rms_norm_eps
};

// Qwen2Config's defaults of `sliding_window` and `max_window_layers`, used
// when use_sliding_window is true and they are absent.
constexpr int64_t kQwen2DefaultSlidingWindow = 4096;
constexpr int64_t kQwen2DefaultMaxWindowLayers = 28;

Status applyBias(const Flavor &flavor, const Json &hf, const std::string &source,
                 ModelConfig &config) {
  switch (flavor.bias) {
  case BiasRule::None:
    config.attentionBias = config.attentionOutputBias = false;
    return Status::ok();
  case BiasRule::FromConfig: {
    LLMC_ASSIGN_OR_RETURN(bool bias, optionalBool(hf, "attention_bias", false, source));
    config.attentionBias = config.attentionOutputBias = bias;
    return Status::ok();
  }
  case BiasRule::QkvAlways:
    config.attentionBias = true;
    config.attentionOutputBias = false;
    return Status::ok();
  }
  return Status::ok();
}

Status readMistralWindow(const Json &hf, const std::string &source, ModelConfig &config) {
  // Absent is read as null (full attention): HF always writes the field, so
  // only a hand-written config omits it.
  LLMC_ASSIGN_OR_RETURN(int64_t window, readSlidingWindow(hf, 0, source));
  if (window == 0)
    return Status::ok();
  LLMC_ASSIGN_OR_RETURN(config.layerWindows,
                        readLayerWindows(hf, source, config, window, [](int64_t) { return true; }));
  return Status::ok();
}

// HF's Qwen2: sliding_window applies only with use_sliding_window, to the
// layers i >= max_window_layers (or as layer_types says, when written).
Status readQwen2Window(const Json &hf, const std::string &source, ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(bool use, optionalBool(hf, "use_sliding_window", false, source));
  if (!use)
    return Status::ok();
  LLMC_ASSIGN_OR_RETURN(int64_t window,
                        readSlidingWindow(hf, kQwen2DefaultSlidingWindow, source));
  LLMC_ASSIGN_OR_RETURN(int64_t firstSliding,
                        optionalInt(hf, "max_window_layers", kQwen2DefaultMaxWindowLayers, source));
  if (firstSliding < 0)
    return Status::error(source + ": field 'max_window_layers': expected an integer >= 0, got " +
                         std::to_string(firstSliding));
  LLMC_ASSIGN_OR_RETURN(config.layerWindows,
                        readLayerWindows(hf, source, config, window, [&](int64_t layer) {
                          return layer >= firstSliding;
                        }));
  return Status::ok();
}

Status applyWindow(const Flavor &flavor, const Json &hf, const std::string &source,
                   ModelConfig &config) {
  switch (flavor.window) {
  case WindowRule::None:
    return Status::ok();
  case WindowRule::SlidingWindow:
    return readMistralWindow(hf, source, config);
  case WindowRule::UseSlidingWindow:
    return readQwen2Window(hf, source, config);
  }
  return Status::ok();
}

Status applyMlpBias(const Flavor &flavor, const Json &hf, const std::string &source,
                    ModelConfig &config) {
  config.mlpBias = false;
  if (!flavor.readsMlpBias)
    return Status::ok();
  LLMC_ASSIGN_OR_RETURN(config.mlpBias, optionalBool(hf, "mlp_bias", false, source));
  return Status::ok();
}

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

class LlamaFamily final : public LlamaLayout {
public:
  explicit LlamaFamily(Flavor flavor) : flavor_(flavor) {}

  std::string_view name() const override { return flavor_.name; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    LLMC_RETURN_IF_ERROR(applyBias(flavor_, hf, source, config));
    LLMC_RETURN_IF_ERROR(applyMlpBias(flavor_, hf, source, config));
    LLMC_ASSIGN_OR_RETURN(config.mlpActivation,
                          readMlpActivation(hf, "hidden_act", "silu", false, source));
    config.qkNorm = flavor_.qkNorm;
    config.postNormsOnly = flavor_.postNormsOnly;
    if (findField(hf, "rms_norm_eps") == nullptr)
      config.rmsNormEps = flavor_.defaultRmsNormEps;
    return applyWindow(flavor_, hf, source, config);
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    if (std::string tied = LlamaLayout::explainUnusedTensor(config, tensorName); !tied.empty())
      return tied;
    if (endsWith(tensorName, "_proj.bias"))
      return "the config declares no bias on this projection";
    if (endsWith(tensorName, "rotary_emb.inv_freq"))
      return "RoPE frequencies are computed from rope_theta and rope_scaling";
    return "";
  }

private:
  Flavor flavor_;
};

} // namespace

const Architecture &llamaForCausalLM() {
  static const LlamaFamily arch(
      {"LlamaForCausalLM", BiasRule::FromConfig, WindowRule::None, /*readsMlpBias=*/true});
  return arch;
}

const Architecture &mistralForCausalLM() {
  static const LlamaFamily arch(
      {"MistralForCausalLM", BiasRule::None, WindowRule::SlidingWindow, /*readsMlpBias=*/false});
  return arch;
}

const Architecture &qwen2ForCausalLM() {
  static const LlamaFamily arch({"Qwen2ForCausalLM", BiasRule::QkvAlways,
                                 WindowRule::UseSlidingWindow, /*readsMlpBias=*/false});
  return arch;
}

const Architecture &qwen3ForCausalLM() {
  static const LlamaFamily arch({"Qwen3ForCausalLM", BiasRule::FromConfig,
                                 WindowRule::UseSlidingWindow, /*readsMlpBias=*/false,
                                 QkNorm::PerHead});
  return arch;
}

const Architecture &olmo2ForCausalLM() {
  static const LlamaFamily arch({"Olmo2ForCausalLM", BiasRule::FromConfig, WindowRule::None,
                                 /*readsMlpBias=*/false, QkNorm::Full, /*postNormsOnly=*/true,
                                 /*defaultRmsNormEps=*/1e-5});
  return arch;
}

std::string llamaLayerTensor(int64_t layer, std::string_view suffix) {
  return "model.layers." + std::to_string(layer) + "." + std::string(suffix);
}

std::string LlamaLayout::explainUnusedTensor(const ModelConfig &config,
                                             const std::string &tensorName) const {
  if (tensorName == "lm_head.weight" && config.tieWordEmbeddings)
    return "tie_word_embeddings is true, so the output layer reuses model.embed_tokens.weight";
  return "";
}

std::vector<TensorSpec> llamaTensors(const ModelConfig &c) {
  const int64_t h = c.hiddenSize, inter = c.intermediateSize, v = c.vocabSize;
  const int64_t q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim;
  std::vector<TensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {v, h}});
  for (int64_t i = 0; i < c.numLayers; ++i) {
    auto add = [&](std::string_view suffix, std::vector<int64_t> shape) {
      specs.push_back({llamaLayerTensor(i, suffix), std::move(shape)});
    };
    if (!c.postNormsOnly)
      add("input_layernorm.weight", {h});
    add("self_attn.q_proj.weight", {q, h});
    add("self_attn.k_proj.weight", {kv, h});
    add("self_attn.v_proj.weight", {kv, h});
    if (c.attentionBias) {
      add("self_attn.q_proj.bias", {q});
      add("self_attn.k_proj.bias", {kv});
      add("self_attn.v_proj.bias", {kv});
    }
    add("self_attn.o_proj.weight", {h, q});
    if (c.attentionOutputBias)
      add("self_attn.o_proj.bias", {h});
    if (c.qkNorm == QkNorm::PerHead) {
      add("self_attn.q_norm.weight", {c.headDim});
      add("self_attn.k_norm.weight", {c.headDim});
    } else if (c.qkNorm == QkNorm::Full) {
      add("self_attn.q_norm.weight", {q});
      add("self_attn.k_norm.weight", {kv});
    }
    add("post_attention_layernorm.weight", {h});
    if (c.sandwichNorms)
      add("pre_feedforward_layernorm.weight", {h});
    if (c.sandwichNorms || c.postNormsOnly)
      add("post_feedforward_layernorm.weight", {h});
    add("mlp.gate_proj.weight", {inter, h});
    add("mlp.up_proj.weight", {inter, h});
    add("mlp.down_proj.weight", {h, inter});
    if (c.mlpBias) {
      add("mlp.gate_proj.bias", {inter});
      add("mlp.up_proj.bias", {inter});
      add("mlp.down_proj.bias", {h});
    }
  }
  specs.push_back({"model.norm.weight", {h}});
  if (!c.tieWordEmbeddings)
    specs.push_back({"lm_head.weight", {v, h}});
  return specs;
}

} // namespace llmc
