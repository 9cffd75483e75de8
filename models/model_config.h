// Architecture hyperparameters of a decoder-only transformer, as read from a
// Hugging Face config.json (compiler/frontend/hf_config.cpp parses it; the
// architecture files in models/ decide what each field means).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

// RoPE frequency scaling (config.json "rope_scaling").
struct RopeScaling {
  enum class Kind { None, Linear, Llama3 };
  Kind kind = Kind::None;
  double factor = 1.0;                       // linear and llama3
  double lowFreqFactor = 1.0;                // llama3
  double highFreqFactor = 4.0;               // llama3
  int64_t originalMaxPositionEmbeddings = 0; // llama3
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
  bool tieWordEmbeddings = false;
  bool attentionBias = false;       // q/k/v projections carry a bias (Qwen2; Llama attention_bias)
  bool attentionOutputBias = false; // o_proj carries a bias too (Llama attention_bias only)
  std::string hiddenAct = "silu";
  std::string torchDtype; // "float32", "bfloat16", ... ("" when absent)
  std::vector<int64_t> bosTokenIds;
  std::vector<int64_t> eosTokenIds;
};

} // namespace llmc
