// The import of tokenizer_config.json, chat_template.jinja and
// generation_config.json (compiler/frontend/generation_config.h): every
// accepted form, every rejected input naming its file and field, and the
// settings arriving in a built plan, which the loader checks again.
#include "frontend/generation_config.h"
#include "frontend/model_spec.h"
#include "plan/plan_fixture.h"
#include "synthetic_plan.h"

#include "schema/engine_generated.h"

#include <gtest/gtest.h>

#include <fstream>

namespace llmc {
namespace {

void write(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

Expected<GenerationSettings> load(const std::string &tokenizerConfig,
                                  const std::string &generationConfig = "",
                                  const std::string &jinja = "") {
  std::string dir = test::scratchDir("genconfig");
  if (!tokenizerConfig.empty())
    write(dir + "/tokenizer_config.json", tokenizerConfig);
  if (!generationConfig.empty())
    write(dir + "/generation_config.json", generationConfig);
  if (!jinja.empty())
    write(dir + "/chat_template.jinja", jinja);
  return loadGenerationSettings(dir, dir, 100);
}

std::string errorOf(const Expected<GenerationSettings> &s) {
  EXPECT_FALSE(s.isOk());
  return s.isOk() ? std::string() : s.message();
}

TEST(GenerationConfig, NoFilesNoSettings) {
  auto s = load("");
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(s->chatTemplates.empty());
  EXPECT_TRUE(s->eosTokenIds.empty());
  EXPECT_FALSE(s->temperature.has_value());
}

TEST(GenerationConfig, StringTemplateAndSpecialTokens) {
  auto s = load(R"({"chat_template": "{{ bos_token }}x", "bos_token": "<s>",
                    "eos_token": {"content": "</s>", "__type": "AddedToken"},
                    "pad_token": null})");
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(s->chatTemplates.size(), 1u);
  EXPECT_EQ(s->chatTemplates[0].first, "default");
  EXPECT_EQ(s->chatTemplates[0].second, "{{ bos_token }}x");
  EXPECT_EQ(s->bosToken, "<s>");
  EXPECT_EQ(s->eosToken, "</s>");
  EXPECT_EQ(s->padToken, "");
}

TEST(GenerationConfig, NamedTemplatesKeepDefaultFirst) {
  auto s = load(R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                      {"name": "default", "template": "D"},
                                      {"name": "rag", "template": "R"}]})");
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(s->chatTemplates.size(), 3u);
  EXPECT_EQ(s->chatTemplates[0], (std::pair<std::string, std::string>{"default", "D"}));
  EXPECT_EQ(s->chatTemplates[1].first, "tool_use");
  EXPECT_EQ(s->chatTemplates[2].first, "rag");
}

TEST(GenerationConfig, TheJinjaFileWinsOverTheJsonDefault) {
  auto s = load(R"({"chat_template": "old"})", "", "new {{ x }}");
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(s->chatTemplates.size(), 1u);
  EXPECT_EQ(s->chatTemplates[0].second, "new {{ x }}");
  auto only = load("", "", "only");
  ASSERT_TRUE(only.isOk());
  EXPECT_EQ(only->chatTemplates[0].first, "default");
}

TEST(GenerationConfig, GenerationDefaultsAndEosIds) {
  auto s = load("", R"({"eos_token_id": [7, 3, 7], "temperature": 0.6, "top_p": 0.9,
                        "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1,
                        "max_new_tokens": 64, "do_sample": true})");
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(s->eosTokenIds, (std::vector<int64_t>{7, 3}));
  EXPECT_FLOAT_EQ(*s->temperature, 0.6f);
  EXPECT_FLOAT_EQ(*s->topP, 0.9f);
  EXPECT_EQ(*s->topK, 20);
  EXPECT_FLOAT_EQ(*s->minP, 0.05f);
  EXPECT_FLOAT_EQ(*s->repetitionPenalty, 1.1f);
  EXPECT_EQ(*s->maxNewTokens, 64);
  auto single = load("", R"({"eos_token_id": 4})");
  ASSERT_TRUE(single.isOk());
  EXPECT_EQ(single->eosTokenIds, std::vector<int64_t>{4});
  EXPECT_EQ(joinTokenIds({2}, {4, 2, 5}), (std::vector<int64_t>{2, 4, 5}));
}

TEST(GenerationConfig, BadInputsNameTheFileAndField) {
  auto has = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  has(errorOf(load(R"({"chat_template": 3})")), "tokenizer_config.json: field 'chat_template'");
  has(errorOf(load(R"({"chat_template": [{"name": "a"}]})")), "template");
  has(errorOf(load(R"({"chat_template": [{"name": "a", "template": "x"},
                                         {"name": "a", "template": "y"}]})")),
      "'a' appears twice");
  has(errorOf(load(R"({"chat_template": ["x"]})")), "chat_template[0]");
  has(errorOf(load(R"({"eos_token": 5})")), "field 'eos_token'");
  has(errorOf(load(R"({"eos_token": {"id": 5}})")), "\"content\"");
  has(errorOf(load(R"([1, 2])")), "expected a JSON object");
  has(errorOf(load("", "", "bad \xC3 byte")), "chat_template.jinja: the template is not valid UTF-8");
  has(errorOf(load("", "", std::string(kMaxChatTemplateBytes + 1, 'x'))), "over the limit");
  has(errorOf(load("", R"({"eos_token_id": 100})")),
      "generation_config.json: field 'eos_token_id'");
  has(errorOf(load("", R"({"eos_token_id": "2"})")), "eos_token_id");
  has(errorOf(load("", R"({"temperature": -1})")), "field 'temperature'");
  has(errorOf(load("", R"({"top_p": 0})")), "field 'top_p'");
  has(errorOf(load("", R"({"top_k": -5})")), "field 'top_k'");
  has(errorOf(load("", R"({"repetition_penalty": 0})")), "field 'repetition_penalty'");
  has(errorOf(load("", R"({"max_new_tokens": 1.5})")), "field 'max_new_tokens'");
  has(errorOf(load("", R"({"temperature": "hot"})")), "expected a number");
}

TEST(GenerationConfig, Stories260kFolder) {
  LLMC_REQUIRE_SHARED("models/stories260k/tokenizer_config.json");
  auto spec = loadModelSpec(test::sharedPath("models/stories260k"));
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->generation.bosToken, "<s>");
  EXPECT_EQ(spec->generation.eosToken, "</s>");
  EXPECT_EQ(spec->generation.unkToken, "<unk>");
  EXPECT_TRUE(spec->generation.chatTemplates.empty());
  EXPECT_EQ(spec->config.eosTokenIds, std::vector<int64_t>{2});
}

// Built into a plan: the templates, tokens and defaults arrive, eos ids joined.
TEST(GenerationConfig, ThePlanCarriesTheSettingsAndTheLoaderChecksThem) {
  std::string dir =
      test::writeTinyModelDir("genconfig-plan", test::tinyLlamaConfig(32));
  write(dir + "/tokenizer_config.json",
        R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "x", "template": "X"}],
            "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"})");
  write(dir + "/generation_config.json", R"({"eos_token_id": [1, 9], "temperature": 0.5})");
  std::string path = test::buildPlan(dir);
  {
    auto plan = Plan::open(path);
    ASSERT_TRUE(plan.isOk()) << plan.message();
    const fb::Plan &meta = plan->meta();
    ASSERT_NE(meta.tokenizer()->chat_templates(), nullptr);
    ASSERT_EQ(meta.tokenizer()->chat_templates()->size(), 2u);
    EXPECT_EQ(meta.tokenizer()->chat_templates()->Get(1)->name()->str(), "x");
    EXPECT_EQ(meta.tokenizer()->bos_token()->str(), "<|begin_of_text|>");
    ASSERT_NE(meta.generation(), nullptr);
    EXPECT_FLOAT_EQ(*meta.generation()->temperature(), 0.5f);
    EXPECT_FALSE(meta.generation()->top_p().has_value());
    std::vector<int64_t> eos(meta.model()->eos_token_ids()->begin(),
                             meta.model()->eos_token_ids()->end());
    EXPECT_EQ(eos, (std::vector<int64_t>{1, 9}));
  }
  test::rewriteMetadata(path, [](fb::PlanT &meta) {
    meta.tokenizer->chat_templates[0]->source = "bad \xC3";
  });
  auto broken = Plan::open(path);
  ASSERT_FALSE(broken.isOk());
  EXPECT_NE(broken.message().find("chat_templates 'default': not valid UTF-8"), std::string::npos)
      << broken.message();
  test::rewriteMetadata(path, [](fb::PlanT &meta) {
    meta.tokenizer->chat_templates[0]->source = "ok";
    meta.generation->top_p = 1.5f;
  });
  broken = Plan::open(path);
  ASSERT_FALSE(broken.isOk());
  EXPECT_NE(broken.message().find("generation.top_p"), std::string::npos) << broken.message();
}

} // namespace
} // namespace llmc
