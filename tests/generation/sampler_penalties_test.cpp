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

// The penalized scores a sampler draws from, checked by its draws: the
// same seed over `expected` with no penalty must draw the same 300 tokens.
void expectDrawsFrom(const SamplingParams &penalized, const std::vector<double> &expected) {
  SamplingParams plain = penalized;
  plain.repetitionPenalty = 1.0f;
  plain.frequencyPenalty = plain.presencePenalty = 0.0f;
  plain.logprobs = -1;
  Sampler a = makeSampler(penalized), b = makeSampler(plain);
  const std::vector<float> scores(expected.begin(), expected.end());
  int differing = 0;
  for (int i = 0; i < 300; ++i)
    differing += a.sample(kLogits.data(), 4, kHistory) !=
                 b.sample(scores.data(), 4, TokenHistory{kSeen.data(), 4, 4});
  EXPECT_EQ(differing, 0);
}

// Logprobs are the raw log-softmax of the logits, whatever the penalties.
void expectRawLogprobs(const SampledLogprobs &out, size_t top) {
  const std::vector<double> raw(kLogits.begin(), kLogits.end());
  EXPECT_NEAR(out.chosen.logprob, logSoftmax(raw, out.chosen.id), 1e-6);
  ASSERT_EQ(out.top.size(), top);
  const int32_t order[] = {3, 1, 0, 2};
  for (size_t i = 0; i < top; ++i) {
    EXPECT_EQ(out.top[i].id, order[i]);
    EXPECT_NEAR(out.top[i].logprob, logSoftmax(raw, order[i]), 1e-6) << order[i];
  }
}

TEST(SamplerPenalties, FrequencyAndPresenceCountGeneratedTokensOnly) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 5;
  p.frequencyPenalty = 0.5f;
  p.presencePenalty = 0.25f;
  p.logprobs = 4;
  // By hand: token 1: 2 - 0.5*2 - 0.25 = 0.75; token 2: 0.5 - 0.5*1 - 0.25 =
  // -0.25; token 3 is only in the prompt: 3; token 0 never seen: 1.
  expectDrawsFrom(p, {1.0, 0.75, -0.25, 3.0});
  Sampler s = makeSampler(p);
  SampledLogprobs out;
  s.sample(kLogits.data(), 4, kHistory, &out);
  expectRawLogprobs(out, 4);
}

TEST(SamplerPenalties, RepetitionPenaltyThenFrequencyAndPresence) {
  SamplingParams p;
  p.seed = 6;
  p.repetitionPenalty = 2.0f;
  p.frequencyPenalty = 0.5f;
  p.presencePenalty = 0.25f;
  // By hand: repetition over prompt and generated: {1, 1, 0.25, 1.5}; then
  // token 1: 1 - 1 - 0.25 = -0.25, token 2: 0.25 - 0.5 - 0.25 = -0.5.
  const std::vector<double> expected = {1.0, -0.25, -0.5, 1.5};
  expectDrawsFrom(p, expected);
  p.temperature = 0.0f;
  p.logprobs = 0;
  Sampler s = makeSampler(p);
  SampledLogprobs out;
  EXPECT_EQ(s.sample(kLogits.data(), 4, kHistory, &out), 3);
  expectRawLogprobs(out, 0);
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

TEST(SamplerPenalties, LogprobsAreRawWhateverTheCuts) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.topK = 2;
  p.topP = 0.5f;
  p.logprobs = 4;
  p.seed = 2;
  Sampler s = makeSampler(p);
  for (int i = 0; i < 20; ++i) {
    SampledLogprobs out;
    int32_t token = s.sample(kLogits.data(), 4, TokenHistory{}, &out);
    EXPECT_EQ(out.chosen.id, token);
    EXPECT_TRUE(token == 3 || token == 1);
    expectRawLogprobs(out, 4); // every token listed: the cuts do not change logprobs
  }
}

TEST(SamplerPenalties, RawLogprobsSkipNanAndTieInIdOrder) {
  const std::vector<float> logits = {2.0f, NAN, 2.0f, -INFINITY, 1.0f};
  SampledLogprobs out;
  rawLogprobs(logits.data(), 5, 1, 5, out);
  EXPECT_EQ(out.chosen.logprob, -INFINITY); // a NaN logit has probability 0
  ASSERT_EQ(out.top.size(), 3u);            // the two of probability 0 are not listed
  EXPECT_EQ(out.top[0].id, 0);
  EXPECT_EQ(out.top[1].id, 2);
  EXPECT_EQ(out.top[2].id, 4);
  const double total = 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(out.top[0].logprob, 2.0 - std::log(total), 1e-6);
  EXPECT_NEAR(out.top[2].logprob, 1.0 - std::log(total), 1e-6);
}

TEST(SamplerPenalties, TopKCandidatesGiveTheSameTokens) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int32_t vocab = 300;
  SamplingParams p;
  p.temperature = 0.8f;
  p.topK = 20;
  p.topP = 0.9f;
  p.seed = 11;
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
    int32_t ta = full.sample(logits.data(), vocab, TokenHistory{});
    int32_t tb = fromTopK.sampleTopK(scores.data(), ids.data(), count, vocab);
    ASSERT_EQ(ta, tb) << step;
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
  p.logprobs = 0; // raw logprobs need the full row
  EXPECT_FALSE(makeSampler(p).drawsFromTopK(100, 3));
}

TEST(SamplerPenalties, PicksArgmaxOnlyForPlainGreedy) {
  SamplingParams p = greedy();
  EXPECT_TRUE(makeSampler(p).picksArgmax(0));
  p.logprobs = 0;
  EXPECT_FALSE(makeSampler(p).picksArgmax(0));
  p = greedy();
  p.repetitionPenalty = 1.1f;
  EXPECT_FALSE(makeSampler(p).picksArgmax(0));
  p = greedy();
  p.presencePenalty = 0.5f;
  EXPECT_FALSE(makeSampler(p).picksArgmax(0));
  p = greedy();
  p.minTokens = 2;
  p.stopTokenIds = {1};
  EXPECT_FALSE(makeSampler(p).picksArgmax(1));
  EXPECT_TRUE(makeSampler(p).picksArgmax(2));
  p.temperature = 0.7f;
  EXPECT_FALSE(makeSampler(p).picksArgmax(2));
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
