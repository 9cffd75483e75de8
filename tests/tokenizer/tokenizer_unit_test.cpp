// Unit tests of the tokenizer on small tokenizer.json documents written by
// the tests (tokenizer_test_util.h): both BPE families, added tokens,
// pre-tokenizer behaviours, decoders and the stream decoder.
#include "tokenizer/tokenizer.h"
#include "common/expect_value.h"
#include "tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace llmc {
namespace {

using Ids = std::vector<int32_t>;
using namespace llmc::test;

Tokenizer make(const Json &json) {
  return valueOrThrow(Tokenizer::fromJson(json.dump(), "test-tokenizer.json"));
}

int32_t b(char c) { return static_cast<uint8_t>(c); } // byte-level id of a byte

TEST(ByteLevelTokenizer, MergesByRank) {
  Tokenizer t = make(byteLevelTokenizer());
  // "hello" merges he, ll, hell, hello; " world" merges Ġw, or, Ġwor, ld.
  EXPECT_EQ(t.encode("hello world", false), (Ids{kHello, kGwor, kLd}));
  // Equal ranks merge leftmost first.
  EXPECT_EQ(t.encode("aaa", false), (Ids{kAa, b('a')}));
  EXPECT_EQ(t.encode("", false), Ids{});
  EXPECT_EQ(t.vocabSize(), kEndOfText + 1);
}

// Words over 64 symbols take the heap-based merge loop.
TEST(ByteLevelTokenizer, LongWords) {
  Tokenizer t = make(byteLevelTokenizer());
  std::string hellos;
  for (int i = 0; i < 40; ++i)
    hellos += "hello";
  EXPECT_EQ(t.encode(hellos, false), Ids(40, kHello));
  EXPECT_EQ(t.encode(std::string(201, 'a'), false).size(), 101u);
}

TEST(ByteLevelTokenizer, PairMergesEqualStringMerges) {
  Tokenizer strings = make(byteLevelTokenizer(false));
  Tokenizer pairs = make(byteLevelTokenizer(true));
  for (const char *text : {"hello world", "aaaa hell", "worldly hello"})
    EXPECT_EQ(strings.encode(text, false), pairs.encode(text, false)) << text;
}

TEST(ByteLevelTokenizer, SpecialTokensMatchedWithoutAddSpecialTokens) {
  Tokenizer t = make(byteLevelTokenizer());
  Ids ids = t.encode("hello<|endoftext|>hello", false);
  EXPECT_EQ(ids, (Ids{kHello, kEndOfText, kHello}));
  EXPECT_EQ(t.encode("hello<|endoftext|>hello", true), ids); // ByteLevel adds nothing
  EXPECT_EQ(t.decode(ids), "hello<|endoftext|>hello");
  EXPECT_EQ(t.decode(ids, /*skipSpecialTokens=*/true), "hellohello");
  EXPECT_TRUE(t.isSpecial(kEndOfText));
  EXPECT_EQ(t.eosId(), std::optional<int32_t>(kEndOfText));
  EXPECT_EQ(t.bosId(), std::nullopt);
}

TEST(ByteLevelTokenizer, VocabularyLookups) {
  Tokenizer t = make(byteLevelTokenizer());
  EXPECT_EQ(t.tokenToId("Ġwor"), std::optional<int32_t>(kGwor));
  EXPECT_EQ(t.tokenToId("<|endoftext|>"), std::optional<int32_t>(kEndOfText));
  EXPECT_EQ(t.tokenToId("nope"), std::nullopt);
  EXPECT_EQ(t.idToToken(kHello), std::optional<std::string>("hello"));
  EXPECT_EQ(t.idToToken(-1), std::nullopt);
  EXPECT_EQ(t.idToToken(kEndOfText + 1), std::nullopt);
  EXPECT_EQ(t.sourceJson(), byteLevelTokenizer().dump());
}

TEST(ByteLevelTokenizer, BytesAndInvalidUtf8) {
  Tokenizer t = make(byteLevelTokenizer());
  EXPECT_EQ(t.encode("é\n", false), (Ids{0xC3, 0xA9, '\n'}));
  // Invalid UTF-8 is repaired to U+FFFD (EF BF BD) before encoding.
  EXPECT_EQ(t.encode("\xff", false), (Ids{0xEF, 0xBF, 0xBD}));
  // A lone continuation byte decodes to U+FFFD.
  EXPECT_EQ(t.decode({0xA9}), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode({kHello, 12345, kGwor}), "hello wor"); // unknown ids are skipped
}

TEST(ByteLevelTokenizer, IgnoreMerges) {
  Json json = byteLevelTokenizer();
  EXPECT_EQ(make(json).encode("abc", false), (Ids{b('a'), b('b'), b('c')}));
  json["model"]["ignore_merges"] = true;
  EXPECT_EQ(make(json).encode("abc", false), Ids{kAbc});
}

// Qwen2's normalizer: NFC composes "e" + U+0301 into U+00E9 before BPE.
TEST(ByteLevelTokenizer, NfcNormalizerComposes) {
  Json json = byteLevelTokenizer();
  Ids composed = make(json).encode("\xC3\xA9", false);
  EXPECT_NE(make(json).encode("e\xCC\x81", false), composed);
  json["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(make(json).encode("e\xCC\x81", false), composed);
  json["normalizer"] = {{"type", "NFD"}};
  EXPECT_EQ(make(json).encode("\xC3\xA9", false), make(json).encode("e\xCC\x81", false));
}

TEST(ByteLevelTokenizer, AddPrefixSpace) {
  Json json = byteLevelTokenizer();
  json["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(make(json).encode("world", false), (Ids{kGwor, kLd}));
}

// Llama 3 / Qwen2 layout: a Split with the regex, then ByteLevel without it.
TEST(ByteLevelTokenizer, SplitThenByteLevelSequence) {
  Json json = byteLevelTokenizer();
  json["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"},
         {"add_prefix_space", false},
         {"trim_offsets", true},
         {"use_regex", false}}}}};
  Tokenizer t = make(json);
  EXPECT_EQ(t.encode("hello world", false), (Ids{kHello, kGwor, kLd}));
  // \p{N}{1,3} splits digits in threes.
  EXPECT_EQ(t.encode("12345", false), (Ids{b('1'), b('2'), b('3'), b('4'), b('5')}));
}

// Each Split behaviour, seen through merges that cross the delimiter "-".
TEST(ByteLevelTokenizer, SplitBehaviors) {
  auto encode = [](const char *behavior, bool invert, const char *text) {
    Json json = byteLevelTokenizer();
    json["model"]["vocab"]["l-"] = 300;
    json["model"]["vocab"]["-l"] = 301;
    json["model"]["merges"].push_back("l -");
    json["model"]["merges"].push_back("- l");
    json["added_tokens"][0]["id"] = 302;
    json["pre_tokenizer"] = {{"type", "Split"},
                             {"pattern", {{"String", "-"}}},
                             {"behavior", behavior},
                             {"invert", invert}};
    for (int id = kEndOfText; id < 300; ++id) // keep ids dense
      json["model"]["vocab"]["<pad" + std::to_string(id) + ">"] = id;
    return make(json).encode(text, false);
  };
  int32_t l = b('l'), dash = b('-');
  EXPECT_EQ(encode("Isolated", false, "l-l"), (Ids{l, dash, l}));
  EXPECT_EQ(encode("Removed", false, "l-l"), (Ids{l, l}));
  EXPECT_EQ(encode("MergedWithPrevious", false, "l-l"), (Ids{300, l}));
  EXPECT_EQ(encode("MergedWithNext", false, "l-l"), (Ids{l, 301}));
  EXPECT_EQ(encode("Contiguous", false, "l--l"), (Ids{l, dash, dash, l}));
  // Inverted: the non-dash runs are the matches, so removing them keeps "-".
  EXPECT_EQ(encode("Removed", true, "l-l"), Ids{dash});
}

TEST(ByteLevelTokenizer, StreamDecoderHoldsPartialUtf8) {
  Tokenizer t = make(byteLevelTokenizer());
  StreamDecoder stream(t);
  EXPECT_EQ(stream.step(kHello), "hello");
  EXPECT_EQ(stream.step(0xC3), ""); // first byte of "é"
  EXPECT_EQ(stream.step(0xA9), "é");
  EXPECT_EQ(stream.step(0xE2), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD"); // an incomplete character at the end
}

TEST(SentencePieceTokenizer, EncodesWithPrependAndByteFallback) {
  Tokenizer t = make(sentencePieceTokenizer());
  EXPECT_EQ(t.encode("ab", true), (Ids{kBos, kMetaAB}));
  EXPECT_EQ(t.encode("ab", false), Ids{kMetaAB});
  EXPECT_EQ(t.encode("ab ab", false), (Ids{kMetaAB, kMetaAB}));
  EXPECT_EQ(t.encode("c", false), (Ids{kMeta, kC}));
  EXPECT_EQ(t.encode("é", false), (Ids{kMeta, kByte0 + 0xC3, kByte0 + 0xA9}));
  EXPECT_EQ(t.encode("", true), Ids{kBos});
  EXPECT_EQ(t.bosId(), std::optional<int32_t>(kBos));
  EXPECT_EQ(t.eosId(), std::optional<int32_t>(kEos));
}

// The whole text is one word here: long ones are cut where no merge joins.
TEST(SentencePieceTokenizer, LongText) {
  Tokenizer t = make(sentencePieceTokenizer());
  std::string text;
  Ids expected;
  for (int i = 0; i < 50; ++i) {
    text += i ? " abcé" : "abcé";
    expected.insert(expected.end(), {kMetaAB, kC, kByte0 + 0xC3, kByte0 + 0xA9});
  }
  EXPECT_EQ(t.encode(text, false), expected);
  EXPECT_EQ(t.decode(expected), text);
}

TEST(SentencePieceTokenizer, SpecialTokensSplitTheText) {
  Tokenizer t = make(sentencePieceTokenizer());
  // Each piece between special tokens is normalized on its own (Prepend).
  EXPECT_EQ(t.encode("ab</s>ab", false), (Ids{kMetaAB, kEos, kMetaAB}));
  EXPECT_EQ(t.encode("<s>ab", true), (Ids{kBos, kBos, kMetaAB}));
}

TEST(SentencePieceTokenizer, Decodes) {
  Tokenizer t = make(sentencePieceTokenizer());
  EXPECT_EQ(t.decode({kBos, kMetaAB, kMetaAB}, true), "ab ab");
  EXPECT_EQ(t.decode({kBos, kMetaAB, kMetaAB}), "<s> ab ab");
  EXPECT_EQ(t.decode({kMeta, kByte0 + 0xC3, kByte0 + 0xA9}), "é");
  // An invalid <0xXX> run becomes one U+FFFD per byte.
  EXPECT_EQ(t.decode({kA, kByte0 + 0xC3, kB}), "a\xEF\xBF\xBD"
                                               "b");
  EXPECT_EQ(t.decode({kA, kByte0 + 0xE2, kByte0 + 0x82, kB}), "a\xEF\xBF\xBD\xEF\xBF\xBD"
                                                              "b");
}

TEST(SentencePieceTokenizer, StreamDecoderKeepsSpaces) {
  Tokenizer t = make(sentencePieceTokenizer());
  Ids ids = t.encode("ab ab c é", true);
  StreamDecoder stream(t, /*skipSpecialTokens=*/true);
  std::vector<std::string> pieces;
  for (int32_t id : ids)
    pieces.push_back(stream.step(id));
  pieces.push_back(stream.flush());
  std::string joined;
  for (const std::string &piece : pieces)
    joined += piece;
  EXPECT_EQ(joined, "ab ab c é");
  EXPECT_EQ(pieces[2], " ab");              // the space Strip removes only at the very start
  EXPECT_EQ(pieces[pieces.size() - 3], ""); // é's first byte is held back
  EXPECT_EQ(pieces[pieces.size() - 2], "é");
}

TEST(SentencePieceTokenizer, UnknownCharactersFuse) {
  Json json = sentencePieceTokenizer();
  json["model"]["byte_fallback"] = false;
  EXPECT_EQ(make(json).encode("éé", false), (Ids{kMeta, kUnk}));
  json["model"]["fuse_unk"] = false;
  EXPECT_EQ(make(json).encode("éé", false), (Ids{kMeta, kUnk, kUnk}));
}

TEST(SentencePieceTokenizer, MetaspacePreTokenizer) {
  Json json = sentencePieceTokenizer();
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  Tokenizer first = make(json);
  EXPECT_EQ(first.encode("ab ab", false), (Ids{kMetaAB, kMetaAB}));
  // "first" prepends only to the text at the start of the input.
  EXPECT_EQ(first.encode("</s>ab", false), (Ids{kEos, kAB}));
  json["pre_tokenizer"]["prepend_scheme"] = "always";
  EXPECT_EQ(make(json).encode("</s>ab", false), (Ids{kEos, kMetaAB}));
  json["pre_tokenizer"]["prepend_scheme"] = "never";
  EXPECT_EQ(make(json).encode("ab ab", false), (Ids{kAB, kMetaAB}));
}

Json withAddedToken(const char *content, bool lstrip, bool rstrip, bool singleWord) {
  Json json = sentencePieceTokenizer();
  json["added_tokens"].push_back({{"id", kMetaAB + 1},
                                  {"content", content},
                                  {"single_word", singleWord},
                                  {"lstrip", lstrip},
                                  {"rstrip", rstrip},
                                  {"normalized", false},
                                  {"special", false}});
  return json;
}

TEST(SentencePieceTokenizer, AddedTokenStripOptions) {
  const int32_t mask = kMetaAB + 1;
  EXPECT_EQ(make(withAddedToken("[M]", false, false, false)).encode("ab [M] ab", false),
            (Ids{kMetaAB, kMeta, mask, kMeta, kMetaAB})); // " ab" -> "▁▁ab"
  EXPECT_EQ(make(withAddedToken("[M]", true, true, false)).encode("ab [M] ab", false),
            (Ids{kMetaAB, mask, kMetaAB}));
  Tokenizer single = make(withAddedToken("[M]", false, false, true));
  EXPECT_EQ(single.encode("a [M]", false), (Ids{kMetaA, kMeta, mask}));
  Ids glued = single.encode("a[M]", false); // a word character touches it: not matched
  EXPECT_EQ(std::count(glued.begin(), glued.end(), mask), 0);
  EXPECT_FALSE(single.isSpecial(mask));
  EXPECT_EQ(single.decode({kMetaAB, mask}, /*skipSpecialTokens=*/true), "ab[M]");
}

// The fuzz target's seeds must import, or the fuzzer starts from nothing.
TEST(TokenizerFuzzCorpus, SeedsImport) {
  size_t count = 0;
  for (const auto &entry : std::filesystem::directory_iterator(std::string(LLMC_SOURCE_DIR) +
                                                               "/tests/tokenizer/corpus")) {
    auto tokenizer = Tokenizer::fromFile(entry.path().string());
    EXPECT_TRUE(tokenizer.isOk()) << tokenizer.message();
    ++count;
  }
  EXPECT_GE(count, 5u);
}

} // namespace
} // namespace llmc
