// What `llmc build` accepts as its input, resolved to one ModelSpec:
//   - a model.json (docs/model-json.md): architecture spec inline or as a path
//     to a config.json, weight files (one, a list, or an index), tokenizer
//     path, default dtype, max sequence length; relative paths resolve
//     against the model.json's folder;
//   - a Hugging Face config.json (weights and tokenizer.json beside it);
//   - a Hugging Face model directory.
#pragma once

#include "frontend/generation_config.h"
#include "models/model_config.h"
#include "support/json.h"
#include "support/status.h"

#include <string>
#include <vector>

namespace llmc {

struct ModelSpec {
  std::string source;       // the path the user gave
  std::string configSource; // file the architecture came from (config.json or model.json)
  ModelConfig config;
  std::vector<std::string> weightFiles; // resolved .safetensors paths
  std::string weightIndex;              // model.safetensors.index.json when sharded, else ""
  std::string tokenizerPath;            // resolved tokenizer.json
  std::string dtype = "f32";            // default plan dtype: "f32", "f16" or "bf16"
  int64_t maxSeqLen = 0;                // 0: use config.maxPositionEmbeddings
  // tokenizer_config.json, chat_template.jinja (beside the tokenizer) and
  // generation_config.json (beside the config); its eos ids are already
  // joined into config.eosTokenIds.
  GenerationSettings generation;
};

// Parses a Hugging Face config.json object. `source` names the file in errors.
// Unknown architectures and missing or invalid fields are errors naming the
// file, the field and the supported values.
Expected<ModelConfig> parseHfConfig(const Json &config, const std::string &source);

struct SpecOptions {
  // false for --synthetic-weights builds: a spec without weight files is
  // accepted (weights that are named must still exist).
  bool requireWeights = true;
};

// Resolves a model.json, a config.json or a model directory.
Expected<ModelSpec> loadModelSpec(const std::string &path, const SpecOptions &options = {});

} // namespace llmc
