// Partial rotary (StableLM, Phi, GPT-NeoX) and interleaved pairs (Cohere) in
// the CPU kernels: cpu::rope against transformers' formulas written out by
// hand (rotate_half on the first rotary_dim features; stack(-x2, x1) on
// (2i, 2i + 1) pairs), the features past rotary_dim untouched, and attention's
// fused RoPE prologue equal to rotating q and k first.
#include "cpu/attention.h"
#include "cpu/kernels.h"
#include "kv/kv_cache.h"
#include "test_util.h"

#include <cmath>
#include <cstring>

namespace llmc::cpu {
namespace {

constexpr float kTheta = 10000.0f;

// HF's rotation of one head, in double, at `position`.
std::vector<double> hfRotate(const float *head, int64_t headDim, int64_t rotaryDim,
                             bool interleaved, int position) {
  std::vector<double> out(head, head + headDim);
  for (int64_t i = 0; i < rotaryDim / 2; ++i) {
    const double invFreq = std::pow(static_cast<double>(kTheta), -2.0 * i / rotaryDim);
    const double a = position * static_cast<double>(static_cast<float>(invFreq));
    const int64_t f = interleaved ? 2 * i : i, s = interleaved ? 2 * i + 1 : i + rotaryDim / 2;
    out[f] = head[f] * std::cos(a) - head[s] * std::sin(a);
    out[s] = head[s] * std::cos(a) + head[f] * std::sin(a);
  }
  return out;
}

TEST(RopePairs, PartialAndInterleavedMatchTransformers) {
  const int64_t heads = 3, headDim = 16, tokens = 5;
  std::mt19937 rng(3);
  ThreadPool pool(2);
  for (int64_t rotaryDim : {4, 8, 16})
    for (bool interleaved : {false, true}) {
      SCOPED_TRACE("rotary " + std::to_string(rotaryDim) + (interleaved ? " interleaved" : ""));
      std::vector<float> invFreq(rotaryDim / 2);
      ropeInvFreqs(static_cast<int>(rotaryDim), kTheta, hd::RopeScaling{}, invFreq.data());
      std::vector<float> table = ropeTable(64, static_cast<int>(rotaryDim), invFreq.data());
      std::vector<float> x = test::randomFloats(rng, tokens * heads * headDim);
      const std::vector<float> before = x;
      std::vector<int32_t> positions = {0, 1, 7, 30, 63};
      rope(pool, x.data(), tokens, heads * headDim, {heads, headDim, rotaryDim, interleaved},
           positions.data(), table.data());
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t at = (t * heads + h) * headDim;
          std::vector<double> want =
              hfRotate(before.data() + at, headDim, rotaryDim, interleaved, positions[t]);
          for (int64_t i = 0; i < headDim; ++i)
            ASSERT_NEAR(x[at + i], want[i], 2e-5) << "token " << t << " head " << h << " i " << i;
          for (int64_t i = rotaryDim; i < headDim; ++i)
            ASSERT_EQ(x[at + i], before[at + i]) << "pass-through feature " << i;
        }
    }
}

// Attention with the RoPE prologue (ropeTable + rotary dim + pairs) gives
// bit for bit what attention gives on q and k rotated by cpu::rope first.
TEST(RopePairs, AttentionPrologueEqualsRotatingFirst) {
  const int32_t blockSize = 16, kvHeads = 2, headDim = 16, heads = 4;
  const int64_t n = 9, qWidth = heads * headDim, kvWidth = kvHeads * headDim;
  std::mt19937 rng(5);
  ThreadPool pool(2);
  for (int64_t rotaryDim : {4, 16})
    for (bool interleaved : {false, true}) {
      SCOPED_TRACE("rotary " + std::to_string(rotaryDim) + (interleaved ? " interleaved" : ""));
      std::vector<float> invFreq(rotaryDim / 2);
      ropeInvFreqs(static_cast<int>(rotaryDim), kTheta, hd::RopeScaling{}, invFreq.data());
      std::vector<float> table = ropeTable(32, static_cast<int>(rotaryDim), invFreq.data());
      std::vector<float> q = test::randomFloats(rng, n * qWidth);
      std::vector<float> k = test::randomFloats(rng, n * kvWidth);
      std::vector<float> v = test::randomFloats(rng, n * kvWidth);
      std::vector<int32_t> positions(n);
      for (int64_t t = 0; t < n; ++t)
        positions[t] = static_cast<int32_t>(t);
      auto run = [&](const std::vector<float> &qs, const std::vector<float> &ks, bool prologue) {
        auto cache = kv::KvCache::create({1, 4, blockSize, kvHeads, headDim});
        EXPECT_TRUE(cache.isOk());
        kv::BlockTable blocks(blockSize);
        EXPECT_TRUE(blocks.reserve(cache->pool(), n));
        std::vector<float> out(n * qWidth, -1.0f);
        AttentionSequence seq{0, n, blocks.blocks().data()};
        AttentionBatch b{qs.data(), qWidth, ks.data(), kvWidth, v.data(), kvWidth, out.data(),
                         qWidth,    positions.data(), &seq, 1, heads, 0.25f};
        if (prologue) {
          b.ropeTable = table.data();
          b.ropeRotaryDim = rotaryDim;
          b.ropeInterleaved = interleaved;
        }
        pagedAttention(pool, b, cache->layer(0));
        return out;
      };
      std::vector<float> qr = q, kr = k;
      rope(pool, qr.data(), n, qWidth, {heads, headDim, rotaryDim, interleaved}, positions.data(),
           table.data());
      rope(pool, kr.data(), n, kvWidth, {kvHeads, headDim, rotaryDim, interleaved},
           positions.data(), table.data());
      std::vector<float> fused = run(q, k, true), unfused = run(qr, kr, false);
      ASSERT_EQ(std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)), 0);
    }
}

} // namespace
} // namespace llmc::cpu
