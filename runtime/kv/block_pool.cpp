#include "kv/block_pool.h"

#include <string>

namespace llmc::kv {

BlockPool::BlockPool(int32_t numBlocks) : refCounts_(numBlocks < 1 ? 1 : numBlocks, 0) {
  // Hand out low ids first: 1, 2, 3, ...
  for (int32_t b = this->numBlocks() - 1; b > kNullBlock; --b)
    free_.push_back(b);
}

Status BlockPool::allocate(int32_t count, std::vector<int32_t> &out) {
  if (count < 0 || count > numFree())
    return Status::error("KV cache: out of blocks: " + std::to_string(count) + " requested, " +
                         std::to_string(numFree()) + " of " + std::to_string(numBlocks() - 1) +
                         " free");
  for (int32_t i = 0; i < count; ++i) {
    int32_t block = free_.back();
    free_.pop_back();
    refCounts_[block] = 1;
    out.push_back(block);
  }
  return Status::ok();
}

Status BlockPool::checkAllocated(int32_t block, const char *operation) const {
  if (block <= kNullBlock || block >= numBlocks())
    return Status::error(std::string("KV cache: ") + operation + " of block " +
                         std::to_string(block) + ": expected an id in [1, " +
                         std::to_string(numBlocks()) + ")");
  if (refCounts_[block] == 0)
    return Status::error(std::string("KV cache: ") + operation + " of block " +
                         std::to_string(block) + ", which is free");
  return Status::ok();
}

Status BlockPool::retain(int32_t block) {
  LLMC_RETURN_IF_ERROR(checkAllocated(block, "retain"));
  ++refCounts_[block];
  return Status::ok();
}

Status BlockPool::release(int32_t block) {
  LLMC_RETURN_IF_ERROR(checkAllocated(block, "release"));
  if (--refCounts_[block] == 0)
    free_.push_back(block);
  return Status::ok();
}

int32_t BlockPool::refCount(int32_t block) const {
  if (block < 0 || block >= numBlocks())
    return 0;
  return refCounts_[block];
}

Status BlockTable::reserve(BlockPool &pool, int64_t numTokens) {
  if (numTokens <= capacity())
    return Status::ok();
  int64_t needed = (numTokens - capacity() + blockSize_ - 1) / blockSize_;
  if (needed > pool.numFree())
    return Status::error("KV cache: out of blocks: " + std::to_string(numTokens) + " tokens need " +
                         std::to_string(needed) + " more blocks, " +
                         std::to_string(pool.numFree()) + " free");
  return pool.allocate(static_cast<int32_t>(needed), blocks_);
}

Status BlockTable::appendShared(BlockPool &pool, int32_t block) {
  LLMC_RETURN_IF_ERROR(pool.retain(block));
  blocks_.push_back(block);
  return Status::ok();
}

Status BlockTable::releaseAll(BlockPool &pool) {
  Status first = Status::ok();
  for (int32_t block : blocks_) {
    Status s = pool.release(block);
    if (first.isOk() && !s.isOk())
      first = s;
  }
  blocks_.clear();
  return first;
}

} // namespace llmc::kv
