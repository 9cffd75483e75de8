// The HTTP server in-process on 127.0.0.1 (a free port) over the tiny
// default model: responses equal solo generation, streaming equals
// non-streaming, disconnects free their KV blocks, a small KV pool serves
// many long requests, metrics go back to zero, and every bad request gets
// OpenAI's error shape naming the field.
#include "server_fixture.h"

#include "plan/plan_fixture.h"
#include "schema/engine_generated.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace llmc::test {
namespace {

std::string promptFor(int i) { return "Once upon a time " + std::to_string(i) + " there was"; }

Json completion(const std::string &prompt, int64_t maxTokens, bool stream = false) {
  return {{"model", "tiny"},   {"prompt", prompt}, {"max_tokens", maxTokens},
          {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
}

// The text of a streamed completion, or of each choice when n > 1.
std::string streamedText(const Stream &stream, size_t choice = 0) {
  std::string text;
  for (const Json &chunk : stream.chunks())
    for (const Json &c : chunk["choices"])
      if (c["index"] == choice)
        text += c.contains("text") ? c["text"].get<std::string>()
                                   : c["delta"].value("content", std::string());
  return text;
}

// Waits (bounded) until the loop has nothing running or waiting.
serving::SchedulerStats waitIdle(TestServer &server) {
  serving::SchedulerStats stats;
  for (int i = 0; i < 500; ++i) {
    stats = server.loop().metrics();
    if (stats.running == 0 && stats.waiting == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return stats;
}

TEST(Server, CompletionShape) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  auto [status, body] = server.post("/v1/completions", completion("Hello", 5).dump());
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_TRUE(body["created"].is_number_integer());
  EXPECT_EQ(body["model"], "tiny");
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(body["choices"][0]["text"].is_string());
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  int64_t promptTokens = static_cast<int64_t>(server.engine().tokenizer().encode("Hello", true).size());
  EXPECT_EQ(body["usage"]["prompt_tokens"], promptTokens);
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"], promptTokens + 5);
}

TEST(Server, ModelsHealthAndUnknownPath) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  int status = 0;
  Json models = Json::parse(server.get("/v1/models", &status));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  server.get("/health", &status);
  EXPECT_EQ(status, 200);
  Json missing = Json::parse(server.get("/v1/nothing", &status), nullptr, false);
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(missing["error"]["message"].is_string()) << missing.dump();
}

TEST(Server, BadRequestMatrix) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  const int64_t context = server.engine().model().max_seq_len();
  struct Case {
    std::string path, body;
    int status;
    const char *param; // nullptr: error.param is null
  };
  std::vector<int> longPrompt(static_cast<size_t>(context), 5);
  const std::vector<Case> cases = {
      {"/v1/completions", "not json", 400, nullptr},
      {"/v1/completions", R"({"prompt": ""})", 400, "prompt"},
      {"/v1/completions", R"({"prompt": "a", "max_tokens": "x"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "a", "temperature": -1})", 400, "temperature"},
      {"/v1/completions", R"({"prompt": "a", "n": 1000})", 400, "n"},
      {"/v1/completions", R"({"prompt": "a", "model": "gpt-4"})", 404, "model"},
      {"/v1/completions", R"({"prompt": [99999]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt": "a", "max_tokens": )" + std::to_string(context) + "}",
       400, "max_tokens"},
      {"/v1/completions", Json({{"prompt", longPrompt}}).dump(), 400, "prompt"},
      {"/v1/completions", R"({"prompt": "a", "echo": true, "logprobs": 21})", 400, "logprobs"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}],
                                   "max_completion_tokens": 100000})",
       400, "max_completion_tokens"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.body);
    auto [status, body] = server.post(c.path, c.body);
    EXPECT_EQ(status, c.status) << body.dump();
    ASSERT_TRUE(body.is_object() && body.contains("error")) << body.dump();
    const Json &error = body["error"];
    EXPECT_TRUE(error["message"].is_string() && !error["message"].get<std::string>().empty());
    EXPECT_TRUE(error["type"].is_string());
    EXPECT_EQ(error["code"], c.status);
    if (c.param)
      EXPECT_EQ(error["param"], c.param);
    else
      EXPECT_TRUE(error["param"].is_null());
  }
  // Nothing above reached the scheduler.
  EXPECT_EQ(server.loop().metrics().promptTokens, 0);
}

TEST(Server, BodyOverTheLimitIs413) {
  ServerConfig config;
  config.maxBodyBytes = 4096;
  TestServer server(config);
  ASSERT_TRUE(server.ok());
  Json body = completion(std::string(8192, 'a'), 1);
  auto [status, answer] = server.post("/v1/completions", body.dump());
  EXPECT_EQ(status, 413);
  EXPECT_EQ(answer["error"]["code"], 413) << answer.dump();
}

TEST(Server, ApiKey) {
  ServerConfig config;
  config.apiKey = "sesame";
  TestServer server(config);
  ASSERT_TRUE(server.ok());
  std::string body = completion("a", 1).dump();
  EXPECT_EQ(server.post("/v1/completions", body).first, 401);
  EXPECT_EQ(server.post("/v1/completions", body, {{"Authorization", "Bearer wrong"}}).first, 401);
  EXPECT_EQ(server.post("/v1/completions", body, {{"Authorization", "sesame"}}).first, 401);
  auto [status, answer] = server.post("/v1/completions", body, {{"Authorization", "Bearer sesame"}});
  EXPECT_EQ(status, 200) << answer.dump();
  int health = 0;
  server.get("/health", &health);
  EXPECT_EQ(health, 200); // health and metrics stay open for probes
}

// Deterministic, not timed: the first request's callback holds the loop
// thread at its first token (callbacks run on the loop thread), so nothing
// finishes or gets admitted meanwhile. The second request then fills the
// one waiting place and the third, over HTTP, must get 503 at once.
TEST(Server, WaitingQueueOverItsBoundIs503) {
  ServerConfig config;
  config.maxNumSeqs = 1;
  config.maxWaiting = 1;
  TestServer server(config);
  ASSERT_TRUE(server.ok());
  std::mutex mutex;
  std::condition_variable changed;
  bool holding = false, release = false;
  serving::RequestParams first;
  first.prompt = server.engine().tokenizer().encode("a", true);
  first.maxTokens = 8;
  first.ignoreEos = true;
  serving::SubmitResult a = server.loop().submit(first, [&](const serving::TokenEvent &) {
    std::unique_lock<std::mutex> lock(mutex);
    if (release || holding) // hold the loop once, at the first token
      return;
    holding = true;
    changed.notify_all();
    changed.wait_for(lock, std::chrono::seconds(20), [&] { return release; });
  });
  ASSERT_EQ(a.status, serving::SubmitStatus::Accepted) << a.message;
  auto unblock = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
    changed.notify_all();
  };
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(60), [&] { return holding; }))
        << "the first request never produced a token";
  }
  serving::SubmitResult b = server.loop().submit(first, [](const serving::TokenEvent &) {});
  EXPECT_EQ(b.status, serving::SubmitStatus::Accepted) << b.message;
  auto [status, body] = server.post("/v1/completions", completion("c", 5).dump());
  EXPECT_EQ(status, 503) << body.dump();
  EXPECT_EQ(body["error"]["code"], 503) << body.dump();
  unblock();
  server.server().shutdown(serving::ShutdownMode::Abort);
}

TEST(Server, ConcurrentGreedyRequestsEqualSoloRuns) {
  constexpr int kRequests = 128;
  constexpr int64_t kTokens = 12;
  SoloRunner solo;
  std::vector<std::string> expected;
  for (int i = 0; i < kRequests; ++i)
    expected.push_back(solo.run(promptFor(i), kTokens).text);
  TestServer server;
  ASSERT_TRUE(server.ok());
  std::vector<Json> answers(kRequests);
  std::vector<int> statuses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      auto [status, body] = server.post("/v1/completions", completion(promptFor(i), kTokens).dump());
      statuses[i] = status;
      answers[i] = body;
    });
  for (std::thread &t : clients)
    t.join();
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(statuses[i], 200) << answers[i].dump();
    EXPECT_EQ(answers[i]["choices"][0]["text"], expected[i]);
    EXPECT_EQ(answers[i]["usage"]["completion_tokens"], kTokens);
  }
}

// The HTTP pool holds max_num_seqs + 64 connections: 256 streams at once
// (the default max_num_seqs) all get served, none starved.
TEST(Server, Holds256ConcurrentStreams) {
  constexpr int kStreams = 256;
  TestServer server;
  ASSERT_TRUE(server.ok());
  std::vector<Stream> streams(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i)
    clients.emplace_back([&, i] {
      streams[i] = streamPost(server.port(), "/v1/completions", completion(promptFor(i), 4, true));
    });
  for (std::thread &t : clients)
    t.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(streams[i].status, 200);
    ASSERT_FALSE(streams[i].events.empty());
    EXPECT_EQ(streams[i].events.back(), "[DONE]");
  }
  EXPECT_EQ(server.loop().metrics().generationTokens, 4 * kStreams);
}

TEST(Server, StreamingEqualsNonStreaming) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  for (int i = 0; i < 4; ++i) {
    Json request = completion(promptFor(i), 20);
    request["stream"] = true;
    request["stream_options"] = {{"include_usage", true}};
    Stream stream = streamPost(server.port(), "/v1/completions", request);
    ASSERT_EQ(stream.status, 200);
    ASSERT_FALSE(stream.events.empty());
    EXPECT_EQ(stream.events.back(), "[DONE]");
    std::vector<Json> chunks = stream.chunks();
    ASSERT_GE(chunks.size(), 2u);
    for (size_t k = 0; k + 1 < chunks.size(); ++k) {
      EXPECT_EQ(chunks[k]["object"], "text_completion");
      EXPECT_TRUE(chunks[k].contains("usage") && chunks[k]["usage"].is_null());
      EXPECT_EQ(chunks[k]["id"], chunks[0]["id"]);
    }
    const Json &last = chunks.back();
    EXPECT_TRUE(last["choices"].empty());
    EXPECT_EQ(last["usage"]["completion_tokens"], 20);
    EXPECT_EQ(chunks[chunks.size() - 2]["choices"][0]["finish_reason"], "length");
    request.erase("stream_options");
    request["stream"] = false;
    auto [status, body] = server.post("/v1/completions", request.dump());
    ASSERT_EQ(status, 200);
    EXPECT_EQ(streamedText(stream), body["choices"][0]["text"].get<std::string>());
  }
}

TEST(Server, ChatStreamingEqualsNonStreaming) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  Json request = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                  {"max_completion_tokens", 16},
                  {"temperature", 0},
                  {"ignore_eos", true}};
  auto [status, body] = server.post("/v1/chat/completions", request.dump());
#if !LLMC_SERVER_HAVE_CHAT
  EXPECT_EQ(status, 400);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("chat"), std::string::npos);
  GTEST_SKIP() << "built without the chat-template engine (runtime/chat)";
#endif
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["usage"]["completion_tokens"], 16);
  request["stream"] = true;
  Stream stream = streamPost(server.port(), "/v1/chat/completions", request);
  ASSERT_EQ(stream.status, 200);
  std::vector<Json> chunks = stream.chunks();
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(streamedText(stream), body["choices"][0]["message"]["content"].get<std::string>());
}

TEST(Server, NChoicesStopStringsEchoLogprobs) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  SoloRunner solo;
  const std::string prompt = promptFor(7);
  const std::string full = solo.run(prompt, 20).text;
  ASSERT_GE(full.size(), 6u);
  // A stop string inside the greedy text cuts the output right before it.
  const std::string stop = full.substr(full.size() / 2, 3);
  Json request = completion(prompt, 20);
  request["stop"] = stop;
  request["n"] = 2;
  auto [status, body] = server.post("/v1/completions", request.dump());
  ASSERT_EQ(status, 200) << body.dump();
  ASSERT_EQ(body["choices"].size(), 2u);
  for (const Json &choice : body["choices"]) {
    EXPECT_EQ(choice["text"], full.substr(0, full.find(stop)));
    EXPECT_EQ(choice["finish_reason"], "stop");
  }
  EXPECT_EQ(body["choices"][1]["index"], 1);
  // echo puts the prompt in front.
  Json echo = completion(prompt, 20);
  echo["echo"] = true;
  auto [echoStatus, echoed] = server.post("/v1/completions", echo.dump());
  ASSERT_EQ(echoStatus, 200);
  EXPECT_EQ(echoed["choices"][0]["text"], prompt + full);
  // logprobs in OpenAI's completions format, one entry per token.
  Json lp = completion(prompt, 6);
  lp["logprobs"] = 3;
  auto [lpStatus, withLogprobs] = server.post("/v1/completions", lp.dump());
  ASSERT_EQ(lpStatus, 200) << withLogprobs.dump();
  const Json &logprobs = withLogprobs["choices"][0]["logprobs"];
  ASSERT_TRUE(logprobs.is_object()) << withLogprobs.dump();
  ASSERT_EQ(logprobs["tokens"].size(), 6u);
  ASSERT_EQ(logprobs["token_logprobs"].size(), 6u);
  ASSERT_EQ(logprobs["top_logprobs"].size(), 6u);
  ASSERT_EQ(logprobs["text_offset"].size(), 6u);
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_LE(logprobs["token_logprobs"][k].get<double>(), 0.0);
    EXPECT_GE(logprobs["top_logprobs"][k].size(), 1u);
    EXPECT_LE(logprobs["top_logprobs"][k].size(), 3u);
  }
  std::string joined;
  for (const Json &t : logprobs["tokens"])
    joined += t.get<std::string>();
  EXPECT_EQ(joined, withLogprobs["choices"][0]["text"].get<std::string>());
}

double logSoftmaxAt(const float *row, int64_t vocab, int32_t id) {
  float best = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v)
    best = std::max(best, row[v]);
  double total = 0;
  for (int64_t v = 0; v < vocab; ++v)
    total += std::exp(static_cast<double>(row[v]) - best);
  return row[id] - best - std::log(total);
}

// echo with logprobs (OpenAI's legacy scoring call): the prompt's tokens
// lead the logprobs, the first with null, each the log-softmax of the
// logits before it; streamed the same.
void checkEchoWithLogprobs(const std::string &plan) {
  ServerConfig config;
  config.plan = plan;
  TestServer server(config);
  ASSERT_TRUE(server.ok());
  SoloRunner solo(plan);
  const std::string prompt = promptFor(3);
  const std::vector<int32_t> ids = server.engine().tokenizer().encode(prompt, true);
  const size_t n = ids.size();
  ASSERT_GE(n, 3u);
  Json request = completion(prompt, 4);
  request["echo"] = true;
  request["logprobs"] = 2;
  auto [status, body] = server.post("/v1/completions", request.dump());
  ASSERT_EQ(status, 200) << body.dump();
  const Json &lp = body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), n + 4) << lp.dump();
  ASSERT_EQ(lp["token_logprobs"].size(), n + 4);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["text_offset"][0], 0);
  const std::vector<float> logits = solo.promptLogits(ids);
  ASSERT_EQ(logits.size(), n * static_cast<size_t>(solo.vocab()));
  for (size_t i = 1; i < n; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(lp["token_logprobs"][i].is_number());
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(),
                logSoftmaxAt(logits.data() + (i - 1) * solo.vocab(), solo.vocab(), ids[i]), 2e-3);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
    EXPECT_GE(lp["text_offset"][i].get<size_t>(), lp["text_offset"][i - 1].get<size_t>());
  }
  const std::string generated = solo.run(prompt, 4).text;
  EXPECT_EQ(body["choices"][0]["text"], prompt + generated);
  // Offsets count the token texts from the start (the prompt's tokens decode
  // with the BOS text, so they run past the echoed prompt string).
  std::string joined;
  for (size_t i = 0; i < n + 4; ++i) {
    EXPECT_EQ(lp["text_offset"][i], joined.size()) << i;
    joined += lp["tokens"][i].get<std::string>();
  }
  EXPECT_EQ(joined.substr(joined.size() - generated.size()), generated);
  for (size_t i = n; i < n + 4; ++i)
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
  // Streamed: the same text and the same logprobs, in order.
  request["stream"] = true;
  Stream stream = streamPost(server.port(), "/v1/completions", request);
  ASSERT_EQ(stream.status, 200);
  EXPECT_EQ(streamedText(stream), prompt + generated);
  Json streamedLogprobs = Json::array();
  for (const Json &chunk : stream.chunks())
    for (const Json &c : chunk["choices"])
      if (c["logprobs"].is_object())
        for (const Json &v : c["logprobs"]["token_logprobs"])
          streamedLogprobs.push_back(v);
  ASSERT_EQ(streamedLogprobs.size(), n + 4);
  EXPECT_TRUE(streamedLogprobs[0].is_null());
  for (size_t i = 1; i < n + 4; ++i)
    EXPECT_NEAR(streamedLogprobs[i].get<double>(), lp["token_logprobs"][i].get<double>(), 2e-3);
}

TEST(Server, EchoWithLogprobsScoresThePrompt) { checkEchoWithLogprobs(defaultModelPlan()); }

// The synthetic model (a fresh clone's, without ../shared) generates tokens
// that end inside UTF-8 characters: their offsets still count the listed
// token texts, not the text the stream has let out so far.
TEST(Server, EchoWithLogprobsOffsetsCountTokenTextsOnTheSyntheticModel) {
  checkEchoWithLogprobs(syntheticModelPlan());
}

// The server and the CLI (generateBatch, `llmrun -p --logprobs`) sample and
// report logprobs the same way: a seeded, penalized request gives the same
// tokens and the same (raw) logprobs.
TEST(Server, LogprobsAgreeWithTheCli) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  SoloRunner solo;
  const std::string prompt = promptFor(5);
  Json request = {{"prompt", prompt},         {"max_tokens", 8},      {"temperature", 0.8},
                  {"top_p", 0.9},             {"presence_penalty", 0.5},
                  {"frequency_penalty", 0.3}, {"seed", 42},           {"ignore_eos", true},
                  {"logprobs", 3}};
  auto [status, body] = server.post("/v1/completions", request.dump());
  ASSERT_EQ(status, 200) << body.dump();
  GenerateOptions options;
  options.maxNewTokens = 8;
  options.ignoreEos = true;
  options.sampling.temperature = 0.8f;
  options.sampling.topP = 0.9f;
  options.sampling.presencePenalty = 0.5f;
  options.sampling.frequencyPenalty = 0.3f;
  options.sampling.seed = 42;
  options.sampling.logprobs = 3;
  GenerateResult cli = solo.runWith(prompt, options);
  EXPECT_EQ(body["choices"][0]["text"], cli.text);
  const Json &lp = body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), cli.logprobs.size());
  for (size_t i = 0; i < cli.logprobs.size(); ++i) {
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), cli.logprobs[i].chosen.logprob, 2e-3);
    // A text is one key: ids with the same text (pieces of a UTF-8
    // character, on the synthetic model) list once, with the most likely's
    // logprob, so the most likely of all is there.
    const Json &top = lp["top_logprobs"][i];
    const std::vector<sampling::TokenLogprob> &want = cli.logprobs[i].top;
    ASSERT_FALSE(want.empty());
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), want.size());
    double best = -INFINITY;
    for (const auto &item : top.items()) {
      const double value = item.value().get<double>();
      best = std::max(best, value);
      EXPECT_TRUE(std::any_of(
          want.begin(), want.end(),
          [&](const sampling::TokenLogprob &t) { return std::abs(t.logprob - value) < 2e-3; }))
          << "'" << item.key() << "' at " << i;
    }
    EXPECT_NEAR(best, want.front().logprob, 2e-3) << i;
  }
}

// The plan's generation_config.json defaults fill what a request leaves out
// (vLLM's behaviour); a field the request sets wins.
TEST(Server, PlanGenerationDefaultsFillTheFieldsLeftOut) {
  const std::string plan = scratchDir("server-genconfig") + "/defaults.plan";
  std::filesystem::copy_file(defaultModelPlan(), plan,
                             std::filesystem::copy_options::overwrite_existing);
  rewriteMetadata(plan, [](fb::PlanT &meta) {
    meta.generation = std::make_unique<fb::GenerationDefaultsT>();
    meta.generation->temperature = 1.0f;
    meta.generation->top_k = 1; // greedy unless the request sets top_k
    meta.generation->max_new_tokens = 6;
  });
  ServerConfig config;
  config.plan = plan;
  TestServer server(config);
  ASSERT_TRUE(server.ok());
  SoloRunner solo(plan);
  const std::string prompt = promptFor(11);
  const std::string greedy16 = solo.run(prompt, 16).text;
  // No max_tokens, no sampling fields: min(16, max_new_tokens) greedy tokens.
  Json bare = {{"prompt", prompt}, {"ignore_eos", true}};
  auto [s1, a] = server.post("/v1/completions", bare.dump());
  ASSERT_EQ(s1, 200) << a.dump();
  EXPECT_EQ(a["usage"]["completion_tokens"], 6);
  EXPECT_EQ(a["choices"][0]["text"], solo.run(prompt, 6).text);
  // An explicit max_tokens wins over max_new_tokens; still top_k 1.
  bare["max_tokens"] = 16;
  auto [s2, b] = server.post("/v1/completions", bare.dump());
  ASSERT_EQ(s2, 200) << b.dump();
  EXPECT_EQ(b["usage"]["completion_tokens"], 16);
  EXPECT_EQ(b["choices"][0]["text"], greedy16);
  // An explicit top_k (-1: off) wins: temperature 1 sampling, seeded.
  bare["top_k"] = -1;
  bare["seed"] = 7;
  auto [s3, c] = server.post("/v1/completions", bare.dump());
  ASSERT_EQ(s3, 200) << c.dump();
  EXPECT_NE(c["choices"][0]["text"], greedy16);
  // Chat: the rest of the context, lowered to max_new_tokens.
  Json chat = {{"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})},
               {"ignore_eos", true}};
  auto [s4, d] = server.post("/v1/chat/completions", chat.dump());
  ASSERT_EQ(s4, 200) << d.dump();
  EXPECT_EQ(d["usage"]["completion_tokens"], 6);
}

TEST(Server, SeededSamplingIsReproducible) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  Json request = {{"prompt", "Once"}, {"max_tokens", 16}, {"temperature", 1.0},
                  {"top_p", 0.9},     {"seed", 1234},     {"ignore_eos", true}};
  auto [s1, a] = server.post("/v1/completions", request.dump());
  auto [s2, b] = server.post("/v1/completions", request.dump());
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
}

// After TensorRT-LLM CVE-2026-24205 (cancellation mid-prefill leaked KV
// blocks across requests): clients hang up mid-stream; every survivor equals
// its solo run and the pool ends fully free.
TEST(Server, DisconnectsAbortAndFreeTheirBlocks) {
  constexpr int kRounds = 10, kPerRound = 16;
  constexpr int64_t kTokens = 16;
  SoloRunner solo;
  TestServer server;
  ASSERT_TRUE(server.ok());
  for (int round = 0; round < kRounds; ++round) {
    std::vector<Stream> streams(kPerRound);
    std::vector<std::thread> clients;
    for (int i = 0; i < kPerRound; ++i)
      clients.emplace_back([&, i] {
        std::string prompt = promptFor(1000 + round * kPerRound + i);
        bool hangUp = i % 4 == 0; // 25%
        streams[i] = streamPost(server.port(), "/v1/completions", completion(prompt, kTokens, true),
                                hangUp ? 1 : -1);
      });
    for (std::thread &t : clients)
      t.join();
    for (int i = 0; i < kPerRound; ++i) {
      if (i % 4 == 0) {
        EXPECT_TRUE(streams[i].cut);
        continue;
      }
      SCOPED_TRACE(std::to_string(round) + "/" + std::to_string(i));
      ASSERT_EQ(streams[i].status, 200);
      EXPECT_EQ(streamedText(streams[i]),
                solo.run(promptFor(1000 + round * kPerRound + i), kTokens).text);
    }
  }
  serving::SchedulerStats stats = waitIdle(server);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.kvUsage, 0.0);
  EXPECT_GE(stats.aborted, 1);
}

// A non-streaming request whose client hangs up mid-generation is aborted
// at the next iteration (its blocks freed) instead of running to its end;
// requests alongside it keep their solo outputs.
TEST(Server, NonStreamingClientThatHangsUpIsAborted) {
  constexpr int64_t kLong = 400;
  SoloRunner solo;
  TestServer server;
  ASSERT_TRUE(server.ok());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server.port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address), 0);
  const std::string body = completion(promptFor(77), kLong).dump();
  const std::string http = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "Content-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, http.data(), http.size(), 0), static_cast<ssize_t>(http.size()));
  std::vector<std::pair<int, Json>> others(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      others[i] = server.post("/v1/completions", completion(promptFor(i), 24).dump());
    });
  for (int i = 0; i < 1000 && server.loop().metrics().generationTokens < 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::close(fd); // gone before its 400 tokens
  for (std::thread &t : clients)
    t.join();
  serving::SchedulerStats stats = waitIdle(server);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.aborted, 1);
  EXPECT_EQ(stats.kvUsage, 0.0);
  EXPECT_EQ(server.engine().availableBlocks(), server.engine().usableBlocks());
  EXPECT_LT(stats.generationTokens, kLong + 4 * 24);
  EXPECT_EQ(server.server().metrics().successAbort.load(), 1);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(others[i].first, 200);
    EXPECT_EQ(others[i].second["choices"][0]["text"], solo.run(promptFor(i), 24).text);
  }
}

TEST(Server, SmallKvPoolServesManyLongRequests) {
  constexpr int kRequests = 48;
  constexpr int64_t kTokens = 200;
  ServerConfig config;
  config.kvCacheTokens = 1024;
  TestServer server(config);
  ASSERT_TRUE(server.ok());
  SoloRunner solo;
  std::vector<Json> answers(kRequests);
  std::vector<int> statuses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      std::tie(statuses[i], answers[i]) =
          server.post("/v1/completions", completion(promptFor(i), kTokens).dump());
    });
  for (std::thread &t : clients)
    t.join();
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(statuses[i], 200) << answers[i].dump();
    EXPECT_EQ(answers[i]["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(answers[i]["usage"]["completion_tokens"], kTokens);
    if (i % 8 == 0) // solo runs are the slow part: check a sixth of them
      EXPECT_EQ(answers[i]["choices"][0]["text"], solo.run(promptFor(i), kTokens).text);
  }
  EXPECT_GT(server.loop().metrics().preemptions, 0);
}

double metricValue(const std::string &text, const std::string &name) {
  size_t at = text.find("\n" + name + "{");
  if (at == std::string::npos)
    return -1;
  size_t space = text.find("} ", at);
  return std::stod(text.substr(space + 2, text.find('\n', space) - space - 2));
}

TEST(Server, MetricsGoBackToZero) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] {
      streamPost(server.port(), "/v1/completions", completion(promptFor(i), 10, true));
    });
  for (std::thread &t : clients)
    t.join();
  waitIdle(server);
  int status = 0;
  std::string text = server.get("/metrics", &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(metricValue(text, "llmc:num_requests_running"), 0);
  EXPECT_EQ(metricValue(text, "llmc:num_requests_waiting"), 0);
  EXPECT_EQ(metricValue(text, "llmc:kv_cache_usage_perc"), 0);
  EXPECT_EQ(metricValue(text, "llmc:generation_tokens_total"), 80);
  EXPECT_GT(metricValue(text, "llmc:prompt_tokens_total"), 0);
  EXPECT_GE(metricValue(text, "llmc:prefix_cache_queries_total"), 0);
  EXPECT_GE(metricValue(text, "llmc:prefix_cache_hits_total"), 0);
  EXPECT_EQ(metricValue(text, "llmc:num_preemptions_total"), 0);
  EXPECT_EQ(metricValue(text, "llmc:time_to_first_token_seconds_count"), 8);
  EXPECT_EQ(metricValue(text, "llmc:inter_token_latency_seconds_count"), 72);
  EXPECT_EQ(metricValue(text, "llmc:e2e_request_latency_seconds_count"), 8);
  EXPECT_NE(text.find("# TYPE llmc:time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("llmc:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 8"),
            std::string::npos)
      << text;
}

} // namespace
} // namespace llmc::test
