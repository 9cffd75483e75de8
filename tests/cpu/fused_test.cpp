// The fused kernels (cpu/fused.h, the RoPE prologue of pagedAttention) give
// bit for bit what the unfused kernels give in sequence, on every ISA and
// weight dtype: the fused plan's logits equal the -O0 plan's because of it.
#include "cpu/attention.h"
#include "cpu/fused.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "kernels/common/activations.h"
#include "test_util.h"

#include <cmath>

namespace llmc::cpu {
namespace {

TEST(FusedKernels, MatmulSwigluEqualsMatmulThenSwiglu) {
  ThreadPool pool(3);
  std::mt19937 rng(11);
  for (cpu::Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (DType dtype : test::kWeightDTypes)
      for (int64_t tokens : {1, 3, 9}) {
        const int64_t k = 40, inter = 150; // not multiples of the 64-row blocks
        test::TestWeights w = test::makeWeights(rng, dtype, 2 * inter * k);
        std::vector<float> x = test::randomFloats(rng, tokens * k, -2.0f, 2.0f);
        std::vector<float> gateUp(tokens * 2 * inter), expected(tokens * inter),
            got(tokens * inter);
        matmul(pool, x.data(), tokens, w.matrix(2 * inter, k), nullptr, 0.0f, gateUp.data());
        swigluFused(pool, gateUp.data(), tokens, inter, expected.data());
        matmulSwiglu(pool, x.data(), tokens, w.matrix(2 * inter, k), got.data());
        ASSERT_EQ(got, expected) << isaName(isa) << " " << dtypeName(dtype) << " T " << tokens;
      }
  }
}

TEST(FusedKernels, RmsNormMatmulEqualsRmsNormThenMatmulWithBiasAndResidual) {
  ThreadPool pool(2);
  std::mt19937 rng(12);
  const int64_t tokens = 5, k = 24, n = 33;
  test::TestWeights w = test::makeWeights(rng, DType::BF16, n * k);
  test::TestWeights gamma = test::makeWeights(rng, DType::F32, k, 0.5f, 1.5f);
  std::vector<float> x = test::randomFloats(rng, tokens * k), bias = test::randomFloats(rng, n);
  std::vector<float> normed(tokens * k), residual = test::randomFloats(rng, tokens * n);
  std::vector<float> expected = residual, got = residual, scratch;
  rmsNorm(pool, x.data(), tokens, gamma.vector(), 1e-5f, normed.data());
  matmul(pool, normed.data(), tokens, w.matrix(n, k), bias.data(), 1.0f, expected.data());
  rmsNormMatmul(pool, x.data(), tokens, gamma.vector(), 1e-5f, w.matrix(n, k), bias.data(), 1.0f,
                got.data(), scratch);
  EXPECT_EQ(got, expected);
  std::vector<float> swiglu(tokens * (n / 2)), gateUp(tokens * 2 * (n / 2));
  test::TestWeights w2 = test::makeWeights(rng, DType::F16, 2 * (n / 2) * k);
  matmul(pool, normed.data(), tokens, w2.matrix(2 * (n / 2), k), nullptr, 0.0f, gateUp.data());
  swigluFused(pool, gateUp.data(), tokens, n / 2, swiglu.data());
  std::vector<float> fused(swiglu.size());
  rmsNormMatmulSwiglu(pool, x.data(), tokens, gamma.vector(), 1e-5f, w2.matrix(2 * (n / 2), k),
                      fused.data(), scratch);
  EXPECT_EQ(fused, swiglu);
}

// GeGLU (tanh and erf gelu) and the (offset + gamma) norm, fused as for
// Gemma, equal the unfused kernels in sequence bit for bit, and the gated
// values follow the formulas of kernels/common/activations.h.
TEST(FusedKernels, GemmaGatedAndOffsetFormsEqualTheUnfusedSequence) {
  ThreadPool pool(2);
  std::mt19937 rng(21);
  const int64_t tokens = 3, k = 24, inter = 70;
  test::TestWeights w = test::makeWeights(rng, DType::BF16, 2 * inter * k);
  test::TestWeights gamma = test::makeWeights(rng, DType::BF16, k, -0.5f, 0.5f);
  std::vector<float> x = test::randomFloats(rng, tokens * k, -2.0f, 2.0f);
  // rmsNorm with offset 1 equals rmsNorm with the weights 1 + gamma in f32.
  std::vector<float> onePlus(k);
  weightsToF32(gamma.vector().data, DType::BF16, 0, k, onePlus.data());
  for (float &g : onePlus)
    g += 1.0f;
  const WeightVector onePlusVector{onePlus.data(), DType::F32, k};
  std::vector<float> normed(tokens * k), normedOffset(tokens * k);
  rmsNorm(pool, x.data(), tokens, onePlusVector, 1e-6f, normed.data());
  rmsNorm(pool, x.data(), tokens, gamma.vector(), 1e-6f, normedOffset.data(), 1.0f);
  ASSERT_EQ(normedOffset, normed);
  for (int gateKind : {hd::kGateGeluTanh, hd::kGateGeluErf}) {
    std::vector<float> gateUp(tokens * 2 * inter), expected(tokens * inter),
        got(tokens * inter), scratch;
    matmul(pool, normed.data(), tokens, w.matrix(2 * inter, k), nullptr, 0.0f, gateUp.data());
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < inter; ++i) {
        const double g = gateUp[t * 2 * inter + i], u = gateUp[t * 2 * inter + inter + i];
        const double gelu = gateKind == hd::kGateGeluErf
                                ? 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)))
                                : 0.5 * g *
                                      (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                                                       (g + 0.044715 * g * g * g)));
        expected[t * inter + i] = static_cast<float>(gelu * u);
      }
    rmsNormMatmulSwiglu(pool, x.data(), tokens, gamma.vector(), 1e-6f, w.matrix(2 * inter, k),
                        got.data(), scratch, 1.0f, gateKind);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-5f * (1.0f + std::fabs(expected[i])))
          << "gate " << gateKind << " element " << i;
    // The fused form equals the unfused gated kernel bit for bit.
    std::vector<float> gate(tokens * inter), up(tokens * inter), unfused(tokens * inter);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < inter; ++i) {
        gate[t * inter + i] = gateUp[t * 2 * inter + i];
        up[t * inter + i] = gateUp[t * 2 * inter + inter + i];
      }
    swiglu(pool, gate.data(), up.data(), unfused.data(), tokens * inter, gateKind);
    ASSERT_EQ(got, unfused) << "gate " << gateKind;
    // So does the -O0 plan's Gelu step then Mul.
    std::vector<float> activated(tokens * inter), product(tokens * inter);
    gelu(pool, gate.data(), activated.data(), tokens * inter, gateKind == hd::kGateGeluTanh);
    mul(pool, activated.data(), up.data(), product.data(), tokens * inter);
    ASSERT_EQ(got, product) << "gate " << gateKind;
  }
}

TEST(Kernels, SoftCapAndScaleFollowTheirFormulas) {
  ThreadPool pool(2);
  std::vector<float> x = {-100.0f, -1.0f, 0.0f, 0.5f, 30.0f, 1000.0f};
  std::vector<float> capped = x;
  softCap(pool, capped.data(), static_cast<int64_t>(capped.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(capped[i], 30.0 * std::tanh(x[i] / 30.0), 1e-5) << x[i];
    EXPECT_LE(std::fabs(capped[i]), 30.0f);
  }
  std::vector<float> scaled = x;
  scale(pool, scaled.data(), static_cast<int64_t>(scaled.size()), 48.0f);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(scaled[i], x[i] * 48.0f);
}

TEST(FusedKernels, MatmulArgmaxIsTheArgmaxOfTheLogits) {
  ThreadPool pool(3);
  std::mt19937 rng(13);
  const int64_t rows = 4, k = 16, vocab = 300;
  test::TestWeights w = test::makeWeights(rng, DType::F32, vocab * k);
  std::vector<float> x = test::randomFloats(rng, rows * k);
  // Row 0's best logit appears twice (vocabulary rows 70 and 250 equal and
  // scaled up): the first one wins. A NaN row never wins.
  for (int64_t i = 0; i < k; ++i) {
    w.f32[70 * k + i] = 4.0f * x[i];
    w.f32[250 * k + i] = 4.0f * x[i];
    w.f32[5 * k + i] = NAN;
  }
  for (cpu::Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    std::vector<float> logits(rows * vocab);
    matmul(pool, x.data(), rows, w.matrix(vocab, k), nullptr, 0.0f, logits.data());
    std::vector<int32_t> expected(rows), got(rows, -1);
    argmax(logits.data(), rows, vocab, expected.data());
    matmulArgmax(pool, x.data(), rows, w.matrix(vocab, k), got.data());
    EXPECT_EQ(got, expected) << isaName(isa);
    EXPECT_EQ(got[0], 70);
  }
}

// Decode (1-2 tokens) takes blocks of 512 rows: a tie across blocks keeps
// the first index, and the SwiGLU GEMM over several blocks and a partial one
// equals the unfused sequence.
TEST(FusedKernels, DecodeBlocksKeepTheFirstBestAndTheUnfusedValues) {
  ThreadPool pool(2);
  std::mt19937 rng(17);
  // The first 1300 of the 2200 rows are the vocabulary.
  const int64_t k = 24, vocab = 1300, inter = 1100;
  test::TestWeights w = test::makeWeights(rng, DType::F32, 2 * inter * k);
  for (int64_t tokens : {1, 2}) {
    std::vector<float> x = test::randomFloats(rng, tokens * k);
    for (int64_t i = 0; i < k; ++i) { // token 0's best logit at rows 600 and 1200
      w.f32[600 * k + i] = 4.0f * x[i];
      w.f32[1200 * k + i] = 4.0f * x[i];
    }
    for (cpu::Isa isa : test::supportedIsas()) {
      test::ScopedIsa scoped(isa);
      std::vector<float> logits(tokens * vocab);
      matmul(pool, x.data(), tokens, w.matrix(vocab, k), nullptr, 0.0f, logits.data());
      std::vector<int32_t> expected(tokens), got(tokens, -1);
      argmax(logits.data(), tokens, vocab, expected.data());
      matmulArgmax(pool, x.data(), tokens, w.matrix(vocab, k), got.data());
      EXPECT_EQ(got, expected) << isaName(isa) << " T " << tokens;
      EXPECT_EQ(got[0], 600) << isaName(isa) << " T " << tokens;
      std::vector<float> gateUp(tokens * 2 * inter), unfused(tokens * inter), fused(tokens * inter);
      const WeightMatrix stacked = w.matrix(2 * inter, k);
      matmul(pool, x.data(), tokens, stacked, nullptr, 0.0f, gateUp.data());
      swigluFused(pool, gateUp.data(), tokens, inter, unfused.data());
      matmulSwiglu(pool, x.data(), tokens, stacked, fused.data());
      ASSERT_EQ(fused, unfused) << isaName(isa) << " T " << tokens;
    }
  }
}

TEST(FusedKernels, MatmulArgmaxOfAllNanRowsIsZero) {
  ThreadPool pool(1);
  std::vector<float> w(8 * 4, NAN), x = {1, 2, 3, 4};
  int32_t id = -1;
  matmulArgmax(pool, x.data(), 1, {w.data(), DType::F32, 8, 4}, &id);
  EXPECT_EQ(id, 0);
}

// The RoPE prologue of attention (q and k of one packed qkv buffer, GQA,
// a prefill chunk then a decode token) gives what rope() then attention
// give, and leaves q and k unrotated.
TEST(FusedKernels, AttentionWithRopePrologueEqualsRopeThenAttention) {
  ThreadPool pool(3);
  std::mt19937 rng(14);
  const int64_t heads = 4, kvHeads = 2, dim = 8, blockSize = 4, maxPositions = 32;
  const int64_t qWidth = heads * dim, kvWidth = kvHeads * dim, ld = qWidth + 2 * kvWidth;
  std::vector<float> invFreq(dim / 2);
  ropeInvFreqs(dim, 10000.0f, hd::RopeScaling{}, invFreq.data());
  std::vector<float> table = ropeTable(maxPositions, dim, invFreq.data());
  auto makeCache = [&] {
    return kv::KvCache::create({1, 8, static_cast<int32_t>(blockSize),
                                static_cast<int32_t>(kvHeads), static_cast<int32_t>(dim)})
        .value();
  };
  kv::KvCache fusedCache = makeCache(), plainCache = makeCache();
  std::vector<int32_t> blockTable = {3, 1, 6, 2};
  int64_t length = 0;
  for (int64_t tokens : {7, 1, 1}) {
    std::vector<float> qkv = test::randomFloats(rng, tokens * ld), rotated = qkv;
    std::vector<int32_t> positions(tokens);
    for (int64_t t = 0; t < tokens; ++t)
      positions[t] = static_cast<int32_t>(length + t);
    AttentionSequence seq{0, tokens, blockTable.data()};
    rope(pool, rotated.data(), tokens, ld, {heads + kvHeads, dim, dim}, positions.data(),
         table.data());
    std::vector<float> expected(tokens * qWidth), got(tokens * qWidth);
    AttentionBatch plain{rotated.data(),
                         ld,
                         rotated.data() + qWidth,
                         ld,
                         rotated.data() + qWidth + kvWidth,
                         ld,
                         expected.data(),
                         qWidth,
                         positions.data(),
                         &seq,
                         1,
                         heads,
                         0.3f};
    pagedAttention(pool, plain, plainCache.layer(0));
    std::vector<float> untouched = qkv;
    AttentionBatch fused{qkv.data(),
                         ld,
                         qkv.data() + qWidth,
                         ld,
                         qkv.data() + qWidth + kvWidth,
                         ld,
                         got.data(),
                         qWidth,
                         positions.data(),
                         &seq,
                         1,
                         heads,
                         0.3f,
                         table.data()};
    pagedAttention(pool, fused, fusedCache.layer(0));
    ASSERT_EQ(got, expected) << "step of " << tokens << " tokens";
    ASSERT_EQ(qkv, untouched);
    length += tokens;
  }
}

} // namespace
} // namespace llmc::cpu
