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

// A tensor the graph reads that the checkpoint stores inside another: the
// rows [begin, begin + count) of each piece, in order, stacked (the first
// dimension of a matrix, the elements of a vector). GPT-NeoX's packed
// query_key_value holds q, k and v interleaved per head; StableLM's per-head
// q/k norms are one tensor per head. The frontend materializes them at import
// (compiler/frontend/derived_tensors.h); the checkpoint check still checks the
// source tensors, which expectedTensors lists.
struct DerivedTensor {
  struct Piece {
    std::string source; // a tensor of expectedTensors
    int64_t begin = 0;
    int64_t count = 0;
  };
  std::string name;           // e.g. "gpt_neox.layers.0.attention.query_key_value.weight:q"
  std::vector<int64_t> shape; // its shape: sum of the counts, then the source's other dims
  std::vector<Piece> pieces;
};

// A config.json name that a family's published checkpoints spell
// differently from the name the shared reader uses (transformers'
// attribute_map): EXAONE 3.x writes `num_layers` for `num_hidden_layers`.
struct ConfigAlias {
  const char *published; // e.g. "num_layers"
  const char *canonical; // e.g. "num_hidden_layers"
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

  // The names this family's configs may spell differently (none for most).
  // The shared reader reads the published name where the config has it; the
  // family checks the two against each other (a config with both).
  virtual std::vector<ConfigAlias> configAliases() const { return {}; }

  // Every tensor `config` needs, with its shape. Plain data: no file access.
  virtual std::vector<TensorSpec> expectedTensors(const ModelConfig &config) const = 0;

  // The tensors the graph reads that are parts of checkpoint tensors (none
  // for most families). The graph reads every tensor of expectedTensors that
  // no derived tensor has as a source, plus the derived ones.
  virtual std::vector<DerivedTensor> derivedTensors(const ModelConfig &config) const {
    return {};
  }

  // Why a tensor the checkpoint holds is not used, when the family knows
  // (e.g. lm_head.weight with tied embeddings); "" when it does not.
  virtual std::string explainUnusedTensor(const ModelConfig &config,
                                          const std::string &tensorName) const {
    return "";
  }
};

// The tensors the graph of `config` reads, with their shapes: expectedTensors
// with each derived tensor's sources replaced by the derived tensors.
std::vector<TensorSpec> graphTensors(const Architecture &arch, const ModelConfig &config);

// The key `hf` gives `canonical` under: `arch`'s published alias of it
// unless `hf` has only `canonical` (so a missing field is named as the
// family publishes it), else `canonical` itself.
std::string configKey(const Architecture &arch, const Json &hf, const std::string &canonical);

// The architecture named `name`, or nullptr when it is not supported.
const Architecture *findArchitecture(std::string_view name);

// Supported names in registry order, and the same joined with ", " for messages.
std::vector<std::string> supportedArchitectureNames();
std::string supportedArchitectureList();

} // namespace llmc
