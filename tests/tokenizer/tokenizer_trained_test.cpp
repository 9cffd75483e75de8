// llmc's tokenizer against Hugging Face `tokenizers` on tokenizers trained
// locally (tests/data/tokenizers, written by make_trained_tokenizers.py):
// a Unigram (Nmt/NFKC/Replace, Metaspace), a WordPiece with BertNormalizer
// and BertPreTokenizer, a WordPiece with the same steps as separate
// components (NFD, Lowercase, StripAccents, Strip; WhitespaceSplit,
// Punctuation, Digits) and a BPE with Whitespace, Punctuation and
// individual Digits. For each of 236 strings (unicode, emoji, CJK, Korean,
// whitespace runs, code, accents, digits, controls, the empty string): the
// ids with and without special tokens and the decoded text, exactly.
#include "common/test_paths.h"
#include "support/json.h"
#include "support/mapped_file.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

namespace llmc {
namespace {

std::vector<int32_t> idsOf(const Json &list) { return list.get<std::vector<int32_t>>(); }

std::string streamDecode(const Tokenizer &tokenizer, const std::vector<int32_t> &ids) {
  StreamDecoder stream(tokenizer);
  std::string text;
  for (int32_t id : ids)
    text += stream.step(id);
  return text + stream.flush();
}

void checkTrained(const std::string &name) {
  auto tokenizer = Tokenizer::fromFile(test::testDataPath("tokenizers/" + name + ".json"));
  ASSERT_TRUE(tokenizer.isOk()) << tokenizer.message();
  auto text = readTextFile(test::testDataPath("tokenizers/" + name + ".cases.json"));
  ASSERT_TRUE(text.isOk()) << text.message();
  auto cases = parseJson(*text, name + ".cases.json");
  ASSERT_TRUE(cases.isOk()) << cases.message();
  const Json &list = (*cases)["cases"];
  ASSERT_GE(list.size(), 200u);
  size_t failures = 0;
  for (const Json &c : list) {
    const std::string input = c["text"].get<std::string>();
    auto ids = tokenizer->tryEncode(input, false);
    ASSERT_TRUE(ids.isOk()) << ids.message();
    auto special = tokenizer->tryEncode(input, true);
    ASSERT_TRUE(special.isOk()) << special.message();
    bool ok = *ids == idsOf(c["ids"]) && *special == idsOf(c["ids_special"]);
    EXPECT_EQ(*ids, idsOf(c["ids"])) << name << " text: '" << input << "'";
    EXPECT_EQ(*special, idsOf(c["ids_special"])) << name << " text: '" << input << "'";
    std::vector<int32_t> expectedIds = idsOf(c["ids"]), expectedSpecial = idsOf(c["ids_special"]);
    auto decoded = tokenizer->tryDecode(expectedIds, false);
    ASSERT_TRUE(decoded.isOk()) << decoded.message();
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << name << " text: '" << input << "'";
    EXPECT_EQ(tokenizer->decode(expectedSpecial, false), c["decoded_special"].get<std::string>())
        << name << " text: '" << input << "'";
    EXPECT_EQ(tokenizer->decode(expectedSpecial, true), c["decoded_skip"].get<std::string>())
        << name << " text: '" << input << "'";
    ok = ok && *decoded == c["decoded"].get<std::string>();
    failures += !ok;
  }
  EXPECT_EQ(failures, 0u) << name << ": " << failures << " of " << list.size() << " strings differ";
}

TEST(TokenizerTrained, Unigram) { checkTrained("unigram"); }
TEST(TokenizerTrained, WordPieceBert) { checkTrained("wordpiece_bert"); }
TEST(TokenizerTrained, WordPieceSequences) { checkTrained("wordpiece_sequences"); }
TEST(TokenizerTrained, BpePreTokenizers) { checkTrained("bpe_pretokenizers"); }

// Stream decoding equals a full decode for the Metaspace and WordPiece decoders.
TEST(TokenizerTrained, StreamDecodeMatchesDecode) {
  for (const char *name : {"unigram", "wordpiece_bert"}) {
    auto tokenizer = Tokenizer::fromFile(test::testDataPath(std::string("tokenizers/") + name +
                                                            ".json"));
    ASSERT_TRUE(tokenizer.isOk()) << tokenizer.message();
    for (const char *s : {"Once upon a time, there was a little girl.", "café 日本 안녕 😀 x=1;"}) {
      std::vector<int32_t> ids = tokenizer->encode(s, false);
      EXPECT_EQ(streamDecode(*tokenizer, ids), tokenizer->decode(ids)) << name << ": " << s;
    }
  }
}

} // namespace
} // namespace llmc
