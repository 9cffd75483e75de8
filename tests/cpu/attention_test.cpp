// Paged attention against a plain attention over contiguous K/V: random block
// tables, a NaN-poisoned cache (so any read of an unused slot shows), GQA,
// several sequences mixing prefill chunks and decode tokens; sliding windows
// and soft-capping against an explicitly masked reference, with every slot
// before a step's window poisoned (so a read outside the window shows); the
// same with an f16 cache, against the reference of its rounded K and V.
#include "common/compare.h"
#include "cpu/attention.h"
#include "cpu/attention_kernels.h"
#include "cpu/simd.h"
#include "kernels/common/half.h"
#include "kv/window_retention.h"
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace llmc::cpu {
namespace {

struct Dims {
  int64_t heads, kvHeads, headDim, blockSize, numBlocks;
};

// One sequence's history as the reference sees it: K and V per position.
struct SequenceState {
  std::vector<int32_t> blockTable;
  std::vector<std::vector<float>> keys, values; // [position][kvHeads * headDim]
};

float roundedToF16(float x) { return hd::f16ToF32(hd::f32ToF16(x)); }

// How a harness's step k and v reach its cache.
enum class KvInput {
  AsDrawn,     // the cache stores them (rounding them to f16 for an f16 cache)
  RoundedToF16 // rounded to f16 values before the step: an f32 cache then holds what an f16 one
               // does
};

class AttentionHarness {
public:
  AttentionHarness(const Dims &d, uint32_t seed, kv::KvDtype dtype = kv::KvDtype::F32,
                   KvInput input = KvInput::AsDrawn)
      : d_(d), rng_(seed), dtype_(dtype), input_(input) {
    kv::KvCacheShape shape{1,
                           static_cast<int32_t>(d.numBlocks),
                           static_cast<int32_t>(d.blockSize),
                           static_cast<int32_t>(d.kvHeads),
                           static_cast<int32_t>(d.headDim),
                           dtype};
    auto cache = kv::KvCache::create(shape);
    EXPECT_TRUE(cache.isOk()) << cache.message();
    cache_.emplace(std::move(*cache));
    poisonSlots(0, d.numBlocks * d.blockSize * d.kvHeads * d.headDim);
    // Free block ids in random order, so tables are scattered over the pool.
    for (int32_t b = 1; b < d.numBlocks; ++b)
      freeBlocks_.push_back(b);
    std::shuffle(freeBlocks_.begin(), freeBlocks_.end(), rng_);
  }

  // Sliding window and soft-capping of the following steps.
  void setScores(hd::AttentionScores scores) { scores_ = scores; }

  size_t addSequence() {
    sequences_.emplace_back();
    return sequences_.size() - 1;
  }

  // Runs one step in which sequence steps[i].first gets steps[i].second new
  // tokens, and checks every output row against the reference.
  // Returns the step's output rows.
  std::vector<float> step(const std::vector<std::pair<size_t, int64_t>> &steps, float scale,
                          double tolerance = 1e-5) {
    const int64_t qWidth = d_.heads * d_.headDim, kvWidth = d_.kvHeads * d_.headDim;
    const int64_t ld = qWidth + 2 * kvWidth; // a fused qkv row
    const int64_t gapRows = 1;               // a row between sequences that no sequence owns
    int64_t rows = gapRows;
    for (const auto &s : steps)
      rows += s.second;
    std::vector<float> qkv = test::randomFloats(rng_, rows * ld);
    if (input_ == KvInput::RoundedToF16)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = qWidth; i < ld; ++i)
          qkv[r * ld + i] = roundedToF16(qkv[r * ld + i]);
    std::vector<float> out(rows * qWidth, -7.0f);
    std::vector<int32_t> positions(rows, 0);
    std::vector<AttentionSequence> batch;
    int64_t row = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (i == 1)
        row += gapRows;
      SequenceState &seq = sequences_[steps[i].first];
      const int64_t first = static_cast<int64_t>(seq.keys.size());
      grow(seq, first + steps[i].second);
      poisonBeforeWindow(seq, hd::windowStart(static_cast<int32_t>(first), scores_.window));
      for (int64_t t = 0; t < steps[i].second; ++t) {
        positions[row + t] = static_cast<int32_t>(first + t);
        const float *k = qkv.data() + (row + t) * ld + qWidth;
        seq.keys.emplace_back(k, k + kvWidth);
        seq.values.emplace_back(k + kvWidth, k + 2 * kvWidth);
        if (dtype_ == kv::KvDtype::F16) // what the cache holds, the reference reads
          for (int64_t i = 0; i < kvWidth; ++i) {
            seq.keys.back()[i] = roundedToF16(seq.keys.back()[i]);
            seq.values.back()[i] = roundedToF16(seq.values.back()[i]);
          }
      }
      batch.push_back({row, steps[i].second, seq.blockTable.data()});
      row += steps[i].second;
    }
    ThreadPool pool(3);
    AttentionBatch args{qkv.data(),
                        ld,
                        qkv.data() + qWidth,
                        ld,
                        qkv.data() + qWidth + kvWidth,
                        ld,
                        out.data(),
                        qWidth,
                        positions.data(),
                        batch.data(),
                        static_cast<int64_t>(batch.size()),
                        d_.heads,
                        scale};
    args.scores = scores_;
    pagedAttention(pool, args, cache_->layer(0));
    for (size_t i = 0; i < steps.size(); ++i)
      for (int64_t r = batch[i].firstRow; r < batch[i].firstRow + batch[i].numRows; ++r)
        checkRow(sequences_[steps[i].first], qkv.data() + r * ld, positions[r],
                 out.data() + r * qWidth, scale, tolerance);
    if (steps.size() > 1)
      for (int64_t i = 0; i < qWidth; ++i)
        EXPECT_EQ(out[batch[0].numRows * qWidth + i], -7.0f) << "the gap row was written";
    return out;
  }

private:
  void grow(SequenceState &seq, int64_t tokens) {
    while (static_cast<int64_t>(seq.blockTable.size()) * d_.blockSize < tokens) {
      ASSERT_FALSE(freeBlocks_.empty());
      seq.blockTable.push_back(freeBlocks_.back());
      freeBlocks_.pop_back();
    }
  }

  // NaN into the cache slots of positions [0, end) of `seq`, which this step
  // must not read: what a released and reused block would hold.
  void poisonBeforeWindow(const SequenceState &seq, int64_t end) {
    const int64_t width = d_.kvHeads * d_.headDim;
    for (int64_t p = 0; p < end; ++p)
      poisonSlots((seq.blockTable[p / d_.blockSize] * d_.blockSize + p % d_.blockSize) * width,
                  width);
  }

  // NaN into elements [first, first + count) of the cache's K and V.
  void poisonSlots(int64_t first, int64_t count) {
    kv::KvLayerView view = cache_->layer(0);
    if (view.isF16()) {
      std::fill(view.keysF16 + first, view.keysF16 + first + count, uint16_t{0x7e00});
      std::fill(view.valuesF16 + first, view.valuesF16 + first + count, uint16_t{0x7e00});
      return;
    }
    std::fill(view.keys + first, view.keys + first + count, NAN);
    std::fill(view.values + first, view.values + first + count, NAN);
  }

  void checkRow(const SequenceState &seq, const float *q, int64_t position, const float *out,
                float scale, double tolerance) {
    const int64_t group = d_.heads / d_.kvHeads, dim = d_.headDim;
    for (int64_t h = 0; h < d_.heads; ++h) {
      const int64_t kvHead = h / group;
      // Scores over every position, capped, then masked: j visible when
      // j <= position and (no window or position - window < j).
      std::vector<double> scores(position + 1);
      std::vector<bool> visible(position + 1);
      double maxScore = -INFINITY;
      for (int64_t j = 0; j <= position; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < dim; ++i)
          dot += static_cast<double>(q[h * dim + i]) * seq.keys[j][kvHead * dim + i];
        scores[j] = scale * dot;
        if (scores_.softcap > 0)
          scores[j] = scores_.softcap * std::tanh(scores[j] / scores_.softcap);
        visible[j] = scores_.window == 0 || position - scores_.window < j;
        if (visible[j])
          maxScore = std::max(maxScore, scores[j]);
      }
      double z = 0;
      for (int64_t j = 0; j <= position; ++j)
        z += (scores[j] = visible[j] ? std::exp(scores[j] - maxScore) : 0.0);
      std::vector<double> expected(dim, 0.0);
      for (int64_t i = 0; i < dim; ++i)
        for (int64_t j = 0; j <= position; ++j)
          if (visible[j])
            expected[i] += scores[j] / z * seq.values[j][kvHead * dim + i];
      test::Difference diff = test::maxAbsDiff(out + h * dim, expected.data(), dim);
      ASSERT_LE(diff.maxAbs, tolerance) << isaName(activeIsa()) << " position " << position
                                        << " head " << h << ": " << diff.describe();
    }
  }

  Dims d_;
  std::mt19937 rng_;
  kv::KvDtype dtype_;
  KvInput input_;
  std::optional<kv::KvCache> cache_;
  std::vector<int32_t> freeBlocks_;
  std::vector<SequenceState> sequences_;
  hd::AttentionScores scores_{};
};

TEST(PagedAttention, MatchesContiguousReferenceThroughRandomBlockTables) {
  for (Isa isa : test::supportedIsas())
    for (kv::KvDtype dtype : {kv::KvDtype::F32, kv::KvDtype::F16}) {
      test::ScopedIsa scoped(isa);
      SCOPED_TRACE(std::string(kv::kvDtypeName(dtype)) + " cache");
      for (const Dims &d : {Dims{6, 2, 24, 16, 40}, Dims{4, 4, 8, 4, 64}, Dims{8, 1, 64, 16, 16}}) {
        AttentionHarness h(d, 7, dtype);
        size_t a = h.addSequence(), b = h.addSequence(), c = h.addSequence(), e = h.addSequence();
        const float scale = 1.0f / std::sqrt(static_cast<float>(d.headDim));
        h.step({{a, 37}, {b, 20}, {c, 5}}, scale);        // prefills
        h.step({{b, 1}, {a, 12}, {e, 1}, {c, 1}}, scale); // decodes and a prefill chunk
        h.step({{a, 1}, {b, 1}, {c, 1}, {e, 1}}, scale);  // decode batch
        h.step({{e, 17}}, 0.3f);                          // a chunk crossing blocks
      }
    }
}

TEST(PagedAttention, LargeScoresStayFinite) {
  // Scores near the f32 exp limit: the online softmax must rescale, not overflow.
  AttentionHarness h(Dims{2, 1, 16, 4, 8}, 11);
  size_t s = h.addSequence();
  // |scores| reach ~300: exp would overflow without the running max. The
  // result is near one-hot, so f32 score rounding shows up more.
  h.step({{s, 9}}, 20.0f, 1e-3);
  h.step({{s, 1}}, 20.0f, 1e-3);
}

// Mistral/Qwen2-style windows (here 16 positions, the block size, and 5,
// which starts inside a block) over 70+ tokens, GQA: a 75-token prefill in one
// chunk, another sequence in three chunks, then decode steps, with and
// without Gemma2-style soft-capping.
TEST(PagedAttention, SlidingWindowMatchesMaskedReference) {
  for (Isa isa : test::supportedIsas())
    for (kv::KvDtype dtype : {kv::KvDtype::F32, kv::KvDtype::F16}) {
      test::ScopedIsa scoped(isa);
      for (const Dims &d : {Dims{6, 2, 24, 16, 40}, Dims{8, 1, 32, 16, 40}})
        for (int32_t window : {16, 5})
          for (float softcap : {0.0f, 1.5f}) {
            SCOPED_TRACE("window " + std::to_string(window) + " softcap " +
                         std::to_string(softcap) + " " + kv::kvDtypeName(dtype) + " cache");
            AttentionHarness h(d, 21, dtype);
            h.setScores({window, softcap});
            size_t a = h.addSequence(), b = h.addSequence();
            const float scale = 1.0f / std::sqrt(static_cast<float>(d.headDim));
            h.step({{a, 75}, {b, 20}}, scale); // one-chunk prefill; b's first chunk
            h.step({{b, 33}, {a, 1}}, scale);  // a chunk starting mid-sequence
            h.step({{b, 22}}, scale);
            for (int i = 0; i < 10; ++i)
              h.step({{a, 1}, {b, 1}}, scale); // decode past block boundaries
          }
    }
}

// Soft-capping alone (no window) bounds every score: large scales stay
// finite and match the reference.
TEST(PagedAttention, SoftcapWithoutWindowMatchesReference) {
  AttentionHarness h(Dims{4, 2, 16, 16, 16}, 5);
  h.setScores({0, 3.0f});
  size_t s = h.addSequence();
  h.step({{s, 40}}, 4.0f);
  h.step({{s, 1}}, 4.0f);
}

// A window that covers every position is no window: identical bits.
TEST(PagedAttention, WindowCoveringTheSequenceIsBitIdenticalToNone) {
  const Dims d{6, 2, 24, 16, 40};
  AttentionHarness plain(d, 3), windowed(d, 3);
  windowed.setScores({90, 0.0f});
  size_t a = plain.addSequence(), b = windowed.addSequence();
  for (int64_t tokens : {50, 30, 1, 1, 8}) { // the last steps end at position 89
    std::vector<float> want = plain.step({{a, tokens}}, 0.2f);
    std::vector<float> got = windowed.step({{b, tokens}}, 0.2f);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "after " << tokens << " tokens: " << test::maxAbsDiff(got, want).describe();
  }
}

// An f16 cache reads what it stored widened back to f32, through the same
// kernels: its outputs are the bits of an f32 cache given the same K and V
// already rounded to f16, on every ISA, prefill chunks (column kernels,
// diagonal blocks) and decode steps, GQA and MHA.
TEST(PagedAttention, F16CacheGivesTheBitsOfAnF32CacheOfRoundedValues) {
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (const Dims &d :
         {Dims{6, 2, 24, 16, 40}, Dims{12, 12, 64, 16, 24}, Dims{8, 1, 128, 16, 16}}) {
      AttentionHarness half(d, 13, kv::KvDtype::F16),
          rounded(d, 13, kv::KvDtype::F32, KvInput::RoundedToF16);
      size_t a = half.addSequence(), b = half.addSequence();
      ASSERT_EQ(rounded.addSequence(), a);
      ASSERT_EQ(rounded.addSequence(), b);
      for (const std::vector<std::pair<size_t, int64_t>> &steps :
           std::vector<std::vector<std::pair<size_t, int64_t>>>{
               {{a, 37}, {b, 3}}, {{a, 1}, {b, 20}}, {{a, 1}, {b, 1}}, {{b, 1}}}) {
        std::vector<float> got = half.step(steps, 0.125f), want = rounded.step(steps, 0.125f);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << isaName(isa) << " heads " << d.heads << ": "
            << test::maxAbsDiff(got, want).describe();
      }
    }
  }
}

// A RoPE prologue rotates k before it is rounded: the f16 cache holds the f16
// of what the f32 cache holds, and the values are rounded as they are.
TEST(PagedAttention, F16CacheStoresTheRotatedKeysRounded) {
  const int32_t blockSize = 16, kvHeads = 2, headDim = 32, heads = 4, rows = 21;
  auto f32 = kv::KvCache::create({1, 4, blockSize, kvHeads, headDim});
  auto f16 = kv::KvCache::create({1, 4, blockSize, kvHeads, headDim, kv::KvDtype::F16});
  ASSERT_TRUE(f32.isOk() && f16.isOk());
  std::mt19937 rng(3);
  const int64_t kvWidth = kvHeads * headDim, qWidth = heads * headDim;
  std::vector<float> q = test::randomFloats(rng, rows * qWidth);
  std::vector<float> k = test::randomFloats(rng, rows * kvWidth, -40.0f, 40.0f);
  std::vector<float> v = test::randomFloats(rng, rows * kvWidth);
  std::vector<float> rope = test::randomFloats(rng, rows * headDim); // cos | sin rows
  std::vector<int32_t> positions(rows), blocks = {3, 1};
  for (int32_t t = 0; t < rows; ++t)
    positions[t] = t;
  std::vector<float> out(rows * qWidth);
  AttentionSequence seq{0, rows, blocks.data()};
  AttentionBatch b{q.data(), qWidth,           k.data(), kvWidth, v.data(), kvWidth, out.data(),
                   qWidth,   positions.data(), &seq,     1,       heads,    0.2f};
  b.ropeTable = rope.data();
  ThreadPool pool(2);
  writeKvCache(pool, b, f32->layer(0));
  writeKvCache(pool, b, f16->layer(0));
  const kv::KvLayerView wide = f32->layer(0), half = f16->layer(0);
  for (int32_t t = 0; t < rows; ++t) {
    const int64_t slot = (blocks[t / blockSize] * blockSize + t % blockSize) * kvWidth;
    for (int64_t i = 0; i < kvWidth; ++i) {
      ASSERT_EQ(half.keysF16[slot + i], hd::f32ToF16(wide.keys[slot + i])) << t << " " << i;
      ASSERT_EQ(half.valuesF16[slot + i], hd::f32ToF16(v[t * kvWidth + i])) << t << " " << i;
    }
    EXPECT_NE(wide.keys[slot], k[t * kvWidth]) << "the keys were not rotated";
  }
}

// One sequence with window-16 layers, run twice over the same inputs: in a
// cache of 4 usable blocks (64 slots) that holds its 80 tokens only because
// out-of-window blocks are released between steps and their memory is
// poisoned and reused, and in a cache that keeps everything. Identical bits.
TEST(PagedAttention, ReleasingOutOfWindowBlocksLeavesOutputsUnchanged) {
  const int32_t blockSize = 16, kvHeads = 2, headDim = 24, heads = 6, window = 16;
  auto small = kv::KvCache::create({1, 5, blockSize, kvHeads, headDim});
  auto large = kv::KvCache::create({1, 8, blockSize, kvHeads, headDim});
  ASSERT_TRUE(small.isOk() && large.isOk());
  kv::BlockTable releasing(blockSize), keeping(blockSize);
  std::mt19937 rng(9);
  const int64_t qWidth = heads * headDim, kvWidth = kvHeads * headDim;
  int64_t next = 0;
  std::vector<int64_t> chunks = {20, 17};
  chunks.resize(chunks.size() + 43, 1); // then decode to 80 tokens
  ThreadPool pool(2);
  for (int64_t n : chunks) {
    auto released = kv::releaseOutOfWindowBlocks(releasing, small->pool(), {window, window}, next);
    ASSERT_TRUE(released.isOk()) << released.message();
    small->poisonFreeBlocks();
    ASSERT_TRUE(releasing.reserve(small->pool(), next + n)) << "at position " << next;
    ASSERT_TRUE(keeping.reserve(large->pool(), next + n));
    std::vector<float> q = test::randomFloats(rng, n * qWidth);
    std::vector<float> k = test::randomFloats(rng, n * kvWidth);
    std::vector<float> v = test::randomFloats(rng, n * kvWidth);
    std::vector<int32_t> positions(n);
    for (int64_t t = 0; t < n; ++t)
      positions[t] = static_cast<int32_t>(next + t);
    auto run = [&](kv::KvCache &cache, const kv::BlockTable &table) {
      std::vector<float> out(n * qWidth, -1.0f);
      AttentionSequence seq{0, n, table.blocks().data()};
      AttentionBatch b{q.data(), qWidth, k.data(), kvWidth, v.data(), kvWidth, out.data(), qWidth,
                       positions.data(), &seq, 1, heads, 0.2f};
      b.scores = {window, 0.0f};
      pagedAttention(pool, b, cache.layer(0));
      return out;
    };
    std::vector<float> got = run(*small, releasing), want = run(*large, keeping);
    test::Difference diff = test::maxAbsDiff(got, want);
    ASSERT_FALSE(diff.nonFinite) << "at position " << next << ": " << diff.describe();
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "at position " << next << ": " << diff.describe();
    next += n;
  }
  EXPECT_EQ(next, 80);
  EXPECT_GE(releasing.releasedBlocks(), 3u);
}

} // namespace
} // namespace llmc::cpu

#if defined(__x86_64__)
namespace llmc::cpu {
namespace {

// The AVX2 block kernels against the per-position IsaOps calls they replace
// (dotAvx2; scaleAvx2 then axpyAvx2 per position): the same bits, for head
// sizes with and without a last 8 / a last partial 64, and every block
// length (off the 4-key step).
TEST(PagedAttention, Avx2BlockKernelsGiveTheBitsOfTheOpsCalls) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
  const detail::IsaOps &ops = detail::kAvx2Ops;
  std::mt19937 rng(11);
  for (int64_t dim : {8, 24, 64, 72, 128, 136})
    for (int64_t count = 1; count <= 16; ++count) {
      const int64_t stride = 3 * dim + 8; // rows of other kv heads between positions
      const std::vector<float> q = test::randomFloats(rng, dim);
      const std::vector<float> keys = test::randomFloats(rng, count * stride);
      const std::vector<float> values = test::randomFloats(rng, count * stride);
      const std::vector<float> weights = test::randomFloats(rng, count, 0.0f, 1.0f);
      const std::vector<float> start = test::randomFloats(rng, dim);
      ASSERT_TRUE(detail::attentionKernelsFit(dim));
      std::vector<float> dots(count);
      detail::attentionScoresAvx2(q.data(), keys.data(), stride, count, dim, dots.data());
      for (int64_t j = 0; j < count; ++j)
        ASSERT_EQ(dots[j], ops.dot(q.data(), keys.data() + j * stride, dim))
            << "dim " << dim << " count " << count << " key " << j;
      for (float accScale : {0.75f, 1.0f}) {
        std::vector<float> got = start, want = start;
        detail::attentionAccumulateAvx2(got.data(), accScale, weights.data(), values.data(),
                                        stride, count, dim);
        ops.scale(accScale, want.data(), dim);
        for (int64_t j = 0; j < count; ++j)
          ops.axpy(weights[j], values.data() + j * stride, want.data(), dim);
        for (int64_t i = 0; i < dim; ++i)
          ASSERT_EQ(got[i], want[i]) << "dim " << dim << " count " << count << " feature " << i;
      }
    }
  EXPECT_FALSE(detail::attentionKernelsFit(12));
}

// The many-query kernels (a tile's queries over one block part, keys' and
// values' chunks shared) against the one-query ones: the same bits for 1 to
// 7 queries (pairs and a last single), every count of a block, all queries
// over the same count or each over its own (a diagonal block: query n over
// count - n, or ragged counts), the scores past a query's count unused.
TEST(PagedAttention, Avx2ManyQueryKernelsGiveTheOneQueryBits) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(23);
  const int64_t bs = 16;
  for (int64_t dim : {8, 24, 64, 80, 128})
    for (int64_t queries = 1; queries <= 7; ++queries)
      for (int64_t count = 1; count <= bs; ++count)
        for (int shape = 0; shape < 3; ++shape) {
          std::vector<int64_t> counts(queries, count);
          for (int64_t n = 0; n < queries; ++n)
            if (shape == 1)
              counts[n] = std::max<int64_t>(1, count - n);
            else if (shape == 2)
              counts[n] = 1 + static_cast<int64_t>(rng() % count);
          const int64_t stride = 2 * dim + 8;
          const std::vector<float> q = test::randomFloats(rng, queries * dim);
          const std::vector<float> keys = test::randomFloats(rng, count * stride);
          const std::vector<float> values = test::randomFloats(rng, count * stride);
          const std::vector<float> weights = test::randomFloats(rng, queries * bs, 0.0f, 1.0f);
          const std::vector<float> start = test::randomFloats(rng, queries * dim);
          std::vector<float> scales = test::randomFloats(rng, queries, 0.0f, 1.0f);
          scales[0] = 1.0f;
          std::vector<float> many(queries * bs, -3.0f), one(bs);
          detail::attentionScoresManyAvx2(q.data(), dim, queries, keys.data(), stride, count, dim,
                                          many.data(), bs);
          std::vector<float> gotAcc = start;
          detail::attentionAccumulateManyAvx2(gotAcc.data(), scales.data(), weights.data(), bs,
                                              queries, values.data(), stride, counts.data(), dim);
          for (int64_t n = 0; n < queries; ++n) {
            const std::string where = "dim " + std::to_string(dim) + " queries " +
                                      std::to_string(queries) + " count " +
                                      std::to_string(count) + " shape " + std::to_string(shape) +
                                      " query " + std::to_string(n);
            detail::attentionScoresAvx2(q.data() + n * dim, keys.data(), stride, count, dim,
                                        one.data());
            for (int64_t j = 0; j < count; ++j)
              ASSERT_EQ(many[n * bs + j], one[j]) << where << " key " << j;
            for (int64_t j = count; j < bs; ++j)
              ASSERT_EQ(many[n * bs + j], -3.0f) << where << " wrote past the block at " << j;
            std::vector<float> wantAcc(start.begin() + n * dim, start.begin() + (n + 1) * dim);
            detail::attentionAccumulateAvx2(wantAcc.data(), scales[n], weights.data() + n * bs,
                                            values.data(), stride, counts[n], dim);
            for (int64_t i = 0; i < dim; ++i)
              ASSERT_EQ(gotAcc[n * dim + i], wantAcc[i]) << where << " feature " << i;
          }
        }
}

// The many-query softmax step against one attentionWeightsAvx2 per query:
// the same weights, states and rescale factors bit for bit, for 1 to 9
// queries (chunks of four and a rest), equal and ragged counts, soft-cap,
// and states that are empty, keep their max or are overtaken.
TEST(PagedAttention, Avx2ManyQueryWeightsGiveTheOneQueryBits) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(29);
  const int64_t bs = 16;
  const hd::SoftmaxState starts[] = {hd::softmaxEmpty(), {40.0f, 3.0f}, {-2.0f, 1.25f},
                                     {5.0f, 2.5f}};
  for (int64_t queries = 1; queries <= 9; ++queries)
    for (int64_t count = 1; count <= bs; ++count)
      for (float softcap : {0.0f, 1.5f})
        for (bool ragged : {false, true}) {
          std::vector<int64_t> counts(queries, count);
          std::vector<hd::SoftmaxState> got(queries), want(queries);
          for (int64_t n = 0; n < queries; ++n) {
            if (ragged)
              counts[n] = 1 + static_cast<int64_t>(rng() % count);
            got[n] = want[n] = starts[(n + count) % 4];
          }
          const std::vector<float> dots = test::randomFloats(rng, queries * bs, -30.0f, 30.0f);
          std::vector<float> many = dots, one = dots, gotScales(queries);
          detail::attentionWeightsManyAvx2(many.data(), bs, queries, counts.data(), 0.7f, softcap,
                                           got.data(), gotScales.data());
          for (int64_t n = 0; n < queries; ++n) {
            const std::string where = "queries " + std::to_string(queries) + " count " +
                                      std::to_string(count) + " query " + std::to_string(n);
            const float wantScale = detail::attentionWeightsAvx2(one.data() + n * bs, counts[n],
                                                                 0.7f, softcap, want[n]);
            ASSERT_EQ(gotScales[n], wantScale) << where;
            ASSERT_EQ(got[n].max, want[n].max) << where;
            ASSERT_EQ(got[n].sum, want[n].sum) << where;
            for (int64_t j = 0; j < bs; ++j) // past counts[n]: untouched in both
              ASSERT_EQ(many[n * bs + j], one[n * bs + j]) << where << " position " << j;
          }
        }
}

// The column-layout kernels (8 queries per vector in the softmax step)
// against the one-query ones, chained as attendBlock chains them: scores,
// weights, accumulate; the same scores, weights, states, factors and
// accumulators bit for bit for 1 to 17 queries (whole vectors of 8, a
// partial one, an odd last query), equal and ragged counts, soft-cap, and
// states that are empty, keep their max or are overtaken.
TEST(PagedAttention, Avx2ColumnKernelsGiveTheOneQueryBits) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(31);
  const int64_t bs = 16;
  const hd::SoftmaxState starts[] = {hd::softmaxEmpty(), {40.0f, 3.0f}, {-2.0f, 1.25f},
                                     {1.0f, 2.5f}};
  for (int64_t dim : {8, 64, 80})
    for (int64_t queries : {1, 2, 3, 7, 8, 9, 16, 17})
      for (int64_t count = 1; count <= bs; count += (dim == 64 ? 1 : 5))
        for (int variant = 0; variant < 4; ++variant) {
          const bool ragged = variant & 1;
          const float softcap = variant & 2 ? 1.5f : 0.0f;
          std::vector<int64_t> counts(queries, count);
          int64_t longest = 0;
          for (int64_t n = 0; n < queries; ++n) {
            if (ragged)
              counts[n] = 1 + static_cast<int64_t>(rng() % count);
            longest = std::max(longest, counts[n]);
          }
          const int64_t stride = 2 * dim + 8, ldw = (queries + 7) / 8 * 8 + 8 * (queries % 2);
          const std::vector<float> q = test::randomFloats(rng, queries * dim, -2.0f, 2.0f);
          const std::vector<float> keys = test::randomFloats(rng, count * stride, -2.0f, 2.0f);
          const std::vector<float> values = test::randomFloats(rng, count * stride);
          const std::vector<float> start = test::randomFloats(rng, queries * dim);
          std::vector<hd::SoftmaxState> got(queries), want(queries);
          for (int64_t n = 0; n < queries; ++n)
            got[n] = want[n] = starts[(n + count + variant) % 4];
          std::vector<float> columns(bs * ldw, 5.0f), scales(queries), gotAcc = start;
          detail::attentionScoresColumnsAvx2(q.data(), dim, queries, keys.data(), stride, longest,
                                             dim, columns.data(), ldw);
          detail::attentionWeightsColumnsAvx2(columns.data(), ldw, queries, counts.data(), longest,
                                              0.7f, softcap, got.data(), scales.data());
          detail::attentionAccumulateColumnsAvx2(gotAcc.data(), scales.data(), columns.data(), ldw,
                                                 queries, values.data(), stride, counts.data(),
                                                 dim);
          for (int64_t n = 0; n < queries; ++n) {
            const std::string where = "dim " + std::to_string(dim) + " queries " +
                                      std::to_string(queries) + " count " +
                                      std::to_string(count) + " variant " +
                                      std::to_string(variant) + " query " + std::to_string(n);
            std::vector<float> one(bs);
            detail::attentionScoresAvx2(q.data() + n * dim, keys.data(), stride, counts[n], dim,
                                        one.data());
            const float scale =
                detail::attentionWeightsAvx2(one.data(), counts[n], 0.7f, softcap, want[n]);
            std::vector<float> wantAcc(start.begin() + n * dim, start.begin() + (n + 1) * dim);
            detail::attentionAccumulateAvx2(wantAcc.data(), scale, one.data(), values.data(),
                                            stride, counts[n], dim);
            ASSERT_EQ(scales[n], scale) << where;
            ASSERT_EQ(got[n].max, want[n].max) << where;
            ASSERT_EQ(got[n].sum, want[n].sum) << where;
            for (int64_t j = 0; j < counts[n]; ++j)
              ASSERT_EQ(columns[j * ldw + n], one[j]) << where << " position " << j;
            for (int64_t i = 0; i < dim; ++i)
              ASSERT_EQ(gotAcc[n * dim + i], wantAcc[i]) << where << " feature " << i;
          }
          for (int64_t j = longest; j < bs; ++j)
            for (int64_t n = 0; n < ldw; ++n)
              ASSERT_EQ(columns[j * ldw + n], 5.0f) << "wrote past the longest count at " << j;
        }
}

} // namespace
} // namespace llmc::cpu
#endif

namespace llmc::cpu {
namespace {

// Head sizes of real models (64, 80, 96, 128), one past a 64 (136), and ones
// the AVX2 kernels do not take (12, 20: the per-position ops path).
constexpr int64_t kHeadDims[] = {64, 80, 96, 128, 136, 12, 20};
constexpr int64_t kGroups[] = {1, 2, 4, 8};

// Every head size and GQA group against the masked reference, with and
// without a window (starting inside a block) and soft-capping: a 40-token
// prefill, a 19-token chunk, then decode steps.
TEST(PagedAttention, RaggedShapesMatchTheReference) {
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    int variant = 0;
    for (int64_t dim : kHeadDims)
      for (int64_t group : kGroups) {
        const hd::AttentionScores scores{(variant % 3) == 1 ? 21 : 0,
                                         (variant % 2) == 1 ? 1.5f : 0.0f};
        ++variant;
        SCOPED_TRACE("dim " + std::to_string(dim) + " group " + std::to_string(group) +
                     " window " + std::to_string(scores.window) + " softcap " +
                     std::to_string(scores.softcap));
        AttentionHarness h(Dims{2 * group, 2, dim, 16, 16}, 31);
        h.setScores(scores);
        size_t a = h.addSequence(), b = h.addSequence();
        const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
        h.step({{a, 40}, {b, 3}}, scale);
        h.step({{a, 19}, {b, 1}}, scale);
        for (int i = 0; i < 3; ++i)
          h.step({{a, 1}, {b, 1}}, scale);
      }
  }
}

// One sequence's 45 tokens attended in different steps: all at once (query
// tiles), one by one (decode), in ragged chunks beside another sequence's
// rows, on 1 and 3 threads. Every row's output has the same bits each time.
std::vector<float> attendInChunks(const Dims &d, hd::AttentionScores scores,
                                  const std::vector<int64_t> &chunks, int threads,
                                  const std::vector<float> &q, const std::vector<float> &k,
                                  const std::vector<float> &v) {
  const int64_t qWidth = d.heads * d.headDim, kvWidth = d.kvHeads * d.headDim;
  auto cache = kv::KvCache::create({1, static_cast<int32_t>(d.numBlocks),
                                    static_cast<int32_t>(d.blockSize),
                                    static_cast<int32_t>(d.kvHeads),
                                    static_cast<int32_t>(d.headDim)});
  EXPECT_TRUE(cache.isOk()) << cache.message();
  // Two sequences: ours with blocks 1, 3, 5, ... and a neighbour whose rows
  // come first in every step, with blocks 2, 4, 6, ...
  std::vector<int32_t> ours, theirs;
  for (int32_t blk = 1; blk + 1 < d.numBlocks; blk += 2) {
    ours.push_back(blk);
    theirs.push_back(blk + 1);
  }
  ThreadPool pool(threads);
  std::vector<float> out(q.size(), -1.0f);
  int64_t done = 0, neighbour = 0;
  for (int64_t n : chunks) {
    const int64_t extra = n % 3; // the neighbour's rows in this step
    const int64_t rows = extra + n;
    std::vector<float> sq(rows * qWidth), sk(rows * kvWidth), sv(rows * kvWidth);
    std::vector<float> so(rows * qWidth);
    std::vector<int32_t> positions(rows);
    std::mt19937 rng(static_cast<uint32_t>(done));
    const std::vector<float> other = test::randomFloats(rng, extra * (qWidth + 2 * kvWidth));
    std::copy_n(other.begin(), extra * qWidth, sq.begin());
    std::copy_n(other.begin() + extra * qWidth, extra * kvWidth, sk.begin());
    std::copy_n(other.begin() + extra * (qWidth + kvWidth), extra * kvWidth, sv.begin());
    for (int64_t r = 0; r < extra; ++r)
      positions[r] = static_cast<int32_t>(neighbour++);
    std::memcpy(sq.data() + extra * qWidth, q.data() + done * qWidth, n * qWidth * sizeof(float));
    std::memcpy(sk.data() + extra * kvWidth, k.data() + done * kvWidth, n * kvWidth * sizeof(float));
    std::memcpy(sv.data() + extra * kvWidth, v.data() + done * kvWidth, n * kvWidth * sizeof(float));
    for (int64_t t = 0; t < n; ++t)
      positions[extra + t] = static_cast<int32_t>(done + t);
    std::vector<AttentionSequence> seqs;
    if (extra > 0)
      seqs.push_back({0, extra, theirs.data()});
    seqs.push_back({extra, n, ours.data()});
    AttentionBatch b{sq.data(), qWidth, sk.data(), kvWidth, sv.data(), kvWidth, so.data(), qWidth,
                     positions.data(), seqs.data(), static_cast<int64_t>(seqs.size()), d.heads,
                     0.3f};
    b.scores = scores;
    pagedAttention(pool, b, cache->layer(0));
    std::memcpy(out.data() + done * qWidth, so.data() + extra * qWidth, n * qWidth * sizeof(float));
    done += n;
  }
  return out;
}

TEST(PagedAttention, RowBitsDoNotDependOnItsQueryTile) {
  const int64_t tokens = 45;
  const std::vector<std::vector<int64_t>> splits = {
      {45}, std::vector<int64_t>(45, 1), {7, 1, 16, 3, 18}, {2, 30, 13}};
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    int variant = 0;
    for (int64_t dim : {64, 80, 12})
      for (int64_t group : kGroups) {
        const Dims d{2 * group, 2, dim, 16, 16};
        const hd::AttentionScores scores{(variant % 3) == 2 ? 10 : 0,
                                         (variant % 2) == 1 ? 2.0f : 0.0f};
        ++variant;
        std::mt19937 rng(static_cast<uint32_t>(dim * 10 + group));
        const std::vector<float> q = test::randomFloats(rng, tokens * d.heads * dim);
        const std::vector<float> k = test::randomFloats(rng, tokens * d.kvHeads * dim);
        const std::vector<float> v = test::randomFloats(rng, tokens * d.kvHeads * dim);
        const std::vector<float> want = attendInChunks(d, scores, splits[0], 1, q, k, v);
        for (size_t s = 0; s < splits.size(); ++s)
          for (int threads : {1, 3}) {
            const std::vector<float> got = attendInChunks(d, scores, splits[s], threads, q, k, v);
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i)
              ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
                  << isaName(isa) << " dim " << dim << " group " << group << " split " << s
                  << " threads " << threads << ": token " << i / (d.heads * dim) << " has "
                  << got[i] << ", attended in one step " << want[i];
          }
      }
  }
}

// AVX-512 machines run the AVX2 block kernels (the portable path's
// per-position calls were 30% of a prefill there): their outputs have the
// AVX2 bits, prefill chunks and a decode step, for head sizes the kernels
// take (multiples of 8).
TEST(PagedAttention, Avx512RunsTheAvx2BlockKernels) {
  if (!isaSupported(Isa::Avx512))
    GTEST_SKIP() << "no AVX-512 on this CPU";
  for (int64_t dim : {64, 80, 128})
    for (int64_t group : kGroups) {
      const Dims d{2 * group, 2, dim, 16, 16};
      std::mt19937 rng(static_cast<uint32_t>(dim + group));
      const int64_t tokens = 37;
      const std::vector<float> q = test::randomFloats(rng, tokens * d.heads * dim);
      const std::vector<float> k = test::randomFloats(rng, tokens * d.kvHeads * dim);
      const std::vector<float> v = test::randomFloats(rng, tokens * d.kvHeads * dim);
      const std::vector<int64_t> split = {30, 1, 6};
      std::vector<float> avx2, avx512;
      {
        test::ScopedIsa scoped(Isa::Avx2);
        avx2 = attendInChunks(d, {}, split, 2, q, k, v);
      }
      {
        test::ScopedIsa scoped(Isa::Avx512);
        avx512 = attendInChunks(d, {}, split, 2, q, k, v);
      }
      ASSERT_EQ(avx2.size(), avx512.size());
      for (size_t i = 0; i < avx2.size(); ++i)
        ASSERT_EQ(std::memcmp(&avx2[i], &avx512[i], sizeof(float)), 0)
            << "dim " << dim << " group " << group << " output " << i << ": avx512 " << avx512[i]
            << ", avx2 " << avx2[i];
    }
}

} // namespace
} // namespace llmc::cpu

#if defined(__x86_64__)
#include "cpu/attention_exp.h"

namespace llmc::cpu {
namespace {

// The AVX2 softmax step against its scalar definition (attention_exp.h's
// exp, lane by lane, then the portable path's sum and merge): the same
// weights, state and rescale factor bit for bit; for
// every count of a 16-position block, with and without soft-capping, from
// an empty state, one whose max stays, and one the block overtakes.
TEST(PagedAttention, Avx2WeightsMatchTheScalarDefinition) {
  if (!isaSupported(Isa::Avx2))
    GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(17);
  for (int64_t count = 1; count <= 16; ++count)
    for (float softcap : {0.0f, 1.5f})
      for (hd::SoftmaxState start : {hd::softmaxEmpty(), hd::SoftmaxState{40.0f, 3.0f},
                                     hd::SoftmaxState{-2.0f, 1.25f}}) {
        const std::vector<float> dots = test::randomFloats(rng, count, -30.0f, 30.0f);
        const float scale = 0.7f;
        std::vector<float> want(count);
        float blockMax = -INFINITY;
        for (int64_t j = 0; j < count; ++j) {
          want[j] = hd::softCap(scale * dots[j], softcap);
          blockMax = std::max(blockMax, want[j]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < count; ++j) {
          want[j] = detail::attentionExp(want[j] - blockMax);
          sum += want[j];
        }
        const hd::SoftmaxMerge merged = hd::softmaxMerge(start, hd::SoftmaxState{blockMax, sum});
        for (float &w : want)
          w *= merged.scaleB;
        std::vector<float> got = dots;
        got.resize(16, 99.0f); // past count: must stay untouched
        hd::SoftmaxState state = start;
        const float accScale = detail::attentionWeightsAvx2(got.data(), count, scale, softcap, state);
        const std::string where = "count " + std::to_string(count) + " softcap " +
                                  std::to_string(softcap) + " start max " +
                                  std::to_string(start.max);
        ASSERT_EQ(accScale, merged.scaleA) << where;
        ASSERT_EQ(state.max, merged.state.max) << where;
        ASSERT_EQ(state.sum, merged.state.sum) << where;
        for (int64_t j = 0; j < count; ++j)
          ASSERT_EQ(got[j], want[j]) << where << " position " << j;
        for (int64_t j = count; j < 16; ++j)
          ASSERT_EQ(got[j], 99.0f) << where << " wrote past the block at " << j;
      }
}

} // namespace
} // namespace llmc::cpu
#endif
