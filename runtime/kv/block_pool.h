// Paged KV cache bookkeeping (vLLM vocabulary): the KV memory of each layer is
// cut into blocks of `blockSize` token slots; a sequence owns a block table
// listing its blocks in position order, so position p lives in slot
// p % blockSize of block table[p / blockSize].
//
// Block 0 is reserved as the null block: it is never handed out, so a zeroed
// table entry can never alias live data. Blocks are reference counted so that
// requests can share the blocks of a common prefix. Not thread-safe: the
// scheduler owns the pool and mutates it between steps.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <vector>

namespace llmc::kv {

constexpr int32_t kNullBlock = 0;
constexpr int kDefaultBlockSize = 16;

class BlockPool {
public:
  // A pool of `numBlocks` blocks including the null block (so numBlocks - 1
  // can be allocated). numBlocks < 1 is treated as 1.
  explicit BlockPool(int32_t numBlocks);

  int32_t numBlocks() const { return static_cast<int32_t>(refCounts_.size()); }
  int32_t numFree() const { return static_cast<int32_t>(free_.size()); }

  // Takes `count` free blocks (reference count 1 each) and appends their ids
  // to `out`; all or nothing: when fewer are free, fails and takes none.
  Status allocate(int32_t count, std::vector<int32_t> &out);

  // Adds a reference to an allocated block (a sequence sharing a prefix).
  Status retain(int32_t block);

  // Drops a reference; the block returns to the free list at zero.
  Status release(int32_t block);

  // 0 for free blocks and for the null block.
  int32_t refCount(int32_t block) const;

private:
  Status checkAllocated(int32_t block, const char *operation) const;

  std::vector<int32_t> refCounts_; // [numBlocks]
  std::vector<int32_t> free_;      // free block ids; the next one handed out is at the back
};

// The blocks of one sequence, in position order. Append-only: growing a
// sequence appends blocks and never reorders or replaces them, so the block
// ids a running kernel sees stay valid.
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

  // Releases every block and empties the table.
  Status releaseAll(BlockPool &pool);

private:
  int blockSize_;
  std::vector<int32_t> blocks_;
};

} // namespace llmc::kv
