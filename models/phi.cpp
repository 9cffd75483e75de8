// PhiForCausalLM (Phi-1, Phi-1.5, Phi-2): a parallel block, x + attn(n(x)) +
// mlp(n(x)) with one LayerNorm (with bias); biases on q, k, v, dense, the
// plain MLP act(fc1 x) -> fc2 and lm_head; the final norm is
// model.final_layernorm. PhiConfig's defaults: qk_layernorm false (one
// [head_dim] LayerNorm with bias shared by the heads), layer_norm_eps 1e-5,
// tie_word_embeddings false, hidden_act gelu_new.
#include "models/layer_norm_family.h"

namespace llmc {
namespace {

class Phi final : public LayerNormFamily {
public:
  std::string_view name() const override { return "PhiForCausalLM"; }

  LayerNormNames names() const override {
    LayerNormNames n;
    n.o = "self_attn.dense";
    n.qNorm = "self_attn.q_layernorm";
    n.kNorm = "self_attn.k_layernorm";
    n.up = "mlp.fc1";
    n.down = "mlp.fc2";
    n.finalNorm = "model.final_layernorm";
    return n;
  }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LayerNormBlock &block = config.layerNorm;
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", false, source));
    config.attentionBias = config.attentionOutputBias = true;
    LLMC_ASSIGN_OR_RETURN(bool qkNorm, optionalBool(hf, "qk_layernorm", false, source));
    // PhiAttention sizes the q/k norms hidden_size / num_attention_heads.
    if (qkNorm && config.headDim * config.numHeads != config.hiddenSize)
      return Status::error(source + ": field 'qk_layernorm': true needs head_dim (" +
                           std::to_string(config.headDim) + ") = hidden_size / " +
                           "num_attention_heads (" +
                           std::to_string(config.hiddenSize / config.numHeads) +
                           ") as in transformers' PhiAttention; remove head_dim or set it so");
    block.qkNorm = qkNorm ? LayerNormBlock::QkNorm::Shared : LayerNormBlock::QkNorm::None;
    block.parallel = block.sharedNorm = true;
    block.normBias = true;
    block.gatedMlp = false;
    block.mlpBias = true;
    block.lmHeadBias = true;
    LLMC_RETURN_IF_ERROR(readLayerNormEps(hf, "layer_norm_eps", source, config));
    return readLayerNormActivation(hf, source, "gelu_new", config);
  }
};

} // namespace

const LayerNormFamily &phiForCausalLM() {
  static const Phi arch;
  return arch;
}

} // namespace llmc
