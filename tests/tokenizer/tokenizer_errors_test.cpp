// Malformed or unsupported tokenizer.json documents: each is an import
// error that names the file and the JSON field, never a tokenizer that
// encodes differently from Hugging Face.
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

#include <gtest/gtest.h>

namespace llmc {
namespace {

using namespace llmc::test;

const char *const kSource = "broken/tokenizer.json";

// Imports `text` and expects an error naming the file and `field`.
void expectTextError(const std::string &text, const std::string &field, const std::string &what) {
  auto tokenizer = Tokenizer::fromJson(text, kSource);
  ASSERT_FALSE(tokenizer.isOk()) << "imported although " << what;
  const std::string &message = tokenizer.message();
  EXPECT_NE(message.find(kSource), std::string::npos) << message;
  EXPECT_NE(message.find(field), std::string::npos) << "expected '" << field << "' in: " << message;
  EXPECT_NE(message.find(what), std::string::npos) << "expected '" << what << "' in: " << message;
}

void expectError(const Json &json, const std::string &field, const std::string &what) {
  expectTextError(json.dump(), field, what);
}

TEST(TokenizerErrors, NotJson) { expectTextError("{\"model\": {\"vocab\": ", "", "invalid JSON"); }

TEST(TokenizerErrors, TopLevelNotAnObject) { expectTextError("[1, 2]", "", "top level"); }

TEST(TokenizerErrors, UnsupportedModelType) {
  Json json = byteLevelTokenizer();
  json["model"]["type"] = "CharLevel";
  expectError(json, "field 'model.type'", "unsupported model type 'CharLevel'");
}

// A BPE model relabelled Unigram: the first BPE-only field is named.
TEST(TokenizerErrors, FieldOfAnotherModelType) {
  Json json = sentencePieceTokenizer();
  json["model"]["type"] = "Unigram";
  expectError(json, "field 'model.continuing_subword_prefix'", "unknown field");
}

TEST(TokenizerErrors, MissingModel) {
  Json json = byteLevelTokenizer();
  json.erase("model");
  expectError(json, "field 'model'", "missing");
}

TEST(TokenizerErrors, MissingVocab) {
  Json json = byteLevelTokenizer();
  json["model"].erase("vocab");
  expectError(json, "field 'model.vocab'", "missing");
}

TEST(TokenizerErrors, MissingMerges) {
  Json json = byteLevelTokenizer();
  json["model"].erase("merges");
  expectError(json, "field 'model.merges'", "missing");
}

TEST(TokenizerErrors, MergeNamesUnknownToken) {
  Json json = byteLevelTokenizer();
  json["model"]["merges"][0] = "Ġ zzz";
  expectError(json, "field 'model.merges[0]'", "'zzz', which is not in model.vocab");
}

TEST(TokenizerErrors, MergeWithoutSpace) {
  Json json = byteLevelTokenizer();
  json["model"]["merges"][1] = "he";
  expectError(json, "field 'model.merges[1]'", "not two tokens");
}

TEST(TokenizerErrors, MergeOfWrongShape) {
  Json json = byteLevelTokenizer();
  json["model"]["merges"][2] = Json::array({"l", "l", "o"});
  expectError(json, "field 'model.merges[2]'", "expected \"left right\"");
}

TEST(TokenizerErrors, VocabIdNotAnInteger) {
  Json json = byteLevelTokenizer();
  json["model"]["vocab"]["abc"] = "265";
  expectError(json, "field 'model.vocab'", "token 'abc'");
}

TEST(TokenizerErrors, VocabIdOutOfRange) {
  Json json = byteLevelTokenizer();
  json["model"]["vocab"]["abc"] = 1000000;
  expectError(json, "field 'model.vocab'", "token 'abc' has id 1000000");
}

TEST(TokenizerErrors, DuplicateVocabId) {
  Json json = byteLevelTokenizer();
  json["model"]["vocab"]["abc"] = kHello;
  expectError(json, "field 'model.vocab'", "is used by both");
}

TEST(TokenizerErrors, IdsNotDense) {
  Json json = sentencePieceTokenizer();
  json["model"]["vocab"].erase("c");
  expectError(json, "field 'model.vocab'", "no token has id " + std::to_string(kC));
}

TEST(TokenizerErrors, UnknownPreTokenizer) {
  Json json = byteLevelTokenizer();
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers", {json["pre_tokenizer"], {{"type", "UnicodeScripts"}}}}};
  expectError(json, "field 'pre_tokenizer.pretokenizers[1].type'",
              "unsupported pre-tokenizer type 'UnicodeScripts'");
}

TEST(TokenizerErrors, InvalidSplitRegex) {
  Json json = byteLevelTokenizer();
  json["pre_tokenizer"] = {{"type", "Split"},
                           {"pattern", {{"Regex", "(\\p{L}+"}}},
                           {"behavior", "Isolated"},
                           {"invert", false}};
  expectError(json, "field 'pre_tokenizer.pattern.Regex'", "invalid regular expression");
}

TEST(TokenizerErrors, UnknownSplitBehavior) {
  Json json = byteLevelTokenizer();
  json["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Merged"}, {"invert", false}};
  expectError(json, "field 'pre_tokenizer.behavior'", "'Merged'");
}

TEST(TokenizerErrors, UnsupportedNormalizer) {
  Json json = sentencePieceTokenizer();
  json["normalizer"]["normalizers"].push_back({{"type", "Precompiled"}});
  expectError(json, "field 'normalizer.normalizers[2].type'",
              "unsupported normalizer type 'Precompiled'");
}

TEST(TokenizerErrors, UnknownDecoder) {
  Json json = sentencePieceTokenizer();
  json["decoder"]["decoders"][3] = {{"type", "CTC"}, {"pad_token", "<pad>"}};
  expectError(json, "field 'decoder.decoders[3].type'", "unsupported decoder type 'CTC'");
}

TEST(TokenizerErrors, UnknownPostProcessor) {
  Json json = sentencePieceTokenizer();
  json["post_processor"] = {{"type", "Whatever"}};
  expectError(json, "field 'post_processor.type'", "'Whatever'");
}

TEST(TokenizerErrors, TemplateNamesMissingSpecialToken) {
  Json json = sentencePieceTokenizer();
  json["post_processor"]["special_tokens"].erase("<s>");
  expectError(json, "field 'post_processor.special_tokens'", "no entry for '<s>'");
}

TEST(TokenizerErrors, TemplateIdOutOfRange) {
  Json json = sentencePieceTokenizer();
  json["post_processor"]["special_tokens"]["<s>"]["ids"] = {99999};
  expectError(json, "field 'post_processor.special_tokens.<s>.ids[0]'", "99999");
}

TEST(TokenizerErrors, AddedTokenIdOutOfRange) {
  Json json = byteLevelTokenizer();
  json["added_tokens"][0]["id"] = 99999;
  expectError(json, "field 'added_tokens[0].id'", "out of range");
}

TEST(TokenizerErrors, AddedTokenConflictsWithVocab) {
  Json json = sentencePieceTokenizer();
  json["added_tokens"][1]["id"] = kEos; // "<s>" is 1 in model.vocab
  expectError(json, "field 'added_tokens[1].id'", "in model.vocab");
}

TEST(TokenizerErrors, AddedTokensShareAnId) {
  Json json = byteLevelTokenizer();
  json["added_tokens"].push_back(json["added_tokens"][0]);
  json["added_tokens"][1]["content"] = "<|other|>";
  expectError(json, "field 'added_tokens[1].id'", "used by both");
}

TEST(TokenizerErrors, AddedTokenListedTwice) {
  Json json = byteLevelTokenizer();
  json["added_tokens"].push_back(json["added_tokens"][0]);
  expectError(json, "field 'added_tokens[1].content'", "listed twice");
}

TEST(TokenizerErrors, UnkTokenNotInVocab) {
  Json json = sentencePieceTokenizer();
  json["model"]["unk_token"] = "<missing>";
  expectError(json, "field 'model.unk_token'", "'<missing>'");
}

TEST(TokenizerErrors, BpeDropout) {
  Json json = byteLevelTokenizer();
  json["model"]["dropout"] = 0.1;
  expectError(json, "field 'model.dropout'", "random");
}

TEST(TokenizerErrors, ContinuingSubwordPrefix) {
  Json json = byteLevelTokenizer();
  json["model"]["continuing_subword_prefix"] = "##";
  expectError(json, "field 'model.continuing_subword_prefix'", "'##'");
}

TEST(TokenizerErrors, UnknownField) {
  Json json = byteLevelTokenizer();
  json["model"]["frobnicate"] = true;
  expectError(json, "field 'model.frobnicate'", "unknown field");
}

TEST(TokenizerErrors, Truncation) {
  Json json = byteLevelTokenizer();
  json["truncation"] = {{"max_length", 512}};
  expectError(json, "field 'truncation'", "must be null");
}

TEST(TokenizerErrors, WrongFieldType) {
  Json json = byteLevelTokenizer();
  json["model"]["byte_fallback"] = "yes";
  expectError(json, "field 'model.byte_fallback'", "expected a boolean, got string");
}

TEST(TokenizerErrors, MissingFile) {
  auto tokenizer = Tokenizer::fromFile("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(tokenizer.isOk());
  EXPECT_NE(tokenizer.message().find("/nonexistent/dir/tokenizer.json"), std::string::npos)
      << tokenizer.message();
}

// Tolerated, but reported: a merge whose result is not a token.
TEST(TokenizerErrors, MergeResultNotInVocabIsAWarning) {
  Json json = byteLevelTokenizer();
  json["model"]["merges"].push_back("w o");
  auto tokenizer = Tokenizer::fromJson(json.dump(), kSource);
  ASSERT_TRUE(tokenizer.isOk()) << tokenizer.message();
  ASSERT_EQ(tokenizer->warnings().size(), 1u);
  const std::string &warning = tokenizer->warnings()[0];
  EXPECT_NE(warning.find(kSource), std::string::npos) << warning;
  EXPECT_NE(warning.find("model.merges[9]"), std::string::npos) << warning;
  EXPECT_EQ(tokenizer->encode("wo", false), (std::vector<int32_t>{'w', 'o'}));
}

// A small Unigram model: <unk> a b ab, Metaspace-free.
Json unigramTokenizer() {
  return {{"version", "1.0"},
          {"added_tokens", Json::array()},
          {"model",
           {{"type", "Unigram"},
            {"unk_id", 0},
            {"byte_fallback", false},
            {"vocab", Json::array({Json::array({"<unk>", 0.0}), Json::array({"a", -1.0}),
                                   Json::array({"b", -2.0}), Json::array({"ab", -2.5})})}}}};
}

TEST(TokenizerErrors, UnigramEncodes) {
  auto tokenizer = Tokenizer::fromJson(unigramTokenizer().dump(), kSource);
  ASSERT_TRUE(tokenizer.isOk()) << tokenizer.message();
  // "ab" (-2.5) beats "a" + "b" (-3); unknown "cc" is one fused unk.
  EXPECT_EQ(tokenizer->encode("abccb", false), (std::vector<int32_t>{3, 0, 2}));
}

// Expected ids from Hugging Face: Unigram(vocab, unk_id=0, byte_fallback=True).
TEST(TokenizerErrors, UnigramByteFallback) {
  Json json = unigramTokenizer();
  json["model"]["byte_fallback"] = true;
  for (const char *piece : {"<0x7A>", "<0xC3>", "<0xA9>"})
    json["model"]["vocab"].push_back(Json::array({piece, -5.0}));
  auto tokenizer = Tokenizer::fromJson(json.dump(), kSource);
  ASSERT_TRUE(tokenizer.isOk()) << tokenizer.message();
  EXPECT_EQ(tokenizer->encode("abz", false), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(tokenizer->encode("z\xC3\xA9", false), (std::vector<int32_t>{4, 5, 6}));
  // '€' has a byte with no <0xXX> piece: unk.
  EXPECT_EQ(tokenizer->encode("a\xE2\x82\xAC" "b", false), (std::vector<int32_t>{1, 0, 2}));
}

TEST(TokenizerErrors, UnigramBadPiece) {
  Json json = unigramTokenizer();
  json["model"]["vocab"][2] = Json::array({"b"});
  expectError(json, "field 'model.vocab[2]'", "expected [\"piece\", score]");
}

TEST(TokenizerErrors, UnigramDuplicatePiece) {
  Json json = unigramTokenizer();
  json["model"]["vocab"][2] = Json::array({"a", -3.0});
  expectError(json, "field 'model.vocab[", "'a' is listed twice");
}

TEST(TokenizerErrors, UnigramUnkIdOutOfRange) {
  Json json = unigramTokenizer();
  json["model"]["unk_id"] = 4;
  expectError(json, "field 'model.unk_id'", "out of range");
}

// Hugging Face fails to encode a character no piece covers without unk_id; so does llmc.
TEST(TokenizerErrors, UnigramWithoutUnkFailsOnUnknownText) {
  Json json = unigramTokenizer();
  json["model"]["unk_id"] = nullptr;
  auto tokenizer = Tokenizer::fromJson(json.dump(), kSource);
  ASSERT_TRUE(tokenizer.isOk()) << tokenizer.message();
  EXPECT_TRUE(tokenizer->tryEncode("ab", false).isOk());
  auto ids = tokenizer->tryEncode("abz", false);
  ASSERT_FALSE(ids.isOk());
  EXPECT_NE(ids.message().find("field 'model'"), std::string::npos) << ids.message();
  EXPECT_NE(ids.message().find("'z'"), std::string::npos) << ids.message();
}

TEST(TokenizerErrors, WordPieceUnkNotInVocab) {
  Json json = {{"model",
                {{"type", "WordPiece"},
                 {"unk_token", "[UNK]"},
                 {"continuing_subword_prefix", "##"},
                 {"max_input_chars_per_word", 100},
                 {"vocab", {{"a", 0}, {"##b", 1}}}}}};
  expectError(json, "field 'model.unk_token'", "'[UNK]' is not in model.vocab");
}

TEST(TokenizerErrors, WordPieceMaxCharsNegative) {
  Json json = {{"model",
                {{"type", "WordPiece"},
                 {"unk_token", "a"},
                 {"max_input_chars_per_word", -1},
                 {"vocab", {{"a", 0}}}}}};
  expectError(json, "field 'model.max_input_chars_per_word'", "out of range");
}

TEST(TokenizerErrors, DigitsUnknownField) {
  Json json = byteLevelTokenizer();
  json["pre_tokenizer"] = {{"type", "Digits"}, {"individual", true}};
  expectError(json, "field 'pre_tokenizer.individual'", "unknown field");
}

TEST(TokenizerErrors, PunctuationBadBehavior) {
  Json json = byteLevelTokenizer();
  json["pre_tokenizer"] = {{"type", "Punctuation"}, {"behavior", "Sideways"}};
  expectError(json, "field 'pre_tokenizer.behavior'", "unknown behavior 'Sideways'");
}

} // namespace
} // namespace llmc
