// Resolves what `llmc build` was given (model.json, config.json or a Hugging
// Face directory) into a ModelSpec. Only checks that files exist and that the
// JSON describes a supported model; the weights themselves are validated by
// safetensors.cpp and weight_check.cpp. See docs/model-json.md.
#include "frontend/model_spec.h"

#include "support/mapped_file.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

namespace llmc {
namespace {

namespace fs = std::filesystem;

const char *const kModelJsonKeys[] = {"config", "weights", "tokenizer", "dtype", "max_seq_len"};
const char *const kDirLayout = "a Hugging Face model directory holds config.json, "
                               "model.safetensors (or model.safetensors.index.json and its "
                               "shards, or *.safetensors) and tokenizer.json";

std::string absolutePath(const fs::path &p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  return (ec ? p : abs).lexically_normal().string();
}

bool isFile(const fs::path &p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Expected<Json> loadJsonFile(const std::string &path) {
  LLMC_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return parseJson(text, path);
}

// "<where>: field '<field>': file not found: <path>" unless `path` is a file.
Status requireFile(const std::string &where, const std::string &field, const std::string &path) {
  if (isFile(path))
    return Status::ok();
  return Status::error(where + ": field '" + field + "': file not found: " + path);
}

// Shard files named by a model.safetensors.index.json, resolved against its
// folder, unique and sorted.
Expected<std::vector<std::string>> indexShards(const std::string &indexPath) {
  LLMC_ASSIGN_OR_RETURN(Json index, loadJsonFile(indexPath));
  const Json *map = findField(index, "weight_map");
  if (map == nullptr || !map->is_object() || map->empty())
    return Status::error(indexPath + ": field 'weight_map': expected a non-empty object " +
                         "{\"tensor name\": \"shard file\"}");
  std::set<std::string> shards;
  for (const auto &[tensor, file] : map->items()) {
    const std::string where = indexPath + ": weight_map['" + tensor + "']";
    if (!file.is_string())
      return Status::error(where + ": expected a file name, got " + jsonTypeName(file));
    fs::path shard(file.get<std::string>());
    // Shards live beside the index; an index must not reach elsewhere.
    if (shard.empty() || shard.is_absolute() ||
        std::find(shard.begin(), shard.end(), "..") != shard.end())
      return Status::error(where + ": '" + shard.string() +
                           "' is not a file name relative to the index's folder");
    std::string path = absolutePath(fs::path(indexPath).parent_path() / shard);
    if (!isFile(path))
      return Status::error(where + ": shard file not found: " + path);
    shards.insert(path);
  }
  return std::vector<std::string>(shards.begin(), shards.end());
}

Status useIndex(const std::string &indexPath, ModelSpec &spec) {
  spec.weightIndex = indexPath;
  LLMC_ASSIGN_OR_RETURN(spec.weightFiles, indexShards(indexPath));
  return Status::ok();
}

// HF's order (from_pretrained): model.safetensors, then the sharded index;
// beyond HF, any *.safetensors in the folder, sorted by name.
Status findHfWeights(const fs::path &dir, const std::string &where, bool required,
                     ModelSpec &spec) {
  if (isFile(dir / "model.safetensors")) {
    spec.weightFiles = {absolutePath(dir / "model.safetensors")};
    return Status::ok();
  }
  if (isFile(dir / "model.safetensors.index.json"))
    return useIndex(absolutePath(dir / "model.safetensors.index.json"), spec);
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".safetensors" && isFile(entry.path()))
      spec.weightFiles.push_back(absolutePath(entry.path()));
  std::sort(spec.weightFiles.begin(), spec.weightFiles.end());
  if (spec.weightFiles.empty() && required)
    return Status::error(where + ": no weights found in " + absolutePath(dir) + " (" + kDirLayout +
                         ")");
  return Status::ok();
}

Status findHfTokenizer(const fs::path &dir, const std::string &where, ModelSpec &spec) {
  spec.tokenizerPath = absolutePath(dir / "tokenizer.json");
  if (isFile(spec.tokenizerPath))
    return Status::ok();
  return Status::error(where + ": tokenizer not found: " + spec.tokenizerPath + " (" + kDirLayout +
                       "; a tokenizer.model alone is not supported)");
}

// "float32" -> "f32", "float16" -> "f16", "bfloat16" -> "bf16"; anything else -> "f32".
std::string dtypeFromTorch(const std::string &torchDtype) {
  if (torchDtype == "float16")
    return "f16";
  if (torchDtype == "bfloat16")
    return "bf16";
  return "f32";
}

// A config.json whose weights and tokenizer lie in the same folder.
Expected<ModelSpec> loadHfConfig(const std::string &source, const std::string &configPath,
                                 const Json &json, const SpecOptions &options) {
  ModelSpec spec;
  spec.source = source;
  spec.configSource = configPath;
  LLMC_ASSIGN_OR_RETURN(spec.config, parseHfConfig(json, configPath));
  fs::path dir = fs::path(configPath).parent_path();
  LLMC_RETURN_IF_ERROR(findHfWeights(dir, source, options.requireWeights, spec));
  LLMC_RETURN_IF_ERROR(findHfTokenizer(dir, source, spec));
  spec.dtype = dtypeFromTorch(spec.config.torchDtype);
  spec.maxSeqLen = spec.config.maxPositionEmbeddings;
  return spec;
}

Expected<ModelSpec> loadHfDir(const std::string &dir, const SpecOptions &options) {
  std::string configPath = absolutePath(fs::path(dir) / "config.json");
  if (!isFile(configPath))
    return Status::error(dir + ": not a model directory: config.json not found (" + kDirLayout +
                         ")");
  LLMC_ASSIGN_OR_RETURN(Json json, loadJsonFile(configPath));
  return loadHfConfig(dir, configPath, json, options);
}

// Levenshtein distance, for "did you mean" on misspelled model.json keys.
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

Status checkModelJsonKeys(const Json &json, const std::string &path) {
  std::string allowed;
  for (const char *key : kModelJsonKeys)
    allowed += (allowed.empty() ? "" : ", ") + std::string(key);
  for (const auto &item : json.items()) {
    const std::string &key = item.key();
    auto known = std::find(std::begin(kModelJsonKeys), std::end(kModelJsonKeys), key);
    if (known != std::end(kModelJsonKeys))
      continue;
    std::string hint;
    size_t best = 3; // suggest only keys at most 2 edits away
    for (const char *candidate : kModelJsonKeys)
      if (size_t d = editDistance(key, candidate); d < best) {
        best = d;
        hint = " (did you mean '" + std::string(candidate) + "'?)";
      }
    return Status::error(path + ": unknown field '" + key + "'" + hint + "; allowed: " + allowed);
  }
  return Status::ok();
}

// A path from model.json, relative to the model.json's folder unless absolute.
std::string resolve(const std::string &modelJson, const std::string &relative) {
  fs::path p(relative);
  return absolutePath(p.is_absolute() ? p : fs::path(modelJson).parent_path() / p);
}

Expected<std::string> requirePath(const Json &json, const char *key, const std::string &path) {
  LLMC_ASSIGN_OR_RETURN(std::string value, requireString(json, key, path));
  if (value.empty())
    return Status::error(path + ": field '" + key + "': expected a file path, got \"\"");
  std::string resolved = resolve(path, value);
  LLMC_RETURN_IF_ERROR(requireFile(path, key, resolved));
  return resolved;
}

Status readModelJsonConfig(const Json &json, const std::string &path, ModelSpec &spec) {
  const Json *config = findField(json, "config");
  if (config != nullptr && config->is_object()) {
    spec.configSource = path;
    LLMC_ASSIGN_OR_RETURN(spec.config, parseHfConfig(*config, path + ": config"));
    return Status::ok();
  }
  if (config != nullptr && !config->is_string() && !config->is_null())
    return Status::error(path + ": field 'config': expected a path to a config.json or an " +
                         "object with its fields, got " + jsonTypeName(*config));
  LLMC_ASSIGN_OR_RETURN(spec.configSource, requirePath(json, "config", path));
  LLMC_ASSIGN_OR_RETURN(Json loaded, loadJsonFile(spec.configSource));
  LLMC_ASSIGN_OR_RETURN(spec.config, parseHfConfig(loaded, spec.configSource));
  return Status::ok();
}

// One weights entry: a .safetensors file, or (alone) a .index.json.
Expected<std::string> weightPath(const Json &entry, const std::string &field,
                                 const std::string &path) {
  if (!entry.is_string() || entry.get<std::string>().empty())
    return Status::error(path + ": field '" + field + "': expected a file path, got " +
                         (entry.is_string() ? "\"\"" : jsonTypeName(entry)));
  const std::string &name = entry.get_ref<const std::string &>();
  if (!endsWith(name, ".safetensors") && !endsWith(name, ".index.json"))
    return Status::error(path + ": field '" + field + "': '" + name +
                         "' is not a .safetensors file or a .safetensors.index.json (other " +
                         "weight formats are not supported; convert them to safetensors)");
  std::string resolved = resolve(path, name);
  LLMC_RETURN_IF_ERROR(requireFile(path, field, resolved));
  return resolved;
}

Status readModelJsonWeights(const Json &json, const std::string &path, bool required,
                            ModelSpec &spec) {
  const Json *weights = findField(json, "weights");
  if ((weights == nullptr || weights->is_null()) && !required)
    return Status::ok();
  if (weights == nullptr || weights->is_null())
    return Status::error(path + ": missing required field 'weights' (a .safetensors file, a " +
                         "list of them, or a model.safetensors.index.json)");
  if (weights->is_string()) {
    LLMC_ASSIGN_OR_RETURN(std::string file, weightPath(*weights, "weights", path));
    if (endsWith(file, ".index.json"))
      return useIndex(file, spec);
    spec.weightFiles = {file};
    return Status::ok();
  }
  if (!weights->is_array() || weights->empty())
    return Status::error(path + ": field 'weights': expected a file path or a non-empty list " +
                         "of .safetensors paths, got " +
                         (weights->is_array() ? "an empty list" : jsonTypeName(*weights)));
  for (size_t i = 0; i < weights->size(); ++i) {
    const std::string field = "weights[" + std::to_string(i) + "]";
    LLMC_ASSIGN_OR_RETURN(std::string file, weightPath((*weights)[i], field, path));
    if (endsWith(file, ".index.json"))
      return Status::error(path + ": field '" + field + "': an index must be given alone, as " +
                           "\"weights\": \"" + (*weights)[i].get<std::string>() + "\"");
    if (std::find(spec.weightFiles.begin(), spec.weightFiles.end(), file) != spec.weightFiles.end())
      return Status::error(path + ": field '" + field + "': " + file + " is listed twice");
    spec.weightFiles.push_back(file);
  }
  return Status::ok();
}

Status readModelJsonOptions(const Json &json, const std::string &path, ModelSpec &spec) {
  LLMC_ASSIGN_OR_RETURN(std::string dtype, optionalString(json, "dtype", "", path));
  if (dtype.empty())
    spec.dtype = dtypeFromTorch(spec.config.torchDtype);
  else if (dtype == "f32" || dtype == "f16" || dtype == "bf16")
    spec.dtype = dtype;
  else
    return Status::error(path + ": field 'dtype': '" + dtype +
                         "' is not supported; supported: f32, f16, bf16");
  const int64_t maxPos = spec.config.maxPositionEmbeddings;
  LLMC_ASSIGN_OR_RETURN(spec.maxSeqLen, optionalInt(json, "max_seq_len", maxPos, path));
  if (spec.maxSeqLen < 1 || spec.maxSeqLen > maxPos)
    return Status::error(path + ": field 'max_seq_len': expected an integer in [1, " +
                         std::to_string(maxPos) + "] (max_position_embeddings of " +
                         spec.configSource + "), got " + std::to_string(spec.maxSeqLen));
  return Status::ok();
}

Expected<ModelSpec> loadModelJson(const std::string &source, const std::string &path,
                                  const Json &json, const SpecOptions &options) {
  if (!json.is_object())
    return Status::error(path + ": expected a JSON object (a model.json or a config.json), got " +
                         jsonTypeName(json));
  LLMC_RETURN_IF_ERROR(checkModelJsonKeys(json, path));
  ModelSpec spec;
  spec.source = source;
  LLMC_RETURN_IF_ERROR(readModelJsonConfig(json, path, spec));
  LLMC_RETURN_IF_ERROR(readModelJsonWeights(json, path, options.requireWeights, spec));
  LLMC_ASSIGN_OR_RETURN(spec.tokenizerPath, requirePath(json, "tokenizer", path));
  LLMC_RETURN_IF_ERROR(readModelJsonOptions(json, path, spec));
  return spec;
}

Expected<ModelSpec> loadSpecFiles(const std::string &path, const SpecOptions &options) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return loadHfDir(path, options);
  if (!isFile(path))
    return Status::error(path + ": no such file or directory (expected a model.json, a " +
                         "config.json or a Hugging Face model directory)");
  std::string file = absolutePath(path);
  LLMC_ASSIGN_OR_RETURN(Json json, loadJsonFile(file));
  if (findField(json, "architectures") != nullptr)
    return loadHfConfig(path, file, json, options);
  return loadModelJson(path, file, json, options);
}

} // namespace

// The spec, with the generation settings of the files beside the tokenizer
// and the config; Hugging Face stops at generation_config.json's eos ids as
// well as config.json's.
Expected<ModelSpec> loadModelSpec(const std::string &path, const SpecOptions &options) {
  LLMC_ASSIGN_OR_RETURN(ModelSpec spec, loadSpecFiles(path, options));
  const std::string configDir =
      spec.configSource.empty() ? fs::path(spec.tokenizerPath).parent_path().string()
                                : fs::path(spec.configSource).parent_path().string();
  LLMC_ASSIGN_OR_RETURN(spec.generation,
                        loadGenerationSettings(fs::path(spec.tokenizerPath).parent_path().string(),
                                               configDir, spec.config.vocabSize));
  spec.config.eosTokenIds = joinTokenIds(spec.config.eosTokenIds, spec.generation.eosTokenIds);
  return spec;
}

} // namespace llmc
