// serving::Scheduler: token budget, chunked prefill, admission order,
// preemption by recompute, prefix cache hits and misses, eviction,
// cancellation; and that batching, preemption and prefix caching never
// change a request's output (the same tokens as the request run alone).
#include "serving_fixture.h"

#include <cmath>

namespace llmc {
namespace {

using serving::FinishReason;
using serving::RequestId;
using serving::RequestParams;
using serving::SchedulerConfig;

TEST(Scheduler, TokenBudgetChunksPrefillsAndNeverStallsDecodes) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  SchedulerConfig config;
  config.maxNumBatchedTokens = 16;
  auto s = test::makeScheduler(*engine, config);
  std::mt19937 rng(1);
  RequestId a = *s->add(test::greedy(test::randomPrompt(rng, 10), 40));
  RequestId b = *s->add(test::greedy(test::randomPrompt(rng, 50), 5));
  auto events = s->step(); // a's prompt (10) + 6 of b's
  EXPECT_EQ(s->lastStepTokens(), 16);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, a);
  EXPECT_EQ(s->runningIds(), (std::vector<RequestId>{a, b}));
  // While b's prompt is chunked in, a decodes one token every step.
  for (int step = 0; step < 2; ++step) {
    events = s->step();
    EXPECT_EQ(s->lastStepTokens(), 16);
    ASSERT_EQ(events.size(), 1u) << "step " << step;
    EXPECT_EQ(events[0].id, a);
  }
  events = s->step(); // a's decode + b's last 14 prompt tokens: b's first token
  EXPECT_EQ(s->lastStepTokens(), 15);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, a);
  EXPECT_EQ(events[1].id, b);
  auto rest = test::drain(*s);
  EXPECT_EQ(rest[b].reason, FinishReason::Length);
  EXPECT_EQ(engine->availableBlocks(), engine->usableBlocks());
}

TEST(Scheduler, SequenceCapAdmitsInArrivalOrder) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  SchedulerConfig config;
  config.maxNumSeqs = 2;
  auto s = test::makeScheduler(*engine, config);
  std::mt19937 rng(2);
  std::vector<RequestId> ids;
  for (int64_t n : {3, 6, 4, 4})
    ids.push_back(*s->add(test::greedy(test::randomPrompt(rng, 5), n)));
  s->step();
  EXPECT_EQ(s->runningIds(), (std::vector<RequestId>{ids[0], ids[1]}));
  EXPECT_EQ(s->waitingIds(), (std::vector<RequestId>{ids[2], ids[3]}));
  std::vector<RequestId> finishOrder;
  std::vector<RequestId> admittedSeen;
  for (int i = 0; i < 100 && s->hasWork(); ++i) {
    for (const auto &e : s->step())
      if (e.finished)
        finishOrder.push_back(e.id);
    EXPECT_LE(s->runningIds().size(), 2u);
    if (s->runningIds().size() == 2 && s->runningIds()[1] == ids[2])
      EXPECT_EQ(s->waitingIds(), (std::vector<RequestId>{ids[3]}));
  }
  EXPECT_EQ(finishOrder.front(), ids[0]);
  EXPECT_EQ(finishOrder.size(), 4u);
  EXPECT_EQ(s->stats().finished, 4);
}

TEST(Scheduler, RejectsWhatCanNeverBeServed) {
  auto engine = test::loadEngine(16 * 8); // 128 tokens of KV
  ASSERT_NE(engine, nullptr);
  auto s = test::makeScheduler(*engine);
  EXPECT_NE(s->add(test::greedy({}, 4)).message().find("prompt is empty"), std::string::npos);
  EXPECT_NE(s->add(test::greedy({1, 512}, 4)).message().find("prompt token 1 is 512"),
            std::string::npos);
  EXPECT_NE(s->add(test::greedy({1, 2}, 0)).message().find("max_tokens is 0"), std::string::npos);
  EXPECT_NE(s->add(test::greedy(std::vector<int32_t>(500, 3), 20)).message().find("context of 512"),
            std::string::npos);
  auto tooBig = s->add(test::greedy(std::vector<int32_t>(100, 3), 40));
  ASSERT_FALSE(tooBig.isOk());
  EXPECT_NE(tooBig.message().find("more KV cache than the whole pool"), std::string::npos)
      << tooBig.message();
  RequestParams bad = test::greedy({1, 2}, 4);
  bad.sampling.topP = 0.0f;
  EXPECT_NE(s->add(bad).message().find("top_p"), std::string::npos);
  bad = test::greedy({1, 2}, 4);
  bad.sampling.logprobs = 21;
  EXPECT_NE(s->add(bad).message().find("logprobs"), std::string::npos);
  // Exactly the pool: accepted, and served.
  auto fits = s->add(test::greedy(std::vector<int32_t>(100, 3), 29));
  ASSERT_TRUE(fits.isOk()) << fits.message();
  auto out = test::drain(*s);
  EXPECT_EQ(out[*fits].tokens.size(), 29u);
}

TEST(Scheduler, StopConditionsAtTheTokenLevel) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(4);
  std::vector<int32_t> prompt = test::randomPrompt(rng, 8);
  test::Outcome free = test::solo(*engine, test::greedy(prompt, 12));
  ASSERT_EQ(free.tokens.size(), 12u);
  EXPECT_EQ(free.reason, FinishReason::Length);
  // A stop id ends the request before it is emitted.
  RequestParams stop = test::greedy(prompt, 12);
  stop.stopTokenIds = {free.tokens[3]};
  size_t firstAt =
      std::find(free.tokens.begin(), free.tokens.end(), free.tokens[3]) - free.tokens.begin();
  test::Outcome stopped = test::solo(*engine, stop);
  EXPECT_EQ(stopped.reason, FinishReason::Stop);
  EXPECT_EQ(stopped.tokens,
            std::vector<int32_t>(free.tokens.begin(), free.tokens.begin() + firstAt));
  // Before min_tokens the stop id is masked out, not merely ignored.
  stop.sampling.minTokens = static_cast<int64_t>(firstAt) + 1;
  test::Outcome later = test::solo(*engine, stop);
  ASSERT_GE(later.tokens.size(), firstAt + 1);
  EXPECT_NE(later.tokens[firstAt], free.tokens[3]);
  for (size_t i = 0; i < firstAt + 1 && i < later.tokens.size(); ++i)
    EXPECT_NE(later.tokens[i], free.tokens[3]);
}

TEST(Scheduler, LogprobsAreTheRawLogSoftmax) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  auto s = test::makeScheduler(*engine);
  RequestParams p = test::greedy({1, 9, 30}, 3);
  p.sampling.logprobs = 5;
  RequestId id = *s->add(p);
  std::vector<serving::TokenEvent> events;
  test::drain(*s, [&](const serving::TokenEvent &e) { events.push_back(e); });
  ASSERT_EQ(events.size(), 3u);
  for (const auto &e : events) {
    EXPECT_EQ(e.id, id);
    ASSERT_EQ(e.topLogprobs.size(), 5u);
    EXPECT_EQ(e.topLogprobs[0].first, e.token); // greedy: the most likely
    EXPECT_EQ(e.topLogprobs[0].second, e.logprob);
    EXPECT_LT(e.logprob, 0.0f);
    for (size_t i = 1; i < 5; ++i)
      EXPECT_LE(e.topLogprobs[i].second, e.topLogprobs[i - 1].second);
  }
  EXPECT_EQ(test::solo(*engine, test::greedy({1, 9, 30}, 3)).tokens.size(), 3u);
}

// Logprobs are the raw model distribution's whatever the sampling: the
// first token of a sampled, penalized request sees the same distribution
// as a greedy one over the same prompt, so its top list is the same.
TEST(Scheduler, LogprobsIgnoreTemperaturePenaltiesAndCuts) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  auto s = test::makeScheduler(*engine);
  RequestParams plain = test::greedy({1, 9, 30, 31}, 1);
  plain.sampling.logprobs = 4;
  RequestParams sampled = test::seeded({1, 9, 30, 31}, 1, 5, 3);
  sampled.sampling.temperature = 0.5f;
  sampled.sampling.topP = 0.8f;
  sampled.sampling.presencePenalty = 1.0f;
  sampled.sampling.repetitionPenalty = 1.3f;
  sampled.sampling.logprobs = 4;
  RequestId a = *s->add(plain), b = *s->add(sampled);
  std::map<RequestId, serving::TokenEvent> first;
  test::drain(*s, [&](const serving::TokenEvent &e) {
    if (e.token >= 0)
      first.emplace(e.id, e);
  });
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(first[a].topLogprobs.size(), 4u);
  ASSERT_EQ(first[b].topLogprobs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(first[a].topLogprobs[i].first, first[b].topLogprobs[i].first);
    EXPECT_NEAR(first[a].topLogprobs[i].second, first[b].topLogprobs[i].second, 1e-5);
  }
  // The sampled token's logprob is its raw one: one of the top 3 (top_k 3).
  bool listed = false;
  for (const auto &[id, logprob] : first[b].topLogprobs)
    if (id == first[b].token) {
      listed = true;
      EXPECT_NEAR(first[b].logprob, logprob, 1e-5);
    }
  EXPECT_TRUE(listed);
}

// Prompt logprobs (echo with logprobs): one entry per prompt token after the
// first, the same whether the prompt is prefilled in one step or in chunks,
// and never served from the prefix cache.
TEST(Scheduler, PromptLogprobsCoverThePromptThroughChunksAndTheCache) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(4);
  const std::vector<int32_t> prompt = test::randomPrompt(rng, 45);
  auto run = [&](int64_t budget, bool warmCache) {
    SchedulerConfig config;
    config.maxNumBatchedTokens = budget;
    auto s = test::makeScheduler(*engine, config);
    if (warmCache) {
      EXPECT_TRUE(s->add(test::greedy(prompt, 1)).isOk());
      test::drain(*s);
    }
    RequestParams p = test::greedy(prompt, 3);
    p.promptLogprobs = 2;
    EXPECT_TRUE(s->add(p).isOk());
    serving::TokenEvent withPrompt;
    int carriers = 0;
    auto out = test::drain(*s, [&](const serving::TokenEvent &e) {
      if (!e.promptLogprobs.empty()) {
        withPrompt = e;
        ++carriers;
      }
    });
    EXPECT_EQ(carriers, 1);
    EXPECT_EQ(out.begin()->second.cachedPromptTokens, 0);
    return withPrompt;
  };
  serving::TokenEvent whole = run(2048, false), chunked = run(7, true);
  ASSERT_EQ(whole.promptLogprobs.size(), prompt.size() - 1);
  ASSERT_EQ(chunked.promptLogprobs.size(), prompt.size() - 1);
  EXPECT_GE(whole.token, 0); // with the first generated token
  for (size_t i = 0; i < whole.promptLogprobs.size(); ++i) {
    const sampling::SampledLogprobs &a = whole.promptLogprobs[i], &b = chunked.promptLogprobs[i];
    EXPECT_EQ(a.chosen.id, prompt[i + 1]);
    EXPECT_LE(a.chosen.logprob, 0.0f);
    EXPECT_NEAR(a.chosen.logprob, b.chosen.logprob, 1e-4) << i;
    ASSERT_EQ(a.top.size(), 2u);
    ASSERT_EQ(b.top.size(), 2u);
    EXPECT_EQ(a.top[0].id, b.top[0].id);
    EXPECT_GE(a.top[0].logprob, a.chosen.logprob - 1e-6f);
  }
  RequestParams bad = test::greedy(prompt, 3);
  bad.promptLogprobs = 21;
  EXPECT_NE(test::makeScheduler(*engine)->add(bad).message().find("prompt_logprobs"),
            std::string::npos);
}

// Greedy with OpenAI penalties picks argmax(logit - presence * (count > 0)
// - frequency * count) over the generated tokens: checked against the raw
// top-20 logprobs (their differences are the logits' differences).
TEST(Scheduler, PresenceAndFrequencyPenaltiesShiftTheGreedyChoice) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  auto s = test::makeScheduler(*engine);
  RequestParams p = test::greedy({1, 40, 41}, 40);
  p.sampling.presencePenalty = 1.5f;
  p.sampling.frequencyPenalty = 0.5f;
  p.sampling.logprobs = 20;
  ASSERT_TRUE(s->add(p));
  std::map<int32_t, int> counts;
  int changed = 0, events = 0, exact = 0;
  test::drain(*s, [&](const serving::TokenEvent &e) {
    ASSERT_GE(e.token, 0);
    ++events;
    auto penalized = [&](int32_t id, float logprob) {
      auto it = counts.find(id);
      int n = it == counts.end() ? 0 : it->second;
      return logprob - (n > 0 ? p.sampling.presencePenalty : 0.0f) - p.sampling.frequencyPenalty * n;
    };
    const float chosen = penalized(e.token, e.logprob);
    int32_t bestId = -1;
    float best = -INFINITY;
    for (const auto &[id, logprob] : e.topLogprobs) {
      EXPECT_GE(chosen, penalized(id, logprob) - 1e-4f) << "token " << id;
      if (penalized(id, logprob) > best) {
        best = penalized(id, logprob);
        bestId = id;
      }
    }
    // Tokens outside the top 20 score at most the 20th raw logprob.
    if (best > e.topLogprobs.back().second + 1e-4f) {
      EXPECT_EQ(e.token, bestId);
      ++exact;
    }
    changed += e.token != e.topLogprobs[0].first;
    ++counts[e.token];
  });
  EXPECT_EQ(events, 40);
  EXPECT_GT(changed, 0) << "the penalties never changed the choice";
  EXPECT_GT(exact, 20);
}

// Many requests, a pool that holds a few: preemption by recompute, and
// every output equal to its solo run (greedy, seeded, seeded top-k).
TEST(Scheduler, PreemptionByRecomputeKeepsEveryOutput) {
  auto engine = test::loadEngine(16 * 12); // 12 blocks
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(5);
  std::vector<RequestParams> requests;
  for (int i = 0; i < 9; ++i) {
    std::vector<int32_t> prompt = test::randomPrompt(rng, 10 + 3 * i);
    if (i % 3 == 0)
      requests.push_back(test::greedy(prompt, 40));
    else
      requests.push_back(test::seeded(prompt, 40, 100 + i, i % 3 == 2 ? 8 : 0));
  }
  std::vector<test::Outcome> expected;
  for (const auto &r : requests)
    expected.push_back(test::solo(*engine, r));
  for (bool caching : {false, true}) {
    SchedulerConfig config;
    config.prefixCaching = caching;
    auto s = test::makeScheduler(*engine, config);
    std::vector<RequestId> ids;
    for (const auto &r : requests)
      ids.push_back(*s->add(r));
    auto out = test::drain(*s);
    EXPECT_GT(s->stats().preemptions, 0) << "the pool was meant to be too small";
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(out[ids[i]].tokens, expected[i].tokens)
          << "request " << i << " caching " << caching;
      EXPECT_EQ(out[ids[i]].reason, FinishReason::Length);
    }
    EXPECT_EQ(engine->availableBlocks(), engine->usableBlocks());
    EXPECT_EQ(engine->backend().blockPool().numInUse(), 0);
  }
}

TEST(Scheduler, PrefixCacheHitMissAndSameOutputs) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(6);
  std::vector<int32_t> shared = test::randomPrompt(rng, 40);
  std::vector<RequestParams> requests;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt = shared;
    std::vector<int32_t> tail = test::randomPrompt(rng, 5 + i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    requests.push_back(i % 2 ? test::seeded(prompt, 12, 7 + i, i % 4 == 1 ? 5 : 0)
                             : test::greedy(prompt, 12));
  }
  std::vector<int32_t> other = test::randomPrompt(rng, 45);
  requests.push_back(test::greedy(other, 12));

  std::map<bool, std::vector<test::Outcome>> results;
  for (bool caching : {false, true}) {
    auto s = test::makeScheduler(*engine, {2048, 256, caching});
    // The first request alone, then the rest together.
    RequestId first = *s->add(requests[0]);
    auto out = test::drain(*s);
    results[caching].push_back(out[first]);
    EXPECT_EQ(out[first].cachedPromptTokens, 0);
    std::vector<RequestId> ids;
    for (size_t i = 1; i < requests.size(); ++i)
      ids.push_back(*s->add(requests[i]));
    out = test::drain(*s);
    for (size_t i = 0; i < ids.size(); ++i) {
      results[caching].push_back(out[ids[i]]);
      const bool sharesPrefix = i + 1 < requests.size() - 1;
      EXPECT_EQ(out[ids[i]].cachedPromptTokens, caching && sharesPrefix ? 32 : 0) << i;
    }
    serving::SchedulerStats st = s->stats();
    if (caching) {
      EXPECT_EQ(st.prefixHits, 5 * 32);
      EXPECT_GT(st.prefixQueries, st.prefixHits);
    } else {
      EXPECT_EQ(st.prefixQueries, 0);
    }
    EXPECT_EQ(engine->backend().blockPool().numInUse(), 0);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(results[true][i].tokens, results[false][i].tokens) << "request " << i;
    EXPECT_EQ(results[true][i].tokens.size(), 12u);
  }
}

// Requests arriving together with one 64-token prefix: the first computes
// it, the others wait one step and attach it (not 4 computations of it in
// the first step); an unrelated request behind them is not held up; the
// outputs are those of solo runs.
TEST(Scheduler, RequestsSharingAPrefixInOneStepComputeItOnce) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(12);
  const std::vector<int32_t> shared = test::randomPrompt(rng, 64);
  std::vector<RequestParams> requests;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt = shared, tail = test::randomPrompt(rng, 8);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    requests.push_back(i % 2 ? test::seeded(prompt, 6, 3 + i) : test::greedy(prompt, 6));
  }
  requests.insert(requests.begin() + 2, test::greedy(test::randomPrompt(rng, 30), 6));
  for (bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching" : "no prefix caching");
    auto s = test::makeScheduler(*engine, {2048, 256, caching});
    std::vector<RequestId> ids;
    for (const RequestParams &p : requests)
      ids.push_back(*s->add(p));
    test::poisonFreeBlocks(*engine);
    std::map<RequestId, std::vector<int32_t>> firstStep;
    for (const serving::TokenEvent &e : s->step())
      if (e.token >= 0)
        firstStep[e.id].push_back(e.token);
    // Caching: the first sharer (72) and the unrelated one (30); else all.
    EXPECT_EQ(s->lastStepTokens(), caching ? 72 + 30 : 4 * 72 + 30);
    EXPECT_EQ(s->runningIds().size(), caching ? 2u : 5u);
    auto out = test::drain(*s);
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool attaches = caching && i != 0 && i != 2;
      EXPECT_EQ(out[ids[i]].cachedPromptTokens, attaches ? 64 : 0) << i;
      std::vector<int32_t> tokens = firstStep[ids[i]];
      tokens.insert(tokens.end(), out[ids[i]].tokens.begin(), out[ids[i]].tokens.end());
      EXPECT_EQ(tokens, test::solo(*engine, requests[i]).tokens) << i;
    }
  }
}

TEST(Scheduler, CachedPrefixesAreEvictedOnlyWhenFreeBlocksRunOut) {
  auto engine = test::loadEngine(16 * 10);
  ASSERT_NE(engine, nullptr);
  auto s = test::makeScheduler(*engine);
  std::mt19937 rng(7);
  std::vector<int32_t> a = test::randomPrompt(rng, 33), b = test::randomPrompt(rng, 33);
  test::drain(*s);
  RequestId first = *s->add(test::greedy(a, 2)); // leaves 2 cached blocks of a
  test::drain(*s);
  RequestId second = *s->add(test::greedy(b, 2)); // 2 of b; 6 blocks still free
  test::drain(*s);
  EXPECT_EQ(engine->backend().blockPool().numEvictable(), 4);
  RequestId again = *s->add(test::greedy(a, 2));
  auto out = test::drain(*s);
  EXPECT_EQ(out[again].cachedPromptTokens, 32); // kept
  // A request needing every block evicts all (b's first: released longest ago).
  RequestId big = *s->add(test::greedy(test::randomPrompt(rng, 150), 8));
  test::drain(*s);
  EXPECT_EQ(engine->backend().blockPool().numCached(), 9); // only big's full blocks
  RequestId lost = *s->add(test::greedy(b, 2));
  out = test::drain(*s);
  EXPECT_EQ(out[lost].cachedPromptTokens, 0);
  (void)first;
  (void)second;
  (void)big;
}

TEST(Scheduler, AbortTakesEffectAtTheNextStepAndFreesBlocks) {
  auto engine = test::loadEngine(4096);
  ASSERT_NE(engine, nullptr);
  auto s = test::makeScheduler(*engine);
  std::mt19937 rng(8);
  RequestId a = *s->add(test::greedy(test::randomPrompt(rng, 20), 50));
  RequestId b = *s->add(test::greedy(test::randomPrompt(rng, 20), 50));
  RequestId c = *s->add(test::greedy(test::randomPrompt(rng, 20), 50));
  s->step();
  s->step();
  const int64_t inUse = engine->backend().blockPool().numInUse();
  s->abort(b);
  s->abort(12345); // unknown: ignored
  auto events = s->step();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].id, b);
  EXPECT_TRUE(events[0].finished);
  EXPECT_EQ(events[0].reason, FinishReason::Abort);
  EXPECT_EQ(events[0].token, -1);
  EXPECT_LT(engine->backend().blockPool().numInUse(), inUse);
  EXPECT_EQ(s->runningIds(), (std::vector<RequestId>{a, c}));
  // A waiting request can be aborted too.
  RequestId d = *s->add(test::greedy({1, 2, 3}, 5));
  s->abort(d);
  events = s->step();
  EXPECT_EQ(events[0].id, d);
  EXPECT_EQ(events[0].reason, FinishReason::Abort);
  test::drain(*s);
  EXPECT_EQ(s->stats().aborted, 2);
  EXPECT_EQ(engine->backend().blockPool().numInUse(), 0);
}

// After TensorRT-LLM CVE-2026-24205 (cancellation mid-prefill leaked KV
// blocks across requests): 10 rounds of 16 unique prompts, a quarter
// aborted after a few tokens (or mid-prefill), every survivor equal to its
// solo run, the pool fully free at the end, free blocks poisoned with NaN.
TEST(Scheduler, CancellationRegressionCve202624205) {
  auto engine = test::loadEngine(16 * 48);
  ASSERT_NE(engine, nullptr);
  SchedulerConfig config;
  config.maxNumBatchedTokens = 64; // long prompts take several chunks
  auto s = test::makeScheduler(*engine, config);
  std::mt19937 rng(9);
  for (int round = 0; round < 10; ++round) {
    std::vector<RequestParams> requests;
    std::vector<RequestId> ids;
    std::map<RequestId, int> abortAfter; // tokens before the abort; 0 = mid-prefill
    for (int i = 0; i < 16; ++i) {
      std::vector<int32_t> prompt = test::randomPrompt(rng, 20 + (i * 13) % 90);
      requests.push_back(i % 2 ? test::seeded(prompt, 16, round * 100 + i)
                               : test::greedy(prompt, 16));
      ids.push_back(*s->add(requests.back()));
      if (i % 4 == 3)
        abortAfter[ids.back()] = (round + i) % 3 == 0 ? 0 : 1 + (i % 3);
    }
    for (auto &[id, after] : abortAfter)
      if (after == 0)
        s->abort(id); // before its prefill completes
    std::map<RequestId, int> seen;
    auto out = test::drain(*s, [&](const serving::TokenEvent &e) {
      if (e.token >= 0 && abortAfter.count(e.id) && ++seen[e.id] == abortAfter[e.id])
        s->abort(e.id);
    });
    for (size_t i = 0; i < ids.size(); ++i) {
      if (abortAfter.count(ids[i])) {
        EXPECT_EQ(out[ids[i]].reason, FinishReason::Abort) << "round " << round << " request " << i;
        continue;
      }
      test::Outcome alone = test::solo(*engine, requests[i]);
      EXPECT_EQ(out[ids[i]].tokens, alone.tokens) << "round " << round << " request " << i;
      EXPECT_EQ(out[ids[i]].reason, FinishReason::Length);
    }
    ASSERT_EQ(engine->backend().blockPool().numInUse(), 0) << "round " << round;
    ASSERT_EQ(engine->availableBlocks(), engine->usableBlocks());
  }
}

// A KV pool of 1024 tokens serving 48 concurrent 200-token requests: all
// complete, each with the tokens of its solo run.
TEST(Scheduler, SmallPoolServesManyLongRequests) {
  auto engine = test::loadEngine(1024);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(10);
  std::vector<RequestParams> requests;
  for (int i = 0; i < 48; ++i)
    requests.push_back(test::greedy(test::randomPrompt(rng, 8 + i % 5), 200));
  auto s = test::makeScheduler(*engine);
  std::vector<RequestId> ids;
  for (const auto &r : requests)
    ids.push_back(*s->add(r));
  auto out = test::drain(*s);
  EXPECT_GT(s->stats().preemptions, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(out[ids[i]].tokens.size(), 200u) << "request " << i;
    EXPECT_EQ(out[ids[i]].reason, FinishReason::Length);
  }
  for (size_t i = 0; i < ids.size(); i += 6) // a sample of solo runs keeps it fast
    EXPECT_EQ(out[ids[i]].tokens, test::solo(*engine, requests[i]).tokens) << "request " << i;
  EXPECT_EQ(engine->backend().blockPool().numInUse(), 0);
  EXPECT_EQ(s->stats().generationTokens, 48 * 200);
}

} // namespace
} // namespace llmc
