// CohereForCausalLM (Command R, Command R+, Aya 23): a parallel block,
// x + attn(n(x)) + mlp(n(x)) with one LayerNorm without bias; Llama's q/k/v/o
// and gate/up/down names; RoPE on interleaved pairs (2i, 2i + 1); the logits
// multiplied by `logit_scale`. CohereConfig's
// defaults: attention_bias false (on q, k, v and o), use_qk_norm false (a
// LayerNorm without bias over each head, its weight [heads, head_dim]),
// layer_norm_eps 1e-5, logit_scale 0.0625, tie_word_embeddings true,
// hidden_act silu.
#include "models/layer_norm_family.h"

#include <cmath>

namespace llmc {
namespace {

constexpr double kDefaultLogitScale = 0.0625;

Expected<double> readLogitScale(const Json &hf, const std::string &source) {
  const Json *field = findField(hf, "logit_scale");
  if (field == nullptr)
    return kDefaultLogitScale;
  if (field->is_null())
    return Status::error(source + ": field 'logit_scale': null is not supported (transformers " +
                         "multiplies the logits by it); give a finite number, e.g. 0.0625");
  LLMC_ASSIGN_OR_RETURN(double scale, optionalNumber(hf, "logit_scale", kDefaultLogitScale, source));
  if (!std::isfinite(scale) || scale == 0)
    return Status::error(source + ": field 'logit_scale': expected a finite non-zero number, got " +
                         field->dump());
  return scale;
}

class Cohere final : public LayerNormFamily {
public:
  std::string_view name() const override { return "CohereForCausalLM"; }

  LayerNormNames names() const override {
    LayerNormNames n;
    n.qNorm = "self_attn.q_norm";
    n.kNorm = "self_attn.k_norm";
    return n;
  }

  Status applyConfig(const Json &hf, const std::string &source,
                     ModelConfig &config) const override {
    LayerNormBlock &block = config.layerNorm;
    LLMC_ASSIGN_OR_RETURN(config.tieWordEmbeddings,
                          optionalBool(hf, "tie_word_embeddings", true, source));
    LLMC_ASSIGN_OR_RETURN(bool bias, optionalBool(hf, "attention_bias", false, source));
    config.attentionBias = config.attentionOutputBias = bias;
    LLMC_ASSIGN_OR_RETURN(bool qkNorm, optionalBool(hf, "use_qk_norm", false, source));
    block.qkNorm = qkNorm ? LayerNormBlock::QkNorm::PerHead : LayerNormBlock::QkNorm::None;
    // CohereRotaryEmbedding repeats each frequency twice: pairs (2i, 2i + 1).
    config.ropeInterleaved = true;
    block.parallel = block.sharedNorm = true;
    block.normBias = false;
    block.gatedMlp = true;
    LLMC_ASSIGN_OR_RETURN(block.logitScale, readLogitScale(hf, source));
    LLMC_RETURN_IF_ERROR(readLayerNormEps(hf, "layer_norm_eps", source, config));
    return readLayerNormActivation(hf, source, "silu", config);
  }
};

} // namespace

const LayerNormFamily &cohereForCausalLM() {
  static const Cohere arch;
  return arch;
}

} // namespace llmc
