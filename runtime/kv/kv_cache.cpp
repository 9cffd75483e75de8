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
         " kv heads x " + std::to_string(s.headDim) + " x " + kvDtypeName(s.dtype);
}

constexpr size_t kAlignment = 64;
constexpr uint16_t kF16QuietNan = 0x7e00;

} // namespace

Expected<KvDtype> parseKvDtype(std::string_view text, std::string_view what) {
  if (text == "f32")
    return KvDtype::F32;
  if (text == "f16")
    return KvDtype::F16;
  return Status::error(std::string(what) + " '" + std::string(text) +
                       "' is not a KV cache type: use f32 or f16");
}

const char *kvDtypeName(KvDtype dtype) { return dtype == KvDtype::F16 ? "f16" : "f32"; }

int64_t kvDtypeBytes(KvDtype dtype) { return dtype == KvDtype::F16 ? 2 : 4; }

void KvCache::FreeStorage::operator()(unsigned char *p) const { std::free(p); }

KvCache::KvCache(const KvCacheShape &shape, unsigned char *storage)
    : shape_(shape), pool_(shape.numBlocks), storage_(storage) {}

int64_t KvCache::elementsPerTensor() const {
  return static_cast<int64_t>(shape_.numBlocks) * shape_.blockSize * shape_.kvHeads *
         shape_.headDim;
}

int64_t KvCache::bytes() const {
  return elementsPerTensor() * 2 * shape_.numLayers * kvDtypeBytes(shape_.dtype);
}

Expected<KvCache> KvCache::create(const KvCacheShape &shape) {
  if (shape.numLayers <= 0 || shape.numBlocks < 2 || shape.blockSize <= 0 || shape.kvHeads <= 0 ||
      shape.headDim <= 0)
    return Status::error("KV cache: shape " + describe(shape) +
                         ": every dimension must be positive and numBlocks >= 2 (block 0 is "
                         "reserved)");
  if (shape.dtype != KvDtype::F32 && shape.dtype != KvDtype::F16)
    return Status::error("KV cache: element type " + std::to_string(static_cast<int>(shape.dtype)) +
                         " is neither f32 nor f16");
  // Factors are below 2^31: a running product checked after each step fits in 128 bits.
  const uint64_t limit = std::numeric_limits<int64_t>::max() / 2;
  unsigned __int128 total = static_cast<uint64_t>(kvDtypeBytes(shape.dtype)) * 2;
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
  return KvCache(shape, static_cast<unsigned char *>(storage));
}

void KvCache::poisonFreeBlocks() {
  const int64_t perBlock = static_cast<int64_t>(shape_.blockSize) * shape_.kvHeads * shape_.headDim;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int32_t block = 1; block < shape_.numBlocks; ++block) {
    if (!pool_.isFree(block))
      continue;
    for (int32_t l = 0; l < shape_.numLayers; ++l) {
      KvLayerView view = layer(l);
      if (view.isF16()) {
        std::fill_n(view.keysF16 + block * perBlock, perBlock, kF16QuietNan);
        std::fill_n(view.valuesF16 + block * perBlock, perBlock, kF16QuietNan);
      } else {
        std::fill_n(view.keys + block * perBlock, perBlock, nan);
        std::fill_n(view.values + block * perBlock, perBlock, nan);
      }
    }
  }
}

KvLayerView KvCache::layer(int32_t layer) {
  const int64_t tensorBytes = elementsPerTensor() * kvDtypeBytes(shape_.dtype);
  unsigned char *keys = storage_.get() + 2 * static_cast<int64_t>(layer) * tensorBytes;
  unsigned char *values = keys + tensorBytes;
  KvLayerView view{nullptr,        nullptr,        shape_.numBlocks, shape_.blockSize,
                   shape_.kvHeads, shape_.headDim, nullptr,          nullptr};
  if (shape_.dtype == KvDtype::F16) {
    view.keysF16 = reinterpret_cast<uint16_t *>(keys);
    view.valuesF16 = reinterpret_cast<uint16_t *>(values);
  } else {
    view.keys = reinterpret_cast<float *>(keys);
    view.values = reinterpret_cast<float *>(values);
  }
  return view;
}

} // namespace llmc::kv
