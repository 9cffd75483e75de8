// Golden tests: llmc's tokenizer against ids produced by independent
// implementations, read from ../shared (skipped when absent):
//   - tokenizers/gpt2, tokenizers/llama2: llama.cpp's test vectors, made with
//     Hugging Face `tokenizers` (add_special_tokens=False);
//   - golden/tok512_encode_cases.json: llama2.c run.c's encoder with BOS, for
//     the stories260K tokenizer.json.
// Also decode(encode(s)) round trips and StreamDecoder == decode.
#include "common/expect_value.h"
#include "common/test_paths.h"
#include "support/json.h"
#include "support/mapped_file.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <sstream>

namespace llmc {
namespace {

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: the strings, each followed by "\n__ggml_vocab_test__\n";
// .out: one line of space-separated ids per string (empty: no ids).
std::vector<Vector> readVectors(const std::string &stem) {
  auto inp = readTextFile(test::sharedPath(stem + ".inp"));
  auto out = readTextFile(test::sharedPath(stem + ".out"));
  EXPECT_TRUE(inp.isOk() && out.isOk()) << inp.message() << out.message();
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<Vector> vectors;
  size_t pos = 0;
  for (size_t next; (next = inp->find(separator, pos)) != std::string::npos;
       pos = next + separator.size())
    vectors.push_back({inp->substr(pos, next - pos), {}});
  EXPECT_EQ(pos, inp->size()) << "the .inp file must end with the separator";
  std::istringstream lines(*out);
  std::string line;
  size_t index = 0;
  for (; std::getline(lines, line); ++index) {
    if (index >= vectors.size())
      break;
    std::istringstream fields(line);
    for (int32_t id; fields >> id;)
      vectors[index].ids.push_back(id);
  }
  EXPECT_EQ(index, vectors.size()) << "one .out line per .inp string";
  return vectors;
}

Tokenizer load(const std::string &relative) {
  return test::valueOrThrow(Tokenizer::fromFile(test::sharedPath(relative)));
}

std::string streamDecode(const Tokenizer &tokenizer, const std::vector<int32_t> &ids,
                         bool skipSpecial) {
  StreamDecoder stream(tokenizer, skipSpecial);
  std::string text;
  for (int32_t id : ids)
    text += stream.step(id);
  return text + stream.flush();
}

// Every vector's ids, plus round trips and stream decoding of each string.
void checkVectors(const std::string &tokenizerPath, const std::string &vectorStem) {
  Tokenizer tokenizer = load(tokenizerPath);
  std::vector<Vector> vectors = readVectors(vectorStem);
  ASSERT_EQ(vectors.size(), 46u);
  for (const Vector &v : vectors) {
    std::vector<int32_t> ids = tokenizer.encode(v.text, /*addSpecialTokens=*/false);
    EXPECT_EQ(ids, v.ids) << "text: '" << v.text << "'";
    EXPECT_EQ(tokenizer.decode(ids), v.text) << "round trip of '" << v.text << "'";
    EXPECT_EQ(streamDecode(tokenizer, ids, false), tokenizer.decode(ids)) << v.text;
  }
}

TEST(TokenizerGolden, Gpt2Vectors) {
  LLMC_REQUIRE_SHARED("tokenizers/gpt2/tokenizer.json");
  checkVectors("tokenizers/gpt2/tokenizer.json", "tokenizers/gpt2/ggml-vocab-gpt-2.gguf");
}

// The shared GPT-2 vocabulary lacks "ĠClaude" (id 40559 reads "ĠLLMProvider"),
// so the merge "ĠCla ude" cannot apply: it is ignored, with a warning.
TEST(TokenizerGolden, Gpt2ReportsItsUnusableMerge) {
  LLMC_REQUIRE_SHARED("tokenizers/gpt2/tokenizer.json");
  Tokenizer tokenizer = load("tokenizers/gpt2/tokenizer.json");
  ASSERT_EQ(tokenizer.warnings().size(), 1u);
  EXPECT_NE(tokenizer.warnings()[0].find("model.merges[40303]"), std::string::npos)
      << tokenizer.warnings()[0];
  EXPECT_EQ(tokenizer.vocabSize(), 50257);
  EXPECT_EQ(tokenizer.eosId(), std::optional<int32_t>(50256));
}

TEST(TokenizerGolden, Llama2Vectors) {
  LLMC_REQUIRE_SHARED("tokenizers/llama2/tokenizer.json");
  checkVectors("tokenizers/llama2/tokenizer.json", "tokenizers/llama2/ggml-vocab-llama-spm.gguf");
}

TEST(TokenizerGolden, Stories260kMatchesLlama2c) {
  LLMC_REQUIRE_SHARED("models/stories260k/tokenizer.json");
  LLMC_REQUIRE_SHARED("golden/tok512_encode_cases.json");
  Tokenizer tokenizer = load("models/stories260k/tokenizer.json");
  auto text = readTextFile(test::sharedPath("golden/tok512_encode_cases.json"));
  ASSERT_TRUE(text.isOk()) << text.message();
  auto cases = parseJson(*text, "tok512_encode_cases.json");
  ASSERT_TRUE(cases.isOk()) << cases.message();
  ASSERT_GE((*cases)["cases"].size(), 30u);
  EXPECT_EQ(tokenizer.bosId(), std::optional<int32_t>(1));
  for (const Json &c : (*cases)["cases"]) {
    std::string s = c["text"].get<std::string>();
    std::vector<int32_t> expected = c["ids_with_bos"].get<std::vector<int32_t>>();
    std::vector<int32_t> ids = tokenizer.encode(s, /*addSpecialTokens=*/true);
    EXPECT_EQ(ids, expected) << "text: '" << s << "'";
    EXPECT_EQ(tokenizer.decode(ids, /*skipSpecialTokens=*/true), s)
        << "round trip of '" << s << "'";
    EXPECT_EQ(streamDecode(tokenizer, ids, true), tokenizer.decode(ids, true)) << s;
    EXPECT_EQ(streamDecode(tokenizer, ids, false), tokenizer.decode(ids, false)) << s;
  }
}

// The perplexity protocol in ../shared/README.md: the whole validation
// excerpt, tokenized once without BOS, is 15,536 ids.
TEST(TokenizerGolden, Stories260kWholeTextIdCount) {
  LLMC_REQUIRE_SHARED("models/stories260k/tokenizer.json");
  LLMC_REQUIRE_SHARED("text/tinystories_valid_excerpt_small.txt");
  Tokenizer tokenizer = load("models/stories260k/tokenizer.json");
  auto text = readTextFile(test::sharedPath("text/tinystories_valid_excerpt_small.txt"));
  ASSERT_TRUE(text.isOk()) << text.message();
  std::vector<int32_t> ids = tokenizer.encode(*text, /*addSpecialTokens=*/false);
  EXPECT_EQ(ids.size(), 15536u);
  EXPECT_EQ(tokenizer.decode(ids), *text);
  EXPECT_EQ(streamDecode(tokenizer, ids, false), *text);
}

} // namespace
} // namespace llmc
