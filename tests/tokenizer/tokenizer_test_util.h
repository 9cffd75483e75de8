// Small tokenizer.json documents for tests, one per family.
//
// Byte-level (GPT-2 style): ids 0..255 are the 256 byte characters (id ==
// byte value), then the merges below, then <|endoftext|> (special).
// SentencePiece-style (Llama 2 style): <unk> <s> </s>, <0x00>..<0xFF>
// (ids 3..258), then ▁ a b c ▁a ab ▁ab, Prepend/Replace normalizers,
// ByteFallback decoders and a <s> template.
#pragma once

#include "support/json.h"

#include <string>
#include <utility>
#include <vector>

namespace llmc::test {

// GPT-2's byte -> character map, written out independently of the library.
inline std::string byteChar(int b) {
  bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  int cp = b;
  if (!printable) {
    cp = 0x100;
    for (int k = 0; k < b; ++k)
      cp += !((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE);
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Ids of the byte-level merges' results, in rank order.
enum ByteLevelId : int32_t {
  kGw = 256, // "Ġw"
  kHe,       // "he"
  kLl,       // "ll"
  kHell,     // "hell"
  kHello,    // "hello"
  kOr,       // "or"
  kGwor,     // "Ġwor"
  kLd,       // "ld"
  kAa,       // "aa"
  kAbc,      // "abc": no merge yields it (for ignore_merges)
  kEndOfText // "<|endoftext|>", special added token
};

inline Json byteLevelTokenizer(bool pairMerges = false) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b)
    vocab[byteChar(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "w"}, {"h", "e"},   {"l", "l"}, {"he", "ll"}, {"hell", "o"},
      {"o", "r"}, {"Ġw", "or"}, {"l", "d"}, {"a", "a"}};
  Json mergeList = Json::array();
  int32_t id = 256;
  for (const auto &[left, right] : merges) {
    vocab[left + right] = id++;
    mergeList.push_back(pairMerges ? Json::array({left, right}) : Json(left + " " + right));
  }
  vocab["abc"] = kAbc;
  Json byteLevel = {{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens",
           {{{"id", kEndOfText},
             {"content", "<|endoftext|>"},
             {"single_word", false},
             {"lstrip", false},
             {"rstrip", false},
             {"normalized", true},
             {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", byteLevel},
          {"post_processor", byteLevel},
          {"decoder", byteLevel},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", mergeList}}}};
}

enum SentencePieceId : int32_t {
  kUnk = 0,
  kBos = 1,
  kEos = 2,
  kByte0 = 3,  // <0x00>; byte b is kByte0 + b
  kMeta = 259, // "▁"
  kA,
  kB,
  kC,
  kMetaA,  // "▁a"
  kAB,     // "ab"
  kMetaAB, // "▁ab"
};

inline Json sentencePieceTokenizer() {
  Json vocab = {{"<unk>", kUnk}, {"<s>", kBos}, {"</s>", kEos}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = kByte0 + b;
  }
  for (auto [token, id] : std::vector<std::pair<const char *, int32_t>>{{"▁", kMeta},
                                                                        {"a", kA},
                                                                        {"b", kB},
                                                                        {"c", kC},
                                                                        {"▁a", kMetaA},
                                                                        {"ab", kAB},
                                                                        {"▁ab", kMetaAB}})
    vocab[token] = id;
  auto special = [](int32_t id, const char *content) {
    return Json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", {special(kUnk, "<unk>"), special(kBos, "<s>"), special(kEos, "</s>")}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "▁"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", Json::array()},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {kBos}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", vocab},
            {"merges", {"▁ a", "a b", "▁a b"}}}}};
}

} // namespace llmc::test
