#include "tokenizer/tokenizer.h"

#include "support/json.h"
#include "support/mapped_file.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/decoders.h"
#include "tokenizer/json_path.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/utf8.h"

#include <unordered_map>

namespace llmc {

using tok::JsonPath;

struct Tokenizer::Impl {
  std::string sourceJson;
  std::optional<tok::Model> model;
  tok::Normalizer normalizer;
  tok::PreTokenizer preTokenizer;
  tok::PostProcessor postProcessor;
  tok::Decoder decoder;
  std::vector<tok::AddedToken> added;
  std::unordered_map<std::string, int32_t> addedByContent; // -> index in `added`
  std::vector<int32_t> addedIndexOfId;                     // id -> index in `added`, or -1
  tok::AddedTokenMatcher rawMatcher;                       // normalized == false
  tok::AddedTokenMatcher normalizedMatcher;                // normalized == true
  int32_t vocabSize = 0;
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;

  Status importJson(const Json &root, const std::string &source);
  Status parseAddedTokens(const Json &root, const JsonPath &at);
  Status checkIds(const JsonPath &at, int64_t idLimit);
  Status buildMatchers();
  void findBosEos();
  Status encodeText(std::string_view text, bool atStart, std::vector<int32_t> &ids) const;
  const std::string *tokenOf(int32_t id) const;
};

Status Tokenizer::Impl::parseAddedTokens(const Json &root, const JsonPath &at) {
  const Json *list = tok::member(root, "added_tokens");
  if (list == nullptr)
    return Status::ok();
  if (!list->is_array())
    return at.wrongType("an array", *list);
  for (size_t i = 0; i < list->size(); ++i) {
    const Json &entry = (*list)[i];
    JsonPath entryAt = at.at(i);
    LLMC_RETURN_IF_ERROR(tok::checkKeys(
        entry, entryAt,
        {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}));
    tok::AddedToken token;
    LLMC_ASSIGN_OR_RETURN(int64_t id,
                          tok::getInt(entry, "id", std::nullopt, 0, INT32_MAX - 1, entryAt));
    token.id = static_cast<int32_t>(id);
    LLMC_ASSIGN_OR_RETURN(token.content, tok::getString(entry, "content", entryAt));
    LLMC_ASSIGN_OR_RETURN(token.special, tok::getBool(entry, "special", false, entryAt));
    LLMC_ASSIGN_OR_RETURN(token.singleWord, tok::getBool(entry, "single_word", false, entryAt));
    LLMC_ASSIGN_OR_RETURN(token.lstrip, tok::getBool(entry, "lstrip", false, entryAt));
    LLMC_ASSIGN_OR_RETURN(token.rstrip, tok::getBool(entry, "rstrip", false, entryAt));
    LLMC_ASSIGN_OR_RETURN(token.normalized,
                          tok::getBool(entry, "normalized", !token.special, entryAt));
    if (!addedByContent.emplace(token.content, static_cast<int32_t>(added.size())).second)
      return entryAt.child("content").error("'" + token.content + "' is listed twice");
    added.push_back(std::move(token));
  }
  return Status::ok();
}

// Ids must be dense over the model vocabulary and the added tokens, and an
// added token that is also in the model vocabulary must have the same id.
Status Tokenizer::Impl::checkIds(const JsonPath &at, int64_t idLimit) {
  vocabSize = model->idEnd();
  for (size_t i = 0; i < added.size(); ++i) {
    if (added[i].id >= idLimit)
      return at.child("added_tokens")
          .at(i)
          .child("id")
          .error("id " + std::to_string(added[i].id) + " is out of range [0, " +
                 std::to_string(idLimit) +
                 ") (ids must be dense over model.vocab and added_tokens)");
    vocabSize = std::max(vocabSize, added[i].id + 1);
  }
  addedIndexOfId.assign(vocabSize, -1);
  for (size_t i = 0; i < added.size(); ++i) {
    const tok::AddedToken &token = added[i];
    JsonPath idAt = at.child("added_tokens").at(i).child("id");
    if (addedIndexOfId[token.id] >= 0)
      return idAt.error("id " + std::to_string(token.id) + " is used by both '" +
                        added[addedIndexOfId[token.id]].content + "' and '" + token.content + "'");
    addedIndexOfId[token.id] = static_cast<int32_t>(i);
    const std::string *modelToken = model->token(token.id);
    if (modelToken != nullptr && *modelToken != token.content)
      return idAt.error("id " + std::to_string(token.id) + " is '" + *modelToken +
                        "' in model.vocab but '" + token.content + "' here");
    int32_t modelId = model->find(token.content);
    if (modelId >= 0 && modelId != token.id)
      return idAt.error("'" + token.content + "' has id " + std::to_string(modelId) +
                        " in model.vocab but " + std::to_string(token.id) + " here");
  }
  for (int32_t id = 0; id < vocabSize; ++id)
    if (tokenOf(id) == nullptr)
      return at.child("model.vocab")
          .error("no token has id " + std::to_string(id) + " (ids must be dense from 0 to " +
                 std::to_string(vocabSize - 1) + " over model.vocab and added_tokens)");
  return Status::ok();
}

Status Tokenizer::Impl::buildMatchers() {
  for (const tok::AddedToken &token : added) {
    if (!token.normalized) {
      rawMatcher.add(token.content, token);
      continue;
    }
    // Hugging Face matches a normalized token by its normalized content.
    std::string pattern = token.content;
    LLMC_RETURN_IF_ERROR(normalizer.normalize(pattern));
    normalizedMatcher.add(std::move(pattern), token);
  }
  rawMatcher.finish();
  normalizedMatcher.finish();
  return Status::ok();
}

void Tokenizer::Impl::findBosEos() {
  bos = postProcessor.leadingId();
  eos = postProcessor.trailingId();
  for (const char *name : {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "<|im_end|>"}) {
    auto it = addedByContent.find(name);
    if (!eos && it != addedByContent.end() && added[it->second].special)
      eos = added[it->second].id;
  }
}

Status Tokenizer::Impl::importJson(const Json &root, const std::string &source) {
  JsonPath at{&source, ""};
  if (!root.is_object())
    return Status::error(source + ": expected a JSON object at the top level, got " +
                         jsonTypeName(root));
  LLMC_RETURN_IF_ERROR(
      tok::checkKeys(root, at,
                     {"version", "truncation", "padding", "added_tokens", "normalizer",
                      "pre_tokenizer", "model", "post_processor", "decoder"}));
  for (const char *key : {"truncation", "padding"})
    if (tok::member(root, key) != nullptr)
      return at.child(key).error("must be null: llmc encodes without truncation or padding");
  LLMC_RETURN_IF_ERROR(parseAddedTokens(root, at.child("added_tokens")));
  const Json *modelJson = tok::member(root, "model");
  if (modelJson == nullptr)
    return at.child("model").error("missing (expected the model object)");
  if (!modelJson->is_object())
    return at.child("model").wrongType("an object", *modelJson);
  const Json *vocab = tok::member(*modelJson, "vocab");
  int64_t idLimit = (vocab ? static_cast<int64_t>(vocab->size()) : 0) + added.size();
  LLMC_ASSIGN_OR_RETURN(model, tok::Model::fromJson(*modelJson, at.child("model"), idLimit));
  LLMC_RETURN_IF_ERROR(checkIds(at, idLimit));
  static const Json null;
  auto field = [&](const char *key) -> const Json & {
    const Json *value = tok::member(root, key);
    return value ? *value : null;
  };
  LLMC_ASSIGN_OR_RETURN(normalizer,
                        tok::Normalizer::fromJson(field("normalizer"), at.child("normalizer")));
  LLMC_ASSIGN_OR_RETURN(
      preTokenizer, tok::PreTokenizer::fromJson(field("pre_tokenizer"), at.child("pre_tokenizer")));
  LLMC_ASSIGN_OR_RETURN(
      postProcessor,
      tok::PostProcessor::fromJson(field("post_processor"), at.child("post_processor"), vocabSize));
  LLMC_ASSIGN_OR_RETURN(decoder, tok::Decoder::fromJson(field("decoder"), at.child("decoder")));
  LLMC_RETURN_IF_ERROR(buildMatchers());
  findBosEos();
  return Status::ok();
}

Expected<Tokenizer> Tokenizer::fromJson(std::string_view jsonText, const std::string &source) {
  LLMC_ASSIGN_OR_RETURN(Json root, parseJson(jsonText, source));
  auto impl = std::make_shared<Impl>();
  LLMC_RETURN_IF_ERROR(impl->importJson(root, source));
  impl->sourceJson = std::string(jsonText);
  Tokenizer tokenizer;
  tokenizer.impl_ = std::move(impl);
  return tokenizer;
}

Expected<Tokenizer> Tokenizer::fromFile(const std::string &path) {
  LLMC_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return fromJson(text, path);
}

const std::string *Tokenizer::Impl::tokenOf(int32_t id) const {
  if (id < 0 || id >= vocabSize)
    return nullptr;
  if (addedIndexOfId[id] >= 0)
    return &added[addedIndexOfId[id]].content;
  return model->token(id);
}

// Pre-tokenizes and encodes text that holds no added token.
Status Tokenizer::Impl::encodeText(std::string_view text, bool atStart,
                                   std::vector<int32_t> &ids) const {
  tok::Words words;
  words.text = std::string(text);
  words.words.push_back({0, text.size(), atStart});
  LLMC_RETURN_IF_ERROR(preTokenizer.run(words));
  std::string_view all = words.text;
  for (const tok::Word &w : words.words)
    LLMC_RETURN_IF_ERROR(model->encodeWord(all.substr(w.begin, w.end - w.begin), ids));
  return Status::ok();
}

Expected<std::vector<int32_t>> Tokenizer::tryEncode(std::string_view text,
                                                    bool addSpecialTokens) const {
  const Impl &impl = *impl_;
  std::string repaired;
  if (!utf8::isValid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  std::vector<tok::Segment> rawSegments, segments;
  impl.rawMatcher.split(text, rawSegments);
  for (const tok::Segment &raw : rawSegments) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    std::string normalized(text.substr(raw.begin, raw.end - raw.begin));
    LLMC_RETURN_IF_ERROR(impl.normalizer.normalize(normalized));
    segments.clear();
    impl.normalizedMatcher.split(normalized, segments);
    for (const tok::Segment &segment : segments) {
      if (segment.id >= 0)
        ids.push_back(segment.id);
      else
        LLMC_RETURN_IF_ERROR(impl.encodeText(
            std::string_view(normalized).substr(segment.begin, segment.end - segment.begin),
            raw.begin == 0 && segment.begin == 0, ids));
    }
  }
  if (addSpecialTokens)
    impl.postProcessor.addSpecialTokens(ids);
  return ids;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool addSpecialTokens) const {
  auto ids = tryEncode(text, addSpecialTokens);
  return ids ? std::move(ids).value() : std::vector<int32_t>();
}

Expected<std::string> Tokenizer::tryDecode(const std::vector<int32_t> &ids,
                                           bool skipSpecialTokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string *token = impl_->tokenOf(id);
    if (token != nullptr && !(skipSpecialTokens && isSpecial(id)))
      tokens.push_back(*token);
  }
  return impl_->decoder.decode(std::move(tokens));
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids, bool skipSpecialTokens) const {
  auto text = tryDecode(ids, skipSpecialTokens);
  return text ? std::move(text).value() : std::string();
}

int32_t Tokenizer::vocabSize() const { return impl_->vocabSize; }

std::optional<int32_t> Tokenizer::tokenToId(std::string_view token) const {
  auto it = impl_->addedByContent.find(std::string(token));
  if (it != impl_->addedByContent.end())
    return impl_->added[it->second].id;
  int32_t id = impl_->model->find(token);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<std::string> Tokenizer::idToToken(int32_t id) const {
  const std::string *token = impl_->tokenOf(id);
  return token ? std::optional<std::string>(*token) : std::nullopt;
}

bool Tokenizer::isSpecial(int32_t id) const {
  if (id < 0 || id >= impl_->vocabSize || impl_->addedIndexOfId[id] < 0)
    return false;
  return impl_->added[impl_->addedIndexOfId[id]].special;
}

std::optional<int32_t> Tokenizer::bosId() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eosId() const { return impl_->eos; }
const std::string &Tokenizer::sourceJson() const { return impl_->sourceJson; }
const std::vector<std::string> &Tokenizer::warnings() const { return impl_->model->warnings(); }

} // namespace llmc
