#include "kv/block_pool.h"
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

// Under AddressSanitizer an impossible allocation aborts unless told to
// return null; KvCache must turn that null into a status.
#if defined(__SANITIZE_ADDRESS__)
#define LLMC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMC_TEST_ASAN 1
#endif
#endif
#if defined(LLMC_TEST_ASAN)
extern "C" const char *__asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace llmc::kv {
namespace {

TEST(BlockPool, NeverHandsOutTheNullBlockAndFailsCleanlyWhenExhausted) {
  BlockPool pool(5);
  EXPECT_EQ(pool.numFree(), 4);
  std::vector<int32_t> blocks;
  ASSERT_TRUE(pool.allocate(3, blocks));
  EXPECT_EQ(blocks, (std::vector<int32_t>{1, 2, 3}));
  Status tooMany = pool.allocate(2, blocks);
  ASSERT_FALSE(tooMany.isOk());
  EXPECT_EQ(tooMany.message(), "KV cache: out of blocks: 2 requested, 1 of 4 free");
  EXPECT_EQ(blocks.size(), 3u); // all or nothing
  EXPECT_EQ(pool.numFree(), 1);
  ASSERT_TRUE(pool.allocate(1, blocks));
  EXPECT_EQ(std::count(blocks.begin(), blocks.end(), kNullBlock), 0);
  EXPECT_FALSE(pool.allocate(1, blocks).isOk());
}

TEST(BlockPool, RefCountsKeepSharedBlocksAlive) {
  BlockPool pool(4);
  std::vector<int32_t> blocks;
  ASSERT_TRUE(pool.allocate(1, blocks));
  int32_t b = blocks[0];
  ASSERT_TRUE(pool.retain(b));
  EXPECT_EQ(pool.refCount(b), 2);
  ASSERT_TRUE(pool.release(b));
  EXPECT_EQ(pool.numFree(), 2); // still held once
  ASSERT_TRUE(pool.release(b));
  EXPECT_EQ(pool.numFree(), 3);
  EXPECT_EQ(pool.refCount(b), 0);
  Status doubleFree = pool.release(b);
  ASSERT_FALSE(doubleFree.isOk());
  EXPECT_EQ(doubleFree.message(), "KV cache: release of block 1, which is free");
  EXPECT_FALSE(pool.retain(kNullBlock).isOk());
  EXPECT_EQ(pool.release(9).message(), "KV cache: release of block 9: expected an id in [1, 4)");
}

TEST(BlockTable, GrowsAppendOnlyAndAllOrNothing) {
  BlockPool pool(6); // 5 usable
  BlockTable table(16);
  ASSERT_TRUE(table.reserve(pool, 1));
  EXPECT_EQ(table.capacity(), 16);
  ASSERT_TRUE(table.reserve(pool, 16)); // already covered
  EXPECT_EQ(table.blocks().size(), 1u);
  std::vector<int32_t> before = table.blocks();
  ASSERT_TRUE(table.reserve(pool, 33));
  ASSERT_EQ(table.blocks().size(), 3u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), table.blocks().begin()));
  before = table.blocks();
  Status full = table.reserve(pool, 16 * 6);
  ASSERT_FALSE(full.isOk());
  EXPECT_EQ(full.message(), "KV cache: out of blocks: 96 tokens need 3 more blocks, 2 free");
  EXPECT_EQ(table.blocks(), before);
  EXPECT_EQ(pool.numFree(), 2);
  ASSERT_TRUE(table.releaseAll(pool));
  EXPECT_TRUE(table.blocks().empty());
  EXPECT_EQ(pool.numFree(), 5);
}

TEST(BlockTable, SharesAPrefixBetweenSequences) {
  BlockPool pool(8);
  BlockTable first(4), second(4);
  ASSERT_TRUE(first.reserve(pool, 8)); // two full blocks of prompt
  for (int32_t b : first.blocks())
    ASSERT_TRUE(second.appendShared(pool, b));
  ASSERT_TRUE(second.reserve(pool, 9)); // its own third block
  EXPECT_EQ(pool.refCount(first.blocks()[0]), 2);
  ASSERT_TRUE(first.releaseAll(pool));
  EXPECT_EQ(pool.refCount(second.blocks()[0]), 1); // still held by the second sequence
  EXPECT_EQ(pool.numFree(), 4);
  ASSERT_TRUE(second.releaseAll(pool));
  EXPECT_EQ(pool.numFree(), 7);
  EXPECT_FALSE(second.appendShared(pool, 3).isOk()); // free now
}

TEST(BlockPool, RandomChurnKeepsCountsConsistent) {
  BlockPool pool(33);
  std::vector<BlockTable> tables(6, BlockTable(8));
  std::mt19937 rng(3);
  for (int step = 0; step < 2000; ++step) {
    BlockTable &t = tables[rng() % tables.size()];
    if (rng() % 4 == 0) {
      ASSERT_TRUE(t.releaseAll(pool));
    } else {
      int64_t want = t.capacity() + 1 + rng() % 20;
      int32_t freeBefore = pool.numFree();
      if (!t.reserve(pool, want).isOk())
        ASSERT_EQ(pool.numFree(), freeBefore);
    }
    std::set<int32_t> used;
    for (const BlockTable &table : tables)
      for (int32_t b : table.blocks()) {
        ASSERT_NE(b, kNullBlock);
        ASSERT_TRUE(used.insert(b).second) << "block " << b << " handed out twice";
      }
    ASSERT_EQ(static_cast<int32_t>(used.size()) + pool.numFree(), 32);
  }
}

// An f16 cache: half the bytes, the f16 pointers set and the f32 ones null,
// the same layout in elements; its free blocks poison to f16 NaN.
TEST(KvCache, F16CacheHalvesTheBytesAndPoisonsWithF16Nan) {
  auto cache = KvCache::create({3, 10, 16, 2, 8, KvDtype::F16});
  ASSERT_TRUE(cache.isOk()) << cache.message();
  EXPECT_EQ(cache->bytes(), 3 * 2 * 10 * 16 * 2 * 8 * 2);
  KvLayerView l0 = cache->layer(0), l2 = cache->layer(2);
  ASSERT_TRUE(l0.isF16());
  EXPECT_EQ(l0.keys, nullptr);
  EXPECT_EQ(l0.values, nullptr);
  EXPECT_EQ(l0.valuesF16 - l0.keysF16, 10 * 16 * 2 * 8);
  EXPECT_EQ(l2.keysF16 - l0.keysF16, 2 * 2 * 10 * 16 * 2 * 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(l0.keysF16) % 64, 0u);
  std::fill(l2.keysF16, l2.keysF16 + 2 * 10 * 16 * 2 * 8, uint16_t{0x3c00}); // the last layer
  std::vector<int32_t> used;
  ASSERT_TRUE(cache->pool().allocate(1, used));
  cache->poisonFreeBlocks();
  const int64_t perBlock = 16 * 2 * 8;
  EXPECT_EQ(l2.keysF16[used[0] * perBlock], 0x3c00);
  const int32_t freeBlock = used[0] == 1 ? 2 : 1;
  EXPECT_EQ(l2.keysF16[freeBlock * perBlock], 0x7e00);
  EXPECT_EQ(l0.valuesF16[freeBlock * perBlock + perBlock - 1], 0x7e00);
  EXPECT_FALSE(KvCache::create({1, 1, 16, 2, 8, KvDtype::F16}).isOk());
  auto tooBig = KvCache::create({64, 1 << 20, 16, 8, 128, KvDtype::F16});
  if (!tooBig.isOk())
    EXPECT_NE(tooBig.message().find("cannot allocate 4398046511104 bytes for 64 layers x 2 x "
                                    "1048576 blocks x 16 tokens x 8 kv heads x 128 x f16"),
              std::string::npos)
        << tooBig.message();
}

TEST(KvCache, ParsesTheElementTypesAndNamesABadOne) {
  EXPECT_EQ(*parseKvDtype("f32", "--kv-cache-dtype"), KvDtype::F32);
  EXPECT_EQ(*parseKvDtype("f16", "--kv-cache-dtype"), KvDtype::F16);
  for (const char *bad : {"", "F16", "bf16", "fp8", "f16 "}) {
    auto parsed = parseKvDtype(bad, "--kv-cache-dtype");
    ASSERT_FALSE(parsed.isOk()) << bad;
    EXPECT_EQ(parsed.message(),
              std::string("--kv-cache-dtype '") + bad + "' is not a KV cache type: use f32 or f16");
  }
  EXPECT_STREQ(kvDtypeName(KvDtype::F16), "f16");
  EXPECT_EQ(kvDtypeBytes(KvDtype::F32), 4);
}

TEST(KvCache, SizesLayersAndRejectsBadShapes) {
  auto cache = KvCache::create({3, 10, 16, 2, 8});
  ASSERT_TRUE(cache.isOk()) << cache.message();
  EXPECT_EQ(cache->bytes(), 3 * 2 * 10 * 16 * 2 * 8 * 4);
  EXPECT_EQ(cache->pool().numFree(), 9);
  KvLayerView l0 = cache->layer(0), l1 = cache->layer(1);
  EXPECT_EQ(l0.values - l0.keys, 10 * 16 * 2 * 8);
  EXPECT_EQ(l1.keys - l0.keys, 2 * 10 * 16 * 2 * 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(l0.keys) % 64, 0u);
  EXPECT_EQ(l1.blockSize, 16);
  // Every slot of the last layer is writable.
  KvLayerView l2 = cache->layer(2);
  std::fill(l2.keys, l2.keys + 2 * 10 * 16 * 2 * 8, 1.0f);

  auto bad = KvCache::create({1, 1, 16, 2, 8});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("numBlocks >= 2"), std::string::npos) << bad.message();
  auto huge = KvCache::create({1000, 1 << 30, 1 << 20, 64, 128});
  ASSERT_FALSE(huge.isOk());
  EXPECT_NE(huge.message().find("overflows"), std::string::npos) << huge.message();
  // 8 TiB: more than any test machine; refused unless the kernel overcommits blindly.
  auto tooBig = KvCache::create({64, 1 << 20, 16, 8, 128});
  if (!tooBig.isOk())
    EXPECT_NE(tooBig.message().find("cannot allocate 8796093022208 bytes for 64 layers x 2 x "
                                    "1048576 blocks x 16 tokens x 8 kv heads x 128 x f32"),
              std::string::npos)
        << tooBig.message();
}

} // namespace
} // namespace llmc::kv
