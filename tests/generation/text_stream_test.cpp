// TextStream on the tokenizers the tokenizer tests write (both families) and
// on the default model's tokenizer.json, which ships in the repository.
#include "generation/text_stream.h"
#include "stream_check.h"
#include "tokenizer/tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <random>

namespace llmc {
namespace {

using Ids = std::vector<int32_t>;
using namespace llmc::test;

Tokenizer make(const Json &json) {
  auto tokenizer = Tokenizer::fromJson(json.dump(), "test-tokenizer.json");
  EXPECT_TRUE(tokenizer.isOk()) << tokenizer.message();
  return std::move(tokenizer).value();
}

int32_t b(char c) { return static_cast<uint8_t>(c); } // byte-level id of a byte

Tokenizer defaultModelTokenizer() {
  auto tokenizer =
      Tokenizer::fromFile(std::string(LLMC_SOURCE_DIR) + "/scripts/default-model/tokenizer.json");
  EXPECT_TRUE(tokenizer.isOk()) << tokenizer.message();
  return std::move(tokenizer).value();
}

// The bug this class exists for: "Once upon a" + "▁time" streamed "time".
TEST(TextStream, SentencePieceKeepsTheSpaceBeforeTheFirstGeneratedWord) {
  Tokenizer t = make(sentencePieceTokenizer());
  Ids prompt = t.encode("ab", true);
  std::vector<std::string> pieces = streamPieces(t, prompt, {kMetaAB, kMetaA});
  EXPECT_EQ(pieces[0], " ab");
  EXPECT_EQ(pieces[1], " a");
  // Without the prompt as context the decoder's Strip eats the space.
  StreamDecoder bare(t, true);
  EXPECT_EQ(bare.step(kMetaAB), "ab");
}

TEST(TextStream, SentencePieceHoldsACharacterSplitAcrossByteTokens) {
  Tokenizer t = make(sentencePieceTokenizer());
  Ids prompt = t.encode("ab", true);
  // " 中" = ▁ then <0xE4><0xB8><0xAD>.
  std::vector<std::string> pieces =
      streamPieces(t, prompt, {kMeta, kByte0 + 0xE4, kByte0 + 0xB8, kByte0 + 0xAD, kC});
  EXPECT_EQ(pieces, (std::vector<std::string>{" ", "", "", "中", "c", ""}));
  expectStreamMatchesDecode(t, prompt, t.encode("中 ab é😀 c", false));
}

TEST(TextStream, SentencePieceEqualsDecodeOnRandomSplits) {
  Tokenizer t = make(sentencePieceTokenizer());
  const std::vector<std::string> texts = {"ab ab c", "é ab", "中文 ab", "😀😀 c", "  ab  ", "abc"};
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string text;
    for (int i = 0; i < 4; ++i)
      text += texts[rng() % texts.size()];
    Ids all = t.encode(text, true);
    size_t split = 1 + rng() % all.size();
    while (split < all.size() && !splitsAtACharacter(t, all, split))
      ++split;
    Ids prompt(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(split));
    Ids generated(all.begin() + static_cast<std::ptrdiff_t>(split), all.end());
    ASSERT_NO_FATAL_FAILURE(expectStreamMatchesDecode(t, prompt, generated)) << text;
  }
}

TEST(TextStream, ByteLevelHoldsPartialUtf8AndEqualsDecode) {
  Tokenizer t = make(byteLevelTokenizer());
  Ids prompt = t.encode("hello", false);
  // "é" = C3 A9, "😀" = F0 9F 98 80: one byte per token.
  std::vector<std::string> pieces = streamPieces(t, prompt, {0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80});
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "é", "", "", "", "😀", ""}));
  expectStreamMatchesDecode(t, prompt, t.encode(" world 中文😀 hello", false));
}

TEST(TextStream, APromptEndingInsideACharacterIsCompletedByTheGeneratedBytes) {
  Tokenizer t = make(byteLevelTokenizer());
  // The prompt stops after the first two bytes of 中 (E4 B8 AD).
  Ids prompt = {kHello, 0xE4, 0xB8};
  std::vector<std::string> pieces = streamPieces(t, prompt, {0xAD, b(' ')});
  std::string streamed = pieces[0] + pieces[1] + pieces[2];
  // Whatever the prompt's text shows for its broken end, the stream never
  // emits a broken character.
  EXPECT_TRUE(utf8::isValid(streamed)) << streamed;
  EXPECT_EQ(streamed.substr(streamed.size() - 1), " ");
}

TEST(TextStream, SpecialTokensAreSkippedByDefault) {
  Tokenizer t = make(byteLevelTokenizer());
  Ids prompt = t.encode("hello", false);
  std::vector<std::string> skipped = streamPieces(t, prompt, {kEndOfText, kGwor, kLd});
  EXPECT_EQ(skipped[0] + skipped[1] + skipped[2], " world");
  std::vector<std::string> kept = streamPieces(t, prompt, {kEndOfText, kGwor, kLd}, false);
  EXPECT_EQ(kept[0], "<|endoftext|>");
  expectStreamMatchesDecode(t, prompt, {kEndOfText, kGwor, kLd}, false);
}

TEST(TextStream, DefaultModelTokenizerEqualsDecode) {
  Tokenizer t = defaultModelTokenizer();
  const std::vector<std::string> prompts = {"Once upon a", "Hello", "中文", " x"};
  const std::vector<std::string> continuations = {" time, there was", "😀 and 中文 text",
                                                  "\n\n  spaces  ", "é à ü ß"};
  for (const std::string &p : prompts)
    for (const std::string &c : continuations)
      ASSERT_NO_FATAL_FAILURE(expectStreamMatchesDecode(t, t.encode(p, true), t.encode(c, false)))
          << p << " + " << c;
}

TEST(TextStream, StopStringSplitAcrossTokensIsCutAndHeldBack) {
  Tokenizer t = make(byteLevelTokenizer());
  Ids prompt = t.encode("x", false);
  generation::TextStream stream(t, prompt, {"wor"});
  EXPECT_EQ(stream.push(kHello).text, "hello");
  EXPECT_EQ(stream.push(kGw).text, " "); // "w" may start "wor": held back
  EXPECT_FALSE(stream.stopped());
  generation::TextStream::Update update = stream.push(kOr);
  EXPECT_TRUE(update.stopped);
  EXPECT_EQ(update.text, "");
  EXPECT_EQ(stream.text(), "hello ");
  EXPECT_EQ(stream.matchedStop(), "wor");
  EXPECT_EQ(stream.push(kLd).text, ""); // nothing after a stop
  EXPECT_EQ(stream.finish(), "");
}

TEST(TextStream, HeldBackTextComesOutWhenNoStopFollows) {
  Tokenizer t = make(byteLevelTokenizer());
  generation::TextStream stream(t, t.encode("x", false), {"world!"});
  EXPECT_EQ(stream.push(kHello).text, "hello");
  EXPECT_EQ(stream.push(kGwor).text, " ");
  EXPECT_EQ(stream.push(kLd).text, "");
  EXPECT_EQ(stream.finish(), "world");
  EXPECT_EQ(stream.text(), "hello world");
  EXPECT_FALSE(stream.stopped());
}

TEST(TextStream, StopStringInsideAMultiByteCharacterRun) {
  Tokenizer t = make(byteLevelTokenizer());
  generation::TextStream stream(t, t.encode("x", false), {"中"});
  EXPECT_EQ(stream.push(kHello).text, "hello");
  EXPECT_EQ(stream.push(0xE4).text, "");
  EXPECT_EQ(stream.push(0xB8).text, "");
  EXPECT_TRUE(stream.push(0xAD).stopped);
  EXPECT_EQ(stream.text(), "hello");
}

} // namespace
} // namespace llmc
