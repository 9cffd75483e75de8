// Architecture hyperparameters of a decoder-only transformer, as read from a
// Hugging Face config.json (compiler/frontend/hf_config.cpp parses it; the
// architecture files in models/ decide what each field means).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmc {

// RoPE frequency scaling (config.json "rope_scaling" / "rope_parameters",
// rope_type or its legacy spelling "type"). The math is
// runtime/kernels/common/rope.h; the fields keep transformers' names.
struct RopeScaling {
  enum class Kind { None, Linear, Llama3, Dynamic, Yarn, LongRope };
  Kind kind = Kind::None;
  double factor = 1.0;                       // linear, llama3, dynamic, yarn, longrope
  double lowFreqFactor = 1.0;                // llama3
  double highFreqFactor = 4.0;               // llama3
  // llama3, yarn, longrope: original_max_position_embeddings (for longrope
  // the config's top-level field wins, as in transformers); dynamic:
  // max_position_embeddings, past which its base grows.
  int64_t originalMaxPositionEmbeddings = 0;
  double betaFast = 32.0; // yarn
  double betaSlow = 1.0;  // yarn
  bool truncate = true;   // yarn: floor/ceil the ramp bounds
  // yarn, longrope: cos and sin are multiplied by it; resolved from the
  // config (attention_factor, else mscale/mscale_all_dim, else factor).
  double attentionFactor = 1.0;
  std::vector<float> shortFactor, longFactor; // longrope: rotaryDim / 2 each
};

// One layer's RoPE, for the families whose layers differ in it.
struct LayerRope {
  bool rotates = true;    // false: NoPE, q and k reach attention unrotated (EXAONE 4)
  double theta = 10000.0; // rope_theta of this layer's type
  RopeScaling scaling;
};

// The MLP's gate activation: act(gate_proj(x)) * up_proj(x).
enum class MlpActivation {
  Silu,     // SwiGLU (hidden_act silu / swish)
  GeluTanh, // GeGLU with GELU's tanh approximation (gelu_pytorch_tanh, gelu_new)
  GeluErf,  // GeGLU with exact GELU (Gemma2's hidden_activation "gelu")
};

// RMSNorms of the attention's q and k projections, before RoPE.
enum class QkNorm {
  None,
  PerHead, // Qwen3, Gemma3, EXAONE 4: self_attn.{q,k}_norm.weight [headDim], each head alone
  Full,    // OLMo2: over the whole projection, weights [numHeads * D] and [numKvHeads * D]
};

// The block of the LayerNorm families (models/layer_norm_family.h: StableLM,
// Starcoder2, Cohere, Phi, GPT-NeoX); the RMSNorm families leave it as is.
struct LayerNormBlock {
  // Per-head LayerNorm of q and k after their projections (before RoPE).
  enum class QkNorm {
    None,
    Shared,  // one [head_dim] weight and bias for every head (Phi's q_layernorm)
    PerHead, // a [head_dim] weight per head, no bias (Cohere's q_norm, StableLM's)
  };
  double eps = 1e-5;       // layer_norm_eps / norm_epsilon
  bool normBias = true;    // the norms add a bias (all but Cohere)
  // Parallel block: x + attn(n(x)) + mlp(n'(x)), n' = n when `sharedNorm`
  // (Phi, Cohere, StableLM), the MLP's own norm otherwise (GPT-NeoX).
  bool parallel = false;
  bool sharedNorm = false;
  bool gatedMlp = true;    // act(gate) * up -> down; false: act(fc1 x) -> fc2
  bool mlpBias = false;    // biases on the MLP's projections
  QkNorm qkNorm = QkNorm::None;
  bool lmHeadBias = false; // Phi's lm_head.bias
  double logitScale = 1.0; // Cohere's logit_scale multiplies the logits
};

struct ModelConfig {
  std::string architecture; // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"
  std::string modelType;    // config.json "model_type", e.g. "llama"
  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0; // == numHeads when the config omits num_key_value_heads
  int64_t headDim = 0;    // config "head_dim" when present, else hiddenSize / numHeads
  int64_t vocabSize = 0;
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  RopeScaling ropeScaling;
  // Features RoPE rotates per head: int(headDim * partial_rotary_factor)
  // (NeoX: rotary_pct; GPT-J style configs: rotary_dim), == headDim by default.
  int64_t rotaryDim = 0;
  // Pairs (2i, 2i + 1) (Cohere, GPT-J) instead of the halves (i, i + rotaryDim / 2).
  bool ropeInterleaved = false;
  bool tieWordEmbeddings = false;
  bool attentionBias = false;       // q/k/v projections carry a bias (Qwen2; Llama attention_bias)
  bool attentionOutputBias = false; // o_proj carries a bias too (Llama attention_bias only)
  bool mlpBias = false; // gate/up/down_proj carry biases (Llama-layout `mlp_bias`)
  std::string hiddenAct = "silu"; // config "hidden_act" as written ("silu" when absent)
  MlpActivation mlpActivation = MlpActivation::Silu;
  // Gemma: RMSNorm scales by (normOffset + w) (1.0; the checkpoint stores w - 1).
  double normOffset = 0.0;
  // Gemma: embeddings are multiplied by sqrt(hidden_size) (1.0: not scaled).
  double embeddingScale = 1.0;
  // Attention scores are q.k * attentionScale: headDim^-0.5 unless the family
  // says otherwise (Gemma2: query_pre_attn_scalar^-0.5).
  double attentionScale = 0.0;
  // Soft-capping c * tanh(x / c) of attention scores and of the logits (0: off).
  double attentionSoftcap = 0.0;
  double finalLogitSoftcap = 0.0;
  // Granite: the attention and MLP outputs are multiplied by residualScale
  // before their residual adds (residual_multiplier), and the logits by
  // logitScale (1 / logits_scaling). 1.0: neither.
  double residualScale = 1.0;
  double logitScale = 1.0;
  // Per layer: the sliding window of its attention (a query at p sees keys
  // p - w < j <= p), 0 for global attention. Empty or numLayers entries.
  std::vector<int64_t> layerWindows;
  // Per layer (empty, or numLayers entries): each layer's RoPE, when the
  // family's layers differ (Gemma3: a local base on its sliding layers;
  // EXAONE 4: no RoPE on its global layers). Empty: every layer rotates by
  // ropeTheta and ropeScaling.
  std::vector<LayerRope> layerRopes;
  // `rope_parameters` keyed by layer type (transformers 5 writes Gemma3's so):
  // ropeTheta / ropeScaling hold the "full_attention" entry, this the
  // "sliding_attention" one. A theta of 0 here or in ropeTheta: the entry
  // and the config's top level give none (the family's default applies).
  // Only a family that turns it into layerRopes accepts such a config.
  std::optional<LayerRope> slidingAttentionRope;
  // Gemma2's sandwich norms: the attention and MLP outputs are normalized
  // (post_attention_layernorm, post_feedforward_layernorm) before their
  // residual add, and the MLP input by pre_feedforward_layernorm.
  bool sandwichNorms = false;
  // OLMo2 / EXAONE 4 post-norms: no input_layernorm and no norm before the
  // MLP; the attention output goes through post_attention_layernorm and the
  // MLP output through post_feedforward_layernorm before their residual adds.
  bool postNormsOnly = false;
  QkNorm qkNorm = QkNorm::None;
  LayerNormBlock layerNorm; // read by the LayerNorm families only
  std::string torchDtype; // "float32", "bfloat16", ... ("" when absent)
  std::vector<int64_t> bosTokenIds;
  std::vector<int64_t> eosTokenIds;
};

} // namespace llmc
