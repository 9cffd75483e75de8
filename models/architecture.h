// The architecture registry: every supported Hugging Face `architectures[0]`
// name maps to one Architecture, which owns that family's quirks (config
// fields only it reads, its defaults, what it rejects) and the list of weight
// tensors a config needs. The frontend parses the fields every decoder-only
// family shares (compiler/frontend/hf_config.cpp) and asks the Architecture
// for the rest; the graph builders read the same ModelConfig.
//
// Adding a family: implement Architecture in models/<family>.cpp and add it
// to the table in models/architecture.cpp.
#pragma once

#include "models/model_config.h"
#include "support/json.h"
#include "support/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

// One weight tensor a model needs, as named in the safetensors checkpoint.
struct TensorSpec {
  std::string name;           // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape; // row-major, e.g. [numHeads * headDim, hiddenSize]
};

class Architecture {
public:
  virtual ~Architecture() = default;

  // The Hugging Face class name, e.g. "LlamaForCausalLM".
  virtual std::string_view name() const = 0;

  // Reads the fields whose presence, default or meaning is specific to this
  // family from `hfConfig` into `config` (the shared fields are already
  // filled in), and rejects what the family supports in HF but llmc does not
  // (e.g. sliding-window attention). `source` names the file in errors.
  virtual Status applyConfig(const Json &hfConfig, const std::string &source,
                             ModelConfig &config) const = 0;

  // Every tensor `config` needs, with its shape. Plain data: no file access.
  virtual std::vector<TensorSpec> expectedTensors(const ModelConfig &config) const = 0;

  // Why a tensor the checkpoint holds is not used, when the family knows
  // (e.g. lm_head.weight with tied embeddings); "" when it does not.
  virtual std::string explainUnusedTensor(const ModelConfig &config,
                                          const std::string &tensorName) const {
    return "";
  }
};

// The architecture named `name`, or nullptr when it is not supported.
const Architecture *findArchitecture(std::string_view name);

// Supported names in registry order, and the same joined with ", " for messages.
std::vector<std::string> supportedArchitectureNames();
std::string supportedArchitectureList();

} // namespace llmc
