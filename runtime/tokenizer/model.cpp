#include "tokenizer/model.h"

namespace llmc::tok {

Expected<Model> Model::fromJson(const Json &json, const JsonPath &at, int64_t idLimit) {
  if (!json.is_object())
    return at.wrongType("an object", json);
  LLMC_ASSIGN_OR_RETURN(auto type, getOptionalString(json, "type", at));
  Model model;
  if (!type || *type == "BPE") {
    LLMC_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::fromJson(json, at, idLimit));
    model.model_ = std::move(bpe);
  } else if (*type == "Unigram") {
    LLMC_ASSIGN_OR_RETURN(UnigramModel unigram, UnigramModel::fromJson(json, at, idLimit));
    model.model_ = std::move(unigram);
  } else if (*type == "WordPiece") {
    LLMC_ASSIGN_OR_RETURN(WordPieceModel wordPiece, WordPieceModel::fromJson(json, at, idLimit));
    model.model_ = std::move(wordPiece);
  } else if (*type == "WordLevel") {
    LLMC_ASSIGN_OR_RETURN(WordLevelModel wordLevel, WordLevelModel::fromJson(json, at, idLimit));
    model.model_ = std::move(wordLevel);
  } else {
    return at.child("type").error("unsupported model type '" + *type +
                                  "' (supported: BPE, Unigram, WordPiece, WordLevel)");
  }
  return model;
}

Status Model::encodeWord(std::string_view word, std::vector<int32_t> &ids) const {
  if (const BpeModel *bpe = std::get_if<BpeModel>(&model_)) { // the hot path first
    bpe->encodeWord(word, ids);
    return Status::ok();
  }
  if (const UnigramModel *unigram = std::get_if<UnigramModel>(&model_))
    return unigram->encodeWord(word, ids);
  if (const WordPieceModel *wordPiece = std::get_if<WordPieceModel>(&model_)) {
    wordPiece->encodeWord(word, ids);
    return Status::ok();
  }
  return std::get<WordLevelModel>(model_).encodeWord(word, ids);
}

const std::string *Model::token(int32_t id) const {
  return std::visit([&](const auto &m) { return m.token(id); }, model_);
}

int32_t Model::find(std::string_view token) const {
  return std::visit([&](const auto &m) { return m.find(token); }, model_);
}

int32_t Model::idEnd() const {
  return std::visit([](const auto &m) { return m.idEnd(); }, model_);
}

const std::vector<std::string> &Model::warnings() const {
  static const std::vector<std::string> none;
  const BpeModel *bpe = std::get_if<BpeModel>(&model_);
  return bpe ? bpe->warnings() : none;
}

} // namespace llmc::tok
