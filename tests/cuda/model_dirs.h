// Model folders for the CUDA tests: a config.json of a given shape and a
// tiny tokenizer.json, built with --synthetic-weights (no weight files).
#pragma once

#include "common/test_paths.h"

#include <fstream>
#include <string>

namespace llmc::test {

// A 6-token BPE tokenizer: enough for plans built with synthetic weights.
inline const char *kTinyTokenizerJson = R"({
 "version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [
  {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
   "normalized": false, "special": true},
  {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
   "normalized": false, "special": true},
  {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
   "normalized": false, "special": true}],
 "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
 "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
           "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
           "byte_fallback": false,
           "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "ab": 5},
           "merges": ["a b"]}})";

// stories260K's shape: dim 64, 5 layers, 8 heads / 4 KV heads of 8,
// intermediate 172 (not a multiple of 8), vocab 512, context 512.
inline const char *kStories260kShape = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5,
  "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 512,
  "rms_norm_eps": 1e-05, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2,
  "rope_theta": 10000.0, "tie_word_embeddings": true, "torch_dtype": "float32"})";

// A Qwen2 of tests/data/hf/qwen2's shape: q/k/v with biases (so int4 plans
// have RmsNormLinearQ4 steps with a bias, five weights), dim 64, 2 layers,
// 4 heads / 2 KV heads of 16, intermediate 96, vocab 512, context 256.
inline const char *kQwen2Shape = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
  "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
  "rms_norm_eps": 1e-06, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "rope_theta": 1000000.0, "use_sliding_window": false,
  "tie_word_embeddings": true, "torch_dtype": "float32"})";

// Llama-3-8B's shape (llama3 RoPE scaling), context 8192.
inline const char *kLlama3_8bShape = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-05, "vocab_size": 128256, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "rope_theta": 500000.0,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": false, "torch_dtype": "bfloat16"})";

// Writes config.json and tokenizer.json into a fresh scratch folder.
inline std::string writeModelDir(const std::string &name, const std::string &config) {
  std::string dir = scratchDir(name);
  std::ofstream(dir + "/config.json") << config;
  std::ofstream(dir + "/tokenizer.json") << kTinyTokenizerJson;
  return dir;
}

} // namespace llmc::test
