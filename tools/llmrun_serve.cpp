// llmrun serve engine.plan: the OpenAI-compatible HTTP server
// (docs/serving.md). SIGTERM / SIGINT stop it: new requests get 503, the
// in-flight ones finish (up to a few seconds, then they are aborted), and
// the process exits 0.
#include "cli_common.h"
#include "llmrun_commands.h"
#include "llmrun_engine.h"

#if LLMC_HAVE_SERVER
#include "server/http_server.h"
#include "serving/serving_loop.h"
#endif

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <pthread.h>

namespace llmc {
namespace {

// "temperature 0.6, top_p 0.9, max_new_tokens 256" (the fields the plan sets).
std::string generationDefaultsText(const fb::GenerationDefaults *g) {
  if (g == nullptr)
    return "";
  std::string text;
  auto add = [&](const char *name, auto value) {
    if (!value.has_value())
      return;
    std::ostringstream number;
    number << *value;
    text += (text.empty() ? "" : ", ") + std::string(name) + " " + number.str();
  };
  add("temperature", g->temperature());
  add("top_p", g->top_p());
  add("top_k", g->top_k());
  add("min_p", g->min_p());
  add("repetition_penalty", g->repetition_penalty());
  add("max_new_tokens", g->max_new_tokens());
  return text;
}

} // namespace

namespace {

struct ServeOptions {
  std::string plan;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string servedModelName;
  int64_t maxNumSeqs = 256;
  int64_t maxNumBatchedTokens = 2048;
  int64_t kvCacheTokens = 0;
  int64_t maxWaiting = 1024;
  bool noPrefixCaching = false;
  std::string chatTemplate;
  std::string apiKey;
  int httpThreads = 0;
  size_t maxBodyBytes = size_t(8) << 20;
  double drainSeconds = 5.0;
  EngineFlags engine;
};

// The KV pool when --kv-cache-tokens is not given: room for every sequence
// at full length, capped so that a large --max-num-seqs does not reserve
// more than this many token slots (the pool's pages are touched only when
// written, and the scheduler preempts when it runs out).
#if LLMC_HAVE_SERVER
constexpr int64_t kDefaultKvTokenCap = 131072;

int runServe(const ServeOptions &o) {
  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  std::signal(SIGPIPE, SIG_IGN); // a client that went away is a failed write, not a crash

  server::ServerOptions serverOptions;
  if (!o.chatTemplate.empty()) {
    auto tmpl = server::loadChatTemplateFile(o.chatTemplate);
    if (!tmpl)
      return cli::fail(tmpl.status());
    serverOptions.chatTemplate = *tmpl;
  }
  EngineOptions engineOptions = o.engine.options();
  engineOptions.maxSequences = o.maxNumSeqs;
  engineOptions.kvCacheTokens = o.kvCacheTokens;
  if (o.kvCacheTokens == 0) {
    auto plan = Plan::open(o.plan);
    if (!plan)
      return cli::fail(plan.status());
    engineOptions.kvCacheTokens =
        std::min(plan->meta().model()->max_seq_len() * o.maxNumSeqs, kDefaultKvTokenCap);
  }
  auto loaded = Engine::load(o.plan, engineOptions);
  if (!loaded)
    return cli::fail(loaded.status());
  Engine &engine = **loaded;
  if (!engine.backendNotice().empty())
    std::fprintf(stderr, "llmrun: %s (%d threads)\n", engine.backendNotice().c_str(),
                 engine.threads());
  else
    std::fprintf(stderr, "llmrun: running on %s\n", engine.backend().description().c_str());
  if (engine.synthetic())
    std::fprintf(stderr, "llmrun: this plan has synthetic weights: the text is meaningless\n");

  serving::ServingConfig config;
  config.scheduler.maxNumSeqs = o.maxNumSeqs;
  config.scheduler.maxNumBatchedTokens = o.maxNumBatchedTokens;
  config.scheduler.prefixCaching = !o.noPrefixCaching;
  config.maxWaiting = o.maxWaiting;
  config.drainSeconds = o.drainSeconds;
  auto loop = serving::ServingLoop::start(engine, config);
  if (!loop)
    return cli::fail(loop.status());

  serverOptions.host = o.host;
  serverOptions.port = o.port;
  serverOptions.modelName = o.servedModelName.empty()
                                ? std::filesystem::path(o.plan).stem().string()
                                : o.servedModelName;
  serverOptions.apiKey = o.apiKey;
  serverOptions.httpThreads = o.httpThreads;
  serverOptions.maxBodyBytes = o.maxBodyBytes;
  if (!serverOptions.chatTemplate) {
    auto fromPlan = server::chatTemplateFromPlan(engine.plan());
    if (!fromPlan)
      return cli::fail(fromPlan.status().withContext(o.plan));
    serverOptions.chatTemplate = *fromPlan;
  }
  if (!serverOptions.chatTemplate)
    serverOptions.chatTemplateMissing =
        "this server has no chat template: the plan holds none; restart it with "
        "--chat-template FILE (a Jinja template as in tokenizer_config.json)";
  auto server = server::HttpServer::start(engine, **loop, serverOptions);
  if (!server)
    return cli::fail(server.status());
  const std::string defaults = generationDefaultsText(engine.plan().meta().generation());
  if (!defaults.empty())
    std::fprintf(stderr,
                 "llmrun: the plan's generation_config defaults for fields a request leaves out: "
                 "%s\n",
                 defaults.c_str());
  std::fprintf(stderr,
               "llmrun: serving '%s' on http://%s:%d (max %lld sequences, %lld tokens per step, "
               "KV pool %lld tokens, prefix caching %s)\n",
               serverOptions.modelName.c_str(), o.host.c_str(), (*server)->port(),
               static_cast<long long>(o.maxNumSeqs), static_cast<long long>(o.maxNumBatchedTokens),
               static_cast<long long>(engineOptions.kvCacheTokens),
               o.noPrefixCaching ? "off" : "on");
  std::fflush(stderr);

  int signal = 0;
  sigwait(&stopSignals, &signal);
  std::fprintf(stderr, "llmrun: %s: draining (new requests get 503), then exiting\n",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->shutdown(serving::ShutdownMode::Drain);
  std::fprintf(stderr, "llmrun: stopped\n");
  return 0;
}
#endif

} // namespace

void registerServeCommand(CLI::App &app, int &exitCode) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App *cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (docs/serving.md)");
  cmd->add_option("plan", o->plan, "Engine plan")->required();
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", o->port, "Port (default 8000; 0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", o->servedModelName,
                  "The model name clients send and see (default: the plan's file name)");
  cmd->add_option("--max-num-seqs", o->maxNumSeqs, "Requests running at once (default 256)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--max-num-batched-tokens", o->maxNumBatchedTokens,
                  "Tokens per engine step: decodes plus prefill chunks (default 2048)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--kv-cache-tokens", o->kvCacheTokens,
                  "Token slots in the KV pool (default: max_seq_len x max-num-seqs, at most 131072)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 32));
  cmd->add_option("--max-waiting", o->maxWaiting,
                  "Requests waiting for admission at most; more get 503 (default 1024)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_flag("--no-prefix-caching", o->noPrefixCaching, "Do not reuse KV blocks of shared prefixes");
  cmd->add_option("--chat-template", o->chatTemplate,
                  "Jinja chat template FILE for /v1/chat/completions (overrides the plan's)");
  cmd->add_option("--api-key", o->apiKey,
                  "Require 'Authorization: Bearer KEY' on /v1/* (default: no key)");
  cmd->add_option("--http-threads", o->httpThreads,
                  "Connections served at once (default: max-num-seqs + 64)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--max-body-bytes", o->maxBodyBytes,
                  "Largest request body; larger ones get 413 (default 8 MiB)")
      ->check(CLI::Range(size_t(1024), size_t(1) << 30));
  cmd->add_option("--drain-seconds", o->drainSeconds,
                  "On SIGTERM, how long in-flight requests may run before they are aborted "
                  "(default 5)")
      ->check(CLI::Range(0.0, 600.0));
  o->engine.add(*cmd);
  cmd->callback([o, &exitCode] {
#if LLMC_HAVE_SERVER
    exitCode = runServe(*o);
#else
    exitCode = cli::fail("this llmrun was built without the HTTP server (needs "
                         "libcpp-httplib-dev; see scripts/setup.sh)");
#endif
  });
}

} // namespace llmc
