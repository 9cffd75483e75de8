// Engine::run's per-row outputs and the KV all-or-nothing contract of a step.
#include "serving_fixture.h"

#include "cpu/kernels.h"
#include "sampling/sampler.h"

#include <cmath>

namespace llmc {
namespace {

TEST(EngineStep, EachRowGetsItsOwnKindOfOutput) {
  auto engine = test::loadEngine(512);
  ASSERT_NE(engine, nullptr);
  const int64_t vocab = engine->vocabSize();
  std::vector<SequenceTokens> batch;
  std::vector<SequenceId> ids;
  std::vector<std::vector<int32_t>> prompts = {{1, 5, 9}, {1, 7}, {1, 3, 3, 3, 4}, {1, 200}};
  for (auto &p : prompts) {
    ids.push_back(engine->addSequence());
    batch.push_back({ids.back(), p});
  }
  // Reference: every last row's logits.
  std::vector<SequenceId> refIds;
  std::vector<SequenceTokens> refBatch;
  for (auto &p : prompts) {
    refIds.push_back(engine->addSequence());
    refBatch.push_back({refIds.back(), p});
  }
  auto logits = engine->step(refBatch, false);
  ASSERT_TRUE(logits.isOk()) << logits.message();
  std::vector<float> reference(*logits, *logits + prompts.size() * vocab);

  std::vector<int64_t> last = Engine::lastRows(batch);
  std::vector<OutputRequest> outputs = {{last[0], OutputKind::Argmax},
                                        {last[1], OutputKind::TopK, 8, 0.7f},
                                        {last[2], OutputKind::Logits},
                                        {last[3], OutputKind::TopK, 3, 1.0f}};
  auto out = engine->run(batch, outputs);
  ASSERT_TRUE(out.isOk()) << out.message();
  const StepOutput &o = **out;
  ASSERT_EQ(o.filled.size(), 4u);
  EXPECT_EQ(o.filled[0], OutputKind::Argmax);
  EXPECT_EQ(o.filled[1], OutputKind::TopK);
  EXPECT_EQ(o.filled[2], OutputKind::Logits);
  EXPECT_EQ(o.filled[3], OutputKind::TopK);
  int32_t argmax = -1;
  cpu::argmax(reference.data(), 1, vocab, &argmax);
  EXPECT_EQ(o.ids[0], argmax);
  for (int r : {1, 3}) {
    std::vector<float> scores(hd::kTopKCapacity);
    std::vector<int32_t> cand(hd::kTopKCapacity);
    int32_t count = sampling::topKCandidates(reference.data() + r * vocab,
                                             static_cast<int32_t>(vocab), outputs[r].k,
                                             outputs[r].temperature, scores.data(), cand.data());
    ASSERT_EQ(o.counts[r], count);
    ASSERT_LE(count, hd::kTopKCapacity);
    for (int32_t i = 0; i < count; ++i) {
      EXPECT_EQ(o.candidatesOf(r)[i], cand[i]);
      EXPECT_EQ(o.scoresOf(r)[i], scores[i]);
    }
  }
  const float *row = o.logitsOf(2);
  ASSERT_NE(row, nullptr);
  for (int64_t v = 0; v < vocab; ++v)
    ASSERT_EQ(row[v], reference[2 * vocab + v]) << "token " << v;
}

TEST(EngineStep, BadOutputRequestsAreErrors) {
  auto engine = test::loadEngine(512);
  ASSERT_NE(engine, nullptr);
  SequenceId s = engine->addSequence();
  EXPECT_FALSE(engine->run({{s, {1, 2}}}, {}).isOk());
  EXPECT_FALSE(engine->run({{s, {1, 2}}}, {{2, OutputKind::Argmax}}).isOk());
  EXPECT_FALSE(engine->run({{s, {1, 2}}}, {{1, OutputKind::Argmax}, {1, OutputKind::Logits}}).isOk());
  auto badK = engine->run({{s, {1, 2}}}, {{1, OutputKind::TopK, 0, 1.0f}});
  ASSERT_FALSE(badK.isOk());
  EXPECT_NE(badK.message().find("takes k in [1, 64]"), std::string::npos) << badK.message();
  EXPECT_EQ(engine->sequenceLength(s), 0);
}

// docs/runtime.md: a step reserves KV blocks for all its sequences or none.
TEST(EngineStep, KvFullStepReservesNothing) {
  auto engine = test::loadEngine(16 * 6); // 6 usable blocks of 16
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->usableBlocks(), 6);
  SequenceId a = engine->addSequence(), b = engine->addSequence(), c = engine->addSequence();
  ASSERT_TRUE(engine->step({{a, std::vector<int32_t>(20, 4)}}, false).isOk()); // 2 blocks
  ASSERT_EQ(engine->availableBlocks(), 4);
  // b needs 2 blocks (fits alone), c 3: together 5 > 4.
  auto full = engine->step({{b, std::vector<int32_t>(17, 5)}, {c, std::vector<int32_t>(40, 6)}},
                           false);
  ASSERT_FALSE(full.isOk());
  EXPECT_NE(full.message().find("KV cache full"), std::string::npos) << full.message();
  EXPECT_EQ(engine->availableBlocks(), 4);
  EXPECT_EQ(engine->sequenceLength(b), 0);
  EXPECT_EQ(engine->sequenceLength(c), 0);
  EXPECT_EQ(engine->blocksToGrow(b, 17), 2);
  // Each still fits on its own afterwards.
  ASSERT_TRUE(engine->step({{b, std::vector<int32_t>(17, 5)}}, false).isOk());
  EXPECT_EQ(engine->availableBlocks(), 2);
  ASSERT_TRUE(engine->releaseSequence(a));
  ASSERT_TRUE(engine->releaseSequence(b));
  EXPECT_EQ(engine->availableBlocks(), 6);
}

TEST(EngineStep, CachedPrefixGivesTheSameLogits) {
  auto engine = test::loadEngine(1024);
  ASSERT_NE(engine, nullptr);
  engine->setPrefixCaching(true);
  const int64_t vocab = engine->vocabSize();
  std::mt19937 rng(3);
  std::vector<int32_t> prompt = test::randomPrompt(rng, 40);
  SequenceId a = engine->addSequence();
  auto first = engine->step({{a, prompt}}, false);
  ASSERT_TRUE(first.isOk()) << first.message();
  std::vector<float> expected(*first, *first + vocab);
  SequenceId b = engine->addSequence();
  auto cached = engine->attachCachedPrefix(b, prompt);
  ASSERT_TRUE(cached.isOk()) << cached.message();
  EXPECT_EQ(*cached, 32);
  EXPECT_EQ(engine->sequenceLength(b), 32);
  test::poisonFreeBlocks(*engine);
  auto second = engine->step({{b, std::vector<int32_t>(prompt.begin() + 32, prompt.end())}}, false);
  ASSERT_TRUE(second.isOk()) << second.message();
  for (int64_t v = 0; v < vocab; ++v)
    ASSERT_EQ((*second)[v], expected[v]) << "token " << v;
}

} // namespace
} // namespace llmc
