// CpuExecutor's hooks (cpu/backend/cpu_executor.h, docs/runtime.md
// "Executor hooks") on the tiny plans of plan_fixture.h, loaded the way the
// compiler's calibration loads its in-memory plans (Plan::fromMetadata,
// LoadedWeights::fromViews): the observer sees exactly the rows a step
// reads, a step range from saved buffers reproduces the whole run bit for
// bit, and a weight override changes exactly that linear.
#include "cpu/backend/cpu_executor.h"
#include "cpu/matmul.h"
#include "plan_fixture.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <utility>

namespace llmc {
namespace {

// A plan held in memory with its weights in `tiny.storage`, ready to run T
// rows of one sequence.
struct Loaded {
  test::TinyPlan tiny;
  std::unique_ptr<Plan> plan;
  std::unique_ptr<LoadedWeights> weights;
  std::unique_ptr<CpuExecutor> exec;
  std::unique_ptr<kv::KvCache> cache;
  ThreadPool pool{2};
  std::vector<int32_t> tokens, positions, blocks;
  StepInput input;
  StepOutput out;

  explicit Loaded(test::TinyPlan t, int64_t rows) : tiny(std::move(t)) {
    for (auto &t : tiny.contents.meta.tensors) { // writePlan fills sizes in; no file here
      t->size = 4;
      for (int64_t d : t->shape)
        t->size *= static_cast<uint64_t>(d);
    }
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(fb::Plan::Pack(builder, &tiny.contents.meta), fb::PlanIdentifier());
    auto p = Plan::fromMetadata(builder.GetBufferPointer(), builder.GetSize(), "in-memory plan");
    EXPECT_TRUE(p.isOk()) << p.message();
    if (!p.isOk())
      return;
    plan = std::make_unique<Plan>(std::move(*p));
    std::vector<const void *> views;
    for (const auto &values : tiny.storage)
      views.push_back(values.data());
    auto w = LoadedWeights::fromViews(*plan, views);
    EXPECT_TRUE(w.isOk()) << w.message();
    weights = std::make_unique<LoadedWeights>(std::move(*w));
    auto e = CpuExecutor::create(*plan, *weights, fb::Phase::Prefill);
    EXPECT_TRUE(e.isOk()) << e.message();
    exec = std::make_unique<CpuExecutor>(std::move(*e));
    kv::KvCacheShape shape{1, 4, 16, 1, 4};
    auto c = kv::KvCache::create(shape);
    EXPECT_TRUE(c.isOk()) << c.message();
    cache = std::make_unique<kv::KvCache>(std::move(*c));
    for (int64_t r = 0; r < rows; ++r) {
      tokens.push_back(static_cast<int32_t>((r * 5 + 3) % test::kVocab));
      positions.push_back(static_cast<int32_t>(r));
      input.outputs.push_back({r, OutputKind::Logits});
    }
    blocks = {1, 2, 3};
    input.tokens = tokens.data();
    input.positions = positions.data();
    input.numTokens = rows;
    input.sequences.push_back({0, rows, blocks.data()});
  }

  // A plain run of other tokens: every buffer and the KV cache hold other
  // values afterwards, so a range that read a buffer it was not given, or
  // the cache, would not reproduce a run.
  void clobber() {
    const std::vector<int32_t> saved = tokens;
    for (int32_t &t : tokens)
      t = (t + 7) % test::kVocab;
    run();
    tokens = saved;
  }

  std::vector<float> run(const CpuRunHooks *hooks = nullptr) {
    out.reset(input.outputs.size());
    out.vocab = test::kVocab;
    Status status = exec->run(pool, input, *cache, out, hooks);
    EXPECT_TRUE(status.isOk()) << status.message();
    if (!status.isOk())
      return {};
    return std::vector<float>(out.logits, out.logits + input.numTokens * test::kVocab);
  }
};

// (step, input) -> the rows the observer saw.
using Observed = std::map<std::pair<uint32_t, int>, std::vector<float>>;
std::pair<uint32_t, int> key(uint32_t step, int input) { return {step, input}; }

CpuRunHooks recordingHooks(Observed &seen) {
  CpuRunHooks hooks;
  hooks.observe = [&seen](uint32_t step, int input, int, const float *rows, int64_t n,
                          int64_t width) { seen[{step, input}].assign(rows, rows + n * width); };
  return hooks;
}

// Step 2 of the tiny plan is Linear(proj) from buffer 2 to 3, which step 3
// (Logits) reads: what the observer saw of step 3's input is proj applied to
// what it saw of step 2's input, and step 1's input is the embedding rows.
TEST(ExecutorHooks, ObserverSeesTheRowsEachStepReads) {
  const int64_t rows = 5;
  Loaded m(test::makeTinyPlan(), rows);
  ASSERT_TRUE(m.exec);
  const std::vector<float> plain = m.run();
  Observed seen;
  CpuRunHooks hooks = recordingHooks(seen);
  const std::vector<float> observed = m.run(&hooks);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain, observed); // observing changes nothing
  // Step 0 (Embedding) reads only the I32 token buffer: not reported.
  EXPECT_EQ(seen.count(key(0, 0)), 0u);
  ASSERT_EQ(seen.size(), 3u);
  const std::vector<float> &embedded = seen.at(key(1, 0));
  ASSERT_EQ(embedded.size(), static_cast<size_t>(rows * test::kHidden));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < test::kHidden; ++c)
      EXPECT_EQ(embedded[r * test::kHidden + c],
                m.tiny.storage[0][m.tokens[r] * test::kHidden + c]);
  std::vector<float> projected(rows * test::kHidden);
  cpu::matmul(m.pool, seen.at(key(2, 0)).data(), rows,
              {m.tiny.storage[2].data(), DType::F32, test::kHidden, test::kHidden}, nullptr, 0.0f,
              projected.data());
  EXPECT_EQ(seen.at(key(3, 0)), projected);
}

// The steps [2, 4) from buffer 2 as step 2 read it give the whole run's logits.
TEST(ExecutorHooks, AStepRangeFromASavedBufferReproducesTheRun) {
  Loaded m(test::makeTinyPlan(), 4);
  ASSERT_TRUE(m.exec);
  Observed seen;
  CpuRunHooks record = recordingHooks(seen);
  const std::vector<float> full = m.run(&record);
  m.clobber();
  CpuRunHooks range;
  range.firstStep = 2;
  range.seeds.push_back({2, seen.at(key(2, 0)).data()});
  EXPECT_EQ(m.run(&range), full);
  // Ending the range after step 2: its output buffer holds step 3's input.
  range.endStep = 3;
  m.clobber();
  m.run(&range);
  const float *linear = m.exec->buffer(3);
  EXPECT_EQ(std::vector<float>(linear, linear + 4 * test::kHidden), seen.at(key(3, 0)));
}

// The fused one-layer plan (RoPE, attention over the KV cache, accumulating
// linears into the residual stream): from step 2 (RoPE) with buffer 2 (q/k/v)
// and buffer 1 (the residual stream) as step 2 and step 1 read them, the
// range re-runs attention and the rest to the same logits, bit for bit.
TEST(ExecutorHooks, AStepRangeThroughAttentionReproducesTheRun) {
  Loaded m(test::makeFusedPlan(), 6);
  ASSERT_TRUE(m.exec);
  // Distinct weights, so that a wrong row or column would show.
  for (auto &values : m.tiny.storage)
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = 0.02f * static_cast<float>((i * 11) % 17) - 0.15f;
  Observed seen;
  CpuRunHooks record = recordingHooks(seen);
  const std::vector<float> full = m.run(&record);
  ASSERT_FALSE(full.empty());
  m.clobber();
  CpuRunHooks range;
  range.firstStep = 2;
  range.seeds = {{2, seen.at(key(2, 0)).data()}}; // without the residual stream
  EXPECT_NE(m.run(&range), full);
  m.clobber();
  range.seeds = {{1, seen.at(key(1, 0)).data()}, {2, seen.at(key(2, 0)).data()}};
  EXPECT_EQ(m.run(&range), full);
}

// An override of "proj" (step 2) changes step 3's input to the new product
// and leaves step 2's input alone; the next plain run uses the plan's weight.
TEST(ExecutorHooks, AWeightOverrideChangesExactlyThatLinear) {
  const int64_t rows = 3;
  Loaded m(test::makeTinyPlan(), rows);
  ASSERT_TRUE(m.exec);
  Observed plainSeen, seen;
  CpuRunHooks record = recordingHooks(plainSeen);
  const std::vector<float> plain = m.run(&record);
  std::vector<float> other(test::kHidden * test::kHidden);
  for (size_t i = 0; i < other.size(); ++i)
    other[i] = 0.03f * static_cast<float>(i % 5) - 0.06f;
  CpuRunHooks hooks = recordingHooks(seen);
  hooks.overrides.push_back({"proj", {other.data(), DType::F32, test::kHidden, test::kHidden}});
  const std::vector<float> changed = m.run(&hooks);
  EXPECT_NE(changed, plain);
  EXPECT_EQ(seen.at(key(2, 0)), plainSeen.at(key(2, 0)));
  std::vector<float> projected(rows * test::kHidden);
  cpu::matmul(m.pool, seen.at(key(2, 0)).data(), rows,
              {other.data(), DType::F32, test::kHidden, test::kHidden}, nullptr, 0.0f,
              projected.data());
  EXPECT_EQ(seen.at(key(3, 0)), projected);
  EXPECT_EQ(m.run(), plain);
}

// Hooks that do not fit the program are errors, not out-of-range reads.
TEST(ExecutorHooks, RefusesARangeSeedOrOverrideThatDoesNotFit) {
  Loaded m(test::makeTinyPlan(), 2);
  ASSERT_TRUE(m.exec);
  std::vector<float> rows(2 * test::kVocab, 0.0f);
  auto fails = [&](const CpuRunHooks &hooks, const std::string &expected) {
    m.out.reset(m.input.outputs.size());
    Status status = m.exec->run(m.pool, m.input, *m.cache, m.out, &hooks);
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.message().find(expected), std::string::npos) << status.message();
  };
  CpuRunHooks range;
  range.firstStep = 3;
  range.endStep = 2;
  fails(range, "step range [3, 2)");
  range.endStep = 9;
  fails(range, "of a program of 4 steps");
  CpuRunHooks seed;
  seed.seeds.push_back({0, rows.data()}); // the I32 token buffer
  fails(seed, "no F32 buffer");
  CpuRunHooks absent;
  absent.overrides.push_back({"nope", {rows.data(), DType::F32, 2, test::kHidden}});
  fails(absent, "'nope', which the plan does not hold");
  CpuRunHooks shape;
  shape.overrides.push_back({"proj", {rows.data(), DType::F32, 2, test::kHidden}});
  fails(shape, "not the tensor's shape");
}

} // namespace
} // namespace llmc
