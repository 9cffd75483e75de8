// The prefix cache of kv::BlockPool / kv::BlockTable: full blocks found by
// their chained hash and shared by reference, partial blocks never shared,
// released cached blocks kept in an LRU and evicted only when the free
// blocks run out, oldest first.
#include "kv/block_pool.h"
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace llmc::kv {
namespace {

constexpr int kBlock = 4;

std::vector<int32_t> iota(int count, int32_t first) {
  std::vector<int32_t> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A table holding `tokens`, all computed and registered.
BlockTable filled(BlockPool &pool, const std::vector<int32_t> &tokens) {
  BlockTable t(kBlock);
  EXPECT_TRUE(t.reserve(pool, static_cast<int64_t>(tokens.size())));
  EXPECT_TRUE(t.registerFull(pool, tokens.data(), static_cast<int64_t>(tokens.size())));
  return t;
}

TEST(BlockHash, ChainsOverTheParentAndTheTokens) {
  std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  BlockHash ha = hashBlock(nullptr, a.data(), 4);
  EXPECT_EQ(ha, hashBlock(nullptr, a.data(), 4));
  EXPECT_FALSE(ha == hashBlock(nullptr, b.data(), 4));
  // The same tokens after different parents are different blocks.
  BlockHash hb = hashBlock(nullptr, b.data(), 4);
  EXPECT_FALSE(hashBlock(&ha, a.data(), 4) == hashBlock(&hb, a.data(), 4));
  // A first block differs from the same tokens after a zero parent hash.
  BlockHash zero;
  EXPECT_FALSE(ha == hashBlock(&zero, a.data(), 4));
}

TEST(PrefixCache, HitSharesFullBlocksByReference) {
  BlockPool pool(16);
  std::vector<int32_t> prompt = iota(10, 100); // 2 full blocks + 2 tokens
  BlockTable first = filled(pool, prompt);
  ASSERT_EQ(first.blocks().size(), 3u);
  EXPECT_EQ(first.hashedBlocks(), 2u); // the partial third block is not registered
  EXPECT_TRUE(pool.isCached(first.blocks()[0]));
  EXPECT_TRUE(pool.isCached(first.blocks()[1]));
  EXPECT_FALSE(pool.isCached(first.blocks()[2]));

  BlockTable second(kBlock);
  auto hit = second.attachCached(pool, prompt.data(), 10, 100);
  ASSERT_TRUE(hit.isOk()) << hit.message();
  EXPECT_EQ(*hit, 2);
  ASSERT_EQ(second.blocks().size(), 2u);
  EXPECT_EQ(second.blocks()[0], first.blocks()[0]);
  EXPECT_EQ(second.blocks()[1], first.blocks()[1]);
  EXPECT_EQ(pool.refCount(first.blocks()[0]), 2);
  EXPECT_EQ(pool.refCount(first.blocks()[2]), 1);
  // The sharer grows with blocks of its own.
  ASSERT_TRUE(second.reserve(pool, 11));
  EXPECT_NE(second.blocks()[2], first.blocks()[2]);
}

TEST(PrefixCache, MissAfterADifferentTokenAndAtMostMaxBlocks) {
  BlockPool pool(16);
  std::vector<int32_t> prompt = iota(12, 0);
  BlockTable first = filled(pool, prompt);
  std::vector<int32_t> other = prompt;
  other[5] = 99; // second block differs: only the first matches
  BlockTable t(kBlock);
  ASSERT_EQ(*t.attachCached(pool, other.data(), 12, 100), 1);
  ASSERT_TRUE(t.releaseAll(pool));
  other[0] = 99; // first block differs: nothing matches, even if later blocks equal
  ASSERT_EQ(*t.attachCached(pool, other.data(), 12, 100), 0);
  EXPECT_TRUE(t.blocks().empty());
  // maxBlocks caps the match (the caller keeps a token to compute).
  ASSERT_EQ(*t.attachCached(pool, prompt.data(), 12, 2), 2);
  EXPECT_FALSE(t.attachCached(pool, prompt.data(), 12, 2).isOk()); // table not empty
}

TEST(PrefixCache, PartialBlockIsNeverShared) {
  BlockPool pool(16);
  std::vector<int32_t> prompt = iota(7, 0); // 1 full block + 3 tokens
  BlockTable first = filled(pool, prompt);
  std::vector<int32_t> longer = iota(9, 0);
  BlockTable t(kBlock);
  EXPECT_EQ(*t.attachCached(pool, longer.data(), 9, 100), 1);
  EXPECT_EQ(pool.refCount(first.blocks()[1]), 1);
  EXPECT_EQ(pool.numCached(), 1);
}

TEST(PrefixCache, ReleasedBlocksStayCachedAndComeBack) {
  BlockPool pool(8); // 7 usable
  std::vector<int32_t> prompt = iota(8, 0);
  BlockTable first = filled(pool, prompt);
  std::vector<int32_t> blocks = first.blocks();
  ASSERT_TRUE(first.releaseAll(pool));
  EXPECT_EQ(pool.numFree(), 7); // evictable blocks count as free
  EXPECT_EQ(pool.numEvictable(), 2);
  EXPECT_EQ(pool.numInUse(), 0);
  EXPECT_EQ(pool.refCount(blocks[0]), 0);
  BlockTable again(kBlock);
  ASSERT_EQ(*again.attachCached(pool, prompt.data(), 9, 100), 2);
  EXPECT_EQ(again.blocks(), blocks);
  EXPECT_EQ(pool.numEvictable(), 0);
  EXPECT_EQ(pool.refCount(blocks[0]), 1);
  EXPECT_EQ(pool.numFree(), 5);
}

TEST(PrefixCache, FreeBlocksGoFirstThenTheLeastRecentlyReleased) {
  BlockPool pool(7); // 6 usable
  std::vector<int32_t> a = iota(4, 0), b = iota(4, 50), c = iota(4, 90);
  BlockTable ta = filled(pool, a), tb = filled(pool, b), tc = filled(pool, c);
  int32_t blockA = ta.blocks()[0], blockB = tb.blocks()[0], blockC = tc.blocks()[0];
  ASSERT_TRUE(tb.releaseAll(pool)); // LRU: b, then a, then c
  ASSERT_TRUE(ta.releaseAll(pool));
  ASSERT_TRUE(tc.releaseAll(pool));
  EXPECT_EQ(pool.numEvictable(), 3);
  std::vector<int32_t> taken;
  ASSERT_TRUE(pool.allocate(3, taken)); // the 3 never-used blocks
  EXPECT_EQ(pool.numEvictable(), 3);
  ASSERT_TRUE(pool.allocate(1, taken)); // evicts b
  EXPECT_EQ(taken.back(), blockB);
  EXPECT_FALSE(pool.isCached(blockB));
  EXPECT_EQ(pool.findCached(hashBlock(nullptr, b.data(), 4)), kNullBlock);
  ASSERT_TRUE(pool.allocate(1, taken)); // then a
  EXPECT_EQ(taken.back(), blockA);
  EXPECT_EQ(pool.findCached(hashBlock(nullptr, c.data(), 4)), blockC);
  EXPECT_FALSE(pool.allocate(2, taken).isOk()); // all or nothing: c stays
  EXPECT_EQ(pool.findCached(hashBlock(nullptr, c.data(), 4)), blockC);
  // A hit refreshes: c, reacquired and released, is again the most recent.
  for (int32_t id : taken)
    ASSERT_TRUE(pool.release(id));
  EXPECT_EQ(pool.numFree(), 6);
}

TEST(PrefixCache, RefCountsOfSharedBlocksAndDuplicates) {
  BlockPool pool(16);
  std::vector<int32_t> prompt = iota(8, 0);
  BlockTable first = filled(pool, prompt);
  // A second sequence computed the same prefix itself: its blocks are not
  // registered again (the first copy is kept) and free normally.
  BlockTable twin = filled(pool, prompt);
  EXPECT_EQ(pool.numCached(), 2);
  EXPECT_FALSE(pool.isCached(twin.blocks()[0]));
  BlockTable a(kBlock), b(kBlock);
  ASSERT_EQ(*a.attachCached(pool, prompt.data(), 9, 100), 2);
  ASSERT_EQ(*b.attachCached(pool, prompt.data(), 9, 100), 2);
  EXPECT_EQ(pool.refCount(first.blocks()[0]), 3);
  ASSERT_TRUE(first.releaseAll(pool));
  ASSERT_TRUE(a.releaseAll(pool));
  EXPECT_EQ(pool.refCount(b.blocks()[0]), 1);
  EXPECT_EQ(pool.numEvictable(), 0);
  ASSERT_TRUE(b.releaseAll(pool));
  EXPECT_EQ(pool.numEvictable(), 2);
  ASSERT_TRUE(twin.releaseAll(pool));
  EXPECT_EQ(pool.numFree(), 15);
  EXPECT_EQ(pool.numInUse(), 0);
  EXPECT_FALSE(pool.acquireCached(twin.blocks().empty() ? 3 : twin.blocks()[0]).isOk());
}

TEST(BlockTable, TruncateRollsBackAReservation) {
  BlockPool pool(8);
  BlockTable t(kBlock);
  ASSERT_TRUE(t.reserve(pool, 5));
  ASSERT_TRUE(t.reserve(pool, 13));
  EXPECT_EQ(t.blocks().size(), 4u);
  ASSERT_TRUE(t.truncate(pool, 2));
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(pool.numFree(), 5);
}

TEST(KvCache, PoisonFillsOnlyFreeBlocksWithNaN) {
  KvCacheShape shape{2, 4, kBlock, 1, 2};
  auto cache = KvCache::create(shape);
  ASSERT_TRUE(cache.isOk()) << cache.message();
  std::vector<int32_t> blocks;
  ASSERT_TRUE(cache->pool().allocate(1, blocks)); // block 1 in use
  const int64_t perBlock = kBlock * 1 * 2;
  for (int32_t l = 0; l < 2; ++l)
    std::fill_n(cache->layer(l).keys + blocks[0] * perBlock, perBlock, 1.0f);
  cache->poisonFreeBlocks();
  for (int32_t l = 0; l < 2; ++l) {
    KvLayerView v = cache->layer(l);
    EXPECT_EQ(v.keys[blocks[0] * perBlock], 1.0f);
    EXPECT_TRUE(std::isnan(v.keys[2 * perBlock]));
    EXPECT_TRUE(std::isnan(v.values[3 * perBlock + perBlock - 1]));
  }
}

} // namespace
} // namespace llmc::kv
