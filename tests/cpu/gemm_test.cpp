// The prefill GEMM (cpu/simd_gemm.h, IsaOps::packedGemm) against a scalar reference that
// sums in the order the GEMM promises, the decode tiles' order (8 lanes of
// fma over k, the lanes added in hsum's tree, the K % 8 tail by fma on AVX2
// and NEON; 16 lanes, the tail a masked step, reduce_add's tree on AVX-512;
// then bias, then the residual): equal bit for bit, on sizes that leave
// tails in every direction (tokens per tile, rows per tile and per converted
// block, columns per vector step and per depth chunk), for every weight
// dtype, with 1 and 2 threads, and on any block of rows and tokens.
#include "../common/compare.h"
#include "cpu/fused.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/simd.h"
#include "cpu/simd_gemm.h"
#include "test_util.h"

#include <cmath>
#include <limits>

namespace llmc::cpu {
namespace {

// The cases' block counts ("in two converted blocks") assume 256 KiB blocks;
// the machine's budget may be up to 1 MiB (gemmL2Budget).
class QuarterMegabyteL2Blocks : public ::testing::Environment {
  void SetUp() override { detail::setGemmL2BudgetForTesting(256 * 1024); }
  void TearDown() override { detail::setGemmL2BudgetForTesting(0); }
};
[[maybe_unused]] const ::testing::Environment *const kBlocks =
    ::testing::AddGlobalTestEnvironment(new QuarterMegabyteL2Blocks);

struct GemmCase {
  int64_t tokens, n, k;
};

struct GemmData {
  test::TestWeights w;
  std::vector<float> x, bias, y0;
};

GemmData makeData(DType dtype, GemmCase c, uint32_t seed) {
  std::mt19937 rng(seed);
  GemmData d{test::makeWeights(rng, dtype, c.n * c.k), {}, {}, {}};
  d.x = test::randomFloats(rng, c.tokens * c.k);
  d.bias = test::randomFloats(rng, c.n);
  d.y0 = test::randomFloats(rng, c.tokens * c.n);
  return d;
}

// The 8-lane sum of the AVX2 and NEON kernels: lanes of fma over k, added in
// hsum's tree, then the K % 8 tail by fma.
float laneSum8(const float *x, const float *w, int64_t k) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j)
      lane[j] = std::fma(x[i + j], w[i + j], lane[j]);
  float acc =
      ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (; i < k; ++i)
    acc = std::fma(x[i], w[i], acc);
  return acc;
}

// The 16-lane sum of the AVX-512 kernels: lanes of fma over k, the K % 16
// tail as one more step (the lanes past K add 0 x 0), then
// _mm512_reduce_add_ps's tree: the halves, the quarters, the pairs.
float laneSum16(const float *x, const float *w, int64_t k) {
  float lane[16] = {};
  for (int64_t i = 0; i < k; i += 16)
    for (int j = 0; j < 16; ++j)
      lane[j] = i + j < k ? std::fma(x[i + j], w[i + j], lane[j]) : std::fma(0.0f, 0.0f, lane[j]);
  return test::reduceAddTree16(lane);
}

// y[t, n] as the GEMM of the active ISA computes it (its decode tiles' order).
float reference(const GemmData &d, GemmCase c, int64_t t, int64_t n, bool withBias, float beta) {
  const float *x = d.x.data() + t * c.k, *w = d.w.values.data() + n * c.k;
#if defined(__x86_64__)
  if (test::roundsInputsToBf16(d.w.dtype)) {
    const float value = test::bf16DotLaneSum(x, w, c.k) + (withBias ? d.bias[n] : 0.0f);
    return beta != 0.0f ? d.y0[t * c.n + n] + value : value;
  }
#endif
  const float acc =
      detail::activeOps().gemmColumns == 16 ? laneSum16(x, w, c.k) : laneSum8(x, w, c.k);
  float value = acc + (withBias ? d.bias[n] : 0.0f);
  return beta != 0.0f ? d.y0[t * c.n + n] + value : value;
}

std::vector<float> referenceAll(const GemmData &d, GemmCase c, bool withBias, float beta) {
  std::vector<float> y(c.tokens * c.n);
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t n = 0; n < c.n; ++n)
      y[t * c.n + n] = reference(d, c, t, n, withBias, beta);
  return y;
}

// Whether this ISA has a packed GEMM.
bool packed() { return detail::activeOps().packedGemm != nullptr; }

// y = x . W^T (+ bias) (+ y) by the packed GEMM, split as matmul splits a
// prefill: row blocks over threads, the tokens in two spans of whole tiles.
// tokenTiles: x packed once first (prefillTokenTiles, as matmul does), or
// copied by each block's first row tile.
void packedMatmul(ThreadPool &pool, const float *x, int64_t tokens, const WeightMatrix &w,
                  const float *bias, float beta, float *y, bool tokenTiles) {
  detail::MatmulProblem p{x, tokens, w, bias, beta, y};
  if (tokenTiles)
    p.xTiles = prefillTokenTiles(pool, x, tokens, w);
  const int64_t rowBlock = detail::activeOps().splitRowBlock;
  const int64_t blocks = (w.rows + rowBlock - 1) / rowBlock;
  const int64_t half = (tokens / 2 + 3) / 4 * 4;
  pool.parallelFor(2 * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / 2 * rowBlock;
      const int64_t t0 = item % 2 ? std::min(half, tokens) : 0,
                    t1 = item % 2 ? tokens : std::min(half, tokens);
      detail::activeOps().packedGemm(p, row, std::min(w.rows, row + rowBlock), t0, t1);
    }
  });
}

// Token counts at or past the AVX2 GEMM threshold (32), with every remainder
// of the 4-token tile and of the 3-row tile.
const GemmCase kCases[] = {
    {36, 15, 8},    // whole tiles, one 8-lane step
    {38, 17, 9},    // a 2-token tile, a 2-row tile, a 1-column tail
    {41, 130, 257}, // a 1-token tile, a 1-row tile, two items of rows, a 1-column tail
    {39, 300, 600}, // a 3-token tile, three items of rows, in two converted blocks each
    {37, 5, 1},     // K = 1: only the tail
    {40, 1, 300},   // N = 1
    {35, 4, 2100},  // K = 2100: three depth chunks of 704, 704, 692 (a 4-column tail; bf16 too)
    {33, 70, 1030}, // K = 1030: two depth chunks of 520 and 510 (a 6-column tail; bf16: one)
    {34, 10, 1024}, // K = 1024: one chunk of all of K, x rows 4 KiB apart
    {35, 7, 2048},  // K = 2048: three depth chunks of 688, 688, 672 (no tail; bf16: one)
    {38, 4, 8192},  // K = 8192: eleven depth chunks of 752, the last 672 (bf16: 8 of 1024)
    {33, 8, 8195},  // K = 8195: eleven chunks (bf16: 9 of 928), a 3-column tail after the last
    {33, 122, 96},  // two items of rows, the second a block of one 2-row panel
    {36, 11, 16},   // AVX-512: one 16-lane step, a 6-row and a 5-row tile
    {37, 13, 31},   // a 15-column tail after one 16-lane step (AVX2: a 7-column one)
    {34, 6, 1040},  // K = 1040: two depth chunks of 528 and 512 at 16 lanes, 520 at 8
};

TEST(PackedGemm, MatchesTheDecodeOrderReferenceBitForBit) {
  uint32_t seed = 100;
  for (Isa isa : test::supportedIsas())
    for (bool bf16Dot : test::bf16DotSettings()) {
      test::ScopedIsa scoped(isa);
      test::ScopedBf16Dot scopedDot(bf16Dot);
      if (!packed())
        continue; // this ISA has no packed GEMM
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        for (DType dtype : test::kWeightDTypes)
          for (const GemmCase &c : kCases)
            for (int form = 0; form < 6; ++form) {
              if (bf16Dot && !test::roundsInputsToBf16(dtype))
                continue; // the kernels that run with it off
              const bool withBias = form % 3 > 0, tokenTiles = form >= 3;
              const float beta = form % 3 == 2 ? 1.0f : 0.0f;
              GemmData d = makeData(dtype, c, seed++);
              std::vector<float> y = d.y0;
              packedMatmul(pool, d.x.data(), c.tokens, d.w.matrix(c.n, c.k),
                           withBias ? d.bias.data() : nullptr, beta, y.data(), tokenTiles);
              test::Difference diff = test::maxAbsDiff(y, referenceAll(d, c, withBias, beta));
              ASSERT_EQ(diff.maxAbs, 0.0)
                  << diff.describe() << " " << isaName(isa) << " " << dtypeName(dtype)
                  << " threads " << threads << " T=" << c.tokens << " N=" << c.n << " K=" << c.k
                  << " bias " << withBias << " beta " << beta << " token tiles " << tokenTiles
                  << " bf16 dot " << bf16Dot;
            }
      }
    }
}

TEST(PackedGemm, ABlockWritesOnlyItsRowsAndTokensAndTheirValuesDoNotDependOnIt) {
  const GemmCase c{47, 150, 270};
  const float poison = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    if (!packed())
      continue;
    for (DType dtype : test::kWeightDTypes) {
      GemmData d = makeData(dtype, c, 7);
      const std::vector<float> expected = referenceAll(d, c, true, 0.0f);
      // Blocks that start and end inside tiles and items of rows.
      const int64_t blocks[][4] = {
          {0, 150, 0, 47}, {3, 131, 5, 18}, {129, 150, 0, 1}, {17, 18, 46, 47}};
      // With x in token tiles, a block that starts inside a tile (5) copies
      // x itself; the others read the tiles.
      ThreadPool pool(1);
      for (const auto &b : blocks)
        for (bool tokenTiles : {false, true}) {
          std::vector<float> y(c.tokens * c.n, poison);
          detail::MatmulProblem p{d.x.data(),    c.tokens, d.w.matrix(c.n, c.k),
                                  d.bias.data(), 0.0f,     y.data()};
          if (tokenTiles)
            p.xTiles = prefillTokenTiles(pool, d.x.data(), c.tokens, p.w);
          detail::activeOps().packedGemm(p, b[0], b[1], b[2], b[3]);
          for (int64_t t = 0; t < c.tokens; ++t)
            for (int64_t n = 0; n < c.n; ++n) {
              const float got = y[t * c.n + n];
              if (n >= b[0] && n < b[1] && t >= b[2] && t < b[3])
                ASSERT_EQ(got, expected[t * c.n + n])
                    << dtypeName(dtype) << " block " << b[0] << ".." << b[1] << " x " << b[2]
                    << ".." << b[3] << " token tiles " << tokenTiles << " t=" << t << " n=" << n;
              else
                ASSERT_TRUE(std::isnan(got)) << "wrote outside the block at t=" << t << " n=" << n;
            }
        }
    }
  }
}

TEST(PackedGemm, ANaNInATokenReachesOnlyThatTokensOutputs) {
  const GemmCase c{40, 40, 300};
  ThreadPool pool(2);
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    if (!packed())
      continue;
    GemmData d = makeData(DType::BF16, c, 9);
    d.x[5 * c.k + 270] = std::numeric_limits<float>::quiet_NaN(); // token 5
    for (bool tokenTiles : {false, true}) {
      std::vector<float> y(c.tokens * c.n);
      packedMatmul(pool, d.x.data(), c.tokens, d.w.matrix(c.n, c.k), nullptr, 0.0f, y.data(),
                   tokenTiles);
      for (int64_t t = 0; t < c.tokens; ++t)
        for (int64_t n = 0; n < c.n; ++n)
          ASSERT_EQ(std::isnan(y[t * c.n + n]), t == 5)
              << isaName(isa) << " token tiles " << tokenTiles << " t=" << t << " n=" << n;
    }
  }
}

TEST(PackedGemm, TokenCountsAroundTheTokenSplitMatchTheDoubleReference) {
  ThreadPool pool(2);
  const int64_t n = 70, k = 333;
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    const int64_t threshold = std::max<int64_t>(detail::activeOps().splitMinTokens, 2);
    for (DType dtype : test::kWeightDTypes)
      for (int64_t tokens = threshold - 1; tokens <= threshold + 1; ++tokens) {
        GemmData d = makeData(dtype, {tokens, n, k}, static_cast<uint32_t>(tokens));
        std::vector<float> y = d.y0;
        matmul(pool, d.x.data(), tokens, d.w.matrix(n, k), d.bias.data(), 1.0f, y.data());
        const std::vector<float> x = test::kernelInputs(dtype, d.x);
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t r = 0; r < n; ++r) {
            double expected = d.bias[r] + static_cast<double>(d.y0[t * n + r]), magnitude = 0;
            for (int64_t i = 0; i < k; ++i) {
              const double term = static_cast<double>(x[t * k + i]) * d.w.values[r * k + i];
              expected += term;
              magnitude += std::fabs(term);
            }
            ASSERT_NEAR(y[t * n + r], expected, 1e-5 * (magnitude + 1))
                << isaName(isa) << " " << dtypeName(dtype) << " T=" << tokens;
          }
      }
  }
}

// matmul splits a prefill over rows and tokens; the fused SwiGLU GEMM runs
// 64-row slices; the outputs must still be equal bit for bit (fused_test
// covers the decode token counts).
TEST(PackedGemm, FusedSwigluOnPrefillEqualsMatmulThenSwiglu) {
  ThreadPool pool(2);
  std::mt19937 rng(21);
  const int64_t tokens = 45, k = 300, inter = 150;
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (DType dtype : test::kWeightDTypes) {
      test::TestWeights w = test::makeWeights(rng, dtype, 2 * inter * k);
      std::vector<float> x = test::randomFloats(rng, tokens * k);
      std::vector<float> gateUp(tokens * 2 * inter), expected(tokens * inter), got(tokens * inter);
      matmul(pool, x.data(), tokens, w.matrix(2 * inter, k), nullptr, 0.0f, gateUp.data());
      swigluFused(pool, gateUp.data(), tokens, inter, expected.data());
      matmulSwiglu(pool, x.data(), tokens, w.matrix(2 * inter, k), got.data());
      test::Difference diff = test::maxAbsDiff(got, expected);
      ASSERT_EQ(diff.maxAbs, 0.0) << diff.describe() << " " << isaName(isa) << " "
                                  << dtypeName(dtype);
    }
  }
}

// A token's outputs do not depend on how many tokens share the call (a prompt
// prefilled whole equals one prefilled after a cached prefix, or in chunks).
TEST(PackedGemm, MatmulGivesEveryTokenTheSameBitsWhateverTheTokenCount) {
  ThreadPool pool(2);
  const int64_t n = 140, k = 300, tokens = 45;
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (DType dtype : test::kWeightDTypes) {
      GemmData d = makeData(dtype, {tokens, n, k}, 5);
      std::vector<float> whole(tokens * n);
      matmul(pool, d.x.data(), tokens, d.w.matrix(n, k), d.bias.data(), 0.0f, whole.data());
      for (int64_t chunk : {1, 2, 5, 8, 33}) {
        std::vector<float> parts(tokens * n);
        for (int64_t t = 0; t < tokens; t += chunk)
          matmul(pool, d.x.data() + t * k, std::min(chunk, tokens - t), d.w.matrix(n, k),
                 d.bias.data(), 0.0f, parts.data() + t * n);
        test::Difference diff = test::maxAbsDiff(parts, whole);
        ASSERT_EQ(diff.maxAbs, 0.0) << diff.describe() << " " << isaName(isa) << " "
                                    << dtypeName(dtype) << " chunks of " << chunk;
      }
    }
  }
}

// Decode (1 and 2 tokens) reads rows in 4 runs (simd_avx2.cpp streamedRows):
// every row count leaves a remainder of 0-3 rows after the runs, and a range
// of rows (a thread's chunk) may start anywhere. Each output keeps the
// reference's bits, and a range writes only its rows.
TEST(PackedGemm, DecodeRunsOfRowsMatchTheReferenceBitForBit) {
  const float poison = std::numeric_limits<float>::quiet_NaN();
  uint32_t seed = 300;
  for (Isa isa : test::supportedIsas())
    for (bool bf16Dot : test::bf16DotSettings()) {
      test::ScopedIsa scoped(isa);
      test::ScopedBf16Dot scopedDot(bf16Dot);
      if (!packed())
        continue; // the reference is the packed GEMMs' order
      for (DType dtype : test::kWeightDTypes)
        for (int64_t tokens : {1, 2})
          if (!bf16Dot || test::roundsInputsToBf16(dtype)) // else the kernels that run with it off
            for (const GemmCase &shape :
                 {GemmCase{0, 1, 9}, GemmCase{0, 7, 8}, GemmCase{0, 64, 300}, GemmCase{0, 129, 257},
                  GemmCase{0, 262, 768}}) {
              const GemmCase c{tokens, shape.n, shape.k};
              GemmData d = makeData(dtype, c, seed++);
              const std::vector<float> expected = referenceAll(d, c, true, 0.0f);
              const int64_t ranges[][2] = {{0, c.n}, {c.n / 3, c.n}, {1, c.n - c.n / 2}};
              for (const auto &range : ranges) {
                std::vector<float> y(c.tokens * c.n, poison);
                const detail::MatmulProblem p{d.x.data(),    c.tokens, d.w.matrix(c.n, c.k),
                                              d.bias.data(), 0.0f,     y.data()};
                detail::activeOps().matmulRows(p, range[0], range[1]);
                for (int64_t t = 0; t < c.tokens; ++t)
                  for (int64_t n = 0; n < c.n; ++n) {
                    const float got = y[t * c.n + n];
                    if (n >= range[0] && n < range[1])
                      ASSERT_EQ(got, expected[t * c.n + n])
                          << dtypeName(dtype) << " T=" << tokens << " N=" << c.n << " K=" << c.k
                          << " rows " << range[0] << ".." << range[1] << " t=" << t << " n=" << n;
                    else
                      ASSERT_TRUE(std::isnan(got))
                          << "wrote outside the rows at t=" << t << " n=" << n;
                  }
              }
              for (int threads : {1, 2}) {
                ThreadPool pool(threads);
                std::vector<float> y(c.tokens * c.n);
                matmul(pool, d.x.data(), c.tokens, d.w.matrix(c.n, c.k), d.bias.data(), 0.0f,
                       y.data());
                test::Difference diff = test::maxAbsDiff(y, expected);
                ASSERT_EQ(diff.maxAbs, 0.0)
                    << diff.describe() << " " << dtypeName(dtype) << " T=" << tokens << " N=" << c.n
                    << " threads " << threads;
              }
            }
    }
}

// The L2 block size (the machine's, 256 KiB to 1 MiB) decides which rows are
// converted together, never an output's bits.
TEST(PackedGemm, TheL2BlockSizeDoesNotChangeTheBits) {
  ThreadPool pool(2);
  const GemmCase c{40, 300, 600};
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    if (!packed())
      continue;
    for (DType dtype : test::kWeightDTypes) {
      GemmData d = makeData(dtype, c, 77);
      const std::vector<float> expected = referenceAll(d, c, true, 0.0f);
      for (int64_t budget : {int64_t{0}, int64_t{16 * 1024}, int64_t{1024 * 1024}}) {
        detail::setGemmL2BudgetForTesting(budget);
        std::vector<float> y(c.tokens * c.n);
        matmul(pool, d.x.data(), c.tokens, d.w.matrix(c.n, c.k), d.bias.data(), 0.0f, y.data());
        detail::setGemmL2BudgetForTesting(256 * 1024);
        test::Difference diff = test::maxAbsDiff(y, expected);
        ASSERT_EQ(diff.maxAbs, 0.0) << diff.describe() << " " << isaName(isa) << " "
                                    << dtypeName(dtype) << " budget " << budget;
      }
    }
  }
}

TEST(PackedGemm, TheMachinesL2BudgetIsAQuarterToOneMegabyte) {
  detail::setGemmL2BudgetForTesting(0);
  const int64_t budget = detail::gemmL2Budget();
  detail::setGemmL2BudgetForTesting(256 * 1024);
  EXPECT_GE(budget, 256 * 1024);
  EXPECT_LE(budget, 1024 * 1024);
  if (l2CacheBytes() >= 4 * 1024 * 1024)
    EXPECT_EQ(budget, 1024 * 1024);
  if (l2CacheBytes() <= 512 * 1024)
    EXPECT_EQ(budget, 256 * 1024);
}

// f32 weights are packed into panels like f16/bf16 wherever they start: any
// alignment gives the reference's bits.
TEST(PackedGemm, AlignedAndMisalignedF32WeightsGiveTheSameBits) {
  const GemmCase c{40, 50, 96};
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    if (!packed())
      continue;
    GemmData d = makeData(DType::F32, c, 31);
    const std::vector<float> expected = referenceAll(d, c, false, 0.0f);
    std::vector<float> storage(c.n * c.k + 16);
    const uintptr_t address = reinterpret_cast<uintptr_t>(storage.data());
    float *aligned = storage.data() + ((32 - address % 32) % 32) / sizeof(float);
    for (int64_t offset : {0, 1, 3}) {
      std::copy(d.w.values.begin(), d.w.values.end(), aligned + offset);
      std::vector<float> y(c.tokens * c.n);
      const detail::MatmulProblem p{d.x.data(), c.tokens, {aligned + offset, DType::F32, c.n, c.k},
                                    nullptr,    0.0f,     y.data()};
      detail::activeOps().packedGemm(p, 0, c.n, 0, c.tokens);
      test::Difference diff = test::maxAbsDiff(y, expected);
      ASSERT_EQ(diff.maxAbs, 0.0) << diff.describe() << " offset " << offset;
    }
  }
}

} // namespace
} // namespace llmc::cpu
