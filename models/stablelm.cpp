// StableLmForCausalLM (StableLM 2, StableLM-3B-4E1T, StableCode): Llama's
// gate/up/down MLP and tensor names, with LayerNorm (with bias) for every norm.
// StableLmConfig's defaults: use_qkv_bias false (q/k/v biases; o_proj never
// has one), qk_layernorm false (a [head_dim] LayerNorm without bias per head,
// stored as q_layernorm.norms.<h>.weight), use_parallel_residual false (true:
// attention and MLP both read input_layernorm's output and there is no
// post_attention_layernorm), layer_norm_eps 1e-5, tie_word_embeddings false,
// hidden_act silu.
#include "models/layer_norm_family.h"

namespace llmc {
namespace {

class StableLm final : public LayerNormFamily {
public:
  std::string_view name() const override { return "StableLmForCausalLM"; }

  LayerNormNames names() const override {
    LayerNormNames n;
    n.qNorm = "self_attn.q_layernorm.norms";
    n.kNorm = "self_attn.k_layernorm.norms";
    n.normPerHeadTensors = true;
    return n;
  }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LayerNormBlock &block = config.layerNorm;
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    LLMC_ASSIGN_OR_RETURN(config.attentionBias, optionalBool(hf, "use_qkv_bias", false, source));
    config.attentionOutputBias = false;
    LLMC_ASSIGN_OR_RETURN(bool qkNorm, optionalBool(hf, "qk_layernorm", false, source));
    block.qkNorm = qkNorm ? LayerNormBlock::QkNorm::PerHead : LayerNormBlock::QkNorm::None;
    LLMC_ASSIGN_OR_RETURN(block.parallel, optionalBool(hf, "use_parallel_residual", false, source));
    block.sharedNorm = block.parallel;
    block.normBias = true;
    block.gatedMlp = true;
    LLMC_RETURN_IF_ERROR(readLayerNormEps(hf, "layer_norm_eps", source, config));
    return readLayerNormActivation(hf, source, "silu", config);
  }

  std::string explainUnusedTensor(const ModelConfig &config,
                                  const std::string &tensorName) const override {
    if (!config.layerNorm.parallel || tensorName.find("post_attention_layernorm") ==
                                          std::string::npos)
      return LayerNormFamily::explainUnusedTensor(config, tensorName);
    return "use_parallel_residual is true: the MLP reads input_layernorm's output";
  }
};

} // namespace

const LayerNormFamily &stableLmForCausalLM() {
  static const StableLm arch;
  return arch;
}

} // namespace llmc
