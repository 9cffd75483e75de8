// Hugging Face config.json -> ModelConfig. This file reads the fields every
// supported decoder-only family shares and checks that they are consistent;
// the family's Architecture (models/) reads its own fields and defaults.
#include "frontend/model_spec.h"
#include "models/architecture.h"

#include <cmath>

namespace llmc {
namespace {

// Sanity limits: far above any released model, low enough that every shape
// product the compiler forms (e.g. vocab * hidden) fits in int64.
constexpr int64_t kMaxHiddenSize = int64_t(1) << 17;
constexpr int64_t kMaxIntermediateSize = int64_t(1) << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxVocabSize = int64_t(1) << 24;
constexpr int64_t kMaxPositions = int64_t(1) << 30;

Status fieldError(const std::string &where, const std::string &field, const std::string &what) {
  return Status::error(where + ": field '" + field + "': " + what);
}

Expected<const Architecture *> readArchitecture(const Json &hf, const std::string &source) {
  const std::string supported = "supported: " + supportedArchitectureList();
  const Json *list = findField(hf, "architectures");
  if (list == nullptr || list->is_null())
    return Status::error(source + ": missing required field 'architectures' (a one-element list " +
                         "such as [\"LlamaForCausalLM\"]); " + supported);
  if (!list->is_array() || list->size() != 1)
    return fieldError(
        source, "architectures",
        std::string("expected a one-element list, got ") +
            (list->is_array() ? std::to_string(list->size()) + " elements" : jsonTypeName(*list)) +
            "; " + supported);
  const Json &name = (*list)[0];
  if (!name.is_string())
    return fieldError(source, "architectures[0]",
                      std::string("expected a string, got ") + jsonTypeName(name));
  const Architecture *arch = findArchitecture(name.get<std::string>());
  if (arch == nullptr)
    return Status::error(source + ": architectures[0] '" + name.get<std::string>() +
                         "' is not supported; " + supported);
  return arch;
}

// A required integer in [1, maxValue].
Expected<int64_t> readSize(const Json &hf, const char *key, int64_t maxValue,
                           const std::string &source) {
  LLMC_ASSIGN_OR_RETURN(int64_t value, requireInt(hf, key, source));
  if (value < 1 || value > maxValue)
    return fieldError(source, key,
                      "expected an integer in [1, " + std::to_string(maxValue) + "], got " +
                          std::to_string(value));
  return value;
}

// A finite number > 0 (absent or null: `fallback`).
Expected<double> readPositive(const Json &object, const char *key, double fallback,
                              const std::string &where) {
  LLMC_ASSIGN_OR_RETURN(double value, optionalNumber(object, key, fallback, where));
  if (!std::isfinite(value) || value <= 0)
    return fieldError(where, key, "expected a finite number > 0, got " + std::to_string(value));
  return value;
}

Expected<double> requirePositive(const Json &object, const char *key, const std::string &where) {
  LLMC_RETURN_IF_ERROR(requireNumber(object, key, where).status());
  return readPositive(object, key, 0.0, where);
}

Status readSizes(const Json &hf, const std::string &source, ModelConfig &c) {
  LLMC_ASSIGN_OR_RETURN(c.hiddenSize, readSize(hf, "hidden_size", kMaxHiddenSize, source));
  LLMC_ASSIGN_OR_RETURN(c.intermediateSize,
                        readSize(hf, "intermediate_size", kMaxIntermediateSize, source));
  LLMC_ASSIGN_OR_RETURN(c.numLayers, readSize(hf, "num_hidden_layers", kMaxLayers, source));
  LLMC_ASSIGN_OR_RETURN(c.numHeads, readSize(hf, "num_attention_heads", kMaxHeads, source));
  LLMC_ASSIGN_OR_RETURN(c.vocabSize, readSize(hf, "vocab_size", kMaxVocabSize, source));
  LLMC_ASSIGN_OR_RETURN(c.maxPositionEmbeddings,
                        readSize(hf, "max_position_embeddings", kMaxPositions, source));
  return Status::ok();
}

// num_key_value_heads (default: num_attention_heads) and head_dim (default:
// hidden_size / num_attention_heads, which must then divide exactly).
Status readHeads(const Json &hf, const std::string &source, ModelConfig &c) {
  c.numKvHeads = c.numHeads;
  if (const Json *kv = findField(hf, "num_key_value_heads"); kv && !kv->is_null()) {
    LLMC_ASSIGN_OR_RETURN(c.numKvHeads, readSize(hf, "num_key_value_heads", kMaxHeads, source));
  }
  if (c.numHeads % c.numKvHeads != 0)
    return fieldError(source, "num_key_value_heads",
                      std::to_string(c.numKvHeads) + " does not divide num_attention_heads " +
                          std::to_string(c.numHeads));
  if (const Json *hd = findField(hf, "head_dim"); hd && !hd->is_null()) {
    LLMC_ASSIGN_OR_RETURN(c.headDim, readSize(hf, "head_dim", kMaxHeadDim, source));
  } else if (c.hiddenSize % c.numHeads != 0) {
    return fieldError(source, "num_attention_heads",
                      std::to_string(c.numHeads) + " does not divide hidden_size " +
                          std::to_string(c.hiddenSize) + " (and no head_dim is given)");
  } else {
    c.headDim = c.hiddenSize / c.numHeads;
  }
  // RoPE rotates pairs (i, i + headDim / 2).
  if (c.headDim % 2 != 0 || c.headDim > kMaxHeadDim)
    return fieldError(source, "head_dim",
                      "head dimension " + std::to_string(c.headDim) + " must be even and at most " +
                          std::to_string(kMaxHeadDim));
  return Status::ok();
}

// `rope_scaling` (or transformers 5's `rope_parameters`): null, or an object
// whose "rope_type" (legacy key: "type") is default, linear, llama3 or dynamic.
Expected<RopeScaling> readRopeScaling(const Json &s, const std::string &where) {
  RopeScaling scaling;
  if (s.is_null())
    return scaling;
  if (!s.is_object())
    return Status::error(where + ": expected an object or null, got " + jsonTypeName(s));
  LLMC_ASSIGN_OR_RETURN(std::string type, optionalString(s, "rope_type", "", where));
  LLMC_ASSIGN_OR_RETURN(std::string legacy, optionalString(s, "type", "", where));
  if (!type.empty() && !legacy.empty() && type != legacy)
    return Status::error(where + ": fields 'rope_type' ('" + type + "') and 'type' ('" + legacy +
                         "') disagree");
  if (type.empty())
    type = legacy;
  const std::string supported =
      "supported: default, linear, llama3, dynamic (or rope_scaling null)";
  if (type.empty())
    return Status::error(where + ": missing required field 'rope_type' (or 'type'); " + supported);
  if (type == "default")
    return scaling;
  if (type == "dynamic") {
    // Dynamic NTK: transformers raises the base only for sequences longer
    // than max_position_embeddings (at that length its formula gives the
    // base unchanged), and a plan never runs past it (the driver caps
    // --max-seq-len there): plain RoPE at every position a plan can see.
    LLMC_RETURN_IF_ERROR(requirePositive(s, "factor", where).status());
    return scaling;
  }
  if (type == "linear") {
    scaling.kind = RopeScaling::Kind::Linear;
    LLMC_ASSIGN_OR_RETURN(scaling.factor, requirePositive(s, "factor", where));
    return scaling;
  }
  if (type != "llama3")
    return Status::error(where + ": field 'rope_type': '" + type + "' is not supported; " +
                         supported);
  scaling.kind = RopeScaling::Kind::Llama3;
  LLMC_ASSIGN_OR_RETURN(scaling.factor, requirePositive(s, "factor", where));
  LLMC_ASSIGN_OR_RETURN(scaling.lowFreqFactor, requirePositive(s, "low_freq_factor", where));
  LLMC_ASSIGN_OR_RETURN(scaling.highFreqFactor, requirePositive(s, "high_freq_factor", where));
  LLMC_ASSIGN_OR_RETURN(scaling.originalMaxPositionEmbeddings,
                        readSize(s, "original_max_position_embeddings", kMaxPositions, where));
  // The llama3 frequency blend divides by (high - low).
  if (scaling.highFreqFactor <= scaling.lowFreqFactor)
    return fieldError(where, "high_freq_factor",
                      "must be greater than low_freq_factor (" +
                          std::to_string(scaling.lowFreqFactor) + "), got " +
                          std::to_string(scaling.highFreqFactor));
  return scaling;
}

Status readRope(const Json &hf, const std::string &source, ModelConfig &c) {
  const Json *scaling = findField(hf, "rope_scaling");
  const Json *params = findField(hf, "rope_parameters");
  double theta = 10000.0;
  if ((scaling == nullptr || scaling->is_null()) && params != nullptr && params->is_object()) {
    const std::string where = source + ": rope_parameters";
    LLMC_ASSIGN_OR_RETURN(theta, readPositive(*params, "rope_theta", theta, where));
    LLMC_ASSIGN_OR_RETURN(c.ropeScaling, readRopeScaling(*params, where));
  } else if (scaling != nullptr) {
    LLMC_ASSIGN_OR_RETURN(c.ropeScaling, readRopeScaling(*scaling, source + ": rope_scaling"));
  }
  LLMC_ASSIGN_OR_RETURN(c.ropeTheta, readPositive(hf, "rope_theta", theta, source));
  return Status::ok();
}

// bos_token_id / eos_token_id: an integer, a list of integers, or null.
Expected<std::vector<int64_t>> readTokenIds(const Json &hf, const char *key, int64_t vocabSize,
                                            const std::string &source) {
  std::vector<int64_t> ids;
  const Json *field = findField(hf, key);
  if (field == nullptr || field->is_null())
    return ids;
  const bool isInt = field->is_number_integer();
  if (!isInt && !field->is_array())
    return fieldError(source, key,
                      std::string("expected an integer, a list of integers or null, got ") +
                          jsonTypeName(*field));
  for (const Json &id : isInt ? Json::array({*field}) : *field) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocabSize)
      return fieldError(source, key,
                        "expected token ids in [0, vocab_size " + std::to_string(vocabSize) +
                            "), got " + id.dump());
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

Status readMisc(const Json &hf, const std::string &source, ModelConfig &c) {
  LLMC_ASSIGN_OR_RETURN(c.modelType, optionalString(hf, "model_type", "", source));
  LLMC_ASSIGN_OR_RETURN(c.rmsNormEps, readPositive(hf, "rms_norm_eps", 1e-6, source));
  // The family decides what the activation means (and which field names it).
  LLMC_ASSIGN_OR_RETURN(c.hiddenAct, optionalString(hf, "hidden_act", "silu", source));
  // transformers >= 4.56 writes "dtype" where older versions wrote "torch_dtype".
  const char *dtypeKey = findField(hf, "torch_dtype") ? "torch_dtype" : "dtype";
  LLMC_ASSIGN_OR_RETURN(c.torchDtype, optionalString(hf, dtypeKey, "", source));
  LLMC_ASSIGN_OR_RETURN(c.bosTokenIds, readTokenIds(hf, "bos_token_id", c.vocabSize, source));
  LLMC_ASSIGN_OR_RETURN(c.eosTokenIds, readTokenIds(hf, "eos_token_id", c.vocabSize, source));
  return Status::ok();
}

} // namespace

Expected<ModelConfig> parseHfConfig(const Json &hf, const std::string &source) {
  if (!hf.is_object())
    return Status::error(source + ": expected a JSON object at the top level, got " +
                         jsonTypeName(hf));
  LLMC_ASSIGN_OR_RETURN(const Architecture *arch, readArchitecture(hf, source));
  ModelConfig config;
  config.architecture = std::string(arch->name());
  LLMC_RETURN_IF_ERROR(readSizes(hf, source, config));
  LLMC_RETURN_IF_ERROR(readHeads(hf, source, config));
  LLMC_RETURN_IF_ERROR(readRope(hf, source, config));
  LLMC_RETURN_IF_ERROR(readMisc(hf, source, config));
  LLMC_RETURN_IF_ERROR(arch->applyConfig(hf, source, config));
  return config;
}

} // namespace llmc
