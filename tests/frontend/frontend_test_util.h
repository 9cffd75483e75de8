// Helpers for the frontend tests: config.json texts of real model families
// (shrunk where the test writes weights), file writers, and a minimal
// safetensors writer (zero-filled data).
#pragma once

#include "frontend/model_spec.h"
#include "support/json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace llmc::test {

// Llama-2-7B's config.json, as published.
inline Json llama2Config() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05, "vocab_size": 32000, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "rope_scaling": null, "rope_theta": 10000.0,
    "tie_word_embeddings": false, "torch_dtype": "float16", "pretraining_tp": 1,
    "attention_bias": false, "pad_token_id": null, "use_cache": true})");
}

// Llama-3.1-8B's config.json (llama3 RoPE scaling, three EOS ids).
inline Json llama3Config() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05, "vocab_size": 128256, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "attention_bias": false,
    "mlp_bias": false})");
}

// Mistral-7B-v0.3's config.json (no sliding window).
inline Json mistralConfig() {
  return Json::parse(R"({
    "architectures": ["MistralForCausalLM"], "model_type": "mistral",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-05, "vocab_size": 32768, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "rope_theta": 1000000.0, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
}

// Qwen2.5-0.5B's config.json (tied embeddings, q/k/v biases, 14 heads of 64).
inline Json qwen2Config() {
  return Json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
    "max_window_layers": 24, "rms_norm_eps": 1e-06, "vocab_size": 151936,
    "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
    "rope_theta": 1000000.0, "sliding_window": 32768, "use_sliding_window": false,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16"})");
}

// gemma-2b's config.json, as published ("gelu" meaning the tanh GELU, tied
// embeddings, multi-query attention with head_dim 256).
inline Json gemmaConfig() {
  return Json::parse(R"({
    "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256,
    "hidden_act": "gelu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 16384, "max_position_embeddings": 8192, "num_attention_heads": 8,
    "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "use_cache": true,
    "vocab_size": 256000})");
}

// gemma-2-2b's config.json, as published (no layer_types: the even layers slide).
inline Json gemma2Config() {
  return Json::parse(R"({
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attention_bias": false,
    "attention_dropout": 0.0, "attn_logit_softcapping": 50.0, "bos_token_id": 2,
    "cache_implementation": "hybrid", "eos_token_id": [1, 107], "final_logit_softcapping": 30.0,
    "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
    "max_position_embeddings": 8192, "num_attention_heads": 8, "num_hidden_layers": 26,
    "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
    "torch_dtype": "float32", "use_cache": true, "vocab_size": 256000})");
}

// ibm-granite/granite-3.0-2b-instruct's config.json (the fields llmc reads).
inline Json graniteConfig() {
  return Json::parse(R"({
    "architectures": ["GraniteForCausalLM"], "model_type": "granite", "attention_bias": false,
    "attention_dropout": 0.1, "attention_multiplier": 0.015625, "bos_token_id": 0,
    "embedding_multiplier": 12.0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 8192, "logits_scaling": 8.0,
    "max_position_embeddings": 4096, "mlp_bias": false, "num_attention_heads": 32,
    "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
    "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 49155})");
}

// microsoft/Phi-3-mini-128k-instruct's config.json (the fields llmc reads;
// 48 factors each, as published).
inline Json phi3Config() {
  Json json = Json::parse(R"({
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_dropout": 0.0,
    "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
    "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "sliding_window": 262144, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "vocab_size": 32064})");
  std::vector<double> shortFactor(48, 1.05), longFactor(48, 1.0);
  for (int i = 0; i < 48; ++i)
    longFactor[i] = 1.0 + i;
  json["rope_scaling"] = {{"type", "su"}, {"short_factor", shortFactor},
                          {"long_factor", longFactor}};
  return json;
}

// A tiny Llama whose weights tests can write: H 8, I 12, 2 layers, 2 heads of
// 4, 1 KV head, vocab 16, context 32.
inline Json tinyConfig() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32,
    "rms_norm_eps": 1e-05, "vocab_size": 16, "bos_token_id": 1, "eos_token_id": 2,
    "tie_word_embeddings": false, "torch_dtype": "float32"})");
}

inline void writeText(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

struct FakeTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "F32";
};

inline size_t fakeDtypeSize(const std::string &dtype) {
  return dtype == "F32" || dtype == "I32" ? 4 : dtype == "I8" || dtype == "U8" ? 1 : 2;
}

// A valid .safetensors file holding `tensors` (zeros), in the order given.
inline void writeSafetensors(const std::string &path, const std::vector<FakeTensor> &tensors) {
  Json header = Json::object();
  uint64_t offset = 0;
  for (const FakeTensor &t : tensors) {
    uint64_t bytes = fakeDtypeSize(t.dtype);
    for (int64_t d : t.shape)
      bytes *= static_cast<uint64_t>(d);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0)
    text += ' ';
  std::string file;
  for (int i = 0; i < 8; ++i)
    file += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  file += text;
  file += std::string(offset, '\0');
  writeText(path, file);
}

// Asserts `message` names the file and the field.
inline void expectNames(const std::string &message, const std::string &file,
                        const std::string &field) {
  EXPECT_NE(message.find(file), std::string::npos) << "file '" << file << "' not in: " << message;
  EXPECT_NE(message.find(field), std::string::npos)
      << "field '" << field << "' not in: " << message;
}

// Parses `json` as config.json, expecting success (a failure is a test failure
// and gives a default config).
inline ModelConfig parseOk(const Json &json) {
  auto config = parseHfConfig(json, "config.json");
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : ModelConfig{};
}

// Parses `json` expecting an error that starts with "config.json: " and names
// `field`; returns the message ("" when it parsed).
inline std::string parseError(const Json &json, const std::string &field) {
  auto config = parseHfConfig(json, "config.json");
  EXPECT_FALSE(config.isOk()) << "expected an error naming '" << field << "'";
  if (config.isOk())
    return "";
  EXPECT_EQ(config.message().rfind("config.json: ", 0), 0u) << config.message();
  expectNames(config.message(), "config.json", field);
  return config.message();
}

} // namespace llmc::test
