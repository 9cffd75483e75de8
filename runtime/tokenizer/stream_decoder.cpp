#include "tokenizer/tokenizer.h"

#include "tokenizer/utf8.h"

namespace llmc {

StreamDecoder::StreamDecoder(Tokenizer tokenizer, bool skipSpecialTokens)
    : tokenizer_(std::move(tokenizer)), skipSpecialTokens_(skipSpecialTokens) {}

StreamDecoder::StreamDecoder(Tokenizer tokenizer, std::vector<int32_t> context,
                             bool skipSpecialTokens)
    : tokenizer_(std::move(tokenizer)), skipSpecialTokens_(skipSpecialTokens),
      ids_(std::move(context)), contextCount_(ids_.size()),
      contextText_(tokenizer_.decode(ids_, skipSpecialTokens_)) {}

// The part of `text` past the context's text. `text` extends the context's
// text for every decoder llmc supports, except around invalid bytes (a
// valid <0xXX> run that later turns invalid becomes U+FFFD per byte); then
// the characters past the context's character count are emitted.
std::string StreamDecoder::emitBeyondPrefix(const std::string &text) const {
  if (text.compare(0, contextText_.size(), contextText_) == 0)
    return text.substr(contextText_.size());
  size_t contextChars = 0;
  for (char c : contextText_)
    contextChars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  size_t pos = 0;
  for (; pos < text.size() && contextChars > 0; contextChars--)
    pos += utf8::charLength(static_cast<uint8_t>(text[pos]));
  return pos < text.size() ? text.substr(pos) : std::string();
}

std::string StreamDecoder::step(int32_t id) {
  ids_.push_back(id);
  std::string text = tokenizer_.decode(ids_, skipSpecialTokens_);
  bool held = text.size() >= utf8::kReplacementChar.size() &&
              text.compare(text.size() - utf8::kReplacementChar.size(),
                           utf8::kReplacementChar.size(), utf8::kReplacementChar) == 0;
  if (text.size() <= contextText_.size() || held)
    return std::string();
  std::string piece = emitBeyondPrefix(text);
  // The ids just emitted become the context of the next piece.
  ids_.erase(ids_.begin(), ids_.begin() + contextCount_);
  contextCount_ = ids_.size();
  contextText_ = tokenizer_.decode(ids_, skipSpecialTokens_);
  return piece;
}

std::string StreamDecoder::flush() {
  std::string text = tokenizer_.decode(ids_, skipSpecialTokens_);
  std::string piece = text.size() > contextText_.size() ? emitBeyondPrefix(text) : std::string();
  ids_.clear();
  contextCount_ = 0;
  contextText_.clear();
  return piece;
}

} // namespace llmc
