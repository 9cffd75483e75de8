#include "tokenizer/wordpiece.h"

#include "tokenizer/limits.h"
#include "tokenizer/utf8.h"

namespace llmc::tok {

Expected<WordPieceModel> WordPieceModel::fromJson(const Json &model, const JsonPath &at,
                                                  int64_t idLimit) {
  LLMC_RETURN_IF_ERROR(checkKeys(
      model, at, {"type", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word",
                  "vocab"}));
  WordPieceModel wp;
  LLMC_RETURN_IF_ERROR(wp.vocab_.parseObject(model, at, idLimit));
  LLMC_ASSIGN_OR_RETURN(std::string unk, getString(model, "unk_token", at));
  wp.unkId_ = wp.find(unk);
  if (wp.unkId_ < 0)
    return at.child("unk_token").error("'" + unk + "' is not in model.vocab");
  LLMC_ASSIGN_OR_RETURN(auto prefix, getOptionalString(model, "continuing_subword_prefix", at));
  wp.prefix_ = prefix ? *prefix : "##";
  if (wp.prefix_.size() > kMaxInsertBytes)
    return at.child("continuing_subword_prefix")
        .error("is longer than " + std::to_string(kMaxInsertBytes) + " bytes");
  LLMC_ASSIGN_OR_RETURN(int64_t maxChars,
                        getInt(model, "max_input_chars_per_word", int64_t(100), 0, INT32_MAX, at));
  wp.maxChars_ = static_cast<size_t>(maxChars);
  return wp;
}

void WordPieceModel::encodeWord(std::string_view word, std::vector<int32_t> &ids) const {
  size_t chars = 0;
  for (char c : word)
    chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  if (chars > maxChars_) {
    ids.push_back(unkId_);
    return;
  }
  size_t firstId = ids.size();
  thread_local std::string candidate;
  for (size_t start = 0; start < word.size();) {
    size_t affix = start > 0 ? prefix_.size() : 0;
    // The longest candidate that could be a token, cut back to a character boundary.
    size_t end = word.size();
    if (affix + (end - start) > vocab_.longestToken()) {
      end = start + (vocab_.longestToken() > affix ? vocab_.longestToken() - affix : 0);
      while (end > start && end < word.size() && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80)
        --end;
    }
    int32_t id = -1;
    for (; end > start; ) {
      candidate.assign(start > 0 ? prefix_ : std::string());
      candidate.append(word.substr(start, end - start));
      id = vocab_.find(candidate);
      if (id >= 0)
        break;
      do
        --end;
      while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
    }
    if (id < 0) { // a part no token covers: the whole word is unk
      ids.resize(firstId);
      ids.push_back(unkId_);
      return;
    }
    ids.push_back(id);
    start = end;
  }
}

Expected<WordLevelModel> WordLevelModel::fromJson(const Json &model, const JsonPath &at,
                                                  int64_t idLimit) {
  LLMC_RETURN_IF_ERROR(checkKeys(model, at, {"type", "unk_token", "vocab"}));
  WordLevelModel wl;
  wl.source_ = *at.source + ": field '" + at.path + "'";
  LLMC_RETURN_IF_ERROR(wl.vocab_.parseObject(model, at, idLimit));
  LLMC_ASSIGN_OR_RETURN(auto unk, getOptionalString(model, "unk_token", at));
  wl.unkToken_ = unk ? *unk : "<unk>";
  wl.unkId_ = wl.find(wl.unkToken_);
  return wl;
}

Status WordLevelModel::encodeWord(std::string_view word, std::vector<int32_t> &ids) const {
  int32_t id = find(word);
  if (id < 0 && unkId_ < 0)
    return Status::error(source_ + ": word '" + std::string(word.substr(0, 100)) +
                         "' is not in the vocabulary and unk_token '" + unkToken_ +
                         "' is not either");
  ids.push_back(id >= 0 ? id : unkId_);
  return Status::ok();
}

} // namespace llmc::tok
