#include "generation/text_stream.h"

#include "tokenizer/utf8.h"

namespace llmc::generation {
namespace {

// Enough prompt tokens that the decoders llmc supports (byte-level,
// SentencePiece: Replace, ByteFallback, Fuse, Strip, Metaspace) decode the
// generated ids as in a decode of the whole sequence.
constexpr size_t kContextTokens = 4;
// A character's bytes span at most 4 tokens (byte fallback, byte-level).
constexpr size_t kMaxExtraContext = 4;

bool startsWithReplacement(const std::string &text) {
  return text.compare(0, utf8::kReplacementChar.size(), utf8::kReplacementChar) == 0;
}

} // namespace

std::vector<int32_t> promptContext(const Tokenizer &tokenizer, const std::vector<int32_t> &prompt,
                                   bool skipSpecialTokens) {
  size_t start = prompt.size() > kContextTokens ? prompt.size() - kContextTokens : 0;
  for (size_t extra = 0; start > 0 && extra < kMaxExtraContext; ++extra) {
    std::vector<int32_t> suffix(prompt.begin() + static_cast<std::ptrdiff_t>(start), prompt.end());
    if (!startsWithReplacement(tokenizer.decode(suffix, skipSpecialTokens)))
      break;
    --start;
  }
  return std::vector<int32_t>(prompt.begin() + static_cast<std::ptrdiff_t>(start), prompt.end());
}

TextStream::TextStream(Tokenizer tokenizer, const std::vector<int32_t> &prompt,
                       std::vector<std::string> stopStrings, bool skipSpecialTokens)
    : decoder_(tokenizer, promptContext(tokenizer, prompt, skipSpecialTokens), skipSpecialTokens),
      stops_(std::move(stopStrings)) {}

TextStream::Update TextStream::push(int32_t id, bool mayStop) {
  Update update;
  if (finished_ || stops_.stopped())
    return update;
  StopStrings::Piece piece = stops_.push(decoder_.step(id), mayStop);
  update.text = std::move(piece.text);
  update.stopped = piece.stopped;
  text_ += update.text;
  return update;
}

std::string TextStream::finish() {
  if (finished_ || stops_.stopped())
    return std::string();
  finished_ = true;
  StopStrings::Piece piece = stops_.push(decoder_.flush(), true);
  std::string rest = piece.text + (piece.stopped ? std::string() : stops_.flush());
  text_ += rest;
  return rest;
}

} // namespace llmc::generation
