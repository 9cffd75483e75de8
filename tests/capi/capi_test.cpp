// The C API (include/llmc/llmc.h) through the shared library, as an embedder
// calls it: the stories260K plan bundled with llmc (assets/), every NULL and
// undersized buffer answered with a status and a message, cancellation from
// the callback, the batch step's all-or-nothing KV contract, and the same
// tokens from llmc_generate as from stepping and sampling by hand.
#include "llmc/llmc.h"

#include "common/test_paths.h"
#include "driver/build.h"

#include <gtest/gtest.h>

#include <cstddef>

#include <string>
#include <vector>

namespace llmc {
namespace {

const std::string &stories260kPlan() {
  static const std::string plan = [] {
    BuildOptions options;
    options.input = test::bundledStories260k();
    options.output = test::scratchDir("capi") + "/s.plan";
    options.targets = "cpu";
    BuildReporter quiet;
    quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
    Status status = runBuild(options, quiet);
    EXPECT_TRUE(status.isOk()) << status.message();
    return options.output;
  }();
  return plan;
}

class CApiTest : public ::testing::Test {
protected:
  void SetUp() override {
    llmc_engine_options options;
    llmc_engine_options_init(&options);
    options.device = "cpu";
    options.threads = 1;
    options.kv_cache_tokens = 512;
    ASSERT_EQ(llmc_engine_open(stories260kPlan().c_str(), &options, &engine_), LLMC_STATUS_OK)
        << llmc_last_error();
    ASSERT_EQ(llmc_engine_model_info(engine_, &info_), LLMC_STATUS_OK);
  }
  void TearDown() override { llmc_engine_close(engine_); }

  std::vector<int32_t> tokenize(const std::string &text) {
    size_t count = 0;
    EXPECT_EQ(llmc_tokenize(engine_, text.data(), text.size(), 1, nullptr, 0, &count),
              LLMC_STATUS_BUFFER_TOO_SMALL); // asks for the size first
    std::vector<int32_t> ids(count);
    EXPECT_EQ(llmc_tokenize(engine_, text.data(), text.size(), 1, ids.data(), ids.size(), &count),
              LLMC_STATUS_OK);
    return ids;
  }

  llmc_engine *engine_ = nullptr;
  llmc_model_info info_{};
};

TEST_F(CApiTest, ModelInfo) {
  EXPECT_STREQ(info_.architecture, "LlamaForCausalLM");
  EXPECT_EQ(info_.vocab_size, 512);
  EXPECT_EQ(info_.max_seq_len, 512);
  EXPECT_EQ(info_.num_layers, 5);
  EXPECT_EQ(info_.bos_id, 1);
  EXPECT_EQ(info_.eos_id, 2);
  EXPECT_EQ(info_.synthetic, 0);
  EXPECT_NE(std::string(info_.backend), "");
}

TEST_F(CApiTest, NullArgumentsAreStatusesWithMessages) {
  llmc_engine *engine = reinterpret_cast<llmc_engine *>(0x1);
  EXPECT_EQ(llmc_engine_open(nullptr, nullptr, &engine), LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("plan_path"), std::string::npos);
  EXPECT_EQ(llmc_engine_open("/nonexistent/x.plan", nullptr, &engine), LLMC_STATUS_LOAD_FAILED);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(llmc_last_error()).find("/nonexistent/x.plan"), std::string::npos);
  EXPECT_EQ(llmc_engine_model_info(nullptr, &info_), LLMC_STATUS_INVALID_ARGUMENT);
  size_t count = 0;
  EXPECT_EQ(llmc_tokenize(engine_, nullptr, 3, 1, nullptr, 0, &count),
            LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(llmc_step(engine_, nullptr, 0, nullptr, 0), LLMC_STATUS_INVALID_ARGUMENT);
  llmc_sampler *sampler = nullptr;
  EXPECT_EQ(llmc_sampler_create(nullptr, nullptr), LLMC_STATUS_INVALID_ARGUMENT);
  llmc_sampling_params bad;
  llmc_sampling_params_init(&bad);
  bad.temperature = -1.0f;
  EXPECT_EQ(llmc_sampler_create(&bad, &sampler), LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("temperature"), std::string::npos);
  bad.struct_size = 0;
  EXPECT_EQ(llmc_sampler_create(&bad, &sampler), LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("struct_size"), std::string::npos);
  llmc_engine_close(nullptr);
  llmc_sampler_free(nullptr);
  EXPECT_STREQ(llmc_status_name(LLMC_STATUS_KV_CACHE_FULL), "KV cache full");
}

// kv_cache_dtype: "f16" opens an f16 cache (the backend line says so), an
// unknown type fails naming it, and a caller whose header predates the field
// (a smaller struct_size) gets the default.
TEST_F(CApiTest, KvCacheDtypeOpensAnF16CacheAndOldStructsKeepTheDefault) {
  llmc_engine_options options;
  llmc_engine_options_init(&options);
  EXPECT_STREQ(options.kv_cache_dtype, "auto");
  options.device = "cpu";
  options.threads = 1;
  options.kv_cache_tokens = 64;
  options.kv_cache_dtype = "f16";
  llmc_engine *engine = nullptr;
  ASSERT_EQ(llmc_engine_open(stories260kPlan().c_str(), &options, &engine), LLMC_STATUS_OK)
      << llmc_last_error();
  llmc_model_info info{};
  ASSERT_EQ(llmc_engine_model_info(engine, &info), LLMC_STATUS_OK);
  EXPECT_NE(std::string(info.backend).find("f16 KV cache"), std::string::npos) << info.backend;
  llmc_engine_close(engine);
  options.kv_cache_dtype = "int8";
  EXPECT_EQ(llmc_engine_open(stories260kPlan().c_str(), &options, &engine),
            LLMC_STATUS_LOAD_FAILED);
  EXPECT_NE(std::string(llmc_last_error()).find("'int8' is not a KV cache type: use f32 or f16"),
            std::string::npos)
      << llmc_last_error();
  options.struct_size = offsetof(llmc_engine_options, kv_cache_dtype); // an older header
  ASSERT_EQ(llmc_engine_open(stories260kPlan().c_str(), &options, &engine), LLMC_STATUS_OK)
      << llmc_last_error();
  ASSERT_EQ(llmc_engine_model_info(engine, &info), LLMC_STATUS_OK);
  EXPECT_EQ(std::string(info.backend).find("KV cache"), std::string::npos) << info.backend;
  llmc_engine_close(engine);
}

TEST_F(CApiTest, BuffersReportTheirNeededSize) {
  const std::string text = "Once upon a time";
  size_t count = 0;
  int32_t one[1] = {-7};
  EXPECT_EQ(llmc_tokenize(engine_, text.data(), text.size(), 1, one, 1, &count),
            LLMC_STATUS_BUFFER_TOO_SMALL);
  EXPECT_GT(count, 1u);
  EXPECT_EQ(one[0], -7); // nothing written
  std::vector<int32_t> ids = tokenize(text);
  ASSERT_EQ(ids.size(), count);
  size_t length = 0;
  char small[4] = {'x', 'x', 'x', 'x'};
  EXPECT_EQ(llmc_detokenize(engine_, ids.data(), ids.size(), 1, small, sizeof small, &length),
            LLMC_STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(length, text.size());
  EXPECT_EQ(small[0], 'x');
  std::string out(length + 1, '\0');
  ASSERT_EQ(llmc_detokenize(engine_, ids.data(), ids.size(), 1, out.data(), out.size(), &length),
            LLMC_STATUS_OK);
  EXPECT_EQ(out.c_str(), text);
  std::vector<float> logits(info_.vocab_size - 1);
  llmc_sequence_id sequence = 0;
  ASSERT_EQ(llmc_sequence_add(engine_, &sequence), LLMC_STATUS_OK);
  llmc_step_entry entry{sequence, ids.data(), ids.size()};
  EXPECT_EQ(llmc_step(engine_, &entry, 1, logits.data(), logits.size()),
            LLMC_STATUS_BUFFER_TOO_SMALL);
  int64_t held = -1;
  ASSERT_EQ(llmc_sequence_length(engine_, sequence, &held), LLMC_STATUS_OK);
  EXPECT_EQ(held, 0); // the refused step changed nothing
  EXPECT_EQ(llmc_sequence_release(engine_, sequence), LLMC_STATUS_OK);
  EXPECT_EQ(llmc_sequence_release(engine_, sequence), LLMC_STATUS_INVALID_ARGUMENT);
}

int collect(const char *piece, size_t length, void *user) {
  static_cast<std::string *>(user)->append(piece, length);
  return 0;
}

int stopAfterThree(const char *, size_t, void *user) { return ++*static_cast<int *>(user) >= 3; }

TEST_F(CApiTest, GenerateStreamsAndCancels) {
  const std::string prompt = "Once upon a time";
  llmc_generate_params params;
  llmc_generate_params_init(&params);
  params.max_new_tokens = 40;
  std::string text;
  llmc_generate_result result{};
  ASSERT_EQ(llmc_generate(engine_, prompt.data(), prompt.size(), &params, collect, &text, &result),
            LLMC_STATUS_OK)
      << llmc_last_error();
  EXPECT_EQ(text.rfind(", there was a little girl named Lily", 0), 0u) << text;
  EXPECT_EQ(result.generated_tokens, 40);
  EXPECT_EQ(result.finish_reason, LLMC_FINISH_LENGTH);

  int calls = 0;
  params.max_new_tokens = 200;
  params.ignore_eos = 1;
  ASSERT_EQ(llmc_generate(engine_, prompt.data(), prompt.size(), &params, stopAfterThree, &calls,
                          &result),
            LLMC_STATUS_OK);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(result.finish_reason, LLMC_FINISH_CANCELLED);
  EXPECT_LE(result.generated_tokens, 10); // stopped at once, not after 200 tokens

  params.max_new_tokens = 0;
  EXPECT_EQ(llmc_generate(engine_, prompt.data(), prompt.size(), &params, nullptr, nullptr,
                          nullptr),
            LLMC_STATUS_INVALID_ARGUMENT);
}

TEST_F(CApiTest, SteppingByHandEqualsGenerate) {
  const std::string prompt = "Tom had a dog";
  llmc_generate_params params;
  llmc_generate_params_init(&params);
  params.max_new_tokens = 24;
  params.ignore_eos = 1;
  params.sampling.temperature = 0.9f;
  params.sampling.top_k = 40;
  params.sampling.seed = 1234;
  std::string generated;
  ASSERT_EQ(llmc_generate(engine_, prompt.data(), prompt.size(), &params, collect, &generated,
                          nullptr),
            LLMC_STATUS_OK);

  std::vector<int32_t> ids = tokenize(prompt);
  const size_t promptCount = ids.size();
  llmc_sampler *sampler = nullptr;
  ASSERT_EQ(llmc_sampler_create(&params.sampling, &sampler), LLMC_STATUS_OK);
  llmc_sequence_id sequence = 0;
  ASSERT_EQ(llmc_sequence_add(engine_, &sequence), LLMC_STATUS_OK);
  std::vector<float> logits(info_.vocab_size);
  llmc_step_entry entry{sequence, ids.data(), ids.size()};
  std::vector<int32_t> next;
  for (int i = 0; i < params.max_new_tokens; ++i) {
    ASSERT_EQ(llmc_step(engine_, &entry, 1, logits.data(), logits.size()), LLMC_STATUS_OK)
        << llmc_last_error();
    int32_t token = -1;
    ASSERT_EQ(llmc_sampler_sample(sampler, logits.data(), logits.size(), ids.data(), ids.size(),
                                  &token),
              LLMC_STATUS_OK);
    ids.push_back(token);
    next.assign(1, token);
    entry.tokens = next.data();
    entry.num_tokens = 1;
  }
  std::vector<int32_t> generatedIds(ids.begin() + promptCount, ids.end());
  std::string byHand(4096, '\0');
  size_t length = 0;
  ASSERT_EQ(llmc_detokenize(engine_, generatedIds.data(), generatedIds.size(), 0, byHand.data(),
                            byHand.size(), &length),
            LLMC_STATUS_OK);
  byHand.resize(length);
  // generate streams with the prompt as context: compare past the first piece's space handling.
  EXPECT_EQ(generated.substr(generated.size() - std::min(generated.size(), byHand.size() - 1)),
            byHand.substr(byHand.size() - std::min(generated.size(), byHand.size() - 1)));
  llmc_sequence_release(engine_, sequence);
  llmc_sampler_free(sampler);
}

TEST_F(CApiTest, StepIsAllOrNothingWhenTheKvCacheIsFull) {
  // 512 KV token slots: two sequences of 300 tokens cannot both fit.
  std::vector<int32_t> tokens(300, 100);
  tokens[0] = 1;
  llmc_sequence_id a = 0, b = 0;
  ASSERT_EQ(llmc_sequence_add(engine_, &a), LLMC_STATUS_OK);
  ASSERT_EQ(llmc_sequence_add(engine_, &b), LLMC_STATUS_OK);
  std::vector<llmc_step_entry> entries = {{a, tokens.data(), tokens.size()},
                                          {b, tokens.data(), tokens.size()}};
  std::vector<float> logits(2 * info_.vocab_size);
  EXPECT_EQ(llmc_step(engine_, entries.data(), 2, logits.data(), logits.size()),
            LLMC_STATUS_KV_CACHE_FULL)
      << llmc_last_error();
  int64_t length = -1;
  ASSERT_EQ(llmc_sequence_length(engine_, a, &length), LLMC_STATUS_OK);
  EXPECT_EQ(length, 0);
  // The refused step kept no blocks: the second sequence alone fits.
  EXPECT_EQ(llmc_step(engine_, &entries[1], 1, logits.data(), logits.size()), LLMC_STATUS_OK)
      << llmc_last_error();
  llmc_sequence_release(engine_, a);
  llmc_sequence_release(engine_, b);
}

} // namespace
} // namespace llmc
