#include "server/http_server.h"

#include "server/completion.h"

#include <httplib.h>

#if LLMC_SERVER_HAVE_CHAT
#include "chat/chat_template.h"
#endif

#include <chrono>
#include <sys/socket.h>
#include <fstream>
#include <sstream>

namespace llmc::server {
namespace {

using Json = nlohmann::json;

// Constant-time for keys of the right length, so a key cannot be found byte
// by byte from response timings.
bool sameKey(const std::string &given, const std::string &key) {
  if (given.size() != key.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

bool authorized(const ServerOptions &options, const httplib::Request &request) {
  if (options.apiKey.empty())
    return true;
  const std::string header = request.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.compare(0, prefix.size(), prefix) != 0)
    return false;
  return sameKey(header.substr(prefix.size()), options.apiKey);
}

} // namespace

Expected<std::shared_ptr<const chat::ChatTemplate>> loadChatTemplateFile(const std::string &path) {
#if LLMC_SERVER_HAVE_CHAT
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot read the chat template");
  std::stringstream text;
  text << in.rdbuf();
  return chat::parseChatTemplate(text.str(), path);
#else
  return Status::error(path + ": this llmc was built without the chat-template engine "
                              "(runtime/chat)");
#endif
}

Expected<std::shared_ptr<const chat::ChatTemplate>> chatTemplateFromPlan(const Plan &plan) {
  const auto *templates = plan.meta().tokenizer()->chat_templates();
  if (templates == nullptr || templates->size() == 0)
    return std::shared_ptr<const chat::ChatTemplate>();
#if LLMC_SERVER_HAVE_CHAT
  const fb::ChatTemplate *chosen = templates->Get(0);
  for (const fb::ChatTemplate *t : *templates)
    if (t->name()->str() == "default")
      chosen = t;
  return chat::parseChatTemplate(chosen->source()->string_view(),
                                 "plan chat template '" + chosen->name()->str() + "'");
#else
  return std::shared_ptr<const chat::ChatTemplate>();
#endif
}

HttpServer::HttpServer(Engine &engine, serving::ServingLoop &loop, ServerOptions options)
    : engine_(engine), loop_(loop), options_(std::move(options)),
      metrics_(std::make_unique<ServerMetrics>()), http_(std::make_unique<httplib::Server>()) {}

HttpServer::~HttpServer() { shutdown(serving::ShutdownMode::Abort); }

void HttpServer::installRoutes() {
  httplib::Server &http = *http_;
  auto generation = [this](Endpoint endpoint) {
    return [this, endpoint](const httplib::Request &request, httplib::Response &response) {
      if (!authorized(options_, request))
        return setError(response, unauthorized());
      if (draining_)
        return setError(response, unavailable("the server is shutting down"));
      GenerationContext context{engine_, loop_, options_, *metrics_, inFlight_};
      handleGeneration(context, endpoint, request, response);
    };
  };
  http.Post("/v1/completions", generation(Endpoint::Completions));
  http.Post("/v1/chat/completions", generation(Endpoint::ChatCompletions));
  http.Get("/v1/models", [this](const httplib::Request &request, httplib::Response &response) {
    if (!authorized(options_, request))
      return setError(response, unauthorized());
    Json model = {{"id", options_.modelName},
                  {"object", "model"},
                  {"created", 0},
                  {"owned_by", "llmc"},
                  {"root", options_.modelName},
                  {"max_model_len", engine_.model().max_seq_len()}};
    Json body = {{"object", "list"}, {"data", Json::array({model})}};
    response.set_content(body.dump(), "application/json");
  });
  http.Get("/health", [this](const httplib::Request &, httplib::Response &response) {
    if (draining_)
      return setError(response, unavailable("the server is shutting down"));
    response.set_content("{\"status\":\"ok\"}", "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request &, httplib::Response &response) {
    response.set_content(metrics_->render(loop_.metrics(), options_.modelName),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  // Errors httplib answers itself (unknown path, body over the limit, a
  // request it cannot parse) get OpenAI's error body too.
  http.set_error_handler([this](const httplib::Request &request, httplib::Response &response) {
    if (!response.body.empty())
      return;
    switch (response.status) {
    case 404:
      return setError(response, notFound("", "no route for " + request.method + " " +
                                                 request.path +
                                                 "; see docs/serving.md for the endpoints"));
    case 413:
      return setError(response, payloadTooLarge(options_.maxBodyBytes));
    default: {
      ApiError error = badRequest("", "the HTTP request could not be served (status " +
                                          std::to_string(response.status) + ")");
      error.status = response.status;
      return setError(response, error);
    }
    }
  });
  http.set_exception_handler(
      [](const httplib::Request &, httplib::Response &response, std::exception_ptr failure) {
        std::string what = "unknown error";
        try {
          if (failure)
            std::rethrow_exception(failure);
        } catch (const std::exception &e) {
          what = e.what();
        } catch (...) {
        }
        setError(response, internalError("the server failed on this request: " + what));
      });
}

Expected<std::unique_ptr<HttpServer>> HttpServer::start(Engine &engine, serving::ServingLoop &loop,
                                                        ServerOptions options) {
  if (options.modelName.empty())
    return Status::error("server: the served model name is empty (--served-model-name)");
  if (options.port < 0 || options.port > 65535)
    return Status::error("server: port " + std::to_string(options.port) +
                         " is outside [0, 65535]");
  // The plan's generation defaults fill the fields requests leave out: a bad
  // one would fail every such request, so it fails here.
  if (const fb::GenerationDefaults *defaults = engine.plan().meta().generation()) {
    sampling::SamplingParams params;
    applyGenerationDefaults(defaults, GivenSampling{}, params);
    auto sampler = sampling::Sampler::create(params);
    if (!sampler)
      return Status::error("server: the plan's generation defaults (generation_config.json): " +
                           sampler.message());
  }
  std::unique_ptr<HttpServer> server(new HttpServer(engine, loop, std::move(options)));
  const ServerOptions &o = server->options_;
  // One pool thread serves one open connection for as long as it stays open
  // (a stream lasts the whole generation), so the pool holds every running
  // request's connection plus room for waiting ones and quick calls.
  size_t threads = o.httpThreads > 0
                       ? static_cast<size_t>(o.httpThreads)
                       : static_cast<size_t>(loop.config().scheduler.maxNumSeqs) + 64;
  server->http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server->http_->set_payload_max_length(o.maxBodyBytes);
  server->http_->set_keep_alive_max_count(1000);
  server->http_->set_keep_alive_timeout(5);
  server->http_->set_read_timeout(30, 0);
  server->http_->set_write_timeout(30, 0);
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of clients
  // connecting at once would see dropped SYNs and second-long retries. The
  // listening socket is captured here and its backlog raised after bind.
  auto listenSocket = std::make_shared<int>(-1);
  server->http_->set_socket_options([listenSocket](socket_t sock) {
    httplib::default_socket_options(sock);
    *listenSocket = sock;
  });
  server->installRoutes();
  int port = o.port;
  if (port == 0) {
    port = server->http_->bind_to_any_port(o.host);
    if (port < 0)
      return Status::error("server: cannot bind " + o.host + " to a free port");
  } else if (!server->http_->bind_to_port(o.host, port)) {
    return Status::error("server: cannot listen on " + o.host + ":" + std::to_string(port) +
                         " (in use, or not an address of this machine); pick another --port");
  }
  if (*listenSocket >= 0)
    ::listen(*listenSocket, SOMAXCONN);
  server->port_ = port;
  httplib::Server *http = server->http_.get();
  server->listener_ = std::thread([http] { http->listen_after_bind(); });
  return server;
}

void HttpServer::shutdown(serving::ShutdownMode mode) {
  std::lock_guard<std::mutex> lock(shutdownMutex_);
  if (shutDown_)
    return;
  shutDown_ = true;
  draining_ = true;
  loop_.shutdown(mode); // every request gets its final event
  // The handlers write what is left; give them a moment, bounded.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (inFlight_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http_->stop();
  if (listener_.joinable())
    listener_.join();
}

} // namespace llmc::server
