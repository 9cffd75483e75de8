// generateBatch on a tiny synthetic plan: stop ids and stop strings, finish
// reasons, -n 0 / -n -1, the context's end, the top-k path against the
// full-logits path, min_tokens, logprobs against the logits, KV reuse.
#include "engine/generate.h"
#include "synthetic_plan.h"

#include <gtest/gtest.h>

#include <cmath>

namespace llmc {
namespace {

constexpr int kContext = 24;

class Generate : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    plan_ = new std::string(
        test::buildPlan(test::writeTinyModelDir("generate", test::tinyLlamaConfig(kContext))));
  }
  static void TearDownTestSuite() { delete plan_; }

  void SetUp() override {
    engine_ = test::loadEngine(*plan_);
    ASSERT_NE(engine_, nullptr);
    prompt_ = engine_->tokenizer().encode("Once upon a time", true);
    ASSERT_GT(prompt_.size(), 2u);
  }

  GenerateResult run(const GenerateOptions &options, GenerateTimings *timings = nullptr,
                     std::string *streamed = nullptr) {
    auto results = generateBatch(*engine_, {prompt_}, options, timings,
                                 [&](size_t, const std::string &piece) {
                                   if (streamed)
                                     *streamed += piece;
                                 });
    EXPECT_TRUE(results.isOk()) << results.message();
    return results.isOk() ? results->front() : GenerateResult{};
  }

  static GenerateOptions greedy(int64_t n) {
    GenerateOptions options;
    options.maxNewTokens = n;
    options.sampling.temperature = 0.0f;
    options.ignoreEos = true; // synthetic weights may draw EOS any time
    return options;
  }

  static std::string *plan_;
  std::unique_ptr<Engine> engine_;
  std::vector<int32_t> prompt_;
};
std::string *Generate::plan_ = nullptr;

TEST_F(Generate, LengthAndTheStreamedTextIsTheResultText) {
  std::string streamed;
  GenerateResult r = run(greedy(6), nullptr, &streamed);
  EXPECT_EQ(r.ids.size(), 6u);
  EXPECT_EQ(r.finishReason, "length");
  EXPECT_FALSE(r.contextFull);
  EXPECT_EQ(streamed, r.text);
  std::vector<int32_t> all = prompt_;
  all.insert(all.end(), r.ids.begin(), r.ids.end());
  std::string whole = engine_->tokenizer().decode(all, true);
  std::string before = engine_->tokenizer().decode(prompt_, true);
  ASSERT_EQ(whole.compare(0, before.size(), before), 0);
  EXPECT_EQ(r.text, whole.substr(before.size()));
}

TEST_F(Generate, ZeroTokensRunsNothing) {
  GenerateTimings timings;
  GenerateResult r = run(greedy(0), &timings);
  EXPECT_TRUE(r.ids.empty());
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.finishReason, "length");
  EXPECT_EQ(timings.prefillTokens, 0);
}

TEST_F(Generate, MinusOneRunsToTheEndOfTheContext) {
  GenerateResult r = run(greedy(-1));
  // The KV cache holds kContext tokens; the token sampled at the last
  // position is kept.
  EXPECT_EQ(static_cast<int64_t>(prompt_.size() + r.ids.size()), kContext + 1);
  EXPECT_EQ(r.finishReason, "length");
  EXPECT_TRUE(r.contextFull);
  // A budget that ends exactly there is the budget, not the context.
  GenerateResult exact = run(greedy(static_cast<int64_t>(r.ids.size())));
  EXPECT_EQ(exact.ids, r.ids);
  EXPECT_FALSE(exact.contextFull);
}

TEST_F(Generate, BadOptionsFailBeforeAnyStep) {
  GenerateOptions options = greedy(-2);
  EXPECT_NE(generateBatch(*engine_, {prompt_}, options).message().find("max_tokens"),
            std::string::npos);
  options = greedy(4);
  options.sampling.presencePenalty = 3.0f;
  EXPECT_NE(generateBatch(*engine_, {prompt_}, options).message().find("presence_penalty"),
            std::string::npos);
  std::vector<int32_t> tooLong(kContext + 1, 5);
  auto result = generateBatch(*engine_, {tooLong}, greedy(1));
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.message().find("max_seq_len"), std::string::npos) << result.message();
  EXPECT_FALSE(generateBatch(*engine_, {{}}, greedy(1)).isOk());
}

TEST_F(Generate, AStopTokenEndsTheSequenceAndIsNotIncluded) {
  GenerateResult free = run(greedy(8));
  ASSERT_EQ(free.ids.size(), 8u);
  GenerateOptions options = greedy(8);
  options.stopTokens = {free.ids[3]};
  GenerateResult r = run(options);
  size_t first = std::find(free.ids.begin(), free.ids.end(), free.ids[3]) - free.ids.begin();
  EXPECT_EQ(r.ids, std::vector<int32_t>(free.ids.begin(), free.ids.begin() + first));
  EXPECT_EQ(r.finishReason, "stop");
  EXPECT_TRUE(r.stopString.empty());
}

TEST_F(Generate, MinTokensKeepsStopTokensAway) {
  GenerateResult free = run(greedy(8));
  GenerateOptions options = greedy(8);
  options.stopTokens = {free.ids[0]};
  options.sampling.minTokens = 3;
  GenerateResult r = run(options);
  ASSERT_GE(r.ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NE(r.ids[i], free.ids[0]) << i;
}

TEST_F(Generate, AStopStringCutsTheTextAndIsNotShown) {
  GenerateResult free = run(greedy(12));
  ASSERT_GE(free.text.size(), 6u);
  // A stop string from the middle of the text (at a character boundary).
  size_t start = 2;
  while ((static_cast<uint8_t>(free.text[start]) & 0xC0) == 0x80)
    ++start;
  size_t end = start + 1;
  while (end < free.text.size() && (static_cast<uint8_t>(free.text[end]) & 0xC0) == 0x80)
    ++end;
  std::string stop = free.text.substr(start, end - start + 1);
  GenerateOptions options = greedy(12);
  options.stopStrings = {"never appears \x01", stop};
  std::string streamed;
  GenerateResult r = run(options, nullptr, &streamed);
  EXPECT_EQ(r.finishReason, "stop");
  EXPECT_EQ(r.stopString, stop);
  EXPECT_EQ(r.text, free.text.substr(0, free.text.find(stop)));
  EXPECT_EQ(streamed, r.text);
  EXPECT_LE(r.ids.size(), free.ids.size());
}

TEST_F(Generate, TopKPathDrawsWhatTheFullLogitsDraw) {
  GenerateOptions options;
  options.maxNewTokens = 10;
  options.ignoreEos = true;
  options.sampling.temperature = 0.9f;
  options.sampling.topK = 8;
  options.sampling.seed = 1234;
  options.sampling.logprobs = 2;
  GenerateResult fast = run(options);
  options.keepAllLogits = true; // forces Engine::step and Sampler::sample
  GenerateResult full = run(options);
  EXPECT_EQ(fast.ids, full.ids);
  ASSERT_EQ(fast.logprobs.size(), full.logprobs.size());
  for (size_t i = 0; i < fast.logprobs.size(); ++i)
    EXPECT_NEAR(fast.logprobs[i].chosen.logprob, full.logprobs[i].chosen.logprob, 1e-4);
  options.keepAllLogits = false;
  options.sampling.seed = 99;
  EXPECT_NE(run(options).ids, fast.ids); // the seed matters
}

TEST_F(Generate, LogprobsAreTheLogSoftmaxOfTheLogits) {
  GenerateOptions options = greedy(5);
  options.sampling.logprobs = 3;
  options.keepAllLogits = true;
  GenerateResult r = run(options);
  ASSERT_EQ(r.logprobs.size(), r.ids.size());
  const int64_t vocab = engine_->vocabSize();
  for (size_t i = 0; i < r.ids.size(); ++i) {
    const float *row = r.logits.data() + (prompt_.size() - 1 + i) * vocab;
    double total = 0, best = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v)
      best = std::max<double>(best, row[v]);
    for (int64_t v = 0; v < vocab; ++v)
      total += std::exp(row[v] - best);
    const sampling::SampledLogprobs &lp = r.logprobs[i];
    EXPECT_EQ(lp.chosen.id, r.ids[i]);
    EXPECT_NEAR(lp.chosen.logprob, row[r.ids[i]] - best - std::log(total), 1e-4);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].id, r.ids[i]); // greedy: the most likely
    EXPECT_GE(lp.top[0].logprob, lp.top[1].logprob);
    EXPECT_GE(lp.top[1].logprob, lp.top[2].logprob);
  }
}

TEST_F(Generate, ACachedPrefixContinuesAsAFreshPrefill) {
  GenerateResult fresh = run(greedy(5));
  SequenceId sequence = engine_->addSequence();
  // Feed the prompt minus its last token, then generate from the cache.
  std::vector<int32_t> head(prompt_.begin(), prompt_.end() - 1);
  ASSERT_TRUE(engine_->step({{sequence, head}}, false).isOk());
  auto reused = generateOnSequences(*engine_, {{sequence, prompt_, static_cast<int64_t>(head.size())}},
                                    greedy(5));
  ASSERT_TRUE(reused.isOk()) << reused.message();
  EXPECT_EQ(reused->front().ids, fresh.ids);
  EXPECT_EQ(reused->front().text, fresh.text);
  // prompt + 4 generated ids fed; the 5th never is.
  EXPECT_EQ(engine_->sequenceLength(sequence), static_cast<int64_t>(prompt_.size()) + 4);
  auto wrong = generateOnSequences(*engine_, {{sequence, prompt_, 1}}, greedy(1));
  EXPECT_FALSE(wrong.isOk());
  EXPECT_TRUE(engine_->releaseSequence(sequence).isOk());
}

TEST_F(Generate, BatchedSequencesFinishOnTheirOwn) {
  std::vector<int32_t> other = engine_->tokenizer().encode("Hello", true);
  GenerateOptions options = greedy(4);
  auto results = generateBatch(*engine_, {prompt_, other}, options);
  ASSERT_TRUE(results.isOk()) << results.message();
  EXPECT_EQ((*results)[0].ids, run(options).ids);
  EXPECT_EQ((*results)[1].ids.size(), 4u);
}

} // namespace
} // namespace llmc
