// A synthetic stories260K-shape plan (CPU program, random weights, no
// ../shared), built once per test binary, and helpers that drive a
// serving::Scheduler to the end with the KV cache's free blocks poisoned
// with NaN after every step, so that a read of a slot no live sequence
// wrote shows up in the outputs.
#pragma once

#include "cuda/model_dirs.h"
#include "driver/build.h"
#include "cpu/backend/cpu_backend.h"
#include "engine/engine.h"
#include "serving/scheduler.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>

namespace llmc::test {

// `unfused`: the -O0 plan, whose program ends in a Logits step (no LmHead).
inline std::string syntheticPlan(bool unfused = false) {
  static std::string paths[2];
  std::string &path = paths[unfused ? 1 : 0];
  if (!path.empty())
    return path;
  std::string dir =
      writeModelDir(unfused ? "serving-synthetic-O0" : "serving-synthetic", kStories260kShape);
  BuildOptions options;
  options.input = dir;
  options.output = dir + "/plan.plan";
  options.syntheticSeed = 11;
  options.targets = "cpu";
  if (unfused)
    options.optimizationLevel = 0;
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  path = options.output;
  return path;
}

inline std::unique_ptr<Engine> loadEngine(int64_t kvTokens, bool unfused = false) {
  EngineOptions options;
  options.threads = 1; // a tiny model: one thread beats the pool's sync cost
  options.kvCacheTokens = kvTokens;
  auto engine = Engine::load(syntheticPlan(unfused), options);
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

inline void poisonFreeBlocks(Engine &engine) {
  static_cast<CpuBackend &>(engine.backend()).kvCache().poisonFreeBlocks();
}

// Unique prompts: a random walk over the vocabulary.
inline std::vector<int32_t> randomPrompt(std::mt19937 &rng, int length) {
  std::uniform_int_distribution<int32_t> token(3, 511);
  std::vector<int32_t> p(length);
  for (int32_t &t : p)
    t = token(rng);
  return p;
}

struct Outcome {
  std::vector<int32_t> tokens;
  serving::FinishReason reason = serving::FinishReason::None;
  int64_t cachedPromptTokens = 0;
  std::string error;
};

// Runs the scheduler until it has nothing left. `onEvent` may abort.
inline std::map<serving::RequestId, Outcome>
drain(serving::Scheduler &scheduler,
      const std::function<void(const serving::TokenEvent &)> &onEvent = nullptr,
      int64_t maxSteps = 200000) {
  std::map<serving::RequestId, Outcome> out;
  for (int64_t s = 0; s < maxSteps && scheduler.hasWork(); ++s) {
    poisonFreeBlocks(scheduler.engine());
    for (const serving::TokenEvent &e : scheduler.step()) {
      Outcome &o = out[e.id];
      if (e.token >= 0)
        o.tokens.push_back(e.token);
      if (e.finished) {
        EXPECT_EQ(o.reason, serving::FinishReason::None) << "request " << e.id << " finished twice";
        o.reason = e.reason;
        o.cachedPromptTokens = e.cachedPromptTokens;
        o.error = e.error;
      }
      if (onEvent)
        onEvent(e);
    }
  }
  EXPECT_FALSE(scheduler.hasWork()) << "the scheduler did not finish";
  return out;
}

inline std::unique_ptr<serving::Scheduler> makeScheduler(Engine &engine,
                                                         serving::SchedulerConfig config = {}) {
  auto s = serving::Scheduler::create(engine, config);
  EXPECT_TRUE(s.isOk()) << s.message();
  return s.isOk() ? std::move(*s) : nullptr;
}

// The request alone on a fresh scheduler (prefix caching off).
inline Outcome solo(Engine &engine, const serving::RequestParams &params) {
  serving::SchedulerConfig config;
  config.prefixCaching = false;
  auto scheduler = makeScheduler(engine, config);
  auto id = scheduler->add(params);
  EXPECT_TRUE(id.isOk()) << id.message();
  auto out = drain(*scheduler);
  return out[*id];
}

inline serving::RequestParams greedy(std::vector<int32_t> prompt, int64_t maxTokens) {
  serving::RequestParams p;
  p.prompt = std::move(prompt);
  p.maxTokens = maxTokens;
  p.ignoreEos = true;
  p.sampling.temperature = 0.0f;
  return p;
}

inline serving::RequestParams seeded(std::vector<int32_t> prompt, int64_t maxTokens, uint64_t seed,
                                     int32_t topK = 0) {
  serving::RequestParams p = greedy(std::move(prompt), maxTokens);
  p.sampling.temperature = 0.9f;
  p.sampling.topK = topK;
  p.sampling.seed = seed;
  return p;
}

} // namespace llmc::test
