#include "tokenizer/added_tokens.h"

#include "tokenizer/chars.h"
#include "tokenizer/utf8.h"

#include <algorithm>

namespace llmc::tok {
namespace {

// The start of the character that ends text[0, end).
size_t previousCharStart(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80)
    --pos;
  return pos;
}

char32_t charAt(std::string_view text, size_t pos) {
  char32_t cp = 0xFFFD;
  utf8::decode(text, pos, cp);
  return cp;
}

bool isWordChar(char32_t cp) { return chars::isWordChar(cp); }

} // namespace

void AddedTokenMatcher::add(std::string pattern, const AddedToken &token) {
  if (pattern.empty())
    return; // Hugging Face never matches empty content
  uint8_t first = static_cast<uint8_t>(pattern[0]);
  entries_.push_back({std::move(pattern), token});
  byFirstByte_[first].push_back(static_cast<uint32_t>(entries_.size() - 1));
}

// One sort per bucket once all tokens are in: sorting on every add made
// 40k added tokens cost half a minute at every start.
void AddedTokenMatcher::finish() {
  for (std::vector<uint32_t> &bucket : byFirstByte_)
    std::stable_sort(bucket.begin(), bucket.end(), [&](uint32_t a, uint32_t b) {
      return entries_[a].pattern.size() > entries_[b].pattern.size();
    });
}

int AddedTokenMatcher::longestMatchAt(std::string_view text, size_t pos) const {
  for (uint32_t index : byFirstByte_[static_cast<uint8_t>(text[pos])]) {
    const std::string &pattern = entries_[index].pattern;
    if (text.compare(pos, pattern.size(), pattern) == 0)
      return static_cast<int>(index);
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment> &segments) const {
  size_t done = 0; // text before `done` is already in `segments`
  for (size_t pos = 0; pos < text.size() && !entries_.empty();) {
    int index = longestMatchAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const Entry &entry = entries_[index];
    size_t start = pos, stop = pos + entry.pattern.size();
    pos = stop; // matches never overlap, even a rejected single_word one
    if (start < done)
      continue;
    if (entry.token.singleWord) {
      bool wordBefore = start > 0 && isWordChar(charAt(text, previousCharStart(text, start)));
      bool wordAfter = stop < text.size() && isWordChar(charAt(text, stop));
      if (wordBefore || wordAfter)
        continue;
    }
    if (entry.token.lstrip)
      while (start > done && utf8::isWhitespace(charAt(text, previousCharStart(text, start))))
        start = previousCharStart(text, start);
    if (entry.token.rstrip)
      while (stop < text.size() && utf8::isWhitespace(charAt(text, stop)))
        stop += utf8::charLength(static_cast<uint8_t>(text[stop]));
    if (start > done)
      segments.push_back({done, start, -1});
    segments.push_back({start, stop, entry.token.id});
    done = stop;
    pos = std::max(pos, stop);
  }
  if (done < text.size())
    segments.push_back({done, text.size(), -1});
}

} // namespace llmc::tok
