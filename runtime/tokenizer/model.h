// tokenizer.json "model": one of the models llmc supports (BPE, Unigram,
// WordPiece, WordLevel), chosen by "type" (a file without one is BPE, as old
// Hugging Face files are). Another type is an import error that names it.
#pragma once

#include "tokenizer/bpe.h"
#include "tokenizer/json_path.h"
#include "tokenizer/unigram.h"
#include "tokenizer/wordpiece.h"

#include <variant>

namespace llmc::tok {

class Model {
public:
  static Expected<Model> fromJson(const Json &model, const JsonPath &at, int64_t idLimit);

  // Appends the ids of one pre-tokenized word.
  Status encodeWord(std::string_view word, std::vector<int32_t> &ids) const;

  const std::string *token(int32_t id) const;
  int32_t find(std::string_view token) const;
  int32_t idEnd() const;
  const std::vector<std::string> &warnings() const;

private:
  std::variant<BpeModel, UnigramModel, WordPieceModel, WordLevelModel> model_;
};

} // namespace llmc::tok
