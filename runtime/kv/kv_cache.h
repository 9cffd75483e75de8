// Host storage of the paged KV cache (the CPU backend's), with its block pool.
//
// Layout, one allocation of f32 or f16 elements (KvDtype), 64-byte aligned;
// for each layer l:
//   keys(l)   [numBlocks, blockSize, kvHeads, headDim]
//   values(l) [numBlocks, blockSize, kvHeads, headDim]
// so the key of kv head h at position p of a sequence with block table bt is
//   keys(l)[((bt[p / blockSize] * blockSize + p % blockSize) * kvHeads + h) * headDim + d].
// A token slot holds all kv heads contiguously: writing one token is one copy.
// Pages are touched on first write; memory of unused blocks is never read.
// An f16 cache holds IEEE binary16 bits, rounded to nearest even from the f32
// keys and values at write: half the bytes a long-context decode step reads
// (llama.cpp's default cache type), for about 3 decimal digits of K and V.
#pragma once

#include "kv/block_pool.h"
#include "support/status.h"

#include <cstdint>
#include <memory>
#include <string_view>

namespace llmc::kv {

enum class KvDtype : uint8_t { F32, F16 };

// "f32" or "f16"; the error names `what` (the flag or field) and the choices.
Expected<KvDtype> parseKvDtype(std::string_view text, std::string_view what);
const char *kvDtypeName(KvDtype dtype);
int64_t kvDtypeBytes(KvDtype dtype);

struct KvCacheShape {
  int32_t numLayers = 0;
  int32_t numBlocks = 0; // including the null block 0
  int32_t blockSize = kDefaultBlockSize;
  int32_t kvHeads = 0;
  int32_t headDim = 0;
  KvDtype dtype = KvDtype::F32;
};

// One layer's K and V as the attention kernel sees them: the f32 pointers
// for an f32 cache, the f16 ones for an f16 cache (the others are null).
struct KvLayerView {
  float *keys;   // [numBlocks, blockSize, kvHeads, headDim]
  float *values; // [numBlocks, blockSize, kvHeads, headDim]
  int64_t numBlocks;
  int64_t blockSize;
  int64_t kvHeads;
  int64_t headDim;
  uint16_t *keysF16 = nullptr; // the same layout, f16 bits
  uint16_t *valuesF16 = nullptr;

  bool isF16() const { return keysF16 != nullptr; }
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
    void operator()(unsigned char *p) const;
  };

  KvCache(const KvCacheShape &shape, unsigned char *storage);
  int64_t elementsPerTensor() const;

  KvCacheShape shape_;
  BlockPool pool_;
  std::unique_ptr<unsigned char, FreeStorage> storage_; // [numLayers, 2 (K, V), numBlocks * ...]
};

} // namespace llmc::kv
