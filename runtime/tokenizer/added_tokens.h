// Added tokens ("added_tokens" in tokenizer.json): strings matched in the
// input before the model sees it, as Hugging Face's AddedVocabulary does.
// Matching is leftmost-longest over all patterns; a match of a single_word
// token is dropped when a word character touches it; lstrip / rstrip extend a
// match over the whitespace on its left / right. Tokens with normalized=false
// are matched in the raw text, those with normalized=true in the normalized
// text (against their normalized content).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool singleWord = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// A piece of text after splitting on added tokens: the span [begin, end) is
// either added token `id` or, when id is -1, text for the model.
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedTokenMatcher {
public:
  // Matches `pattern` (the token's content, normalized if the token is) as
  // `token`. Call finish() after the last add and before split().
  void add(std::string pattern, const AddedToken &token);
  void finish();

  // Appends the segments that cover `text`. Empty text gives no segment.
  void split(std::string_view text, std::vector<Segment> &segments) const;

private:
  struct Entry {
    std::string pattern;
    AddedToken token;
  };
  // Index of the longest pattern that matches at `pos`, or -1.
  int longestMatchAt(std::string_view text, size_t pos) const;

  std::vector<Entry> entries_;
  // Entries by first byte, longest pattern first.
  std::array<std::vector<uint32_t>, 256> byFirstByte_;
};

} // namespace llmc::tok
