// The host/device math that the CUDA kernels share with the CPU
// (runtime/kernels/common), checked on the host: flash-decoding's run-time
// split of a context, the many-way split merge against folded pairwise
// merges, the int4 GEMV's paired bf16 dequantization against the f32 one.
#include "kernels/common/decode_splits.h"
#include "kernels/common/int4.h"
#include "kernels/common/online_softmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace llmc::hd {
namespace {

TEST(DecodeSplits, CoverTheContextOnceInWholeChunksWithinTheGrid) {
  for (int maxSplits : {1, 2, 8, 10, 32, 64})
    for (int context = 1; context <= 140000; context += context < 600 ? 1 : 997) {
      const DecodeSplits s = decodeSplits(context, maxSplits, 32);
      ASSERT_EQ(s.length % 32, 0) << context << " / " << maxSplits;
      ASSERT_GE(s.length, 32);
      ASSERT_GE(s.count, 1);
      ASSERT_LE(s.count, maxSplits) << context;
      // Split count - 1 holds the last position; none after it holds any.
      ASSERT_GE(int64_t{s.count} * s.length, context) << context;
      ASSERT_LT(int64_t{s.count - 1} * s.length, context) << context;
      // As many working splits as whole chunks allow, up to the grid.
      const int chunks = (context + 31) / 32;
      ASSERT_GE(s.count, (std::min(maxSplits, chunks) + 1) / 2) << context;
    }
}

TEST(DecodeSplits, TheBenchmarkContexts) {
  // 8 KV heads: 32 splits per head in the grid.
  EXPECT_EQ(decodeSplits(1, 32, 32).count, 1);
  EXPECT_EQ(decodeSplits(38, 32, 32).count, 2);
  EXPECT_EQ(decodeSplits(192, 32, 32).count, 6); // batch-1 bench: prompt 128 + 64 new
  EXPECT_EQ(decodeSplits(4096, 32, 32).length, 128);
  EXPECT_EQ(decodeSplits(4096, 32, 32).count, 32);
  EXPECT_EQ(decodeSplits(131072, 32, 32).length, 4096);
  EXPECT_EQ(decodeSplits(131072, 32, 32).count, 32);
}

TEST(SoftmaxScaleTo, MergingAllPiecesAtOnceEqualsFoldingPairwise) {
  std::mt19937 rng(7);
  std::normal_distribution<float> score(0.0f, 4.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int pieces = 1 + trial % 64;
    std::vector<SoftmaxState> states(pieces);
    std::vector<float> acc(pieces);
    for (int i = 0; i < pieces; ++i) {
      const bool empty = (rng() % 5) == 0; // splits past the context
      states[i] = empty ? softmaxEmpty() : SoftmaxState{score(rng), 1.0f + (rng() % 1000) / 10.0f};
      acc[i] = empty ? 0.0f : score(rng);
    }
    SoftmaxState folded = softmaxEmpty();
    float foldedAcc = 0.0f;
    for (int i = 0; i < pieces; ++i) {
      const SoftmaxMerge m = softmaxMerge(folded, states[i]);
      folded = m.state;
      foldedAcc = foldedAcc * m.scaleA + acc[i] * m.scaleB;
    }
    float max = -infinity();
    for (const SoftmaxState &s : states)
      max = maxF(max, s.max);
    float sum = 0.0f, total = 0.0f;
    for (int i = 0; i < pieces; ++i) {
      const float f = softmaxScaleTo(states[i], max);
      sum += states[i].sum * f;
      total += acc[i] * f;
    }
    const float got = total * softmaxInvSum({max, sum});
    const float want = foldedAcc * softmaxInvSum(folded);
    ASSERT_FALSE(std::isnan(got)) << trial;
    ASSERT_NEAR(got, want, 1e-5f * (1.0f + std::fabs(want))) << trial;
    ASSERT_EQ(max, folded.max) << trial;
  }
}

TEST(SoftmaxScaleTo, EmptyPiecesWeighNothingAndAllEmptyGivesZeros) {
  EXPECT_EQ(softmaxScaleTo(softmaxEmpty(), 3.0f), 0.0f);
  EXPECT_EQ(softmaxScaleTo(softmaxEmpty(), -infinity()), 0.0f);
  EXPECT_EQ(softmaxScaleTo(SoftmaxState{2.0f, 1.0f}, 2.0f), 1.0f);
  EXPECT_EQ(softmaxInvSum({-infinity(), 0.0f}), 0.0f);
}

// Bit for bit the values of int4MinusMagicZero (the f32 path and the CPU's
// q - zero) for every nibble and every zero point the fast path takes.
TEST(Int4PairBf16x2, EqualsTheF32DequantizationBitForBit) {
  std::mt19937 rng(11);
  std::vector<float> zeros;
  for (int z = 0; z <= 127; ++z)
    zeros.push_back(static_cast<float>(z));
  for (float z : {0.5f, 7.5f, 8.5f, 0.25f, 14.75f, 126.5f, 127.0f})
    zeros.push_back(z); // rounded to nearest even by both
  for (int trial = 0; trial < 64; ++trial) {
    const u32 word = trial < 16 ? 0x11111111u * static_cast<u32>(trial) : static_cast<u32>(rng());
    for (float zero : zeros) {
      ASSERT_TRUE(int4ZeroFitsBf16x2(zero));
      const u32 neg = int4NegMagicZeroBf16x2(zero);
      for (int s = 0; s < 4; ++s) {
        const u32 pair = int4PairBf16x2(word, s);
        for (int half = 0; half < 2; ++half) {
          const float want = int4MinusMagicZero(word, s + 4 * half, int4MagicZero(zero));
          const float got = int4PairMinusMagicZero(pair, neg, half);
          ASSERT_EQ(floatBits(got), floatBits(want))
              << std::hex << word << std::dec << " nibble " << s + 4 * half << " zero " << zero;
        }
      }
    }
  }
  EXPECT_FALSE(int4ZeroFitsBf16x2(-1.0f));
  EXPECT_FALSE(int4ZeroFitsBf16x2(127.5f));
  EXPECT_FALSE(int4ZeroFitsBf16x2(std::nanf("")));
}

} // namespace
} // namespace llmc::hd
