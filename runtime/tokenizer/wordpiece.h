// The WordPiece and WordLevel models of tokenizer.json.
//
// WordPiece ("type": "WordPiece", BERT): each word is cut greedily into the
// longest vocabulary prefix, then the longest "##"-prefixed continuation, and
// so on; a word with a part no token covers, or longer than
// max_input_chars_per_word characters, is one unk_token. Candidates longer
// than the longest token are never tried, so a word costs O(bytes x longest
// token) lookups whatever max_input_chars_per_word says.
//
// WordLevel ("type": "WordLevel"): each word is one token, or unk_token.
#pragma once

#include "tokenizer/json_path.h"
#include "tokenizer/vocab.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::tok {

class WordPieceModel {
public:
  static Expected<WordPieceModel> fromJson(const Json &model, const JsonPath &at,
                                           int64_t idLimit);
  void encodeWord(std::string_view word, std::vector<int32_t> &ids) const;

  const std::string *token(int32_t id) const { return vocab_.token(id); }
  int32_t find(std::string_view token) const { return vocab_.find(token); }
  int32_t idEnd() const { return vocab_.idEnd(); }

private:
  Vocab vocab_;
  std::string prefix_ = "##";
  size_t maxChars_ = 100;
  int32_t unkId_ = -1;
};

class WordLevelModel {
public:
  static Expected<WordLevelModel> fromJson(const Json &model, const JsonPath &at,
                                           int64_t idLimit);
  // Fails on a word not in the vocabulary when unk_token is not in it either.
  Status encodeWord(std::string_view word, std::vector<int32_t> &ids) const;

  const std::string *token(int32_t id) const { return vocab_.token(id); }
  int32_t find(std::string_view token) const { return vocab_.find(token); }
  int32_t idEnd() const { return vocab_.idEnd(); }

private:
  Vocab vocab_;
  std::string unkToken_;
  int32_t unkId_ = -1;
  std::string source_;
};

} // namespace llmc::tok
