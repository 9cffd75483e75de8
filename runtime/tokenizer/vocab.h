// A model vocabulary: token strings by id with a hash index, parsed from
// tokenizer.json's "model.vocab" (an object of token -> id for WordPiece and
// WordLevel; Unigram's [[piece, score], ...] list is parsed by unigram.cpp).
#pragma once

#include "tokenizer/bpe.h"
#include "tokenizer/json_path.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::tok {

class Vocab {
public:
  // Parses `model.vocab` as an object of token -> id, ids in [0, idLimit).
  Status parseObject(const Json &model, const JsonPath &at, int64_t idLimit);
  // Adds the next id (for list vocabularies). Call index() once all are
  // added; a duplicate is then found by find(token) != its id.
  void push(std::string token);
  void index() { index_.build(tokens_, present_); }

  int32_t find(std::string_view token) const { return index_.find(token, tokens_); }
  const std::string *token(int32_t id) const {
    return id >= 0 && id < idEnd() && present_[id] ? &tokens_[id] : nullptr;
  }
  int32_t idEnd() const { return static_cast<int32_t>(tokens_.size()); }
  // Bytes of the longest token.
  size_t longestToken() const { return longest_; }

private:
  std::vector<std::string> tokens_; // by id; "" where `present_` is 0
  std::vector<uint8_t> present_;
  TokenIndex index_;
  size_t longest_ = 0;
};

} // namespace llmc::tok
