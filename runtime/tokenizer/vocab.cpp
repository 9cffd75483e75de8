#include "tokenizer/vocab.h"

#include <algorithm>

namespace llmc::tok {

Status Vocab::parseObject(const Json &model, const JsonPath &at, int64_t idLimit) {
  const Json *vocab = member(model, "vocab");
  JsonPath vocabAt = at.child("vocab");
  if (vocab == nullptr)
    return vocabAt.error("missing (expected an object of token -> id)");
  if (!vocab->is_object())
    return vocabAt.wrongType("an object of token -> id", *vocab);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const Json &id = it.value();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= idLimit)
      return vocabAt.error("token '" + it.key() + "' has id " + id.dump() +
                           ", expected an integer in [0, " + std::to_string(idLimit) +
                           ") (ids must be dense over the vocabulary and added_tokens)");
    size_t index = id.get<size_t>();
    if (index >= tokens_.size()) {
      tokens_.resize(index + 1);
      present_.resize(index + 1, 0);
    }
    if (present_[index])
      return vocabAt.error("id " + std::to_string(index) + " is used by both '" + tokens_[index] +
                           "' and '" + it.key() + "'");
    tokens_[index] = it.key();
    present_[index] = 1;
    longest_ = std::max(longest_, it.key().size());
  }
  index();
  return Status::ok();
}

void Vocab::push(std::string token) {
  longest_ = std::max(longest_, token.size());
  tokens_.push_back(std::move(token));
  present_.push_back(1);
}

} // namespace llmc::tok
