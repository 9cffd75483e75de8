// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}).
//
// A word (one pre-tokenized piece, already in the vocabulary's alphabet) is
// split into characters, each looked up in the vocabulary (or written as
// <0xXX> byte tokens with byte_fallback, or as unk_token, fused when
// fuse_unk), then adjacent pairs are merged lowest rank first (leftmost
// first among equal ranks) until no pair has a merge. A binary heap of
// candidate pairs over a doubly linked list of symbols makes this
// O(n log n) in the word length: SentencePiece-style models hand the whole
// text to the model as one word.
#pragma once

#include "tokenizer/json_path.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::tok {

// Token string -> id over a token table, by open addressing. Stores ids
// only, so a copy stays valid with the copied table.
class TokenIndex {
public:
  void build(const std::vector<std::string> &tokens, const std::vector<uint8_t> &present);
  int32_t find(std::string_view token, const std::vector<std::string> &tokens) const;

private:
  std::vector<int32_t> slots_; // -1 = empty; size is a power of two
};

// (left, right) -> (rank, merged id), by open addressing. Keys are token
// ids for merges, code points for the "may join" table.
class PairTable {
public:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  void reserve(size_t count);
  // A pair listed twice keeps the later value (as Hugging Face's HashMap insert does).
  void insert(int32_t left, int32_t right, Merge merge);
  const Merge *find(int32_t left, int32_t right) const;

private:
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  size_t slotOf(uint64_t key) const;

  std::vector<Slot> slots_;
};

class BpeModel {
public:
  // Parses the "model" object. Ids must lie in [0, idLimit): the importer
  // requires dense ids over the model vocabulary and the added tokens.
  static Expected<BpeModel> fromJson(const Json &model, const JsonPath &at, int64_t idLimit);

  // Appends the ids of one word.
  void encodeWord(std::string_view word, std::vector<int32_t> &ids) const;

  // Token of `id`, or nullptr if the model vocabulary has no such id.
  const std::string *token(int32_t id) const;
  int32_t find(std::string_view token) const { return index_.find(token, tokens_); }
  // One past the highest model id.
  int32_t idEnd() const { return static_cast<int32_t>(tokens_.size()); }
  // What the import tolerated but a user should know (ignored merges).
  const std::vector<std::string> &warnings() const { return warnings_; }

private:
  Status parseVocab(const Json &model, const JsonPath &at, int64_t idLimit);
  Status parseMerges(const Json &model, const JsonPath &at);
  Status parseOptions(const Json &model, const JsonPath &at);
  void buildCharTables();
  void buildJoins();
  int32_t charId(std::string_view ch) const;
  void appendInitialSymbols(std::string_view word, std::vector<int32_t> &symbols) const;
  bool mayJoin(int32_t left, int32_t right) const;
  // Merges the run symbols[0, n) completely and appends the resulting ids.
  void mergeShortRun(const int32_t *symbols, size_t n, std::vector<int32_t> &ids) const;
  void mergeLongRun(const int32_t *symbols, size_t n, std::vector<int32_t> &ids) const;

  std::vector<std::string> tokens_; // by id; "" where `present_` is 0
  std::vector<uint8_t> present_;
  TokenIndex index_;
  PairTable merges_;
  // (last code point of the left token, first of the right) of every merge:
  // two adjacent symbols whose facing characters are not listed here never
  // merge, so a long word splits there into runs merged independently.
  PairTable joins_;
  std::vector<char32_t> firstChar_;                     // by id
  std::vector<char32_t> lastChar_;                      // by id
  std::vector<std::pair<int32_t, int32_t>> mergePairs_; // during import only
  // False if a merge or unk_token involves an empty token, where the
  // facing-characters argument above does not hold.
  bool splittable_ = true;
  // Ids of one-character tokens for code points below U+0800 (every
  // character of the byte-level alphabet), -1 if absent: saves a hash lookup
  // per character.
  std::vector<int32_t> smallCharIds_;
  std::array<int32_t, 256> byteIds_{}; // <0xXX> tokens, -1 if absent
  int32_t unkId_ = -1;
  bool fuseUnk_ = false;
  bool byteFallback_ = false;
  bool ignoreMerges_ = false;
  std::vector<std::string> warnings_;
};

} // namespace llmc::tok
