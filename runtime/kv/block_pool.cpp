#include "kv/block_pool.h"

#include <xxhash.h>

#include <algorithm>
#include <string>

namespace llmc::kv {

BlockHash hashBlock(const BlockHash *parent, const int32_t *tokens, int64_t count) {
  // Seeded by the parent's hash so that equal blocks after different
  // prefixes differ; the first block of a sequence has seed 0.
  XXH3_state_t *state = XXH3_createState();
  XXH3_128bits_reset(state);
  const uint64_t seed[2] = {parent != nullptr ? parent->low : 0,
                            parent != nullptr ? parent->high : 0};
  const uint8_t hasParent = parent != nullptr ? 1 : 0;
  XXH3_128bits_update(state, &hasParent, 1);
  XXH3_128bits_update(state, seed, sizeof(seed));
  XXH3_128bits_update(state, tokens, static_cast<size_t>(count) * sizeof(int32_t));
  XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return BlockHash{h.low64, h.high64};
}

BlockPool::BlockPool(int32_t numBlocks)
    : refCounts_(numBlocks < 1 ? 1 : numBlocks, 0), evictablePos_(refCounts_.size()),
      isEvictable_(refCounts_.size(), 0), hashOf_(refCounts_.size()),
      registered_(refCounts_.size(), 0) {
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
    int32_t block;
    if (!free_.empty()) {
      block = free_.back();
      free_.pop_back();
    } else { // the least recently released cached block leaves the cache
      block = evictable_.front();
      evictable_.pop_front();
      isEvictable_[block] = 0;
      uncache(block);
    }
    refCounts_[block] = 1;
    out.push_back(block);
  }
  return Status::ok();
}

void BlockPool::uncache(int32_t block) {
  if (!registered_[block])
    return;
  cached_.erase(hashOf_[block]);
  registered_[block] = 0;
}

Status BlockPool::registerCached(int32_t block, const BlockHash &hash) {
  LLMC_RETURN_IF_ERROR(checkAllocated(block, "registration"));
  if (registered_[block] || cached_.count(hash) != 0)
    return Status::ok();
  cached_.emplace(hash, block);
  hashOf_[block] = hash;
  registered_[block] = 1;
  return Status::ok();
}

int32_t BlockPool::findCached(const BlockHash &hash) const {
  auto it = cached_.find(hash);
  return it == cached_.end() ? kNullBlock : it->second;
}

Status BlockPool::acquireCached(int32_t block) {
  if (block <= kNullBlock || block >= numBlocks() || !registered_[block])
    return Status::error("KV cache: acquiring block " + std::to_string(block) +
                         ", which holds no cached prefix");
  if (isEvictable_[block]) {
    evictable_.erase(evictablePos_[block]);
    isEvictable_[block] = 0;
  }
  ++refCounts_[block];
  return Status::ok();
}

bool BlockPool::isFree(int32_t block) const {
  return block > kNullBlock && block < numBlocks() && refCounts_[block] == 0 &&
         !isEvictable_[block];
}

bool BlockPool::isCached(int32_t block) const {
  return block > kNullBlock && block < numBlocks() && registered_[block];
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
  if (--refCounts_[block] != 0)
    return Status::ok();
  if (registered_[block]) { // keep its prefix until the space is needed
    evictablePos_[block] = evictable_.insert(evictable_.end(), block);
    isEvictable_[block] = 1;
  } else {
    free_.push_back(block);
  }
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

Status BlockTable::truncate(BlockPool &pool, size_t numBlocks) {
  Status first = Status::ok();
  // Newest first, so that an LRU sees a prefix's tail released before its head.
  while (blocks_.size() > numBlocks) {
    Status s = blocks_.size() > released_ ? pool.release(blocks_.back()) : Status::ok();
    if (first.isOk() && !s.isOk())
      first = s;
    blocks_.pop_back();
  }
  if (hashes_.size() > blocks_.size())
    hashes_.resize(blocks_.size());
  released_ = std::min(released_, blocks_.size());
  return first;
}

Expected<int64_t> BlockTable::releaseBefore(BlockPool &pool, int64_t position) {
  const size_t end = std::min(blocks_.size(), static_cast<size_t>(std::max<int64_t>(position, 0) /
                                                                  blockSize_));
  int64_t count = 0;
  // Oldest first, as the window passes them.
  for (; released_ < end; ++released_, ++count) {
    LLMC_RETURN_IF_ERROR(pool.release(blocks_[released_]));
    blocks_[released_] = kNullBlock;
  }
  return count;
}

Status BlockTable::releaseAll(BlockPool &pool) { return truncate(pool, 0); }

Expected<int64_t> BlockTable::attachCached(BlockPool &pool, const int32_t *tokens, int64_t count,
                                           int64_t maxBlocks) {
  if (!blocks_.empty())
    return Status::error("KV cache: a cached prefix can only start an empty block table");
  int64_t matched = 0;
  while (matched < maxBlocks && (matched + 1) * blockSize_ <= count) {
    BlockHash h = hashBlock(hashes_.empty() ? nullptr : &hashes_.back(),
                            tokens + matched * blockSize_, blockSize_);
    int32_t block = pool.findCached(h);
    if (block == kNullBlock)
      break;
    LLMC_RETURN_IF_ERROR(pool.acquireCached(block));
    blocks_.push_back(block);
    hashes_.push_back(h);
    ++matched;
  }
  return matched;
}

Status BlockTable::registerFull(BlockPool &pool, const int32_t *tokens, int64_t count) {
  while (hashes_.size() < blocks_.size() &&
         static_cast<int64_t>(hashes_.size() + 1) * blockSize_ <= count) {
    const size_t i = hashes_.size();
    BlockHash h =
        hashBlock(i == 0 ? nullptr : &hashes_.back(), tokens + i * blockSize_, blockSize_);
    if (i >= released_) // a released block is gone; its hash still chains the next one
      LLMC_RETURN_IF_ERROR(pool.registerCached(blocks_[i], h));
    hashes_.push_back(h);
  }
  return Status::ok();
}

} // namespace llmc::kv
