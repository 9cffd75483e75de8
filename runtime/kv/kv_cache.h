// Host storage of the paged KV cache (the CPU backend's), with its block pool.
//
// Layout, one allocation, f32, 64-byte aligned; for each layer l:
//   keys(l)   [numBlocks, blockSize, kvHeads, headDim]
//   values(l) [numBlocks, blockSize, kvHeads, headDim]
// so the key of kv head h at position p of a sequence with block table bt is
//   keys(l)[((bt[p / blockSize] * blockSize + p % blockSize) * kvHeads + h) * headDim + d].
// A token slot holds all kv heads contiguously: writing one token is one copy.
// Pages are touched on first write; memory of unused blocks is never read.
#pragma once

#include "kv/block_pool.h"
#include "support/status.h"

#include <cstdint>
#include <memory>

namespace llmc::kv {

struct KvCacheShape {
  int32_t numLayers = 0;
  int32_t numBlocks = 0; // including the null block 0
  int32_t blockSize = kDefaultBlockSize;
  int32_t kvHeads = 0;
  int32_t headDim = 0;
};

// One layer's K and V as the attention kernel sees them.
struct KvLayerView {
  float *keys;   // [numBlocks, blockSize, kvHeads, headDim]
  float *values; // [numBlocks, blockSize, kvHeads, headDim]
  int64_t numBlocks;
  int64_t blockSize;
  int64_t kvHeads;
  int64_t headDim;
};

class KvCache {
public:
  // Fails, naming the shape and size, when a dimension is not positive or
  // the memory cannot be allocated.
  static Expected<KvCache> create(const KvCacheShape &shape);

  const KvCacheShape &shape() const { return shape_; }
  BlockPool &pool() { return pool_; }
  KvLayerView layer(int32_t layer);
  // Bytes of K and V storage over all layers.
  int64_t bytes() const;
  // Test hook: fills the K and V of every free block (BlockPool::isFree) with
  // NaN, so that a kernel reading a slot no live sequence wrote shows up as
  // NaN logits. Touches the pages of those blocks.
  void poisonFreeBlocks();

private:
  struct FreeStorage {
    void operator()(float *p) const;
  };

  KvCache(const KvCacheShape &shape, float *storage);
  int64_t floatsPerTensor() const;

  KvCacheShape shape_;
  BlockPool pool_;
  std::unique_ptr<float, FreeStorage> storage_; // [numLayers, 2 (K, V), numBlocks * ...]
};

} // namespace llmc::kv
