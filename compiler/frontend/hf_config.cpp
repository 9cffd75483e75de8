// Hugging Face config.json -> ModelConfig. This file reads the fields every
// supported decoder-only family shares and checks that they are consistent;
// the family's Architecture (models/) reads its own fields and defaults.
#include "frontend/model_spec.h"

#include "kernels/common/rope_params.h"
#include "models/architecture.h"
#include "models/unsupported_features.h"

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
  // What a recognised class, or the config, asks for that llmc lacks, by name.
  if (arch == nullptr)
    LLMC_RETURN_IF_ERROR(explainUnsupportedClass(hf, name.get<std::string>(), source, supported));
  else
    LLMC_RETURN_IF_ERROR(checkUnsupportedFeatures(hf, name.get<std::string>(), source));
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

Status readSizes(const Json &hf, const Architecture &arch, const std::string &source,
                 ModelConfig &c) {
  LLMC_ASSIGN_OR_RETURN(c.hiddenSize, readSize(hf, "hidden_size", kMaxHiddenSize, source));
  LLMC_ASSIGN_OR_RETURN(c.intermediateSize,
                        readSize(hf, "intermediate_size", kMaxIntermediateSize, source));
  const std::string layersKey = configKey(arch, hf, "num_hidden_layers");
  LLMC_ASSIGN_OR_RETURN(c.numLayers, readSize(hf, layersKey.c_str(), kMaxLayers, source));
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

// The pretraining length the scaling was fitted to: the config's top-level
// `original_max_position_embeddings` (Phi-3 writes it there; transformers
// gives it priority), else the scaling's own, else max_position_embeddings.
Expected<int64_t> readOriginalMax(const Json &hf, const Json &s, const std::string &source,
                                  const std::string &where, const ModelConfig &c) {
  const char *key = "original_max_position_embeddings";
  if (const Json *top = findField(hf, key); top && !top->is_null())
    return readSize(hf, key, kMaxPositions, source);
  if (const Json *own = findField(s, key); own && !own->is_null())
    return readSize(s, key, kMaxPositions, where);
  return c.maxPositionEmbeddings;
}

// longrope's short_factor / long_factor: rotaryDim / 2 finite numbers > 0.
Expected<std::vector<float>> readLongRopeFactors(const Json &s, const char *key,
                                                 const std::string &where, int64_t pairs) {
  const Json *field = findField(s, key);
  if (field == nullptr || !field->is_array())
    return fieldError(where, key,
                      "expected a list of " + std::to_string(pairs) +
                          " numbers (one per rotated pair), got " +
                          (field ? jsonTypeName(*field) : std::string("nothing")));
  if (static_cast<int64_t>(field->size()) != pairs)
    return fieldError(where, key,
                      "expected " + std::to_string(pairs) + " entries (rotary dim / 2), got " +
                          std::to_string(field->size()));
  std::vector<float> factors;
  for (const Json &f : *field) {
    if (!f.is_number() || !std::isfinite(f.get<double>()) || f.get<double>() <= 0)
      return fieldError(where, key, "expected numbers > 0, got " + f.dump());
    factors.push_back(static_cast<float>(f.get<double>()));
  }
  return factors;
}

Status readYarn(const Json &hf, const Json &s, const std::string &source, const std::string &where,
                ModelConfig &c) {
  RopeScaling &r = c.ropeScaling;
  LLMC_ASSIGN_OR_RETURN(r.originalMaxPositionEmbeddings, readOriginalMax(hf, s, source, where, c));
  LLMC_ASSIGN_OR_RETURN(r.factor, readPositive(s, "factor",
                                               static_cast<double>(c.maxPositionEmbeddings) /
                                                   r.originalMaxPositionEmbeddings,
                                               where));
  LLMC_ASSIGN_OR_RETURN(r.betaFast, readPositive(s, "beta_fast", 32.0, where));
  LLMC_ASSIGN_OR_RETURN(r.betaSlow, readPositive(s, "beta_slow", 1.0, where));
  LLMC_ASSIGN_OR_RETURN(r.truncate, optionalBool(s, "truncate", true, where));
  LLMC_ASSIGN_OR_RETURN(double mscale, optionalNumber(s, "mscale", 0.0, where));
  LLMC_ASSIGN_OR_RETURN(double mscaleAllDim, optionalNumber(s, "mscale_all_dim", 0.0, where));
  LLMC_ASSIGN_OR_RETURN(
      r.attentionFactor,
      readPositive(s, "attention_factor",
                   hd::ropeYarnAttentionFactor(r.factor, mscale, mscaleAllDim), where));
  return Status::ok();
}

Status readLongRope(const Json &hf, const Json &s, const std::string &source,
                    const std::string &where, ModelConfig &c) {
  RopeScaling &r = c.ropeScaling;
  LLMC_ASSIGN_OR_RETURN(r.originalMaxPositionEmbeddings, readOriginalMax(hf, s, source, where, c));
  LLMC_ASSIGN_OR_RETURN(r.factor, readPositive(s, "factor",
                                               static_cast<double>(c.maxPositionEmbeddings) /
                                                   r.originalMaxPositionEmbeddings,
                                               where));
  LLMC_ASSIGN_OR_RETURN(r.attentionFactor,
                        readPositive(s, "attention_factor",
                                     hd::ropeLongRopeAttentionFactor(
                                         r.factor, r.originalMaxPositionEmbeddings),
                                     where));
  LLMC_ASSIGN_OR_RETURN(r.shortFactor,
                        readLongRopeFactors(s, "short_factor", where, c.rotaryDim / 2));
  LLMC_ASSIGN_OR_RETURN(r.longFactor, readLongRopeFactors(s, "long_factor", where, c.rotaryDim / 2));
  return Status::ok();
}

Status readLlama3(const Json &hf, const Json &s, const std::string &source,
                  const std::string &where, ModelConfig &c) {
  RopeScaling &r = c.ropeScaling;
  LLMC_ASSIGN_OR_RETURN(r.factor, requirePositive(s, "factor", where));
  LLMC_ASSIGN_OR_RETURN(r.lowFreqFactor, requirePositive(s, "low_freq_factor", where));
  LLMC_ASSIGN_OR_RETURN(r.highFreqFactor, requirePositive(s, "high_freq_factor", where));
  if (findField(s, "original_max_position_embeddings") == nullptr &&
      findField(hf, "original_max_position_embeddings") == nullptr)
    return fieldError(where, "original_max_position_embeddings",
                      "is required by rope_type 'llama3' (Llama 3.1 writes 8192)");
  LLMC_ASSIGN_OR_RETURN(r.originalMaxPositionEmbeddings, readOriginalMax(hf, s, source, where, c));
  // The llama3 frequency blend divides by (high - low).
  if (r.highFreqFactor <= r.lowFreqFactor)
    return fieldError(where, "high_freq_factor",
                      "must be greater than low_freq_factor (" + std::to_string(r.lowFreqFactor) +
                          "), got " + std::to_string(r.highFreqFactor));
  return Status::ok();
}

// `rope_scaling` (or transformers 5's `rope_parameters`): null, or an object
// whose "rope_type" (legacy key: "type") is one of kSupportedRopeTypes.
// "su" is Phi-3's old name of longrope.
Status readRopeScaling(const Json &hf, const Json &s, const std::string &source,
                       const std::string &where, ModelConfig &c) {
  if (s.is_null())
    return Status::ok();
  if (!s.is_object())
    return Status::error(where + ": expected an object or null, got " + jsonTypeName(s));
  LLMC_ASSIGN_OR_RETURN(std::string type, optionalString(s, "rope_type", "", where));
  LLMC_ASSIGN_OR_RETURN(std::string legacy, optionalString(s, "type", "", where));
  if (!type.empty() && !legacy.empty() && type != legacy)
    return Status::error(where + ": fields 'rope_type' ('" + type + "') and 'type' ('" + legacy +
                         "') disagree");
  if (type.empty())
    type = legacy;
  const std::string supported = "supported: default, linear, llama3, dynamic, yarn, longrope "
                                "(or su), or rope_scaling null";
  if (type.empty())
    return Status::error(where + ": missing required field 'rope_type' (or 'type'); " + supported);
  RopeScaling &r = c.ropeScaling;
  if (type == "default")
    return Status::ok();
  if (type == "linear" || type == "dynamic") {
    r.kind = type == "linear" ? RopeScaling::Kind::Linear : RopeScaling::Kind::Dynamic;
    LLMC_ASSIGN_OR_RETURN(r.factor, requirePositive(s, "factor", where));
    // Dynamic NTK grows its base past max_position_embeddings (and at that
    // length its formula gives the base unchanged).
    r.originalMaxPositionEmbeddings = c.maxPositionEmbeddings;
    return Status::ok();
  }
  if (type == "llama3") {
    r.kind = RopeScaling::Kind::Llama3;
    return readLlama3(hf, s, source, where, c);
  }
  if (type == "yarn") {
    r.kind = RopeScaling::Kind::Yarn;
    return readYarn(hf, s, source, where, c);
  }
  if (type == "longrope" || type == "su") {
    r.kind = RopeScaling::Kind::LongRope;
    return readLongRope(hf, s, source, where, c);
  }
  return Status::error(where + ": field 'rope_type': '" + type + "' is not supported; " +
                       supported);
}

// The rotated features per head: `rotary_dim` (GPT-J style), else
// int(head_dim * partial_rotary_factor) (top level or in rope_parameters;
// NeoX spells it rotary_pct). Even, in [2, head_dim].
Status readRotaryDim(const Json &hf, const Json *params, const std::string &source,
                     ModelConfig &c) {
  c.rotaryDim = c.headDim;
  if (const Json *dim = findField(hf, "rotary_dim"); dim && !dim->is_null()) {
    LLMC_ASSIGN_OR_RETURN(c.rotaryDim, readSize(hf, "rotary_dim", c.headDim, source));
  } else {
    const char *key = findField(hf, "rotary_pct") ? "rotary_pct" : "partial_rotary_factor";
    const Json *holder = &hf;
    std::string where = source;
    if (!findField(hf, key) && params != nullptr && params->is_object() &&
        findField(*params, "partial_rotary_factor")) {
      holder = params;
      where = source + ": rope_parameters";
    }
    LLMC_ASSIGN_OR_RETURN(double fraction, readPositive(*holder, key, 1.0, where));
    if (fraction > 1.0)
      return fieldError(where, key, "expected a fraction in (0, 1], got " + std::to_string(fraction));
    c.rotaryDim = hd::ropeRotaryDim(static_cast<int>(c.headDim), fraction);
  }
  if (c.rotaryDim < 2 || c.rotaryDim % 2 != 0)
    return fieldError(source, "rotary_dim",
                      "RoPE needs an even number of rotated features >= 2, got " +
                          std::to_string(c.rotaryDim) + " of head_dim " +
                          std::to_string(c.headDim));
  return Status::ok();
}

// transformers 5's rope_parameters keyed by layer type (Gemma3 writes
// {"full_attention": {...}, "sliding_attention": {...}}).
bool keyedByLayerType(const Json *params) {
  return params != nullptr && params->is_object() &&
         (params->contains("full_attention") || params->contains("sliding_attention"));
}

// One entry of a keyed rope_parameters: its scaling, and its rope_theta (0
// when the entry gives none: the family's default). Null or absent is
// transformers' {"rope_type": "default"}.
Expected<LayerRope> readLayerTypeRope(const Json &hf, const Json &params, const char *type,
                                      const std::string &source, const ModelConfig &c) {
  const std::string where = source + ": rope_parameters." + type;
  LayerRope rope;
  rope.theta = 0.0;
  const Json *entry = findField(params, type);
  if (entry == nullptr || entry->is_null())
    return rope;
  if (!entry->is_object())
    return Status::error(where + ": expected an object or null, got " + jsonTypeName(*entry));
  LLMC_ASSIGN_OR_RETURN(double fraction, readPositive(*entry, "partial_rotary_factor", 1.0, where));
  if (fraction != 1.0)
    return fieldError(where, "partial_rotary_factor",
                      "partial rotary per layer type is not supported; supported: 1.0 (or absent)");
  ModelConfig scratch = c;
  scratch.ropeScaling = RopeScaling();
  LLMC_RETURN_IF_ERROR(readRopeScaling(hf, *entry, source, where, scratch));
  rope.scaling = scratch.ropeScaling;
  if (const Json *theta = findField(*entry, "rope_theta"); theta && !theta->is_null()) {
    LLMC_ASSIGN_OR_RETURN(rope.theta, readPositive(*entry, "rope_theta", 0.0, where));
  }
  return rope;
}

// Keyed rope_parameters: "full_attention" into ropeTheta / ropeScaling (its
// theta defaults to a top-level rope_theta, as transformers'), and
// "sliding_attention" into slidingAttentionRope; the family decides the rest.
Status readRopeByLayerType(const Json &hf, const Json &params, const Json *scaling,
                           const std::string &source, ModelConfig &c) {
  if (scaling != nullptr && !scaling->is_null())
    return fieldError(source, "rope_scaling",
                      "given beside rope_parameters keyed by layer type; write the scaling into "
                      "rope_parameters.full_attention instead");
  for (const auto &[key, value] : params.items())
    if (key != "full_attention" && key != "sliding_attention")
      return Status::error(source + ": rope_parameters: key '" + key +
                           "' is not a layer type; supported: full_attention, sliding_attention");
  LLMC_ASSIGN_OR_RETURN(LayerRope full, readLayerTypeRope(hf, params, "full_attention", source, c));
  LLMC_ASSIGN_OR_RETURN(c.slidingAttentionRope,
                        readLayerTypeRope(hf, params, "sliding_attention", source, c));
  if (const Json *top = findField(hf, "rope_theta"); full.theta == 0.0 && top && !top->is_null()) {
    LLMC_ASSIGN_OR_RETURN(full.theta, readPositive(hf, "rope_theta", 0.0, source));
  }
  c.ropeTheta = full.theta;
  c.ropeScaling = full.scaling;
  return Status::ok();
}

Status readRope(const Json &hf, const std::string &source, ModelConfig &c) {
  const Json *scaling = findField(hf, "rope_scaling");
  const Json *params = findField(hf, "rope_parameters");
  if (keyedByLayerType(params)) {
    LLMC_RETURN_IF_ERROR(readRotaryDim(hf, nullptr, source, c));
    return readRopeByLayerType(hf, *params, scaling, source, c);
  }
  LLMC_RETURN_IF_ERROR(readRotaryDim(hf, params, source, c));
  double theta = 10000.0;
  if ((scaling == nullptr || scaling->is_null()) && params != nullptr && params->is_object()) {
    const std::string where = source + ": rope_parameters";
    LLMC_ASSIGN_OR_RETURN(theta, readPositive(*params, "rope_theta", theta, where));
    LLMC_RETURN_IF_ERROR(readRopeScaling(hf, *params, source, where, c));
  } else if (scaling != nullptr) {
    LLMC_RETURN_IF_ERROR(readRopeScaling(hf, *scaling, source, source + ": rope_scaling", c));
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

Status readMisc(const Json &hf, const Architecture &arch, const std::string &source,
                ModelConfig &c) {
  LLMC_ASSIGN_OR_RETURN(c.modelType, optionalString(hf, "model_type", "", source));
  const std::string epsKey = configKey(arch, hf, "rms_norm_eps");
  LLMC_ASSIGN_OR_RETURN(c.rmsNormEps, readPositive(hf, epsKey.c_str(), 1e-6, source));
  // The family decides what the activation means (and which field names it).
  const std::string actKey = configKey(arch, hf, "hidden_act");
  LLMC_ASSIGN_OR_RETURN(c.hiddenAct, optionalString(hf, actKey.c_str(), "silu", source));
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
  LLMC_RETURN_IF_ERROR(readSizes(hf, *arch, source, config));
  LLMC_RETURN_IF_ERROR(readHeads(hf, source, config));
  LLMC_RETURN_IF_ERROR(readRope(hf, source, config));
  LLMC_RETURN_IF_ERROR(readMisc(hf, *arch, source, config));
  LLMC_RETURN_IF_ERROR(arch->applyConfig(hf, source, config));
  if (config.slidingAttentionRope && config.layerRopes.empty())
    return fieldError(source, "rope_parameters",
                      "keyed by layer type (full_attention, sliding_attention), which " +
                          config.architecture +
                          " does not read; write one rope_parameters object for all layers");
  return config;
}

} // namespace llmc
