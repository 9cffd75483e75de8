#include "frontend/generation_config.h"

#include "schema/engine_generated.h"
#include "support/json.h"
#include "support/mapped_file.h"
#include "tokenizer/utf8.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace llmc {
namespace {

namespace fs = std::filesystem;

Status fieldError(const std::string &file, const std::string &field, const std::string &what) {
  return Status::error(file + ": field '" + field + "': " + what);
}

// The JSON file at `path`, or null when there is none.
Expected<std::optional<Json>> readOptionalJson(const std::string &path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return std::optional<Json>();
  LLMC_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  LLMC_ASSIGN_OR_RETURN(Json json, parseJson(text, path));
  if (!json.is_object())
    return Status::error(path + ": expected a JSON object at the top level, got " +
                         jsonTypeName(json));
  return std::optional<Json>(std::move(json));
}

Status checkTemplate(const std::string &file, const std::string &field, const std::string &source) {
  if (source.size() > kMaxChatTemplateBytes)
    return fieldError(file, field,
                      "the template has " + std::to_string(source.size()) +
                          " bytes, over the limit of " + std::to_string(kMaxChatTemplateBytes));
  if (!utf8::isValid(source))
    return fieldError(file, field, "the template is not valid UTF-8");
  return Status::ok();
}

// chat_template: a string, or a list of {"name": ..., "template": ...}.
Status readChatTemplates(const Json &config, const std::string &file, GenerationSettings &out) {
  const Json *field = findField(config, "chat_template");
  if (field == nullptr || field->is_null())
    return Status::ok();
  if (field->is_string()) {
    LLMC_RETURN_IF_ERROR(checkTemplate(file, "chat_template", field->get<std::string>()));
    out.chatTemplates.emplace_back("default", field->get<std::string>());
    return Status::ok();
  }
  if (!field->is_array())
    return fieldError(file, "chat_template",
                      std::string("expected a string or a list of {\"name\", \"template\"} "
                                  "objects, got ") +
                          jsonTypeName(*field));
  if (field->size() > kMaxChatTemplates)
    return fieldError(file, "chat_template",
                      std::to_string(field->size()) + " templates, over the limit of " +
                          std::to_string(kMaxChatTemplates));
  for (size_t i = 0; i < field->size(); ++i) {
    const Json &entry = (*field)[i];
    const std::string where = "chat_template[" + std::to_string(i) + "]";
    if (!entry.is_object())
      return fieldError(file, where,
                        std::string("expected an object with \"name\" and \"template\", got ") +
                            jsonTypeName(entry));
    LLMC_ASSIGN_OR_RETURN(std::string name, requireString(entry, "name", file + ": " + where));
    LLMC_ASSIGN_OR_RETURN(std::string source,
                          requireString(entry, "template", file + ": " + where));
    if (name.empty() || name.size() > 256)
      return fieldError(file, where + ".name", "expected a name of 1 to 256 bytes");
    for (const auto &existing : out.chatTemplates)
      if (existing.first == name)
        return fieldError(file, where + ".name", "'" + name + "' appears twice");
    LLMC_RETURN_IF_ERROR(checkTemplate(file, where + ".template", source));
    out.chatTemplates.emplace_back(std::move(name), std::move(source));
  }
  // "default" first: what a plan's user gets without naming one.
  std::stable_partition(out.chatTemplates.begin(), out.chatTemplates.end(),
                        [](const auto &t) { return t.first == "default"; });
  return Status::ok();
}

// bos_token etc.: a string, an AddedToken object {"content": ...}, or null.
Status readSpecialToken(const Json &config, const char *key, const std::string &file,
                        std::string &out) {
  const Json *field = findField(config, key);
  if (field == nullptr || field->is_null())
    return Status::ok();
  const Json *content = field;
  if (field->is_object()) {
    content = findField(*field, "content");
    if (content == nullptr)
      return fieldError(file, key, "an AddedToken object needs a \"content\" string");
  }
  if (!content->is_string())
    return fieldError(file, key,
                      std::string("expected a string or an AddedToken object, got ") +
                          jsonTypeName(*content));
  out = content->get<std::string>();
  if (out.size() > kMaxSpecialTokenBytes)
    return fieldError(file, key,
                      "the token has " + std::to_string(out.size()) + " bytes, over the limit of " +
                          std::to_string(kMaxSpecialTokenBytes));
  return Status::ok();
}

Status readTokenizerConfig(const std::string &dir, GenerationSettings &out) {
  const std::string file = (fs::path(dir) / "tokenizer_config.json").string();
  LLMC_ASSIGN_OR_RETURN(std::optional<Json> config, readOptionalJson(file));
  if (config) {
    LLMC_RETURN_IF_ERROR(readChatTemplates(*config, file, out));
    LLMC_RETURN_IF_ERROR(readSpecialToken(*config, "bos_token", file, out.bosToken));
    LLMC_RETURN_IF_ERROR(readSpecialToken(*config, "eos_token", file, out.eosToken));
    LLMC_RETURN_IF_ERROR(readSpecialToken(*config, "pad_token", file, out.padToken));
    LLMC_RETURN_IF_ERROR(readSpecialToken(*config, "unk_token", file, out.unkToken));
  }
  const std::string jinja = (fs::path(dir) / "chat_template.jinja").string();
  std::error_code ec;
  if (fs::is_regular_file(jinja, ec)) {
    LLMC_ASSIGN_OR_RETURN(std::string source, readTextFile(jinja));
    if (source.size() > kMaxChatTemplateBytes || !utf8::isValid(source))
      return Status::error(jinja + ": " +
                           (source.size() > kMaxChatTemplateBytes
                                ? "the template has " + std::to_string(source.size()) +
                                      " bytes, over the limit of " +
                                      std::to_string(kMaxChatTemplateBytes)
                                : std::string("the template is not valid UTF-8")));
    auto existing = std::find_if(out.chatTemplates.begin(), out.chatTemplates.end(),
                                 [](const auto &t) { return t.first == "default"; });
    if (existing != out.chatTemplates.end())
      existing->second = std::move(source);
    else
      out.chatTemplates.insert(out.chatTemplates.begin(), {"default", std::move(source)});
  }
  return Status::ok();
}

// An optional number in [lo, hi] (loOpen: lo excluded).
Expected<std::optional<float>> readRange(const Json &config, const char *key, double lo, double hi,
                                         bool loOpen, const std::string &file) {
  const Json *field = findField(config, key);
  if (field == nullptr || field->is_null())
    return std::optional<float>();
  if (!field->is_number())
    return fieldError(file, key, std::string("expected a number, got ") + jsonTypeName(*field));
  const double v = field->get<double>();
  if (!std::isfinite(v) || v > hi || (loOpen ? v <= lo : v < lo))
    return fieldError(file, key,
                      "expected a number in " + std::string(loOpen ? "(" : "[") +
                          std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          field->dump());
  return std::optional<float>(static_cast<float>(v));
}

Expected<std::optional<int64_t>> readCount(const Json &config, const char *key, int64_t hi,
                                           const std::string &file) {
  const Json *field = findField(config, key);
  if (field == nullptr || field->is_null())
    return std::optional<int64_t>();
  if (!field->is_number_integer() || field->get<int64_t>() < 0 || field->get<int64_t>() > hi)
    return fieldError(file, key,
                      "expected an integer in [0, " + std::to_string(hi) + "], got " +
                          field->dump());
  return std::optional<int64_t>(field->get<int64_t>());
}

Status readGenerationConfig(const std::string &dir, int64_t vocabSize, GenerationSettings &out) {
  const std::string file = (fs::path(dir) / "generation_config.json").string();
  LLMC_ASSIGN_OR_RETURN(std::optional<Json> config, readOptionalJson(file));
  if (!config)
    return Status::ok();
  if (const Json *eos = findField(*config, "eos_token_id"); eos != nullptr && !eos->is_null()) {
    if (!eos->is_number_integer() && !eos->is_array())
      return fieldError(file, "eos_token_id",
                        std::string("expected an integer or a list of integers, got ") +
                            jsonTypeName(*eos));
    for (const Json &id : eos->is_array() ? *eos : Json::array({*eos})) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocabSize)
        return fieldError(file, "eos_token_id",
                          "expected token ids in [0, vocab_size " + std::to_string(vocabSize) +
                              "), got " + id.dump());
      out.eosTokenIds = joinTokenIds(out.eosTokenIds, {id.get<int64_t>()});
    }
  }
  LLMC_ASSIGN_OR_RETURN(out.temperature, readRange(*config, "temperature", 0, 1e6, false, file));
  LLMC_ASSIGN_OR_RETURN(out.topP, readRange(*config, "top_p", 0, 1, true, file));
  LLMC_ASSIGN_OR_RETURN(out.minP, readRange(*config, "min_p", 0, 1, false, file));
  LLMC_ASSIGN_OR_RETURN(out.repetitionPenalty,
                        readRange(*config, "repetition_penalty", 0, 1e6, true, file));
  LLMC_ASSIGN_OR_RETURN(std::optional<int64_t> topK,
                        readCount(*config, "top_k", int64_t(1) << 30, file));
  if (topK)
    out.topK = static_cast<int32_t>(*topK);
  LLMC_ASSIGN_OR_RETURN(out.maxNewTokens,
                        readCount(*config, "max_new_tokens", int64_t(1) << 40, file));
  return Status::ok();
}

} // namespace

std::vector<int64_t> joinTokenIds(std::vector<int64_t> ids, const std::vector<int64_t> &more) {
  for (int64_t id : more)
    if (std::find(ids.begin(), ids.end(), id) == ids.end())
      ids.push_back(id);
  return ids;
}

Expected<GenerationSettings> loadGenerationSettings(const std::string &tokenizerDir,
                                                    const std::string &configDir,
                                                    int64_t vocabSize) {
  GenerationSettings settings;
  LLMC_RETURN_IF_ERROR(readTokenizerConfig(tokenizerDir, settings));
  LLMC_RETURN_IF_ERROR(readGenerationConfig(configDir, vocabSize, settings));
  return settings;
}

void recordGenerationSettings(const GenerationSettings &settings, fb::PlanT &meta) {
  fb::TokenizerInfoT &tokenizer = *meta.tokenizer;
  tokenizer.chat_templates.clear();
  for (const auto &[name, source] : settings.chatTemplates) {
    auto t = std::make_unique<fb::ChatTemplateT>();
    t->name = name;
    t->source = source;
    tokenizer.chat_templates.push_back(std::move(t));
  }
  tokenizer.bos_token = settings.bosToken;
  tokenizer.eos_token = settings.eosToken;
  tokenizer.pad_token = settings.padToken;
  tokenizer.unk_token = settings.unkToken;
  const bool any = settings.temperature || settings.topP || settings.topK || settings.minP ||
                   settings.repetitionPenalty || settings.maxNewTokens;
  if (!any) {
    meta.generation.reset();
    return;
  }
  meta.generation = std::make_unique<fb::GenerationDefaultsT>();
  auto set = [](auto &field, const auto &value) { // flatbuffers::Optional from std::optional
    if (value)
      field = *value;
  };
  set(meta.generation->temperature, settings.temperature);
  set(meta.generation->top_p, settings.topP);
  set(meta.generation->top_k, settings.topK);
  set(meta.generation->min_p, settings.minP);
  set(meta.generation->repetition_penalty, settings.repetitionPenalty);
  set(meta.generation->max_new_tokens, settings.maxNewTokens);
}

} // namespace llmc
