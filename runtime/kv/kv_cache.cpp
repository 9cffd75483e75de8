#include "kv/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

namespace llmc::kv {
namespace {

std::string describe(const KvCacheShape &s) {
  return std::to_string(s.numLayers) + " layers x 2 x " + std::to_string(s.numBlocks) +
         " blocks x " + std::to_string(s.blockSize) + " tokens x " + std::to_string(s.kvHeads) +
         " kv heads x " + std::to_string(s.headDim) + " x f32";
}

constexpr size_t kAlignment = 64;

} // namespace

void KvCache::FreeStorage::operator()(float *p) const { std::free(p); }

KvCache::KvCache(const KvCacheShape &shape, float *storage)
    : shape_(shape), pool_(shape.numBlocks), storage_(storage) {}

int64_t KvCache::floatsPerTensor() const {
  return static_cast<int64_t>(shape_.numBlocks) * shape_.blockSize * shape_.kvHeads *
         shape_.headDim;
}

int64_t KvCache::bytes() const {
  return floatsPerTensor() * 2 * shape_.numLayers * static_cast<int64_t>(sizeof(float));
}

Expected<KvCache> KvCache::create(const KvCacheShape &shape) {
  if (shape.numLayers <= 0 || shape.numBlocks < 2 || shape.blockSize <= 0 || shape.kvHeads <= 0 ||
      shape.headDim <= 0)
    return Status::error("KV cache: shape " + describe(shape) +
                         ": every dimension must be positive and numBlocks >= 2 (block 0 is "
                         "reserved)");
  // Factors are below 2^31: a running product checked after each step fits in 128 bits.
  const uint64_t limit = std::numeric_limits<int64_t>::max() / 2;
  unsigned __int128 total = sizeof(float) * 2;
  for (int32_t factor :
       {shape.numLayers, shape.numBlocks, shape.blockSize, shape.kvHeads, shape.headDim}) {
    total *= static_cast<uint64_t>(factor);
    if (total > limit)
      return Status::error("KV cache: shape " + describe(shape) + " overflows the address space");
  }
  size_t bytes = (static_cast<size_t>(total) + kAlignment - 1) / kAlignment * kAlignment;
  void *storage = std::aligned_alloc(kAlignment, bytes);
  if (storage == nullptr)
    return Status::error("KV cache: cannot allocate " + std::to_string(bytes) + " bytes for " +
                         describe(shape));
  return KvCache(shape, static_cast<float *>(storage));
}

void KvCache::poisonFreeBlocks() {
  const int64_t perBlock =
      static_cast<int64_t>(shape_.blockSize) * shape_.kvHeads * shape_.headDim;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int32_t block = 1; block < shape_.numBlocks; ++block) {
    if (!pool_.isFree(block))
      continue;
    for (int32_t l = 0; l < shape_.numLayers; ++l) {
      KvLayerView view = layer(l);
      std::fill_n(view.keys + block * perBlock, perBlock, nan);
      std::fill_n(view.values + block * perBlock, perBlock, nan);
    }
  }
}

KvLayerView KvCache::layer(int32_t layer) {
  float *keys = storage_.get() + 2 * static_cast<int64_t>(layer) * floatsPerTensor();
  return {
      keys,          keys + floatsPerTensor(), shape_.numBlocks, shape_.blockSize, shape_.kvHeads,
      shape_.headDim};
}

} // namespace llmc::kv
