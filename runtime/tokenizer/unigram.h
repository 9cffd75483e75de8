// The Unigram model of tokenizer.json ("model": {"type": "Unigram", "vocab":
// [[piece, score], ...], "unk_id": ..., "byte_fallback": ...}), as Hugging
// Face encodes it: the segmentation of each word with the highest total
// score (Viterbi over the pieces that match at each character, found with a
// byte trie), where a character no piece starts with costs the lowest score
// minus 10 as unk; adjacent unks are fused; with byte_fallback an unknown
// run becomes its <0xXX> tokens when all exist. Ties keep the first path
// found (earlier start, then shorter piece), as Hugging Face does.
// O(word bytes x longest piece).
#pragma once

#include "tokenizer/json_path.h"
#include "tokenizer/vocab.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::tok {

// Byte trie over the pieces: node 0 is the root.
class ByteTrie {
public:
  void insert(std::string_view key, int32_t id);
  // The child of `node` by `byte`, or -1.
  int32_t child(int32_t node, uint8_t byte) const;
  // The id of the piece that ends at `node`, or -1.
  int32_t idAt(int32_t node) const { return ids_[node]; }

private:
  struct Edge {
    uint64_t key = ~uint64_t(0); // node << 8 | byte
    int32_t child = -1;
  };
  size_t slotOf(uint64_t key) const;
  void grow();

  std::vector<int32_t> ids_{-1};  // by node
  std::vector<Edge> edges_{16};   // open addressing, at most half full
  size_t edgeCount_ = 0;
};

class UnigramModel {
public:
  static Expected<UnigramModel> fromJson(const Json &model, const JsonPath &at, int64_t idLimit);

  // Appends the ids of one word; fails if a character has no piece and the
  // model has no unk_id (Hugging Face fails too).
  Status encodeWord(std::string_view word, std::vector<int32_t> &ids) const;

  const std::string *token(int32_t id) const { return vocab_.token(id); }
  int32_t find(std::string_view token) const { return vocab_.find(token); }
  int32_t idEnd() const { return vocab_.idEnd(); }

private:
  Status parseVocab(const Json &model, const JsonPath &at, int64_t idLimit);
  void appendPiece(std::string_view piece, bool unknown, std::vector<int32_t> &ids) const;

  Vocab vocab_;
  std::vector<double> scores_; // by id
  ByteTrie trie_;
  double unkScore_ = 0;        // lowest score - 10
  int32_t unkId_ = -1;
  bool byteFallback_ = false;
  std::array<int32_t, 256> byteIds_{}; // <0xXX> tokens, -1 if absent
  std::string source_;                 // "file: field 'model'", for errors
};

} // namespace llmc::tok
