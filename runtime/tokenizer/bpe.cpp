#include "tokenizer/bpe.h"

#include "tokenizer/utf8.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <tuple>

namespace llmc::tok {
namespace {

size_t tableSizeFor(size_t count) {
  size_t size = 16;
  while (size < count * 2)
    size *= 2;
  return size;
}

} // namespace

void TokenIndex::build(const std::vector<std::string> &tokens,
                       const std::vector<uint8_t> &present) {
  slots_.assign(tableSizeFor(tokens.size()), -1);
  size_t mask = slots_.size() - 1;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (!present[id])
      continue;
    size_t slot = std::hash<std::string_view>()(tokens[id]) & mask;
    while (slots_[slot] >= 0)
      slot = (slot + 1) & mask;
    slots_[slot] = static_cast<int32_t>(id);
  }
}

int32_t TokenIndex::find(std::string_view token, const std::vector<std::string> &tokens) const {
  if (slots_.empty())
    return -1;
  size_t mask = slots_.size() - 1;
  for (size_t slot = std::hash<std::string_view>()(token) & mask; slots_[slot] >= 0;
       slot = (slot + 1) & mask)
    if (tokens[slots_[slot]] == token)
      return slots_[slot];
  return -1;
}

void PairTable::reserve(size_t count) { slots_.assign(tableSizeFor(count), Slot()); }

size_t PairTable::slotOf(uint64_t key) const {
  // Fibonacci hashing spreads the (left, right) bits over the table.
  size_t mask = slots_.size() - 1;
  size_t slot = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
  while (slots_[slot].key != kEmpty && slots_[slot].key != key)
    slot = (slot + 1) & mask;
  return slot;
}

void PairTable::insert(int32_t left, int32_t right, Merge merge) {
  uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  Slot &slot = slots_[slotOf(key)];
  slot.key = key;
  slot.merge = merge;
}

const PairTable::Merge *PairTable::find(int32_t left, int32_t right) const {
  uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  const Slot &slot = slots_[slotOf(key)];
  return slot.key == key ? &slot.merge : nullptr;
}

Expected<BpeModel> BpeModel::fromJson(const Json &model, const JsonPath &at, int64_t idLimit) {
  LLMC_RETURN_IF_ERROR(
      checkKeys(model, at,
                {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                 "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"}));
  BpeModel bpe;
  LLMC_RETURN_IF_ERROR(bpe.parseVocab(model, at, idLimit));
  LLMC_RETURN_IF_ERROR(bpe.parseMerges(model, at));
  LLMC_RETURN_IF_ERROR(bpe.parseOptions(model, at));
  bpe.buildCharTables();
  bpe.buildJoins();
  return bpe;
}

Status BpeModel::parseVocab(const Json &model, const JsonPath &at, int64_t idLimit) {
  const Json *vocab = member(model, "vocab");
  JsonPath vocabAt = at.child("vocab");
  if (vocab == nullptr)
    return vocabAt.error("missing (expected an object of token -> id)");
  if (!vocab->is_object())
    return vocabAt.wrongType("an object of token -> id", *vocab);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const Json &id = it.value();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= idLimit)
      return vocabAt.error("token '" + it.key() + "' has id " + id.dump() +
                           ", expected an integer in [0, " + std::to_string(idLimit) +
                           ") (ids must be dense over the vocabulary and added_tokens)");
    size_t index = id.get<size_t>();
    if (index >= tokens_.size()) {
      tokens_.resize(index + 1);
      present_.resize(index + 1, 0);
    }
    if (present_[index])
      return vocabAt.error("id " + std::to_string(index) + " is used by both '" + tokens_[index] +
                           "' and '" + it.key() + "'");
    tokens_[index] = it.key();
    present_[index] = 1;
  }
  index_.build(tokens_, present_);
  return Status::ok();
}

Status BpeModel::parseMerges(const Json &model, const JsonPath &at) {
  LLMC_ASSIGN_OR_RETURN(const Json *merges, getArray(model, "merges", at));
  merges_.reserve(merges->size());
  constexpr size_t kWarnedMerges = 3;
  size_t ignoredMerges = 0;
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const Json &merge = (*merges)[rank];
    JsonPath mergeAt = at.child("merges").at(rank);
    std::string left, right;
    if (merge.is_string()) { // "left right"
      const std::string &text = merge.get_ref<const std::string &>();
      size_t space = text.find(' ');
      if (space == std::string::npos)
        return mergeAt.error("merge '" + text + "' is not two tokens separated by a space");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) { // ["left", "right"]
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return mergeAt.error("expected \"left right\" or [\"left\", \"right\"], got " + merge.dump());
    }
    int32_t leftId = find(left), rightId = find(right), mergedId = find(left + right);
    for (auto [id, what] : {std::pair{leftId, &left}, std::pair{rightId, &right}})
      if (id < 0)
        return mergeAt.error("merge names token '" + *what + "', which is not in model.vocab");
    if (mergedId < 0) {
      // Hugging Face refuses such a file; llama.cpp loads it. The merge can
      // never yield a token, so it is left out, and said so (the first few
      // one by one, the rest as a count).
      if (++ignoredMerges <= kWarnedMerges)
        warnings_.push_back(*mergeAt.source + ": field '" + mergeAt.path + "': merge '" + left +
                            " " + right + "' is ignored: '" + left + right +
                            "' is not in model.vocab");
      continue;
    }
    merges_.insert(leftId, rightId, {static_cast<int32_t>(rank), mergedId});
    mergePairs_.push_back({leftId, rightId});
    splittable_ = splittable_ && !left.empty() && !right.empty();
  }
  if (ignoredMerges > kWarnedMerges)
    warnings_.push_back(*at.source + ": field '" + at.child("merges").path + "': " +
                        std::to_string(ignoredMerges - kWarnedMerges) +
                        " more merges are ignored for the same reason (" +
                        std::to_string(ignoredMerges) + " in all)");
  return Status::ok();
}

Status BpeModel::parseOptions(const Json &model, const JsonPath &at) {
  if (const Json *dropout = member(model, "dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0)
      return at.child("dropout").error("BPE dropout " + dropout->dump() +
                                       " makes tokenization random; only null or 0 is supported");
  }
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    LLMC_ASSIGN_OR_RETURN(auto affix, getOptionalString(model, key, at));
    if (affix && !affix->empty())
      return at.child(key).error("'" + *affix + "' is not supported (only null or \"\")");
  }
  LLMC_ASSIGN_OR_RETURN(auto unk, getOptionalString(model, "unk_token", at));
  if (unk) {
    splittable_ = splittable_ && !unk->empty();
    unkId_ = find(*unk);
    if (unkId_ < 0)
      return at.child("unk_token").error("'" + *unk + "' is not in model.vocab");
  }
  LLMC_ASSIGN_OR_RETURN(fuseUnk_, getBool(model, "fuse_unk", false, at));
  LLMC_ASSIGN_OR_RETURN(byteFallback_, getBool(model, "byte_fallback", false, at));
  LLMC_ASSIGN_OR_RETURN(ignoreMerges_, getBool(model, "ignore_merges", false, at));
  return Status::ok();
}

namespace {

// The first and last code points of a non-empty valid UTF-8 string.
std::pair<char32_t, char32_t> endChars(const std::string &token) {
  size_t pos = 0, last = token.size() - 1;
  char32_t first = 0, end = 0;
  utf8::decode(token, pos, first);
  while (last > 0 && (static_cast<uint8_t>(token[last]) & 0xC0) == 0x80)
    --last;
  utf8::decode(token, last, end);
  return {first, end};
}

} // namespace

void BpeModel::buildJoins() {
  firstChar_.assign(tokens_.size(), 0);
  lastChar_.assign(tokens_.size(), 0);
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (!tokens_[id].empty())
      std::tie(firstChar_[id], lastChar_[id]) = endChars(tokens_[id]);
  joins_.reserve(mergePairs_.size());
  for (auto [left, right] : mergePairs_)
    joins_.insert(static_cast<int32_t>(lastChar_[left]), static_cast<int32_t>(firstChar_[right]),
                  {0, 0});
  mergePairs_.clear();
  mergePairs_.shrink_to_fit();
}

void BpeModel::buildCharTables() {
  smallCharIds_.assign(0x800, -1);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string &token = tokens_[id];
    size_t pos = 0;
    char32_t cp;
    if (present_[id] && !token.empty() && utf8::decode(token, pos, cp) && pos == token.size() &&
        cp < 0x800)
      smallCharIds_[cp] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byteIds_[b] = find(name);
  }
}

const std::string *BpeModel::token(int32_t id) const {
  if (id < 0 || id >= idEnd() || !present_[id])
    return nullptr;
  return &tokens_[id];
}

int32_t BpeModel::charId(std::string_view ch) const {
  size_t pos = 0;
  char32_t cp;
  if (ch.size() <= 2 && utf8::decode(ch, pos, cp) && pos == ch.size())
    return smallCharIds_[cp];
  return find(ch);
}

// One symbol per character: its token, its <0xXX> byte tokens, or unk.
void BpeModel::appendInitialSymbols(std::string_view word, std::vector<int32_t> &symbols) const {
  bool pendingUnk = false;
  for (size_t pos = 0; pos < word.size();) {
    size_t length = std::min(utf8::charLength(static_cast<uint8_t>(word[pos])), word.size() - pos);
    std::string_view ch = word.substr(pos, length);
    pos += length;
    int32_t id = charId(ch);
    bool bytesKnown = byteFallback_ && std::all_of(ch.begin(), ch.end(), [&](char c) {
                        return byteIds_[static_cast<uint8_t>(c)] >= 0;
                      });
    if (id < 0 && !bytesKnown && unkId_ < 0)
      continue; // no way to write it: Hugging Face drops the character
    if (id < 0 && !bytesKnown) {
      if (!(pendingUnk && fuseUnk_)) {
        if (pendingUnk)
          symbols.push_back(unkId_);
        pendingUnk = true;
      }
      continue;
    }
    if (pendingUnk)
      symbols.push_back(unkId_);
    pendingUnk = false;
    if (id >= 0)
      symbols.push_back(id);
    else
      for (char c : ch)
        symbols.push_back(byteIds_[static_cast<uint8_t>(c)]);
  }
  if (pendingUnk)
    symbols.push_back(unkId_);
}

namespace {

constexpr int32_t kNoMerge = INT32_MAX;

// Runs up to this many symbols are merged by rescanning an array of pair
// ranks (few hash lookups, no heap); longer ones use a heap.
constexpr size_t kShortRun = 64;

// A candidate merge of the symbol at `pos` with its right neighbour.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t merged;
};

// Heap order: the lowest rank on top, then the leftmost position.
bool lowerPriority(const Candidate &a, const Candidate &b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

struct HeapScratch {
  std::vector<int32_t> id;   // symbol -> token id
  std::vector<int32_t> prev; // linked list over live symbols, -1 at the ends
  std::vector<int32_t> next;
  std::vector<uint8_t> alive;
  std::vector<Candidate> heap;
};

} // namespace

bool BpeModel::mayJoin(int32_t left, int32_t right) const {
  return joins_.find(static_cast<int32_t>(lastChar_[left]),
                     static_cast<int32_t>(firstChar_[right])) != nullptr;
}

// Both merge loops apply, at each step, the lowest-rank pair, leftmost among
// equals: Hugging Face's order.
void BpeModel::mergeShortRun(const int32_t *symbols, size_t n, std::vector<int32_t> &ids) const {
  int32_t id[kShortRun], rank[kShortRun], merged[kShortRun]; // rank of pair (i, i + 1)
  std::copy(symbols, symbols + n, id);
  auto lookup = [&](size_t i) {
    const PairTable::Merge *m = merges_.find(id[i], id[i + 1]);
    rank[i] = m ? m->rank : kNoMerge;
    merged[i] = m ? m->merged : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i)
    lookup(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best])
        best = i;
    if (rank[best] == kNoMerge)
      break;
    // Symbol best + 1 and pair best + 1 disappear; pairs best - 1 and best change.
    id[best] = merged[best];
    std::copy(id + best + 2, id + n, id + best + 1);
    if (best + 2 < n - 1) {
      std::copy(rank + best + 2, rank + n - 1, rank + best + 1);
      std::copy(merged + best + 2, merged + n - 1, merged + best + 1);
    }
    --n;
    if (best > 0)
      lookup(best - 1);
    if (best + 1 < n)
      lookup(best);
  }
  ids.insert(ids.end(), id, id + n);
}

void BpeModel::mergeLongRun(const int32_t *symbols, size_t count, std::vector<int32_t> &ids) const {
  thread_local HeapScratch s;
  int32_t n = static_cast<int32_t>(count);
  s.id.assign(symbols, symbols + count);
  s.prev.resize(n);
  s.next.resize(n);
  s.alive.assign(n, 1);
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < n ? i + 1 : -1;
    if (i + 1 < n)
      if (const PairTable::Merge *m = merges_.find(s.id[i], s.id[i + 1]))
        s.heap.push_back({m->rank, i, m->merged});
  }
  std::make_heap(s.heap.begin(), s.heap.end(), lowerPriority);
  auto pushCandidate = [&](int32_t pos) {
    if (const PairTable::Merge *m = merges_.find(s.id[pos], s.id[s.next[pos]])) {
      s.heap.push_back({m->rank, pos, m->merged});
      std::push_heap(s.heap.begin(), s.heap.end(), lowerPriority);
    }
  };
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), lowerPriority);
    Candidate top = s.heap.back();
    s.heap.pop_back();
    int32_t right = s.next[top.pos];
    if (!s.alive[top.pos] || right < 0)
      continue;
    // Stale when the pair changed since it was queued (a changed pair never
    // has the same merged token, so comparing that is enough).
    const PairTable::Merge *m = merges_.find(s.id[top.pos], s.id[right]);
    if (m == nullptr || m->merged != top.merged)
      continue;
    s.id[top.pos] = top.merged;
    s.alive[right] = 0;
    s.next[top.pos] = s.next[right];
    if (s.next[right] >= 0)
      s.prev[s.next[right]] = top.pos;
    if (s.prev[top.pos] >= 0)
      pushCandidate(s.prev[top.pos]);
    if (s.next[top.pos] >= 0)
      pushCandidate(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = s.next[i])
    ids.push_back(s.id[i]);
}

void BpeModel::encodeWord(std::string_view word, std::vector<int32_t> &ids) const {
  if (ignoreMerges_) {
    if (int32_t id = find(word); id >= 0) {
      ids.push_back(id);
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  appendInitialSymbols(word, symbols);
  size_t n = symbols.size(), start = 0;
  auto mergeRun = [&](size_t end) {
    if (end - start <= kShortRun)
      mergeShortRun(symbols.data() + start, end - start, ids);
    else
      mergeLongRun(symbols.data() + start, end - start, ids);
    start = end;
  };
  // SentencePiece-style models see the whole text as one word: cut it where
  // no merge can ever join the two sides (e.g. before each "▁" in Llama 2).
  if (n > kShortRun && splittable_)
    for (size_t i = 1; i < n; ++i)
      if (!mayJoin(symbols[i - 1], symbols[i]))
        mergeRun(i);
  if (n > start)
    mergeRun(n);
}

} // namespace llmc::tok
