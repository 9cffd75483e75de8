// The sampler's OpenAI-style penalties, min_tokens and logprobs, against
// values computed by hand from the definitions.
#include "sampling/sampler.h"

#include "kernels/common/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace llmc::sampling {
namespace {

Sampler makeSampler(const SamplingParams &params) {
  auto sampler = Sampler::create(params);
  EXPECT_TRUE(sampler.isOk()) << sampler.message();
  return std::move(*sampler);
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// log-softmax of `scores` at index i, written out.
double logSoftmax(const std::vector<double> &scores, size_t i) {
  double total = 0;
  for (double s : scores)
    total += std::exp(s);
  return scores[i] - std::log(total);
}

// Logits {1, 2, 0.5, 3}; the prompt holds token 3, the model generated 1, 1, 2.
const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, 3.0f};
const std::vector<int32_t> kSeen = {3, 1, 1, 2};
const TokenHistory kHistory{kSeen.data(), 4, 1};

TEST(SamplerPenalties, FrequencyAndPresenceCountGeneratedTokensOnly) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.frequencyPenalty = 0.5f;
  p.presencePenalty = 0.25f;
  p.logprobs = 4;
  Sampler s = makeSampler(p);
  SampledLogprobs out;
  s.sample(kLogits.data(), 4, kHistory, &out);
  // By hand: token 1: 2 - 0.5*2 - 0.25 = 0.75; token 2: 0.5 - 0.5*1 - 0.25 =
  // -0.25; token 3 is only in the prompt: 3; token 0 never seen: 1.
  const std::vector<double> expected = {1.0, 0.75, -0.25, 3.0};
  ASSERT_EQ(out.top.size(), 4u);
  const int32_t order[] = {3, 0, 1, 2};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out.top[i].id, order[i]);
    EXPECT_NEAR(out.top[i].logprob, logSoftmax(expected, order[i]), 1e-6) << order[i];
  }
  EXPECT_NEAR(out.chosen.logprob, logSoftmax(expected, out.chosen.id), 1e-6);
}

TEST(SamplerPenalties, RepetitionPenaltyThenFrequencyAndPresence) {
  SamplingParams p = greedy();
  p.repetitionPenalty = 2.0f;
  p.frequencyPenalty = 0.5f;
  p.presencePenalty = 0.25f;
  p.logprobs = 0;
  Sampler s = makeSampler(p);
  SampledLogprobs out;
  // By hand: repetition over prompt and generated: {1, 1, 0.25, 1.5}; then
  // token 1: 1 - 1 - 0.25 = -0.25, token 2: 0.25 - 0.5 - 0.25 = -0.5.
  EXPECT_EQ(s.sample(kLogits.data(), 4, kHistory, &out), 3);
  const std::vector<double> expected = {1.0, -0.25, -0.5, 1.5};
  EXPECT_NEAR(out.chosen.logprob, logSoftmax(expected, 3), 1e-6); // greedy: not scaled
  EXPECT_TRUE(out.top.empty());
}

TEST(SamplerPenalties, NegativePenaltiesEncourageRepeats) {
  SamplingParams p = greedy();
  p.presencePenalty = -2.0f; // token 1: 2 + 2 = 4 > 3
  EXPECT_EQ(makeSampler(p).sample(kLogits.data(), 4, kHistory), 1);
  p.presencePenalty = 0.0f;
  p.frequencyPenalty = -0.4f; // token 1: 2 + 0.8 = 2.8 < 3
  EXPECT_EQ(makeSampler(p).sample(kLogits.data(), 4, kHistory), 3);
}

TEST(SamplerPenalties, MinTokensSuppressesStopTokensUntilReached) {
  SamplingParams p = greedy();
  p.minTokens = 4;
  p.stopTokenIds = {3, 1};
  Sampler s = makeSampler(p);
  EXPECT_EQ(s.sample(kLogits.data(), 4, kHistory), 0); // 3 generated < 4: 3 and 1 masked
  const std::vector<int32_t> more = {3, 1, 1, 2, 0};
  EXPECT_EQ(s.sample(kLogits.data(), 4, TokenHistory{more.data(), 5, 1}), 3);
  // The old overload counts every seen token as prompt: still masked.
  EXPECT_EQ(s.sample(kLogits.data(), 4, more.data(), 5), 0);
}

TEST(SamplerPenalties, LogprobsAfterTopKAndTopPListOnlyTheKeptTokens) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.topK = 2;
  p.logprobs = 4;
  Sampler s = makeSampler(p);
  SampledLogprobs out;
  int32_t token = s.sample(kLogits.data(), 4, TokenHistory{}, &out);
  // Kept: tokens 3 and 1, scores 6 and 4.
  ASSERT_EQ(out.top.size(), 2u);
  EXPECT_EQ(out.top[0].id, 3);
  EXPECT_EQ(out.top[1].id, 1);
  EXPECT_NEAR(out.top[0].logprob, -std::log(1 + std::exp(-2.0)), 1e-6);
  EXPECT_NEAR(out.top[1].logprob, -2.0 - std::log(1 + std::exp(-2.0)), 1e-6);
  EXPECT_EQ(out.chosen.id, token);
  EXPECT_TRUE(token == 3 || token == 1);
}

TEST(SamplerPenalties, TopKCandidatesGiveTheSameTokensAndLogprobs) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int32_t vocab = 300;
  SamplingParams p;
  p.temperature = 0.8f;
  p.topK = 20;
  p.topP = 0.9f;
  p.seed = 11;
  p.logprobs = 5;
  Sampler full = makeSampler(p), fromTopK = makeSampler(p);
  ASSERT_TRUE(fromTopK.drawsFromTopK(vocab));
  std::vector<float> logits(vocab), scores(hd::kTopKCapacity);
  std::vector<int32_t> ids(hd::kTopKCapacity);
  for (int step = 0; step < 100; ++step) {
    for (float &l : logits)
      l = dist(rng);
    int32_t count = topKCandidates(logits.data(), vocab, p.topK, p.temperature, scores.data(),
                                   ids.data());
    ASSERT_LE(count, hd::kTopKCapacity);
    SampledLogprobs a, b;
    int32_t ta = full.sample(logits.data(), vocab, TokenHistory{}, &a);
    int32_t tb = fromTopK.sampleTopK(scores.data(), ids.data(), count, vocab, &b);
    ASSERT_EQ(ta, tb) << step;
    EXPECT_NEAR(a.chosen.logprob, b.chosen.logprob, 1e-5);
    ASSERT_EQ(a.top.size(), b.top.size());
    for (size_t i = 0; i < a.top.size(); ++i) {
      EXPECT_EQ(a.top[i].id, b.top[i].id);
      EXPECT_NEAR(a.top[i].logprob, b.top[i].logprob, 1e-5);
    }
  }
}

TEST(SamplerPenalties, TheTopKPathIsOffWhilePenaltiesOrTheMinTokensMaskApply) {
  SamplingParams p;
  p.topK = 5;
  EXPECT_TRUE(makeSampler(p).drawsFromTopK(100));
  p.frequencyPenalty = 0.1f;
  EXPECT_FALSE(makeSampler(p).drawsFromTopK(100));
  p.frequencyPenalty = 0.0f;
  p.presencePenalty = 0.1f;
  EXPECT_FALSE(makeSampler(p).drawsFromTopK(100));
  p.presencePenalty = 0.0f;
  p.minTokens = 3;
  p.stopTokenIds = {2};
  EXPECT_FALSE(makeSampler(p).drawsFromTopK(100, 2));
  EXPECT_TRUE(makeSampler(p).drawsFromTopK(100, 3));
}

TEST(SamplerPenalties, OutOfRangeParametersNameTheField) {
  auto message = [](SamplingParams p) { return Sampler::create(p).message(); };
  SamplingParams p;
  p.frequencyPenalty = 2.5f;
  EXPECT_NE(message(p).find("'frequency_penalty'"), std::string::npos);
  p = {};
  p.presencePenalty = NAN;
  EXPECT_NE(message(p).find("'presence_penalty'"), std::string::npos);
  p = {};
  p.minTokens = -1;
  EXPECT_NE(message(p).find("'min_tokens'"), std::string::npos);
  p = {};
  p.logprobs = 21;
  EXPECT_NE(message(p).find("'logprobs'"), std::string::npos);
  p.logprobs = 20;
  EXPECT_TRUE(Sampler::create(p).isOk());
}

} // namespace
} // namespace llmc::sampling
