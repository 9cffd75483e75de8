// The OpenAI-compatible HTTP server over a serving::ServingLoop:
//   POST /v1/completions, POST /v1/chat/completions (JSON or SSE streams),
//   GET /v1/models, GET /health, GET /metrics.
// It parses and validates requests (server/request.h), tokenizes them,
// submits one serving request per choice, turns token events into text
// (generation::TextStream: the prompt as context, stop strings) and writes
// OpenAI-shaped responses. It never touches KV blocks or the engine's steps.
//
// HTTP runs on cpp-httplib: one pool thread per open connection (see
// docs/serving.md, "Connections"), so the pool is sized for the loop's
// max_num_seqs plus headroom.
#pragma once

#include "server/metrics.h"
#include "server/request.h"
#include "serving/serving_loop.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace llmc::chat {
struct ChatTemplate;
}

namespace llmc::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;             // 0: a free port chosen by the system (tests)
  std::string modelName;       // the served model name ("model" in requests and responses)
  std::string apiKey;          // "": no authentication
  size_t maxBodyBytes = size_t(8) << 20; // larger bodies get 413
  int httpThreads = 0;         // connections served at once; 0: max_num_seqs + 64
  RequestLimits limits;
  // The chat template (null: chat requests get 400 with chatTemplateMissing).
  std::shared_ptr<const chat::ChatTemplate> chatTemplate;
  std::string chatTemplateMissing = "this server has no chat template: start it with "
                                    "--chat-template FILE";
};

// Reads and parses a Jinja chat template file (--chat-template); fails when
// this llmc was built without the chat-template engine.
Expected<std::shared_ptr<const chat::ChatTemplate>> loadChatTemplateFile(const std::string &path);

// The plan's own chat template ("default", else the first), parsed; null
// when the plan has none.
Expected<std::shared_ptr<const chat::ChatTemplate>> chatTemplateFromPlan(const Plan &plan);

class HttpServer {
public:
  // Binds host:port and starts serving on a thread of its own. The engine
  // and the loop must outlive the server.
  static Expected<std::unique_ptr<HttpServer>> start(Engine &engine, serving::ServingLoop &loop,
                                                     ServerOptions options);
  ~HttpServer();

  int port() const { return port_; }
  const ServerOptions &options() const { return options_; }
  const ServerMetrics &metrics() const { return *metrics_; }

  // Stops taking requests (new ones get 503), ends the in-flight ones
  // (Drain: let them finish within the loop's drainSeconds; Abort: now),
  // waits for their responses to be written, then closes the listener and
  // joins every thread. Idempotent.
  void shutdown(serving::ShutdownMode mode);

private:
  HttpServer(Engine &engine, serving::ServingLoop &loop, ServerOptions options);
  void installRoutes();

  Engine &engine_;
  serving::ServingLoop &loop_;
  ServerOptions options_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> inFlight_{0}; // HTTP generation requests not yet answered
  std::mutex shutdownMutex_;
  bool shutDown_ = false;
};

} // namespace llmc::server
