// Paged attention against a plain attention over contiguous K/V: random block
// tables, a NaN-poisoned cache (so any read of an unused slot shows), GQA,
// several sequences mixing prefill chunks and decode tokens.
#include "cpu/attention.h"
#include "test_util.h"

#include <algorithm>
#include <cmath>
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

class AttentionHarness {
public:
  AttentionHarness(const Dims &d, uint32_t seed) : d_(d), rng_(seed) {
    kv::KvCacheShape shape{1, static_cast<int32_t>(d.numBlocks), static_cast<int32_t>(d.blockSize),
                           static_cast<int32_t>(d.kvHeads), static_cast<int32_t>(d.headDim)};
    auto cache = kv::KvCache::create(shape);
    EXPECT_TRUE(cache.isOk()) << cache.message();
    cache_.emplace(std::move(*cache));
    kv::KvLayerView view = cache_->layer(0);
    const int64_t floats = d.numBlocks * d.blockSize * d.kvHeads * d.headDim;
    std::fill(view.keys, view.keys + floats, NAN);
    std::fill(view.values, view.values + floats, NAN);
    // Free block ids in random order, so tables are scattered over the pool.
    for (int32_t b = 1; b < d.numBlocks; ++b)
      freeBlocks_.push_back(b);
    std::shuffle(freeBlocks_.begin(), freeBlocks_.end(), rng_);
  }

  size_t addSequence() {
    sequences_.emplace_back();
    return sequences_.size() - 1;
  }

  // Runs one step in which sequence steps[i].first gets steps[i].second new
  // tokens, and checks every output row against the reference.
  void step(const std::vector<std::pair<size_t, int64_t>> &steps, float scale,
            double tolerance = 1e-5) {
    const int64_t qWidth = d_.heads * d_.headDim, kvWidth = d_.kvHeads * d_.headDim;
    const int64_t ld = qWidth + 2 * kvWidth; // a fused qkv row
    const int64_t gapRows = 1;               // a row between sequences that no sequence owns
    int64_t rows = gapRows;
    for (const auto &s : steps)
      rows += s.second;
    std::vector<float> qkv = test::randomFloats(rng_, rows * ld);
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
      for (int64_t t = 0; t < steps[i].second; ++t) {
        positions[row + t] = static_cast<int32_t>(first + t);
        const float *k = qkv.data() + (row + t) * ld + qWidth;
        seq.keys.emplace_back(k, k + kvWidth);
        seq.values.emplace_back(k + kvWidth, k + 2 * kvWidth);
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
    pagedAttention(pool, args, cache_->layer(0));
    for (size_t i = 0; i < steps.size(); ++i)
      for (int64_t r = batch[i].firstRow; r < batch[i].firstRow + batch[i].numRows; ++r)
        checkRow(sequences_[steps[i].first], qkv.data() + r * ld, positions[r],
                 out.data() + r * qWidth, scale, tolerance);
    if (steps.size() > 1)
      for (int64_t i = 0; i < qWidth; ++i)
        ASSERT_EQ(out[batch[0].numRows * qWidth + i], -7.0f) << "the gap row was written";
  }

private:
  void grow(SequenceState &seq, int64_t tokens) {
    while (static_cast<int64_t>(seq.blockTable.size()) * d_.blockSize < tokens) {
      ASSERT_FALSE(freeBlocks_.empty());
      seq.blockTable.push_back(freeBlocks_.back());
      freeBlocks_.pop_back();
    }
  }

  void checkRow(const SequenceState &seq, const float *q, int64_t position, const float *out,
                float scale, double tolerance) {
    const int64_t group = d_.heads / d_.kvHeads, dim = d_.headDim;
    for (int64_t h = 0; h < d_.heads; ++h) {
      const int64_t kvHead = h / group;
      std::vector<double> scores(position + 1);
      double maxScore = -INFINITY;
      for (int64_t j = 0; j <= position; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < dim; ++i)
          dot += static_cast<double>(q[h * dim + i]) * seq.keys[j][kvHead * dim + i];
        scores[j] = scale * dot;
        maxScore = std::max(maxScore, scores[j]);
      }
      double z = 0;
      for (double &s : scores)
        z += (s = std::exp(s - maxScore));
      for (int64_t i = 0; i < dim; ++i) {
        double expected = 0;
        for (int64_t j = 0; j <= position; ++j)
          expected += scores[j] / z * seq.values[j][kvHead * dim + i];
        ASSERT_NEAR(out[h * dim + i], expected, tolerance)
            << isaName(activeIsa()) << " position " << position << " head " << h << " i " << i;
      }
    }
  }

  Dims d_;
  std::mt19937 rng_;
  std::optional<kv::KvCache> cache_;
  std::vector<int32_t> freeBlocks_;
  std::vector<SequenceState> sequences_;
};

TEST(PagedAttention, MatchesContiguousReferenceThroughRandomBlockTables) {
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (const Dims &d : {Dims{6, 2, 24, 16, 40}, Dims{4, 4, 8, 4, 64}, Dims{8, 1, 64, 16, 16}}) {
      AttentionHarness h(d, 7);
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

} // namespace
} // namespace llmc::cpu
