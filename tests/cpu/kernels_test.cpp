// The small CPU kernels against double-precision references.
#include "cpu/kernels.h"
#include "test_util.h"

#include <cmath>

namespace llmc::cpu {
namespace {

double sigmoidSilu(double x) { return x / (1 + std::exp(-x)); }

TEST(Elementwise, AddMulSiluSwiglu) {
  ThreadPool pool(3);
  std::mt19937 rng(1);
  for (int64_t n : {1, 17, 100000}) {
    std::vector<float> a = test::randomFloats(rng, n, -20, 20), b = test::randomFloats(rng, n);
    std::vector<float> y(n);
    add(pool, a.data(), b.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y[i], a[i] + b[i]);
    mul(pool, a.data(), b.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y[i], a[i] * b[i]);
    silu(pool, a.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(y[i], sigmoidSilu(a[i]), 1e-6 * (1 + std::fabs(a[i])));
    swiglu(pool, a.data(), b.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(y[i], sigmoidSilu(a[i]) * b[i], 1e-6 * (1 + std::fabs(a[i])));
    std::vector<float> inPlace = a;
    add(pool, inPlace.data(), b.data(), inPlace.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(inPlace[i], a[i] + b[i]);
  }
}

TEST(Elementwise, SiluSaturatesWithoutNaN) {
  ThreadPool pool(1);
  float x[] = {-1000.0f, -100.0f, 0.0f, 100.0f, 1000.0f};
  float y[5];
  silu(pool, x, y, 5);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 0.0f, 1e-30);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 100.0f);
  EXPECT_EQ(y[4], 1000.0f);
}

TEST(Elementwise, FusedSwigluReadsGateThenUp) {
  ThreadPool pool(3);
  std::mt19937 rng(2);
  const int64_t tokens = 7, inter = 172;
  std::vector<float> gateUp = test::randomFloats(rng, tokens * 2 * inter, -5, 5);
  std::vector<float> y(tokens * inter);
  swigluFused(pool, gateUp.data(), tokens, inter, y.data());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < inter; ++i) {
      double gate = gateUp[t * 2 * inter + i], up = gateUp[t * 2 * inter + inter + i];
      ASSERT_NEAR(y[t * inter + i], sigmoidSilu(gate) * up, 1e-5);
    }
}

TEST(RmsNorm, MatchesReferenceForEveryIsaAndDtype) {
  ThreadPool pool(3);
  std::mt19937 rng(3);
  const int64_t tokens = 5, hidden = 172;
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (DType dtype : test::kWeightDTypes) {
      test::TestWeights w = test::makeWeights(rng, dtype, hidden, 0.5f, 1.5f);
      std::vector<float> x = test::randomFloats(rng, tokens * hidden, -3, 3), y(tokens * hidden);
      rmsNorm(pool, x.data(), tokens, w.vector(), 1e-5f, y.data());
      for (int64_t t = 0; t < tokens; ++t) {
        double sum = 0;
        for (int64_t i = 0; i < hidden; ++i)
          sum += static_cast<double>(x[t * hidden + i]) * x[t * hidden + i];
        double inv = 1 / std::sqrt(sum / hidden + 1e-5);
        for (int64_t i = 0; i < hidden; ++i) {
          double expected = x[t * hidden + i] * inv * w.values[i];
          ASSERT_NEAR(y[t * hidden + i], expected, 1e-5 * (1 + std::fabs(expected)))
              << isaName(isa) << " " << dtypeName(dtype);
        }
      }
      rmsNorm(pool, x.data(), tokens, w.vector(), 1e-5f, x.data()); // in place
      EXPECT_EQ(x, y);
    }
  }
}

TEST(Embedding, GathersRowsOfEveryDtype) {
  ThreadPool pool(3);
  std::mt19937 rng(4);
  const int64_t vocab = 50, hidden = 33;
  for (DType dtype : test::kWeightDTypes) {
    test::TestWeights table = test::makeWeights(rng, dtype, vocab * hidden);
    std::vector<int32_t> ids = {0, 49, 7, 7, 13};
    std::vector<float> y(ids.size() * hidden);
    ASSERT_TRUE(embedding(pool, table.matrix(vocab, hidden), ids.data(), ids.size(), y.data()));
    for (size_t t = 0; t < ids.size(); ++t)
      for (int64_t i = 0; i < hidden; ++i)
        ASSERT_EQ(y[t * hidden + i], table.values[ids[t] * hidden + i]);
  }
}

TEST(Embedding, NamesAnOutOfRangeId) {
  ThreadPool pool(1);
  std::vector<float> table(4 * 2), y(2 * 2);
  int32_t ids[] = {1, 4};
  Status s = embedding(pool, {table.data(), DType::F32, 4, 2}, ids, 2, y.data());
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "embedding: token id 4 at position 1 is outside the vocabulary [0, 4)");
  ids[1] = -1;
  EXPECT_FALSE(embedding(pool, {table.data(), DType::F32, 4, 2}, ids, 2, y.data()).isOk());
}

TEST(Argmax, FirstMaximumPerRowIgnoringNaN) {
  const float x[] = {1, 3, 3, 2, /**/ NAN, -1, NAN, -2, /**/ -INFINITY, -INFINITY, -INFINITY, -5};
  int32_t out[3];
  argmax(x, 3, 4, out);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 3);
}

// HF apply_rotary_pos_emb in double: q * cos + rotate_half(q) * sin.
void referenceRope(std::vector<double> &head, int rotaryDim, int position,
                   const std::vector<float> &invFreq) {
  int half = rotaryDim / 2;
  std::vector<double> rotated(head);
  for (int i = 0; i < rotaryDim; ++i) {
    double angle = static_cast<double>(static_cast<float>(position) * invFreq[i % half]);
    double rotateHalf = i < half ? -head[i + half] : head[i - half];
    rotated[i] = head[i] * std::cos(angle) + rotateHalf * std::sin(angle);
  }
  head = rotated;
}

TEST(Rope, MatchesHfFormulaWithLlama3ScalingAndPartialRotary) {
  ThreadPool pool(3);
  std::mt19937 rng(5);
  hd::RopeScaling llama3{hd::RopeScalingKind::Llama3, 32.0f, 1.0f, 4.0f, 8192.0f};
  struct Case {
    int64_t heads, headDim, rotaryDim, ld;
    hd::RopeScaling scaling;
  };
  const Case cases[] = {{4, 64, 64, 4 * 64 + 3 * 64, llama3},
                        {3, 10, 10, 30, hd::RopeScaling{}},
                        {2, 16, 8, 40, hd::RopeScaling{hd::RopeScalingKind::Linear, 2.0f}}};
  for (const Case &c : cases) {
    const int64_t tokens = 9;
    std::vector<float> invFreq(c.rotaryDim / 2);
    ropeInvFreqs(static_cast<int>(c.rotaryDim), 500000.0f, c.scaling, invFreq.data());
    std::vector<float> table = ropeTable(131072, static_cast<int>(c.rotaryDim), invFreq.data());
    std::vector<int32_t> positions(tokens);
    for (int32_t &p : positions)
      p = static_cast<int32_t>(rng() % 131072);
    positions[0] = 0;
    std::vector<float> x = test::randomFloats(rng, tokens * c.ld), original = x;
    rope(pool, x.data(), tokens, c.ld, {c.heads, c.headDim, c.rotaryDim}, positions.data(),
         table.data());
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t h = 0; h < c.heads; ++h) {
        const float *in = original.data() + t * c.ld + h * c.headDim;
        std::vector<double> head(in, in + c.headDim);
        referenceRope(head, static_cast<int>(c.rotaryDim), positions[t], invFreq);
        for (int64_t i = 0; i < c.headDim; ++i)
          ASSERT_NEAR(x[t * c.ld + h * c.headDim + i], head[i], 2e-6)
              << "t " << t << " h " << h << " i " << i;
      }
      // Features past the heads (the rest of a fused row) are untouched.
      for (int64_t i = c.heads * c.headDim; i < c.ld; ++i)
        ASSERT_EQ(x[t * c.ld + i], original[t * c.ld + i]);
    }
  }
}

} // namespace
} // namespace llmc::cpu
