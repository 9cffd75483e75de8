// What the stories260K end-to-end tests share, on the CPU (tests/golden) and
// on the GPU (tests/cuda): llama2.c run.c's greedy runs and the generation
// options that reproduce them.
#pragma once

#include "common/test_paths.h"
#include "engine/generate.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <gtest/gtest.h>

namespace llmc::test {

// ../shared/golden/stories260k_greedy.json's "runs": prompt, prompt_ids,
// generated_ids.
inline Json stories260kGoldenRuns() {
  auto text = readTextFile(sharedPath("golden/stories260k_greedy.json"));
  EXPECT_TRUE(text.isOk()) << text.message();
  auto json = parseJson(text.isOk() ? *text : "{}", "stories260k_greedy.json");
  EXPECT_TRUE(json.isOk()) << json.message();
  return json.isOk() ? (*json)["runs"] : Json::array();
}

// run.c semantics: greedy, forward passes at positions 0..255 (prompt
// included; the pass at 255 still yields a token), stops when it samples BOS
// (1); it knows no EOS.
inline GenerateOptions runcOptions(size_t promptLength) {
  GenerateOptions options;
  options.maxNewTokens = 256 - static_cast<int64_t>(promptLength) + 1;
  options.sampling.temperature = 0.0f;
  options.ignoreEos = true;
  options.stopTokens = {1};
  return options;
}

// The golden prompts decoded together (96 tokens each) give each sequence
// the tokens it gets alone.
inline void expectBatchGivesEachSequenceItsOwnIds(Engine &engine) {
  std::vector<std::vector<int32_t>> prompts;
  for (const Json &run : stories260kGoldenRuns())
    prompts.push_back(run["prompt_ids"].get<std::vector<int32_t>>());
  GenerateOptions options = runcOptions(8);
  options.maxNewTokens = 96;
  auto together = generateBatch(engine, prompts, options);
  ASSERT_TRUE(together.isOk()) << together.message();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = generateBatch(engine, {prompts[i]}, options);
    ASSERT_TRUE(alone.isOk()) << alone.message();
    EXPECT_EQ((*together)[i].ids, alone->front().ids) << "sequence " << i;
  }
}

} // namespace llmc::test
