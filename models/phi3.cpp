#include "models/phi3.h"

#include "models/config_fields.h"
#include "models/llama.h"

namespace llmc {
namespace {

std::string packedQkv(int64_t layer) { return llamaLayerTensor(layer, "self_attn.qkv_proj.weight"); }
std::string packedGateUp(int64_t layer) { return llamaLayerTensor(layer, "mlp.gate_up_proj.weight"); }

bool isPacked(const std::string &name) {
  return name.find(".self_attn.q_proj.") != std::string::npos ||
         name.find(".self_attn.k_proj.") != std::string::npos ||
         name.find(".self_attn.v_proj.") != std::string::npos ||
         name.find(".mlp.gate_proj.") != std::string::npos ||
         name.find(".mlp.up_proj.") != std::string::npos;
}

// Rows [begin, begin + count) of `source` as Llama's tensor `name`.
DerivedTensor rowsOf(std::string name, const std::string &source, int64_t begin, int64_t count,
                     int64_t cols) {
  return {std::move(name), {count, cols}, {{source, begin, count}}};
}

// Phi3Config accepts only default and longrope RoPE, and rewrites a
// rope_type "yarn" to longrope: a yarn read as yarn would compute other
// frequencies than transformers, so it is refused with the fix.
Status checkRopeType(const Json &hf, const std::string &source, const ModelConfig &config) {
  using Kind = RopeScaling::Kind;
  const Kind kind = config.ropeScaling.kind;
  if (kind == Kind::None || kind == Kind::LongRope)
    return Status::ok();
  const char *holder = findField(hf, "rope_scaling") != nullptr &&
                               !findField(hf, "rope_scaling")->is_null()
                           ? "rope_scaling"
                           : "rope_parameters";
  if (kind == Kind::Yarn)
    return Status::error(source + ": field '" + holder +
                         ".rope_type': 'yarn' is read by Phi3Config as longrope; write "
                         "\"longrope\" with short_factor and long_factor");
  return Status::error(source + ": field '" + holder +
                       ".rope_type': Phi3ForCausalLM supports default and longrope (\"su\") "
                       "RoPE only, as Phi3Config does");
}

class Phi3 final : public LlamaLayout {
public:
  std::string_view name() const override { return "Phi3ForCausalLM"; }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    config.attentionBias = config.attentionOutputBias = config.mlpBias = false;
    LLMC_ASSIGN_OR_RETURN(config.mlpActivation,
                          readMlpActivation(hf, "hidden_act", "silu", false, source));
    if (findField(hf, "rms_norm_eps") == nullptr)
      config.rmsNormEps = 1e-5; // Phi3Config's default
    LLMC_RETURN_IF_ERROR(checkRopeType(hf, source, config));
    // sliding_window: null or absent is full attention, else every layer slides.
    LLMC_ASSIGN_OR_RETURN(int64_t window, readSlidingWindow(hf, 0, source));
    if (window == 0)
      return Status::ok();
    LLMC_ASSIGN_OR_RETURN(config.layerWindows,
                          readLayerWindows(hf, source, config, window,
                                           [](int64_t) { return true; }));
    return Status::ok();
  }

  // Llama's tensors with q/k/v_proj and gate/up_proj replaced by the packed two.
  std::vector<TensorSpec> expectedTensors(const ModelConfig &c) const override {
    const int64_t h = c.hiddenSize;
    const int64_t qkv = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    std::vector<TensorSpec> specs;
    for (TensorSpec &spec : llamaTensors(c)) {
      if (!isPacked(spec.name)) {
        specs.push_back(std::move(spec));
        continue;
      }
      // One packed tensor where the first of its parts was.
      const size_t dot = spec.name.find(".self_attn.q_proj.");
      const size_t gate = spec.name.find(".mlp.gate_proj.");
      const int64_t layer = std::stoll(spec.name.substr(std::string("model.layers.").size()));
      if (dot != std::string::npos)
        specs.push_back({packedQkv(layer), {qkv, h}});
      else if (gate != std::string::npos)
        specs.push_back({packedGateUp(layer), {2 * c.intermediateSize, h}});
    }
    return specs;
  }

  std::vector<DerivedTensor> derivedTensors(const ModelConfig &c) const override {
    const int64_t h = c.hiddenSize, q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim;
    const int64_t inter = c.intermediateSize;
    std::vector<DerivedTensor> derived;
    for (int64_t i = 0; i < c.numLayers; ++i) {
      const std::string qkv = packedQkv(i), gateUp = packedGateUp(i);
      derived.push_back(rowsOf(llamaLayerTensor(i, "self_attn.q_proj.weight"), qkv, 0, q, h));
      derived.push_back(rowsOf(llamaLayerTensor(i, "self_attn.k_proj.weight"), qkv, q, kv, h));
      derived.push_back(
          rowsOf(llamaLayerTensor(i, "self_attn.v_proj.weight"), qkv, q + kv, kv, h));
      derived.push_back(rowsOf(llamaLayerTensor(i, "mlp.gate_proj.weight"), gateUp, 0, inter, h));
      derived.push_back(rowsOf(llamaLayerTensor(i, "mlp.up_proj.weight"), gateUp, inter, inter, h));
    }
    return derived;
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    return llamaForCausalLM().explainUnusedTensor(config, tensorName);
  }
};

} // namespace

const Architecture &phi3ForCausalLM() {
  static const Phi3 arch;
  return arch;
}

} // namespace llmc
