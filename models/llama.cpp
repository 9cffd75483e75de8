#include "models/llama.h"

namespace llmc {
namespace {

// How a flavor decides which projections carry biases.
enum class BiasRule {
  None,       // Mistral: no biases anywhere
  FromConfig, // Llama: `attention_bias` (default false) on q, k, v and o
  QkvAlways,  // Qwen2: q, k and v always, never o
};

// How a flavor asks for sliding-window attention, which llmc does not run yet.
enum class WindowRule {
  None,             // Llama: no such field
  SlidingWindow,    // Mistral: `sliding_window` (null: full attention)
  UseSlidingWindow, // Qwen2: `use_sliding_window` switches `sliding_window` (HF default 4096) on
};

struct Flavor {
  std::string_view name;
  BiasRule bias;
  WindowRule window;
  bool readsMlpBias; // Llama has `mlp_bias`; only false is supported
};

// Qwen2Config's default `sliding_window`, used when use_sliding_window is true.
constexpr int64_t kQwen2DefaultSlidingWindow = 4096;

std::string windowUnsupported(const std::string &source, const std::string &field,
                              const std::string &detail, const char *supported) {
  return source + ": field '" + field + "': " + detail +
         ": sliding-window attention is not supported yet; supported: " + supported;
}

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

Status checkMistralWindow(const Json &hf, const std::string &source, const ModelConfig &config) {
  // Absent is read as null (full attention): HF always writes the field, so
  // only a hand-written config omits it.
  const Json *field = findField(hf, "sliding_window");
  if (field == nullptr || field->is_null())
    return Status::ok();
  LLMC_ASSIGN_OR_RETURN(int64_t window, requireInt(hf, "sliding_window", source));
  if (window <= 0)
    return Status::error(source + ": field 'sliding_window': expected a positive integer or " +
                         "null, got " + std::to_string(window));
  if (window >= config.maxPositionEmbeddings)
    return Status::ok();
  return Status::error(windowUnsupported(source, "sliding_window",
                                         std::to_string(window) +
                                             " is smaller than max_position_embeddings " +
                                             std::to_string(config.maxPositionEmbeddings),
                                         "null or a value >= max_position_embeddings"));
}

Status checkQwen2Window(const Json &hf, const std::string &source, const ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(bool use, optionalBool(hf, "use_sliding_window", false, source));
  if (!use)
    return Status::ok();
  LLMC_ASSIGN_OR_RETURN(int64_t window,
                        optionalInt(hf, "sliding_window", kQwen2DefaultSlidingWindow, source));
  if (window >= config.maxPositionEmbeddings)
    return Status::ok();
  return Status::error(windowUnsupported(source, "use_sliding_window",
                                         "true with sliding_window " + std::to_string(window) +
                                             " < max_position_embeddings " +
                                             std::to_string(config.maxPositionEmbeddings),
                                         "false"));
}

Status applyWindow(const Flavor &flavor, const Json &hf, const std::string &source,
                   const ModelConfig &config) {
  switch (flavor.window) {
  case WindowRule::None:
    return Status::ok();
  case WindowRule::SlidingWindow:
    return checkMistralWindow(hf, source, config);
  case WindowRule::UseSlidingWindow:
    return checkQwen2Window(hf, source, config);
  }
  return Status::ok();
}

Status applyMlpBias(const Flavor &flavor, const Json &hf, const std::string &source) {
  if (!flavor.readsMlpBias)
    return Status::ok();
  LLMC_ASSIGN_OR_RETURN(bool mlpBias, optionalBool(hf, "mlp_bias", false, source));
  if (!mlpBias)
    return Status::ok();
  return Status::error(source + ": field 'mlp_bias': true (biases on gate/up/down_proj) is not "
                                "supported; supported: false");
}

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

class LlamaFamily final : public Architecture {
public:
  explicit LlamaFamily(Flavor flavor) : flavor_(flavor) {}

  std::string_view name() const override { return flavor_.name; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    LLMC_RETURN_IF_ERROR(applyBias(flavor_, hf, source, config));
    LLMC_RETURN_IF_ERROR(applyMlpBias(flavor_, hf, source));
    return applyWindow(flavor_, hf, source, config);
  }

  std::vector<TensorSpec> expectedTensors(const ModelConfig &config) const override {
    return llamaTensors(config);
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    if (tensorName == "lm_head.weight" && config.tieWordEmbeddings)
      return "tie_word_embeddings is true, so the output layer reuses model.embed_tokens.weight";
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

std::string llamaLayerTensor(int64_t layer, std::string_view suffix) {
  return "model.layers." + std::to_string(layer) + "." + std::string(suffix);
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
    add("post_attention_layernorm.weight", {h});
    add("mlp.gate_proj.weight", {inter, h});
    add("mlp.up_proj.weight", {inter, h});
    add("mlp.down_proj.weight", {h, inter});
  }
  specs.push_back({"model.norm.weight", {h}});
  if (!c.tieWordEmbeddings)
    specs.push_back({"lm_head.weight", {v, h}});
  return specs;
}

} // namespace llmc
