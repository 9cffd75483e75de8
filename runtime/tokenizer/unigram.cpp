#include "tokenizer/unigram.h"

#include "tokenizer/utf8.h"

#include <cmath>
#include <cstdio>

namespace llmc::tok {

size_t ByteTrie::slotOf(uint64_t key) const {
  size_t mask = edges_.size() - 1;
  size_t slot = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
  while (edges_[slot].key != ~uint64_t(0) && edges_[slot].key != key)
    slot = (slot + 1) & mask;
  return slot;
}

void ByteTrie::grow() {
  std::vector<Edge> old = std::move(edges_);
  edges_.assign(old.size() * 2, Edge());
  for (const Edge &edge : old)
    if (edge.child >= 0)
      edges_[slotOf(edge.key)] = edge;
}

int32_t ByteTrie::child(int32_t node, uint8_t byte) const {
  uint64_t key = (uint64_t(uint32_t(node)) << 8) | byte;
  return edges_[slotOf(key)].child;
}

void ByteTrie::insert(std::string_view key, int32_t id) {
  int32_t node = 0;
  for (char c : key) {
    int32_t next = child(node, static_cast<uint8_t>(c));
    if (next < 0) {
      if ((edgeCount_ + 1) * 2 > edges_.size())
        grow();
      next = static_cast<int32_t>(ids_.size());
      ids_.push_back(-1);
      uint64_t edgeKey = (uint64_t(uint32_t(node)) << 8) | static_cast<uint8_t>(c);
      edges_[slotOf(edgeKey)] = {edgeKey, next};
      ++edgeCount_;
    }
    node = next;
  }
  ids_[node] = id;
}

Expected<UnigramModel> UnigramModel::fromJson(const Json &model, const JsonPath &at,
                                              int64_t idLimit) {
  LLMC_RETURN_IF_ERROR(checkKeys(model, at, {"type", "unk_id", "vocab", "byte_fallback"}));
  UnigramModel unigram;
  unigram.source_ = *at.source + ": field '" + at.path + "'";
  LLMC_RETURN_IF_ERROR(unigram.parseVocab(model, at, idLimit));
  if (member(model, "unk_id") != nullptr) {
    LLMC_ASSIGN_OR_RETURN(int64_t unk, getInt(model, "unk_id", std::nullopt, 0,
                                              unigram.idEnd() - 1, at));
    unigram.unkId_ = static_cast<int32_t>(unk);
  }
  LLMC_ASSIGN_OR_RETURN(unigram.byteFallback_, getBool(model, "byte_fallback", false, at));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    unigram.byteIds_[b] = unigram.find(name);
  }
  return unigram;
}

Status UnigramModel::parseVocab(const Json &model, const JsonPath &at, int64_t idLimit) {
  LLMC_ASSIGN_OR_RETURN(const Json *list, getArray(model, "vocab", at));
  JsonPath vocabAt = at.child("vocab");
  if (list->empty())
    return vocabAt.error("is empty (a Unigram model needs at least its unk piece)");
  if (static_cast<int64_t>(list->size()) > idLimit)
    return vocabAt.error("has more pieces than ids");
  double lowest = INFINITY;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json &entry = (*list)[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
      return vocabAt.at(i).error("expected [\"piece\", score], got " + entry.dump());
    double score = entry[1].get<double>();
    if (!std::isfinite(score))
      return vocabAt.at(i).error("score " + entry[1].dump() + " is not a finite number");
    std::string piece = entry[0].get<std::string>();
    if (piece.empty())
      return vocabAt.at(i).error("the piece is empty");
    trie_.insert(piece, static_cast<int32_t>(i));
    vocab_.push(std::move(piece));
    scores_.push_back(score);
    lowest = std::min(lowest, score);
  }
  vocab_.index();
  for (int32_t id = 0; id < vocab_.idEnd(); ++id)
    if (vocab_.find(*vocab_.token(id)) != id)
      return vocabAt.at(id).error("piece '" + *vocab_.token(id) + "' is listed twice (also at [" +
                                  std::to_string(vocab_.find(*vocab_.token(id))) + "])");
  unkScore_ = lowest - 10.0;
  return Status::ok();
}

// One piece of the best path: its vocabulary id, or for a run of unknown
// characters its <0xXX> bytes (byte_fallback) or unk.
void UnigramModel::appendPiece(std::string_view piece, bool unknown,
                               std::vector<int32_t> &ids) const {
  int32_t id = vocab_.find(piece);
  if (id >= 0 || !unknown) {
    ids.push_back(id);
    return;
  }
  if (byteFallback_) {
    bool allBytes = true;
    for (char c : piece)
      allBytes = allBytes && byteIds_[static_cast<uint8_t>(c)] >= 0;
    if (allBytes) {
      for (char c : piece)
        ids.push_back(byteIds_[static_cast<uint8_t>(c)]);
      return;
    }
  }
  ids.push_back(unkId_);
}

Status UnigramModel::encodeWord(std::string_view word, std::vector<int32_t> &ids) const {
  struct Node {
    double score = 0;
    int32_t start = -1; // where the best path's last piece starts; -1: not reached
    int32_t id = -1;
  };
  thread_local std::vector<Node> best;
  size_t n = word.size();
  best.assign(n + 1, Node());
  for (size_t start = 0; start < n;) {
    size_t charBytes = std::min(utf8::charLength(static_cast<uint8_t>(word[start])), n - start);
    double here = best[start].score;
    bool singleChar = false;
    int32_t node = 0;
    for (size_t pos = start; pos < n; ++pos) {
      node = trie_.child(node, static_cast<uint8_t>(word[pos]));
      if (node < 0)
        break;
      int32_t id = trie_.idAt(node);
      if (id < 0)
        continue;
      Node &target = best[pos + 1];
      double score = scores_[id] + here;
      if (target.start < 0 || score > target.score)
        target = {score, static_cast<int32_t>(start), id};
      singleChar = singleChar || pos + 1 - start == charBytes;
    }
    if (!singleChar) {
      if (unkId_ < 0)
        return Status::error(source_ + ": the text has a character that no piece covers ('" +
                             std::string(word.substr(start, charBytes)) +
                             "') and model.unk_id is null");
      Node &target = best[start + charBytes];
      double score = unkScore_ + here;
      if (target.start < 0 || score > target.score)
        target = {score, static_cast<int32_t>(start), unkId_};
    }
    start += charBytes;
  }
  // Walk back, fusing adjacent unks, then emit left to right.
  thread_local std::vector<std::pair<size_t, size_t>> pieces; // [begin, end)
  thread_local std::vector<uint8_t> unknown;
  pieces.clear();
  unknown.clear();
  for (size_t end = n; end > 0;) {
    const Node &node = best[end];
    size_t begin = static_cast<size_t>(node.start);
    bool isUnk = node.id == unkId_;
    if (isUnk && !unknown.empty() && unknown.back())
      pieces.back().first = begin;
    else {
      pieces.push_back({begin, end});
      unknown.push_back(isUnk);
    }
    end = begin;
  }
  for (size_t i = pieces.size(); i-- > 0;)
    appendPiece(word.substr(pieces[i].first, pieces[i].second - pieces[i].first), unknown[i], ids);
  return Status::ok();
}

} // namespace llmc::tok
