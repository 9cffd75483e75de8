// In-process servers for the tests: the tiny default model (scripts/
// default-model, synthetic weights) built once per test binary, an Engine,
// a ServingLoop and an HttpServer on 127.0.0.1 and a free port, plus a few
// HTTP helpers (JSON posts, SSE streams).
#pragma once

#include "common/test_paths.h"
#include "driver/build.h"
#include "engine/generate.h"
#include "server/http_server.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace llmc::test {

using Json = nlohmann::json;

// A CPU plan of `input` (with synthetic weights of syntheticSeed when it has
// one) built into the scratch folder `name`.
inline std::string buildTestPlan(const std::string &name, const std::string &input,
                                 std::optional<uint64_t> syntheticSeed) {
  BuildOptions options;
  options.input = input;
  options.syntheticSeed = syntheticSeed;
  options.output = scratchDir(name) + "/test.plan";
  options.targets = "cpu";
  BuildReporter reporter;
  reporter.info = reporter.verbose = reporter.ir = reporter.warning = [](const std::string &) {};
  Status status = runBuild(options, reporter);
  if (!status)
    ADD_FAILURE() << "building " << input << ": " << status.message();
  return options.output;
}

// The default model's plan (synthetic weights, which a fresh clone always
// has), built once.
inline const std::string &syntheticModelPlan() {
  static const std::string plan = buildTestPlan(
      "server-synthetic-plan", std::string(LLMC_SOURCE_DIR) + "/scripts/default-model/model.json", 1);
  return plan;
}

// The test model's plan, built once into a scratch folder: stories260K
// (real text, so streams carry many pieces) when ../shared has it, else the
// default model (syntheticModelPlan).
inline const std::string &defaultModelPlan() {
  static const std::string plan = [] {
    const std::string stories = sharedPath("models/stories260k");
    if (!std::filesystem::exists(stories + "/model.safetensors"))
      return syntheticModelPlan();
    return buildTestPlan("server-plan", stories, std::nullopt);
  }();
  return plan;
}

struct ServerConfig {
  int64_t maxNumSeqs = 256;
  int64_t maxNumBatchedTokens = 2048;
  int64_t kvCacheTokens = 0; // 0: 64 sequences at full length
  int64_t maxWaiting = 1024;
  bool prefixCaching = true;
  std::string apiKey;
  size_t maxBodyBytes = size_t(1) << 20;
  bool chatTemplate = true;
  int threads = 2;
  std::string plan; // "": defaultModelPlan()
};

class TestServer {
public:
  explicit TestServer(const ServerConfig &config = ServerConfig()) {
    EngineOptions engineOptions;
    engineOptions.threads = config.threads;
    engineOptions.maxSequences = 64;
    engineOptions.kvCacheTokens = config.kvCacheTokens;
    auto engine =
        Engine::load(config.plan.empty() ? defaultModelPlan() : config.plan, engineOptions);
    if (!engine) {
      ADD_FAILURE() << engine.message();
      return;
    }
    engine_ = std::move(*engine);
    serving::ServingConfig loopConfig;
    loopConfig.scheduler.maxNumSeqs = config.maxNumSeqs;
    loopConfig.scheduler.maxNumBatchedTokens = config.maxNumBatchedTokens;
    loopConfig.scheduler.prefixCaching = config.prefixCaching;
    loopConfig.maxWaiting = config.maxWaiting;
    loopConfig.drainSeconds = 2.0;
    auto loop = serving::ServingLoop::start(*engine_, loopConfig);
    if (!loop) {
      ADD_FAILURE() << loop.message();
      return;
    }
    loop_ = std::move(*loop);
    server::ServerOptions options;
    options.port = 0;
    options.modelName = "tiny";
    options.apiKey = config.apiKey;
    options.maxBodyBytes = config.maxBodyBytes;
    if (config.chatTemplate) {
      auto tmpl = server::loadChatTemplateFile(std::string(LLMC_SOURCE_DIR) +
                                               "/tests/server/data/chat.jinja");
      if (tmpl)
        options.chatTemplate = *tmpl;
    }
    auto http = server::HttpServer::start(*engine_, *loop_, options);
    if (!http) {
      ADD_FAILURE() << http.message();
      return;
    }
    server_ = std::move(*http);
  }
  ~TestServer() {
    if (server_)
      server_->shutdown(serving::ShutdownMode::Abort);
  }

  bool ok() const { return server_ != nullptr; }
  int port() const { return server_->port(); }
  Engine &engine() { return *engine_; }
  serving::ServingLoop &loop() { return *loop_; }
  server::HttpServer &server() { return *server_; }

  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    c->set_read_timeout(60, 0);
    c->set_connection_timeout(30, 0);
    return c;
  }

  // POST path with a JSON body; the status and the parsed answer (null when it is no JSON).
  std::pair<int, Json> post(const std::string &path, const std::string &body,
                            const httplib::Headers &headers = {}) const {
    auto result = client()->Post(path.c_str(), headers, body, "application/json");
    if (!result)
      return {-1, Json()};
    return {result->status, Json::parse(result->body, nullptr, false)};
  }

  std::string get(const std::string &path, int *status = nullptr) const {
    auto result = client()->Get(path.c_str());
    if (status)
      *status = result ? result->status : -1;
    return result ? result->body : std::string();
  }

private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<serving::ServingLoop> loop_;
  std::unique_ptr<server::HttpServer> server_;
};

// A streamed answer: the data payloads in order (the last one "[DONE]").
struct Stream {
  int status = -1;
  std::vector<std::string> events;
  std::string raw;
  bool cut = false; // the client hung up on purpose

  // The parsed JSON events (without [DONE]).
  std::vector<Json> chunks() const {
    std::vector<Json> out;
    for (const std::string &e : events)
      if (e != "[DONE]")
        out.push_back(Json::parse(e, nullptr, false));
    return out;
  }
};

// Streams a POST; hangs up after `hangUpAfter` events when >= 0.
inline Stream streamPost(int port, const std::string &path, const Json &body,
                         int hangUpAfter = -1) {
  Stream stream;
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  std::string buffer;
  int textChunks = 0;
  auto receive = [&](const char *data, size_t size) {
    buffer.append(data, size);
    stream.raw.append(data, size);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) == 0) {
        stream.events.push_back(event.substr(6));
        ++textChunks;
      }
    }
    if (hangUpAfter >= 0 && textChunks >= hangUpAfter) {
      stream.cut = true;
      return false;
    }
    return true;
  };
  httplib::Request request; // cpp-httplib 0.11 streams a POST's answer only through send()
  request.method = "POST";
  request.path = path;
  request.set_header("Content-Type", "application/json");
  request.body = body.dump();
  request.content_receiver = [&](const char *data, size_t size, uint64_t, uint64_t) {
    return receive(data, size);
  };
  auto result = client.send(request);
  if (result)
    stream.status = result->status;
  return stream;
}

// Greedy generation of one prompt alone, as `llmrun -p` does it (a second
// engine, so nothing is shared with the server's).
class SoloRunner {
public:
  explicit SoloRunner(const std::string &plan = "") {
    EngineOptions options;
    options.threads = 2;
    auto engine = Engine::load(plan.empty() ? defaultModelPlan() : plan, options);
    EXPECT_TRUE(engine.isOk()) << engine.message();
    if (engine)
      engine_ = std::move(*engine);
  }

  GenerateResult run(const std::string &prompt, int64_t maxTokens) {
    GenerateOptions generate;
    generate.maxNewTokens = maxTokens;
    generate.sampling.temperature = 0.0f;
    generate.ignoreEos = true;
    auto results = generateBatch(*engine_, {engine_->tokenizer().encode(prompt, true)}, generate);
    EXPECT_TRUE(results.isOk()) << results.message();
    return results ? results->front() : GenerateResult();
  }

  // The same with any options (the path of `llmrun PLAN -p`).
  GenerateResult runWith(const std::string &prompt, const GenerateOptions &options) {
    auto results = generateBatch(*engine_, {engine_->tokenizer().encode(prompt, true)}, options);
    EXPECT_TRUE(results.isOk()) << results.message();
    return results ? results->front() : GenerateResult();
  }

  // The logits of every position of `ids`: [ids.size(), vocab].
  std::vector<float> promptLogits(const std::vector<int32_t> &ids) {
    GenerateOptions options;
    options.maxNewTokens = 0;
    options.keepAllLogits = true;
    auto results = generateBatch(*engine_, {ids}, options);
    EXPECT_TRUE(results.isOk()) << results.message();
    return results ? results->front().logits : std::vector<float>();
  }
  int64_t vocab() const { return engine_->vocabSize(); }

private:
  std::unique_ptr<Engine> engine_;
};

} // namespace llmc::test
