// Paged KV cache bookkeeping (vLLM vocabulary): the KV memory of each layer is
// cut into blocks of `blockSize` token slots; a sequence owns a block table
// listing its blocks in position order, so position p lives in slot
// p % blockSize of block table[p / blockSize].
//
// Block 0 is reserved as the null block: it is never handed out, so a zeroed
// table entry can never alias live data. Blocks are reference counted so that
// requests can share the blocks of a common prefix. Not thread-safe: the
// scheduler owns the pool and mutates it between steps.
//
// Prefix caching: a full block (all blockSize slots written) can be
// registered under its BlockHash, chained over the hash of the block before
// it and the block's own token ids, so equal hashes mean equal token
// prefixes up to and including the block (XXH3-128: collisions are
// negligible). A later sequence with the same prefix finds the block and
// shares it by reference. A registered block whose count drops to zero is
// not freed but kept, evictable, in an LRU; allocate() takes free blocks
// first and evicts the least recently released cached block only when the
// free ones run out. A partial block is never registered, so never shared.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace llmc::kv {

constexpr int32_t kNullBlock = 0;
constexpr int kDefaultBlockSize = 16;

// The identity of a full block's contents: XXH3-128 of (parent hash, token ids).
struct BlockHash {
  uint64_t low = 0, high = 0;
  bool operator==(const BlockHash &o) const { return low == o.low && high == o.high; }
};

// The hash of a block holding `tokens` [count] after the block hashed
// `parent` (null for the first block of a sequence).
BlockHash hashBlock(const BlockHash *parent, const int32_t *tokens, int64_t count);

class BlockPool {
public:
  // A pool of `numBlocks` blocks including the null block (so numBlocks - 1
  // can be allocated). numBlocks < 1 is treated as 1.
  explicit BlockPool(int32_t numBlocks);

  int32_t numBlocks() const { return static_cast<int32_t>(refCounts_.size()); }
  // Blocks allocate() can take: free ones plus evictable cached ones.
  int32_t numFree() const { return static_cast<int32_t>(free_.size() + evictable_.size()); }
  // Unreferenced blocks that still hold a cached prefix (part of numFree()).
  int32_t numEvictable() const { return static_cast<int32_t>(evictable_.size()); }
  // Blocks with a reference count > 0.
  int32_t numInUse() const { return numBlocks() - 1 - numFree(); }
  // Registered blocks (in use or evictable).
  int32_t numCached() const { return static_cast<int32_t>(cached_.size()); }

  // Takes `count` blocks (reference count 1 each) and appends their ids to
  // `out`: free blocks first, then the least recently released evictable
  // ones (which leave the cache). All or nothing: when fewer are available,
  // fails and takes none.
  Status allocate(int32_t count, std::vector<int32_t> &out);

  // Adds a reference to an allocated block (a sequence sharing a prefix).
  Status retain(int32_t block);

  // Drops a reference; at zero a cached block becomes evictable (most
  // recently used), any other block returns to the free list.
  Status release(int32_t block);

  // 0 for free and evictable blocks and for the null block.
  int32_t refCount(int32_t block) const;

  // Registers an allocated, full block under `hash`. Nothing happens when
  // another block already holds that hash (two sequences computed the same
  // prefix in one step: the first one is kept) or the block is registered.
  Status registerCached(int32_t block, const BlockHash &hash);
  // The cached block with this hash, or kNullBlock.
  int32_t findCached(const BlockHash &hash) const;
  // Takes a reference on a cached block, taking it out of the evictable LRU
  // when it was unreferenced.
  Status acquireCached(int32_t block);
  // Whether a block is registered (tests).
  bool isCached(int32_t block) const;
  // Whether a block is on the free list: unreferenced and holding no cached prefix.
  bool isFree(int32_t block) const;

private:
  struct HashOf {
    size_t operator()(const BlockHash &h) const { return static_cast<size_t>(h.low); }
  };
  Status checkAllocated(int32_t block, const char *operation) const;
  void uncache(int32_t block);

  std::vector<int32_t> refCounts_; // [numBlocks]
  std::vector<int32_t> free_;      // free block ids; the next one handed out is at the back
  // Cached, unreferenced blocks; the front is evicted first.
  std::list<int32_t> evictable_;
  std::vector<std::list<int32_t>::iterator> evictablePos_; // [numBlocks], valid when evictable
  std::vector<uint8_t> isEvictable_;                       // [numBlocks]
  std::unordered_map<BlockHash, int32_t, HashOf> cached_;  // hash -> block
  std::vector<BlockHash> hashOf_;                          // [numBlocks], valid when registered
  std::vector<uint8_t> registered_;                        // [numBlocks]
};

// The blocks of one sequence, in position order. Append-only: growing a
// sequence appends blocks and never reorders or replaces them, so the block
// ids a running kernel sees stay valid. The one exception, releaseBefore(),
// turns leading entries that no later query reads (sliding-window layers)
// into kNullBlock; positions keep their table index.
class BlockTable {
public:
  explicit BlockTable(int blockSize = kDefaultBlockSize) : blockSize_(blockSize) {}

  int blockSize() const { return blockSize_; }
  const std::vector<int32_t> &blocks() const { return blocks_; }
  // Token slots the table covers.
  int64_t capacity() const { return static_cast<int64_t>(blocks_.size()) * blockSize_; }

  // Grows the table to cover at least `numTokens` tokens. All or nothing:
  // when the pool runs out, fails (the scheduler then preempts) and keeps the
  // table as it was.
  Status reserve(BlockPool &pool, int64_t numTokens);

  // Appends a block shared with another sequence (a common prefix); takes a
  // reference on it.
  Status appendShared(BlockPool &pool, int32_t block);

  // Releases the blocks from `numBlocks` on (undoing a reserve() of a step
  // that did not run).
  Status truncate(BlockPool &pool, size_t numBlocks);

  // Releases every block and empties the table.
  Status releaseAll(BlockPool &pool);

  // Releases the blocks wholly before `position` (slots [0, position) are
  // never read again: kv/window_retention.h says when) and leaves kNullBlock
  // in their entries. Returns how many it released now; blocks released
  // before are not counted again, and a position past the table's capacity
  // releases the blocks it has.
  Expected<int64_t> releaseBefore(BlockPool &pool, int64_t position);
  // Leading entries released by releaseBefore (kNullBlock in blocks()).
  size_t releasedBlocks() const { return released_; }

  // Prefix caching. For an empty table: shares the cached blocks matching
  // the longest run of full blocks of `tokens` [count], at most `maxBlocks`,
  // and returns how many blocks matched.
  Expected<int64_t> attachCached(BlockPool &pool, const int32_t *tokens, int64_t count,
                                 int64_t maxBlocks);
  // Registers every block fully covered by `tokens` [count] (the sequence's
  // tokens so far, all computed) that is not registered yet.
  Status registerFull(BlockPool &pool, const int32_t *tokens, int64_t count);
  // Leading blocks whose hashes the table knows (attached or registered).
  size_t hashedBlocks() const { return hashes_.size(); }

private:
  int blockSize_;
  std::vector<int32_t> blocks_;
  std::vector<BlockHash> hashes_; // of blocks_[0 .. hashes_.size())
  size_t released_ = 0;           // blocks_[0 .. released_) are kNullBlock
};

} // namespace llmc::kv
