#include "sampling/sampler.h"

#include "kernels/common/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace llmc::sampling {
namespace {

Sampler makeSampler(const SamplingParams &params) {
  auto sampler = Sampler::create(params);
  EXPECT_TRUE(sampler.isOk()) << sampler.message();
  return std::move(*sampler);
}

std::vector<float> randomLogits(std::mt19937 &rng, int vocab) {
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float &l : logits)
    l = dist(rng);
  return logits;
}

// How often each token is drawn in `draws` samples of the same logits.
std::map<int32_t, int> histogram(Sampler &sampler, const std::vector<float> &logits, int draws,
                                 const std::vector<int32_t> &seen = {}) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i)
    ++counts[sampler.sample(logits.data(), static_cast<int32_t>(logits.size()), seen.data(),
                            static_cast<int64_t>(seen.size()))];
  return counts;
}

std::set<int32_t> keysOf(const std::map<int32_t, int> &counts) {
  std::set<int32_t> keys;
  for (const auto &kv : counts)
    keys.insert(kv.first);
  return keys;
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::mt19937 rng(1);
  std::vector<std::vector<float>> steps;
  for (int i = 0; i < 200; ++i)
    steps.push_back(randomLogits(rng, 1000));
  auto run = [&](uint64_t seed) {
    Sampler s = makeSampler({0.9f, 50, 0.95f, 0.01f, 1.1f, seed});
    std::vector<int32_t> tokens;
    for (const auto &logits : steps)
      tokens.push_back(s.sample(logits.data(), 1000, tokens.data(), tokens.size()));
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, RngIsXoshiro256StarStarSeededBySplitmix64) {
  // Pinned: a change here changes every seeded generation.
  Rng rng(0);
  EXPECT_EQ(rng.next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(rng.next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(rng.next(), 0x1a5f849d4933e6e0ull);
  for (int i = 0; i < 1000; ++i) {
    double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(Sampler, TemperatureZeroIsGreedyAfterThePenalty) {
  Sampler s = makeSampler({0.0f, 0, 1.0f, 0.0f, 1.0f, 0});
  std::vector<float> logits = {1.0f, 5.0f, 5.0f, -2.0f};
  EXPECT_EQ(s.sample(logits.data(), 4, nullptr, 0), 1); // first maximum
  // Penalty 2: token 1 becomes 2.5, token 2 stays 5.
  Sampler penalized = makeSampler({0.0f, 0, 1.0f, 0.0f, 2.0f, 0});
  int32_t seen[] = {1, 1, 1};
  EXPECT_EQ(penalized.sample(logits.data(), 4, seen, 3), 2);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeOncePerToken) {
  // Logits {2, -1, 1.5}; penalty 2 on tokens 0 and 1 gives {1, -2, 1.5}: greedy picks 2.
  Sampler s = makeSampler({0.0f, 0, 1.0f, 0.0f, 2.0f, 0});
  std::vector<float> logits = {2.0f, -1.0f, 1.5f};
  int32_t seen[] = {0, 1, 0, 0, 7 /* outside the vocabulary: ignored */};
  EXPECT_EQ(s.sample(logits.data(), 3, seen, 5), 2);
  // Sampled: token 1 (-1 -> -2) must become rarer against token 2 exactly as
  // softmax({1, -2, 1.5}) says.
  Sampler sampled = makeSampler({1.0f, 0, 1.0f, 0.0f, 2.0f, 5});
  std::vector<int32_t> seenTokens = {0, 1};
  auto counts = histogram(sampled, logits, 100000, seenTokens);
  double z = std::exp(1.0) + std::exp(-2.0) + std::exp(1.5);
  EXPECT_NEAR(counts[1] / 100000.0, std::exp(-2.0) / z, 0.005);
  EXPECT_NEAR(counts[0] / 100000.0, std::exp(1.0) / z, 0.01);
}

TEST(Sampler, DrawsFollowTheTemperedSoftmax) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, -1.0f};
  Sampler s = makeSampler({0.5f, 0, 1.0f, 0.0f, 1.0f, 9});
  auto counts = histogram(s, logits, 200000);
  double z = 0;
  for (float l : logits)
    z += std::exp(l / 0.5);
  for (int t = 0; t < 4; ++t)
    EXPECT_NEAR(counts[t] / 200000.0, std::exp(logits[t] / 0.5) / z, 0.005) << t;
}

TEST(Sampler, TopKKeepsTheKBestAndTheirTies) {
  std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f, 2.0f, -1.0f};
  Sampler s = makeSampler({1.0f, 2, 1.0f, 0.0f, 1.0f, 1});
  EXPECT_EQ(keysOf(histogram(s, logits, 5000)), (std::set<int32_t>{1, 3, 4})); // ties kept
  Sampler one = makeSampler({1.0f, 1, 1.0f, 0.0f, 1.0f, 1});
  EXPECT_EQ(keysOf(histogram(one, logits, 1000)), (std::set<int32_t>{1}));
  Sampler all = makeSampler({1.0f, 100, 1.0f, 0.0f, 1.0f, 1}); // k >= vocab: off
  EXPECT_EQ(keysOf(histogram(all, logits, 20000)).size(), 6u);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (in shuffled token order).
  std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  Sampler s = makeSampler({1.0f, 0, 0.75f, 0.0f, 1.0f, 3});
  EXPECT_EQ(keysOf(histogram(s, logits, 5000)), (std::set<int32_t>{1, 3}));
  Sampler more = makeSampler({1.0f, 0, 0.85f, 0.0f, 1.0f, 3});
  auto counts = histogram(more, logits, 100000);
  EXPECT_EQ(keysOf(counts), (std::set<int32_t>{0, 1, 3}));
  EXPECT_NEAR(counts[1] / 100000.0, 0.5 / 0.95, 0.01); // renormalized over the kept
  // After top-k 2, top-p works on the renormalized pair {0.625, 0.375}.
  Sampler after = makeSampler({1.0f, 2, 0.6f, 0.0f, 1.0f, 3});
  EXPECT_EQ(keysOf(histogram(after, logits, 5000)), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPOnALargeVocabularyMatchesAFullSort) {
  std::mt19937 rng(4);
  std::vector<float> logits = randomLogits(rng, 50000);
  for (float p : {0.3f, 0.9f, 0.999f}) {
    // The expected kept set from a full sort.
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    double z = 0, maxLogit = logits[order[0]];
    for (float l : logits)
      z += std::exp(l - maxLogit);
    std::set<int32_t> expected;
    double before = 0;
    for (int32_t t : order) {
      if (!expected.empty() && before >= p)
        break;
      expected.insert(t);
      before += std::exp(logits[t] - maxLogit) / z;
    }
    Sampler s = makeSampler({1.0f, 0, p, 0.0f, 1.0f, 11});
    std::set<int32_t> drawn = keysOf(histogram(s, logits, 500));
    for (int32_t t : drawn)
      ASSERT_TRUE(expected.count(t)) << "p " << p << " drew token " << t << " outside the nucleus";
    EXPECT_GT(drawn.size(), std::min<size_t>(expected.size(), 5) - 1);
  }
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  // Probabilities proportional to 1, 0.2, 0.05: min_p 0.1 drops the last.
  std::vector<float> logits = {0.0f, std::log(0.2f), std::log(0.05f)};
  Sampler s = makeSampler({1.0f, 0, 1.0f, 0.1f, 1.0f, 4});
  EXPECT_EQ(keysOf(histogram(s, logits, 20000)), (std::set<int32_t>{0, 1}));
  // Applied after temperature: at T=2 the ratios are sqrt'ed (0.45, 0.22).
  Sampler hot = makeSampler({2.0f, 0, 1.0f, 0.1f, 1.0f, 4});
  EXPECT_EQ(keysOf(histogram(hot, logits, 20000)), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, NeverPicksNaNLogits) {
  std::vector<float> logits(300, NAN);
  logits[7] = 1.0f;
  logits[250] = 0.5f;
  Sampler greedy = makeSampler({0.0f, 0, 1.0f, 0.0f, 1.0f, 0});
  EXPECT_EQ(greedy.sample(logits.data(), 300, nullptr, 0), 7);
  Sampler s = makeSampler({1.0f, 0, 0.99f, 0.0f, 1.0f, 2});
  EXPECT_EQ(keysOf(histogram(s, logits, 2000)), (std::set<int32_t>{7, 250}));
}

// Sampling from the top-k candidates (what the GPU returns instead of the
// logits) picks exactly the tokens sampling from the full logits picks, with
// the same random state: ties, -0/+0, NaN and -inf logits, temperatures,
// top-p and min-p included.
TEST(Sampler, TopKCandidatesDrawTheSameTokensAsTheFullLogits) {
  std::mt19937 rng(11);
  const int vocab = 3000;
  int draws = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<float> logits = randomLogits(rng, vocab);
    for (int i = 0; i < 40; ++i) // rounded: many exact ties
      logits[rng() % vocab] = std::round(logits[rng() % vocab]);
    logits[rng() % vocab] = -0.0f;
    logits[rng() % vocab] = 0.0f;
    logits[rng() % vocab] = std::nanf("");
    logits[rng() % vocab] = -INFINITY;
    SamplingParams params;
    params.temperature = std::vector<float>{1.0f, 0.7f, 1.3f}[trial % 3];
    params.topK = 1 + static_cast<int32_t>(rng() % hd::kTopKMaxK);
    params.topP = trial % 4 == 0 ? 1.0f : 0.8f;
    params.minP = trial % 5 == 0 ? 0.05f : 0.0f;
    params.seed = trial;
    Sampler full = makeSampler(params), fromTopK = makeSampler(params);
    ASSERT_TRUE(fromTopK.drawsFromTopK(vocab));
    std::vector<float> scores(hd::kTopKCapacity);
    std::vector<int32_t> ids(hd::kTopKCapacity);
    int32_t count = topKCandidates(logits.data(), vocab, params.topK, params.temperature,
                                   scores.data(), ids.data());
    ASSERT_GE(count, params.topK);
    ASSERT_LE(count, hd::kTopKCapacity);
    for (int d = 0; d < 20; ++d, ++draws)
      ASSERT_EQ(fromTopK.sampleTopK(scores.data(), ids.data(), count, vocab),
                full.sample(logits.data(), vocab, nullptr, 0))
          << "trial " << trial << " draw " << d;
  }
  EXPECT_EQ(draws, 60 * 20);
  // Ties with the k-th past the capacity: reported, nothing stored.
  std::vector<float> flat(500, 1.5f);
  std::vector<float> scores(hd::kTopKCapacity);
  std::vector<int32_t> ids(hd::kTopKCapacity);
  EXPECT_EQ(topKCandidates(flat.data(), 500, 4, 1.0f, scores.data(), ids.data()), 500);
  // Penalties and greedy decoding need the full logits.
  SamplingParams penalty;
  penalty.topK = 10;
  penalty.repetitionPenalty = 1.1f;
  EXPECT_FALSE(makeSampler(penalty).drawsFromTopK(vocab));
  penalty.repetitionPenalty = 1.0f;
  penalty.temperature = 0.0f;
  EXPECT_FALSE(makeSampler(penalty).drawsFromTopK(vocab));
}

TEST(Sampler, RejectsOutOfRangeParametersNamingTheField) {
  auto bad = Sampler::create({-1.0f, 0, 1.0f, 0.0f, 1.0f, 0});
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.message().rfind("sampling: field 'temperature': expected a finite number >= 0", 0),
            0u)
      << bad.message();
  EXPECT_NE(Sampler::create({1.0f, -1, 1.0f, 0.0f, 1.0f, 0}).message().find("'top_k'"),
            std::string::npos);
  EXPECT_NE(Sampler::create({1.0f, 0, 0.0f, 0.0f, 1.0f, 0}).message().find("'top_p'"),
            std::string::npos);
  EXPECT_NE(Sampler::create({1.0f, 0, 1.0f, 1.5f, 1.0f, 0}).message().find("'min_p'"),
            std::string::npos);
  EXPECT_NE(Sampler::create({1.0f, 0, 1.0f, 0.0f, 0.0f, 0}).message().find("'repetition_penalty'"),
            std::string::npos);
  EXPECT_FALSE(Sampler::create({NAN, 0, 1.0f, 0.0f, 1.0f, 0}).isOk());
}

} // namespace
} // namespace llmc::sampling
