// TextStream on real tokenizers from ../shared: stories260K's and Llama 2's
// (SentencePiece with byte fallback) and GPT-2's (byte-level): the streamed
// text equals decode(prompt + generated) minus decode(prompt), with CJK and
// emoji whose bytes span several tokens.
#include "common/test_paths.h"
#include "generation/text_stream.h"
#include "stream_check.h"

#include <gtest/gtest.h>

#include <random>

namespace llmc {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer load(const std::string &relative) {
  auto tokenizer = Tokenizer::fromFile(test::sharedPath(relative));
  EXPECT_TRUE(tokenizer.isOk()) << tokenizer.message();
  return std::move(tokenizer).value();
}

const std::vector<std::string> kTexts = {
    "Once upon a time, there was a little girl named Lily.",
    " She liked 中文 and 日本語 and 한국어.",
    "Emoji: 😀🎉👍🏽 and flags 🇫🇷!",
    "  two spaces\tand a tab\nnew line",
    "Ünïcödé façade naïve — “quotes”",
    "code: for (int i = 0; i < n; ++i) { x += y; }",
};

// Every split of every text pair into a prompt and a generated part.
void checkSplits(const Tokenizer &t) {
  std::mt19937 rng(5);
  for (const std::string &a : kTexts)
    for (const std::string &b : kTexts) {
      Ids all = t.encode(a + b, true);
      for (int trial = 0; trial < 6; ++trial) {
        size_t split = 1 + rng() % (all.size() - 1);
        while (split < all.size() && !test::splitsAtACharacter(t, all, split))
          ++split;
        Ids prompt(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(split));
        Ids generated(all.begin() + static_cast<std::ptrdiff_t>(split), all.end());
        ASSERT_NO_FATAL_FAILURE(test::expectStreamMatchesDecode(t, prompt, generated))
            << a << b << " split at " << split;
      }
      ASSERT_NO_FATAL_FAILURE(test::expectStreamMatchesDecode(t, t.encode(a, true),
                                                              t.encode(b, false)));
    }
}

TEST(TextStreamGolden, Stories260kKeepsTheSpaceAfterThePrompt) {
  LLMC_REQUIRE_SHARED("models/stories260k/tokenizer.json");
  Tokenizer t = load("models/stories260k/tokenizer.json");
  Ids prompt = t.encode("Once upon a", true);
  Ids all = t.encode("Once upon a time, there", true);
  ASSERT_EQ(Ids(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(prompt.size())), prompt);
  Ids generated(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end());
  std::string streamed;
  for (const std::string &piece : test::streamPieces(t, prompt, generated))
    streamed += piece;
  EXPECT_EQ(streamed, " time, there");
  checkSplits(t);
}

TEST(TextStreamGolden, Llama2SentencePiece) {
  LLMC_REQUIRE_SHARED("tokenizers/llama2/tokenizer.json");
  Tokenizer t = load("tokenizers/llama2/tokenizer.json");
  // 😀 is not in the vocabulary: ▁ and four byte-fallback tokens.
  ASSERT_EQ(t.encode("😀", false).size(), 5u);
  checkSplits(t);
}

TEST(TextStreamGolden, Gpt2ByteLevel) {
  LLMC_REQUIRE_SHARED("tokenizers/gpt2/tokenizer.json");
  Tokenizer t = load("tokenizers/gpt2/tokenizer.json");
  checkSplits(t);
}

} // namespace
} // namespace llmc
