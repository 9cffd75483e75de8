// A tiny Llama plan with synthetic weights and the default model's
// tokenizer (byte-level, 512 ids), built through the driver: generation
// tests that need no ../shared. The text is noise, but deterministic.
#pragma once

#include "common/test_paths.h"
#include "driver/build.h"
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace llmc::test {

// hidden 32, 2 layers, 4 heads / 2 KV heads, vocab 512, context `context`.
inline std::string tinyLlamaConfig(int context, const std::string &extra = "") {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
    "max_position_embeddings": )" +
         std::to_string(context) + R"(, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": true, "bos_token_id": 0,
    "eos_token_id": 1, "torch_dtype": "float32")" +
         extra + "}";
}

// Writes config.json (and the default model's tokenizer.json) into a fresh
// folder; returns the folder.
inline std::string writeTinyModelDir(const std::string &name, const std::string &config) {
  std::string dir = scratchDir(name);
  std::ofstream(dir + "/config.json") << config;
  std::filesystem::copy_file(std::string(LLMC_SOURCE_DIR) + "/scripts/default-model/tokenizer.json",
                             dir + "/tokenizer.json");
  return dir;
}

// Builds `dir` into dir/model.plan (CPU target only, synthetic weights).
inline std::string buildPlan(const std::string &dir) {
  BuildOptions options;
  options.input = dir;
  options.output = dir + "/model.plan";
  options.syntheticSeed = 7;
  options.targets = "cpu";
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  return options.output;
}

inline std::unique_ptr<Engine> loadEngine(const std::string &plan) {
  EngineOptions options;
  options.threads = 1;
  auto engine = Engine::load(plan, options);
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

} // namespace llmc::test
