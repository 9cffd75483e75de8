// Shared by the quantize tests that compare plans: the logits of one prefill
// of a fixed prompt (ids below 512, every fixture's vocabulary).
#pragma once

#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::test {

inline const std::vector<int32_t> kQuantizePrompt = {0,   421, 17, 256, 3,  98,  511,
                                                     77,  140, 302, 5,  64, 64, 200};

// Logits [kQuantizePrompt, V] of one prefill step of `plan`; a failure is a
// test failure and gives an empty vector.
inline std::vector<float> prefillLogits(const std::string &plan) {
  auto engine = Engine::load(plan, EngineOptions{});
  EXPECT_TRUE(engine.isOk()) << engine.message();
  if (!engine.isOk())
    return {};
  SequenceId seq = (*engine)->addSequence();
  auto logits = (*engine)->step({{seq, kQuantizePrompt}}, /*allLogits=*/true);
  EXPECT_TRUE(logits.isOk()) << logits.message();
  if (!logits.isOk())
    return {};
  return std::vector<float>(*logits, *logits + kQuantizePrompt.size() * (*engine)->vocabSize());
}

} // namespace llmc::test
