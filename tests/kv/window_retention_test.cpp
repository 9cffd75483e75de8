// Releasing the KV blocks that fall out of every layer's sliding window:
// which position is the first one kept, the table's null entries, shared and
// cached blocks, and the table growing and shrinking around released entries.
#include "kv/window_retention.h"

#include <gtest/gtest.h>

namespace llmc::kv {
namespace {

TEST(WindowRetention, FirstRetainedPositionFollowsTheWidestWindow) {
  auto at = [](const std::vector<int32_t> &windows, int64_t next) {
    auto first = firstRetainedPosition(windows, next);
    EXPECT_TRUE(first.isOk()) << first.message();
    return first.isOk() ? *first : -1;
  };
  EXPECT_EQ(at({16, 16}, 70), 55); // the query at 70 reads 55..70
  EXPECT_EQ(at({16, 16}, 16), 1);
  EXPECT_EQ(at({16, 16}, 15), 0);
  EXPECT_EQ(at({16, 4096, 16}, 5000), 905);
  EXPECT_EQ(at({16, 0, 16}, 5000), 0) << "a global layer keeps everything (Gemma2, Qwen2)";
  EXPECT_EQ(at({}, 5000), 0);
  EXPECT_EQ(at({1}, 9), 9);
  auto bad = firstRetainedPosition({16, -3}, 100);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.message(),
            "KV cache: layer 1 has window -3: expected 0 (global) or a positive size");
}

TEST(WindowRetention, ReleasesWholeBlocksBeforeTheWindowOnce) {
  BlockPool pool(10);
  BlockTable table(16);
  ASSERT_TRUE(table.reserve(pool, 80)); // 5 blocks
  const std::vector<int32_t> kept = table.blocks();
  EXPECT_EQ(pool.numFree(), 4);
  // Next query at 60 with window 16: reads 45..60; blocks 0 and 1 (0..31) go,
  // block 2 (32..47) holds 45 and stays.
  auto released = releaseOutOfWindowBlocks(table, pool, {16, 16}, 60);
  ASSERT_TRUE(released.isOk()) << released.message();
  EXPECT_EQ(*released, 2);
  EXPECT_EQ(table.releasedBlocks(), 2u);
  EXPECT_EQ(table.blocks(), (std::vector<int32_t>{kNullBlock, kNullBlock, kept[2], kept[3], kept[4]}));
  EXPECT_EQ(pool.numFree(), 6);
  EXPECT_EQ(pool.refCount(kept[0]), 0);
  EXPECT_EQ(pool.refCount(kept[2]), 1);
  // Again at the same or an earlier position: nothing more.
  EXPECT_EQ(*releaseOutOfWindowBlocks(table, pool, {16, 16}, 60), 0);
  EXPECT_EQ(*table.releaseBefore(pool, 10), 0);
  // A global layer releases nothing.
  EXPECT_EQ(*releaseOutOfWindowBlocks(table, pool, {16, 0}, 79), 0);
  // Growing after a release appends after the live blocks; the freed ones
  // are reused.
  ASSERT_TRUE(table.reserve(pool, 100)); // 7 blocks
  EXPECT_EQ(table.blocks().size(), 7u);
  EXPECT_EQ(table.blocks()[0], kNullBlock);
  EXPECT_EQ(pool.numFree(), 4);
  // Truncating into the released entries releases only live blocks.
  ASSERT_TRUE(table.truncate(pool, 1));
  EXPECT_EQ(table.releasedBlocks(), 1u);
  EXPECT_EQ(pool.numFree(), 9);
  ASSERT_TRUE(table.releaseAll(pool));
  EXPECT_EQ(table.releasedBlocks(), 0u);
  EXPECT_EQ(pool.numFree(), 9);
  EXPECT_EQ(pool.numInUse(), 0);
}

TEST(WindowRetention, SharedBlocksStayWithTheOtherSequence) {
  BlockPool pool(8);
  BlockTable a(4), b(4);
  ASSERT_TRUE(a.reserve(pool, 8));
  ASSERT_TRUE(b.appendShared(pool, a.blocks()[0]));
  ASSERT_TRUE(b.reserve(pool, 8));
  const int32_t shared = a.blocks()[0];
  EXPECT_EQ(*a.releaseBefore(pool, 8), 2);
  EXPECT_EQ(pool.refCount(shared), 1) << "b still reads it";
  EXPECT_EQ(b.blocks()[0], shared);
  ASSERT_TRUE(a.releaseAll(pool));
  ASSERT_TRUE(b.releaseAll(pool));
  EXPECT_EQ(pool.numInUse(), 0);
}

TEST(WindowRetention, PrefixRegistrationSkipsReleasedBlocks) {
  BlockPool pool(8);
  BlockTable table(4);
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ASSERT_TRUE(table.reserve(pool, 12));
  EXPECT_EQ(*table.releaseBefore(pool, 5), 1);
  ASSERT_TRUE(table.registerFull(pool, tokens.data(), 12));
  EXPECT_EQ(table.hashedBlocks(), 3u);
  EXPECT_FALSE(pool.isCached(kNullBlock));
  EXPECT_TRUE(pool.isCached(table.blocks()[1]));
  EXPECT_TRUE(pool.isCached(table.blocks()[2]));
  // A registered block released by the window stays findable (evictable).
  EXPECT_EQ(*table.releaseBefore(pool, 9), 1);
  EXPECT_EQ(pool.numEvictable(), 1);
  ASSERT_TRUE(table.releaseAll(pool));
  EXPECT_EQ(pool.numInUse(), 0);
}

} // namespace
} // namespace llmc::kv
