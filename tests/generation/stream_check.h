// The property every TextStream test checks: the streamed text equals
// decode(prompt + generated) minus decode(prompt).
#pragma once

#include "generation/text_stream.h"
#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmc::test {

// Streams `generated` after `prompt`; returns the pieces (the last one is
// finish()'s).
inline std::vector<std::string> streamPieces(const Tokenizer &tokenizer,
                                             const std::vector<int32_t> &prompt,
                                             const std::vector<int32_t> &generated,
                                             bool skipSpecialTokens = true) {
  generation::TextStream stream(tokenizer, prompt, {}, skipSpecialTokens);
  std::vector<std::string> pieces;
  for (int32_t id : generated)
    pieces.push_back(stream.push(id).text);
  pieces.push_back(stream.finish());
  return pieces;
}

// Whether all[0:split] ends at a character boundary of the text, so that
// decode(prompt) is a prefix of decode(all) and "minus" is defined.
inline bool splitsAtACharacter(const Tokenizer &tokenizer, const std::vector<int32_t> &all,
                               size_t split) {
  std::vector<int32_t> prompt(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(split));
  std::string before = tokenizer.decode(prompt, true);
  return tokenizer.decode(all, true).compare(0, before.size(), before) == 0;
}

inline void expectStreamMatchesDecode(const Tokenizer &tokenizer, const std::vector<int32_t> &prompt,
                                      const std::vector<int32_t> &generated,
                                      bool skipSpecialTokens = true) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const std::string whole = tokenizer.decode(all, skipSpecialTokens);
  const std::string before = tokenizer.decode(prompt, skipSpecialTokens);
  ASSERT_EQ(whole.compare(0, before.size(), before), 0)
      << "decode(prompt) is not a prefix of decode(all): '" << before << "' vs '" << whole << "'";
  std::string streamed;
  for (const std::string &piece : streamPieces(tokenizer, prompt, generated, skipSpecialTokens)) {
    EXPECT_TRUE(utf8::isValid(piece)) << "a piece is not complete UTF-8: '" << piece << "'";
    streamed += piece;
  }
  EXPECT_EQ(streamed, whole.substr(before.size()))
      << "prompt " << ::testing::PrintToString(prompt) << " generated "
      << ::testing::PrintToString(generated);
}

} // namespace llmc::test
