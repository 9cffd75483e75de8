// The C API's embedding levels above tokenize/generate, through the shared
// library on the bundled stories260K plan: chat templates (a given one and
// the plan's own, from JSON and from structs), the batch step with per-row
// outputs and the sampler drawing from each kind, and the scheduler object
// (callbacks, polling, stop strings, cancellation, the engine kept busy).
#include "llmc/llmc.h"

#include "common/test_paths.h"
#include "driver/build.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace llmc {
namespace {

// stories260K with a chat template added (chat_template.jinja beside it), so
// the plan carries a template and its special token strings.
const std::string &chatPlan() {
  static const std::string plan = [] {
    namespace fs = std::filesystem;
    std::string dir = test::scratchDir("capi-embed");
    fs::copy(test::bundledStories260k(), dir + "/model", fs::copy_options::recursive);
    std::ofstream(dir + "/model/chat_template.jinja")
        << "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}"
           "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}";
    BuildOptions options;
    options.input = dir + "/model";
    options.output = dir + "/s.plan";
    options.targets = "cpu";
    BuildReporter quiet;
    quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
    Status status = runBuild(options, quiet);
    EXPECT_TRUE(status.isOk()) << status.message();
    return options.output;
  }();
  return plan;
}

class CApiEmbedTest : public ::testing::Test {
protected:
  void SetUp() override {
    llmc_engine_options options;
    llmc_engine_options_init(&options);
    options.device = "cpu";
    options.threads = 1;
    options.kv_cache_tokens = 1024;
    ASSERT_EQ(llmc_engine_open(chatPlan().c_str(), &options, &engine_), LLMC_STATUS_OK)
        << llmc_last_error();
    ASSERT_EQ(llmc_engine_model_info(engine_, &info_), LLMC_STATUS_OK);
  }
  void TearDown() override { llmc_engine_close(engine_); }

  std::vector<int32_t> tokenize(const std::string &text) {
    std::vector<int32_t> ids(512);
    size_t count = 0;
    EXPECT_EQ(llmc_tokenize(engine_, text.data(), text.size(), 1, ids.data(), ids.size(), &count),
              LLMC_STATUS_OK);
    ids.resize(count);
    return ids;
  }

  std::string greedyText(const std::string &prompt, int64_t tokens) {
    llmc_generate_params params;
    llmc_generate_params_init(&params);
    params.max_new_tokens = tokens;
    params.ignore_eos = 1;
    std::string text;
    EXPECT_EQ(llmc_generate(engine_, prompt.data(), prompt.size(), &params,
                            [](const char *piece, size_t length, void *user) {
                              static_cast<std::string *>(user)->append(piece, length);
                              return 0;
                            },
                            &text, nullptr),
              LLMC_STATUS_OK)
        << llmc_last_error();
    return text;
  }

  llmc_engine *engine_ = nullptr;
  llmc_model_info info_{};
};

std::string renderJson(const llmc_chat_template *tmpl, const std::string &messages,
                       const llmc_chat_render_options *options, llmc_status *status) {
  size_t length = 0;
  *status = llmc_chat_render_json(tmpl, messages.data(), messages.size(), options, nullptr, 0,
                                  &length);
  if (*status != LLMC_STATUS_BUFFER_TOO_SMALL)
    return "";
  std::string text(length + 1, '\0');
  *status = llmc_chat_render_json(tmpl, messages.data(), messages.size(), options, text.data(),
                                  text.size(), &length);
  text.resize(length);
  return text;
}

TEST_F(CApiEmbedTest, ChatTemplateRendersFromJsonAndFromStructs) {
  const std::string source =
      "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>\n"
      "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}{{ greeting }}";
  llmc_chat_template *tmpl = nullptr;
  ASSERT_EQ(llmc_chat_template_parse(source.data(), source.size(), "t.jinja", &tmpl),
            LLMC_STATUS_OK)
      << llmc_last_error();
  llmc_chat_render_options options;
  llmc_chat_render_options_init(&options);
  options.add_generation_prompt = 1;
  const std::string context = R"({"greeting": "hé"})";
  options.context_json = context.data();
  options.context_json_length = context.size();
  llmc_status status;
  std::string fromJson = renderJson(
      tmpl, R"([{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}])",
      &options, &status);
  ASSERT_EQ(status, LLMC_STATUS_OK) << llmc_last_error();
  EXPECT_EQ(fromJson, "<system>Be brief.</system>\n<user>Hi</user>\n<assistant>hé");

  llmc_chat_message messages[2] = {{"system", " Be brief. "}, {"user", "Hi"}};
  char text[128];
  size_t length = 0;
  ASSERT_EQ(llmc_chat_render(tmpl, messages, 2, &options, text, sizeof text, &length),
            LLMC_STATUS_OK);
  EXPECT_EQ(std::string(text, length), fromJson);
  EXPECT_EQ(text[length], '\0');
  // Too small: nothing written, the size still reported.
  text[0] = 'x';
  EXPECT_EQ(llmc_chat_render(tmpl, messages, 2, &options, text, length, &length),
            LLMC_STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(length, fromJson.size());
  EXPECT_EQ(text[0], 'x');
  // Without options: no generation prompt, `greeting` undefined (empty).
  ASSERT_EQ(llmc_chat_render(tmpl, messages, 1, nullptr, text, sizeof text, &length),
            LLMC_STATUS_OK);
  EXPECT_EQ(std::string(text, length), "<system>Be brief.</system>\n");
  // Bad inputs: statuses with messages.
  EXPECT_EQ(renderJson(tmpl, R"({"role": "user"})", nullptr, &status), "");
  EXPECT_EQ(status, LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("JSON array"), std::string::npos);
  EXPECT_EQ(renderJson(tmpl, "[{", nullptr, &status), "");
  EXPECT_EQ(status, LLMC_STATUS_INVALID_ARGUMENT);
  const std::string notObject = "[1]";
  options.context_json = notObject.data();
  options.context_json_length = notObject.size();
  EXPECT_EQ(llmc_chat_render(tmpl, messages, 2, &options, text, sizeof text, &length),
            LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("context_json"), std::string::npos);
  llmc_chat_message nullRole[1] = {{nullptr, "x"}};
  EXPECT_EQ(llmc_chat_render(tmpl, nullRole, 1, nullptr, text, sizeof text, &length),
            LLMC_STATUS_INVALID_ARGUMENT);
  llmc_chat_template_free(tmpl);
}

TEST_F(CApiEmbedTest, ChatTemplateErrorsNameTheLineAndColumn) {
  llmc_chat_template *tmpl = nullptr;
  const std::string broken = "line one\n{% if x %}unclosed";
  EXPECT_EQ(llmc_chat_template_parse(broken.data(), broken.size(), "b.jinja", &tmpl),
            LLMC_STATUS_TEMPLATE_ERROR);
  EXPECT_EQ(tmpl, nullptr);
  EXPECT_EQ(std::string(llmc_last_error()).rfind("b.jinja:", 0), 0u) << llmc_last_error();
  const std::string raising = "{{ raise_exception('no system role') }}";
  ASSERT_EQ(llmc_chat_template_parse(raising.data(), raising.size(), "r.jinja", &tmpl),
            LLMC_STATUS_OK);
  llmc_status status;
  EXPECT_EQ(renderJson(tmpl, "[]", nullptr, &status), "");
  EXPECT_EQ(status, LLMC_STATUS_TEMPLATE_ERROR);
  EXPECT_NE(std::string(llmc_last_error()).find("r.jinja:1:"), std::string::npos)
      << llmc_last_error();
  EXPECT_NE(std::string(llmc_last_error()).find("no system role"), std::string::npos);
  llmc_chat_template_free(tmpl);
  // strftime_now at a fixed moment.
  const std::string dated = "{{ strftime_now('%Y-%m-%d') }}";
  ASSERT_EQ(llmc_chat_template_parse(dated.data(), dated.size(), nullptr, &tmpl), LLMC_STATUS_OK);
  llmc_chat_render_options options;
  llmc_chat_render_options_init(&options);
  options.fixed_time = 1;
  options.time_seconds = 86400 * 365;
  EXPECT_EQ(renderJson(tmpl, "[]", &options, &status), "1971-01-01");
  llmc_chat_template_free(tmpl);
  llmc_chat_template_free(nullptr);
}

TEST_F(CApiEmbedTest, PlanChatTemplateCarriesTheSpecialTokens) {
  llmc_chat_template *tmpl = nullptr;
  ASSERT_EQ(llmc_engine_chat_template(engine_, nullptr, &tmpl), LLMC_STATUS_OK)
      << llmc_last_error();
  llmc_chat_message messages[1] = {{"user", "Hi"}};
  llmc_chat_render_options options;
  llmc_chat_render_options_init(&options);
  options.add_generation_prompt = 1;
  char text[128];
  size_t length = 0;
  ASSERT_EQ(llmc_chat_render(tmpl, messages, 1, &options, text, sizeof text, &length),
            LLMC_STATUS_OK)
      << llmc_last_error();
  EXPECT_EQ(std::string(text, length), "<s>[user] Hi</s>[assistant] ");
  // The caller's context wins over the plan's tokens.
  const std::string context = R"({"bos_token": "", "eos_token": "|"})";
  options.context_json = context.data();
  options.context_json_length = context.size();
  ASSERT_EQ(llmc_chat_render(tmpl, messages, 1, &options, text, sizeof text, &length),
            LLMC_STATUS_OK);
  EXPECT_EQ(std::string(text, length), "[user] Hi|[assistant] ");
  llmc_chat_template_free(tmpl);
  EXPECT_EQ(llmc_engine_chat_template(engine_, "tool_use", &tmpl), LLMC_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(llmc_last_error()).find("it has: default"), std::string::npos)
      << llmc_last_error();
}

// One step over three copies of a prompt, each asking for another kind: the
// argmax and the top-k candidates agree with the logits row.
TEST_F(CApiEmbedTest, StepOutputsGiveEachRowItsKind) {
  std::vector<int32_t> prompt = tokenize("Once upon a time");
  llmc_sequence_id seqs[3];
  for (llmc_sequence_id &s : seqs)
    ASSERT_EQ(llmc_sequence_add(engine_, &s), LLMC_STATUS_OK);
  llmc_step_request requests[3] = {
      {seqs[0], prompt.data(), prompt.size(), LLMC_OUTPUT_LOGITS, 0, 1.0f},
      {seqs[1], prompt.data(), prompt.size(), LLMC_OUTPUT_ARGMAX, 0, 1.0f},
      {seqs[2], prompt.data(), prompt.size(), LLMC_OUTPUT_TOP_K, 5, 0.5f}};
  llmc_step_row rows[3];
  EXPECT_EQ(llmc_step_outputs(engine_, requests, 3, rows, 2), LLMC_STATUS_BUFFER_TOO_SMALL);
  ASSERT_EQ(llmc_step_outputs(engine_, requests, 3, rows, 3), LLMC_STATUS_OK)
      << llmc_last_error();
  ASSERT_NE(rows[0].logits, nullptr);
  const float *logits = rows[0].logits;
  const int64_t vocab = info_.vocab_size;
  std::vector<float> copy(logits, logits + vocab);
  const int32_t best = static_cast<int32_t>(std::max_element(copy.begin(), copy.end()) -
                                            copy.begin());
  EXPECT_EQ(rows[1].kind, LLMC_OUTPUT_ARGMAX);
  EXPECT_EQ(rows[1].token, best);
  ASSERT_EQ(rows[2].kind, LLMC_OUTPUT_TOP_K);
  ASSERT_GE(rows[2].num_candidates, 5);
  ASSERT_NE(rows[2].scores, nullptr);
  std::vector<int32_t> order(vocab);
  for (int32_t t = 0; t < vocab; ++t)
    order[t] = t;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return copy[a] > copy[b]; });
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(rows[2].candidates[i], order[i]) << i;
    EXPECT_FLOAT_EQ(rows[2].scores[i], copy[order[i]] / 0.5f) << i;
  }

  // Each sampler asks for the cheapest kind it draws from exactly.
  llmc_sampling_params greedy, topK, topP;
  llmc_sampling_params_init(&greedy);
  llmc_sampling_params_init(&topK);
  topK.temperature = 0.5f;
  topK.top_k = 5;
  topK.seed = 7;
  llmc_sampling_params_init(&topP);
  topP.temperature = 0.8f;
  topP.top_p = 0.9f;
  llmc_sampler *g = nullptr, *k1 = nullptr, *k2 = nullptr, *p = nullptr;
  ASSERT_EQ(llmc_sampler_create(&greedy, &g), LLMC_STATUS_OK);
  ASSERT_EQ(llmc_sampler_create(&topK, &k1), LLMC_STATUS_OK);
  ASSERT_EQ(llmc_sampler_create(&topK, &k2), LLMC_STATUS_OK);
  ASSERT_EQ(llmc_sampler_create(&topP, &p), LLMC_STATUS_OK);
  llmc_step_request asked{};
  ASSERT_EQ(llmc_sampler_output_kind(g, vocab, &asked), LLMC_STATUS_OK);
  EXPECT_EQ(asked.output, LLMC_OUTPUT_ARGMAX);
  ASSERT_EQ(llmc_sampler_output_kind(k1, vocab, &asked), LLMC_STATUS_OK);
  EXPECT_EQ(asked.output, LLMC_OUTPUT_TOP_K);
  EXPECT_EQ(asked.top_k, 5);
  EXPECT_FLOAT_EQ(asked.temperature, 0.5f);
  ASSERT_EQ(llmc_sampler_output_kind(p, vocab, &asked), LLMC_STATUS_OK);
  EXPECT_EQ(asked.output, LLMC_OUTPUT_LOGITS);

  int32_t token = -1, fromLogits = -2;
  ASSERT_EQ(llmc_sampler_sample_row(g, &rows[1], vocab, nullptr, 0, &token), LLMC_STATUS_OK);
  EXPECT_EQ(token, best);
  for (int draw = 0; draw < 20; ++draw) { // the same draws from candidates as from logits
    ASSERT_EQ(llmc_sampler_sample_row(k1, &rows[2], vocab, nullptr, 0, &token), LLMC_STATUS_OK);
    ASSERT_EQ(llmc_sampler_sample(k2, logits, vocab, nullptr, 0, &fromLogits), LLMC_STATUS_OK);
    EXPECT_EQ(token, fromLogits) << draw;
  }
  ASSERT_EQ(llmc_sampler_sample_row(p, &rows[0], vocab, nullptr, 0, &token), LLMC_STATUS_OK);
  EXPECT_GE(token, 0);
  // An argmax row cannot feed a sampler with a temperature.
  EXPECT_EQ(llmc_sampler_sample_row(p, &rows[1], vocab, nullptr, 0, &token),
            LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("llmc_sampler_output_kind"), std::string::npos);
  // A top-k request out of range is refused before the step; nothing changes.
  llmc_step_request bad = {seqs[0], prompt.data(), 1, LLMC_OUTPUT_TOP_K, 0, 1.0f};
  EXPECT_EQ(llmc_step_outputs(engine_, &bad, 1, rows, 1), LLMC_STATUS_FAILED);
  int64_t length = 0;
  ASSERT_EQ(llmc_sequence_length(engine_, seqs[0], &length), LLMC_STATUS_OK);
  EXPECT_EQ(length, static_cast<int64_t>(prompt.size()));
  bad.output = static_cast<llmc_output_kind>(9);
  EXPECT_EQ(llmc_step_outputs(engine_, &bad, 1, rows, 1), LLMC_STATUS_INVALID_ARGUMENT);
  for (llmc_sampler *s : {g, k1, k2, p})
    llmc_sampler_free(s);
  for (llmc_sequence_id s : seqs)
    EXPECT_EQ(llmc_sequence_release(engine_, s), LLMC_STATUS_OK);
}

struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  int events = 0, finals = 0;
  llmc_finish_reason reason = LLMC_FINISH_LENGTH;
  int64_t generated = 0;
  int cancelAfter = 0; // nonzero: return 1 at this many token events
};

int collectEvent(const llmc_request_event *e, void *user) {
  Collected &c = *static_cast<Collected *>(user);
  ++c.events;
  c.text.append(e->text, e->text_length);
  if (e->token >= 0)
    c.tokens.push_back(e->token);
  c.generated = e->generated_tokens;
  if (e->finished) {
    ++c.finals;
    c.reason = e->finish_reason;
  }
  return c.cancelAfter > 0 && static_cast<int>(c.tokens.size()) >= c.cancelAfter;
}

TEST_F(CApiEmbedTest, SchedulerServesRequestsAsGenerateDoes) {
  // Long enough for full KV blocks the prefix cache can share.
  const std::string prompt = "Once upon a time, there was a little girl named Lily. She loved to "
                             "play outside in the park with her friends. One day";
  const std::string expected = greedyText(prompt, 30);
  ASSERT_FALSE(expected.empty());

  llmc_scheduler_options options;
  llmc_scheduler_options_init(&options);
  options.max_num_seqs = 2; // three requests: one waits
  options.max_num_batched_tokens = 8; // the prompts are prefilled in chunks
  llmc_scheduler *scheduler = nullptr;
  ASSERT_EQ(llmc_scheduler_create(engine_, &options, &scheduler), LLMC_STATUS_OK)
      << llmc_last_error();
  // The engine is the scheduler's now.
  llmc_generate_params gen;
  llmc_generate_params_init(&gen);
  EXPECT_EQ(llmc_generate(engine_, "x", 1, &gen, nullptr, nullptr, nullptr), LLMC_STATUS_BUSY);
  llmc_sequence_id seq = 0;
  EXPECT_EQ(llmc_sequence_add(engine_, &seq), LLMC_STATUS_BUSY);
  llmc_scheduler *second = nullptr;
  EXPECT_EQ(llmc_scheduler_create(engine_, nullptr, &second), LLMC_STATUS_BUSY);

  llmc_request_params params;
  llmc_request_params_init(&params);
  params.prompt = prompt.data();
  params.prompt_length = prompt.size();
  params.max_tokens = 30;
  params.ignore_eos = 1;
  Collected greedy, cancelled;
  llmc_request_id a = 0, b = 0, c = 0;
  ASSERT_EQ(llmc_scheduler_submit(scheduler, &params, collectEvent, &greedy, &a), LLMC_STATUS_OK)
      << llmc_last_error();
  // The same prompt as ids, cancelled from its callback after 3 tokens.
  std::vector<int32_t> ids = tokenize(prompt);
  params.prompt = nullptr;
  params.prompt_length = 0;
  params.prompt_ids = ids.data();
  params.num_prompt_ids = ids.size();
  cancelled.cancelAfter = 3;
  ASSERT_EQ(llmc_scheduler_submit(scheduler, &params, collectEvent, &cancelled, &b),
            LLMC_STATUS_OK);
  // Polled, with a stop string taken from the middle of the greedy text.
  const std::string stop = expected.substr(12, 6);
  const char *stops[1] = {stop.c_str()};
  params.stop = stops;
  params.num_stop = 1;
  ASSERT_EQ(llmc_scheduler_submit(scheduler, &params, nullptr, nullptr, &c), LLMC_STATUS_OK);
  EXPECT_NE(a, b);

  std::string polledText;
  int polledFinals = 0;
  llmc_finish_reason polledReason = LLMC_FINISH_LENGTH;
  int32_t hasWork = 1;
  for (int step = 0; hasWork != 0 && step < 500; ++step) {
    ASSERT_EQ(llmc_scheduler_step(scheduler, &hasWork), LLMC_STATUS_OK) << llmc_last_error();
    llmc_request_event events[4];
    size_t count = 0;
    do {
      ASSERT_EQ(llmc_scheduler_poll(scheduler, events, 4, &count), LLMC_STATUS_OK);
      for (size_t i = 0; i < count; ++i) {
        EXPECT_EQ(events[i].id, c);
        polledText.append(events[i].text, events[i].text_length);
        if (events[i].finished) {
          ++polledFinals;
          polledReason = events[i].finish_reason;
        }
      }
    } while (count == 4);
  }
  EXPECT_EQ(hasWork, 0);
  EXPECT_EQ(greedy.text, expected);
  EXPECT_EQ(greedy.finals, 1);
  EXPECT_EQ(greedy.reason, LLMC_FINISH_LENGTH);
  EXPECT_EQ(greedy.generated, 30);
  EXPECT_EQ(cancelled.finals, 1);
  EXPECT_EQ(cancelled.reason, LLMC_FINISH_CANCELLED);
  EXPECT_EQ(cancelled.tokens.size(), 3u);
  EXPECT_EQ(expected.rfind(cancelled.text, 0), 0u) << cancelled.text;
  EXPECT_EQ(polledFinals, 1);
  EXPECT_EQ(polledReason, LLMC_FINISH_STOP);
  EXPECT_EQ(polledText, expected.substr(0, expected.find(stop)));

  llmc_scheduler_stats stats;
  ASSERT_EQ(llmc_scheduler_get_stats(scheduler, &stats), LLMC_STATUS_OK);
  EXPECT_EQ(stats.running + stats.waiting, 0);
  EXPECT_GE(stats.finished, 1);
  EXPECT_GE(stats.cancelled, 2); // the callback's cancel and the stop string's
  EXPECT_GT(stats.prefix_hit_tokens, 0); // the same prompt three times
  EXPECT_EQ(llmc_scheduler_cancel(scheduler, a), LLMC_STATUS_NOT_FOUND);
  llmc_scheduler_destroy(scheduler);
  // The engine is free again.
  EXPECT_EQ(greedyText(prompt, 30), expected);
}

TEST_F(CApiEmbedTest, SchedulerRefusesBadRequestsAndCancelsAtDestroy) {
  llmc_scheduler_options options;
  llmc_scheduler_options_init(&options);
  options.max_num_seqs = 0;
  llmc_scheduler *scheduler = nullptr;
  EXPECT_EQ(llmc_scheduler_create(engine_, &options, &scheduler), LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("max_num_seqs"), std::string::npos)
      << llmc_last_error();
  ASSERT_EQ(llmc_scheduler_create(engine_, nullptr, &scheduler), LLMC_STATUS_OK);
  llmc_request_params params;
  llmc_request_params_init(&params);
  llmc_request_id id = 0;
  EXPECT_EQ(llmc_scheduler_submit(scheduler, &params, nullptr, nullptr, &id),
            LLMC_STATUS_INVALID_ARGUMENT); // no prompt
  const int32_t outside[2] = {1, 100000};
  params.prompt_ids = outside;
  params.num_prompt_ids = 2;
  EXPECT_EQ(llmc_scheduler_submit(scheduler, &params, nullptr, nullptr, &id),
            LLMC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llmc_last_error()).find("100000"), std::string::npos)
      << llmc_last_error();
  const int32_t fine[2] = {1, 100};
  params.prompt_ids = fine;
  params.max_tokens = 100000; // over max_seq_len
  EXPECT_EQ(llmc_scheduler_submit(scheduler, &params, nullptr, nullptr, &id),
            LLMC_STATUS_INVALID_ARGUMENT);
  params.max_tokens = 50;
  const char *empty[1] = {""};
  params.stop = empty;
  params.num_stop = 1;
  EXPECT_EQ(llmc_scheduler_submit(scheduler, &params, nullptr, nullptr, &id),
            LLMC_STATUS_INVALID_ARGUMENT);
  params.stop = nullptr;
  params.num_stop = 0;
  Collected live;
  ASSERT_EQ(llmc_scheduler_submit(scheduler, &params, collectEvent, &live, &id), LLMC_STATUS_OK);
  ASSERT_EQ(llmc_scheduler_step(scheduler, nullptr), LLMC_STATUS_OK);
  llmc_scheduler_destroy(scheduler); // the request still runs: it ends CANCELLED
  EXPECT_EQ(live.finals, 1);
  EXPECT_EQ(live.reason, LLMC_FINISH_CANCELLED);
  llmc_scheduler_destroy(nullptr);
  llmc_sequence_id seq = 0;
  EXPECT_EQ(llmc_sequence_add(engine_, &seq), LLMC_STATUS_OK);
}

} // namespace
} // namespace llmc
