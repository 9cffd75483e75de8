// llmrun bench-serve: a load generator for an OpenAI-compatible server, in
// the shape of `vllm bench serve`. Sends --num-prompts streaming completions
// (at most --max-concurrency at once, arriving as a Poisson process of
// --request-rate per second, default all at once), each asking for exactly
// --random-output-len tokens (ignore_eos), and reports throughput and the
// distributions of time to first token (TTFT), time per output token after
// the first (TPOT) and inter-token latency (ITL, between streamed chunks:
// text, or the SSE comments llmrun serve sends for tokens with no visible
// text yet).
#include "cli_common.h"
#include "llmrun_commands.h"

#if LLMC_HAVE_SERVER
#include <httplib.h>
#endif
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <thread>

namespace llmc {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
  std::string baseUrl = "http://127.0.0.1:8000";
  std::string model;
  std::string apiKey;
  int64_t numPrompts = 100;
  int64_t maxConcurrency = 0; // 0: no limit
  double requestRate = std::numeric_limits<double>::infinity();
  int64_t randomInputLen = 128;
  int64_t randomOutputLen = 128;
  int64_t sharedPrefixLen = 0;
  int64_t randomVocab = 500;
  std::string promptsFile;
  uint64_t seed = 0;
  bool json = false;
  double timeoutSeconds = 600;
};

#if LLMC_HAVE_SERVER
struct Outcome {
  bool ok = false;
  std::string error;
  int64_t promptTokens = 0;
  int64_t outputTokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

double mean(const std::vector<double> &v) {
  double sum = 0;
  for (double x : v)
    sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// The prompts: lines of --prompts FILE (text), or random token ids with an
// optional shared prefix (the same ids at the start of every prompt).
Expected<std::vector<Json>> makePrompts(const BenchServeOptions &o) {
  std::vector<Json> prompts;
  if (!o.promptsFile.empty()) {
    std::ifstream in(o.promptsFile);
    if (!in)
      return Status::error(o.promptsFile + ": cannot read the prompts (--prompts)");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
      if (!line.empty())
        lines.push_back(line);
    if (lines.empty())
      return Status::error(o.promptsFile + ": holds no prompts (one per line)");
    for (int64_t i = 0; i < o.numPrompts; ++i)
      prompts.push_back(lines[static_cast<size_t>(i) % lines.size()]);
    return prompts;
  }
  std::mt19937_64 random(o.seed);
  std::uniform_int_distribution<int32_t> id(10, static_cast<int32_t>(o.randomVocab) - 1);
  std::vector<int32_t> prefix(static_cast<size_t>(o.sharedPrefixLen));
  for (int32_t &t : prefix)
    t = id(random);
  for (int64_t i = 0; i < o.numPrompts; ++i) {
    std::vector<int32_t> ids = prefix;
    for (int64_t k = 0; k < o.randomInputLen; ++k)
      ids.push_back(id(random));
    prompts.push_back(ids);
  }
  return prompts;
}

// One streaming completion; times each SSE chunk that carries text.
Outcome sendOne(const BenchServeOptions &o, const Json &prompt) {
  Outcome out;
  httplib::Client client(o.baseUrl);
  client.set_read_timeout(static_cast<time_t>(o.timeoutSeconds), 0);
  client.set_connection_timeout(10, 0);
  if (!o.apiKey.empty())
    client.set_bearer_token_auth(o.apiKey);
  Json body = {{"model", o.model},          {"prompt", prompt},
               {"max_tokens", o.randomOutputLen}, {"temperature", 0},
               {"ignore_eos", true},        {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  std::string buffer;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  bool first = true;
  auto arrival = [&] {
    Clock::time_point now = Clock::now();
    if (first)
      out.ttft = std::chrono::duration<double>(now - start).count();
    else
      out.itl.push_back(std::chrono::duration<double>(now - last).count());
    first = false;
    last = now;
  };
  auto onData = [&](const char *data, size_t size) {
    buffer.append(data, size);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      // An SSE comment: llmrun serve sends one for tokens whose text is held
      // back (or decodes to nothing), so they are timed as arrivals too.
      if (event.rfind(":", 0) == 0) {
        arrival();
        continue;
      }
      if (event.rfind("data: ", 0) != 0)
        continue;
      std::string payload = event.substr(6);
      if (payload == "[DONE]")
        continue;
      Json chunk = Json::parse(payload, nullptr, false);
      if (chunk.is_discarded())
        continue;
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        out.promptTokens = chunk["usage"].value("prompt_tokens", 0);
        out.outputTokens = chunk["usage"].value("completion_tokens", 0);
      }
      if (!chunk.contains("choices") || chunk["choices"].empty())
        continue;
      const Json &choice = chunk["choices"][0];
      if (!choice.contains("text") || !choice["text"].is_string() ||
          choice["text"].get_ref<const std::string &>().empty())
        continue;
      arrival();
    }
    return true;
  };
  httplib::Request request; // cpp-httplib 0.11 streams a POST's answer only through send()
  request.method = "POST";
  request.path = "/v1/completions";
  request.set_header("Content-Type", "application/json");
  request.body = body.dump();
  request.content_receiver = [&](const char *data, size_t size, uint64_t, uint64_t) {
    return onData(data, size);
  };
  auto result = client.send(request);
  out.e2e = std::chrono::duration<double>(Clock::now() - start).count();
  if (!result) {
    out.error = "request failed: " + httplib::to_string(result.error());
    return out;
  }
  if (result->status != 200) {
    out.error = "HTTP " + std::to_string(result->status) + ": " + buffer;
    return out;
  }
  out.ok = !first;
  if (!out.ok)
    out.error = "the stream carried no text";
  return out;
}

Expected<std::string> servedModel(const BenchServeOptions &o) {
  httplib::Client client(o.baseUrl);
  client.set_connection_timeout(10, 0);
  if (!o.apiKey.empty())
    client.set_bearer_token_auth(o.apiKey);
  auto result = client.Get("/v1/models");
  if (!result)
    return Status::error(o.baseUrl + "/v1/models: " + httplib::to_string(result.error()) +
                         " (is `llmrun serve` running there?)");
  Json body = Json::parse(result->body, nullptr, false);
  if (result->status != 200 || body.is_discarded() || !body.contains("data") ||
      !body["data"].is_array() || body["data"].empty() || !body["data"][0].contains("id"))
    return Status::error(o.baseUrl + "/v1/models: unexpected answer (HTTP " +
                         std::to_string(result->status) + ")");
  return body["data"][0]["id"].get<std::string>();
}

int runBenchServe(BenchServeOptions o) {
  if (o.model.empty()) {
    auto model = servedModel(o);
    if (!model)
      return cli::fail(model.status());
    o.model = *model;
  }
  auto prompts = makePrompts(o);
  if (!prompts)
    return cli::fail(prompts.status());
  // Arrival offsets: a Poisson process (exponential gaps) at --request-rate.
  std::vector<double> arrival(static_cast<size_t>(o.numPrompts), 0.0);
  if (std::isfinite(o.requestRate)) {
    std::mt19937_64 random(o.seed ^ 0x9e3779b97f4a7c15ULL);
    std::exponential_distribution<double> gap(o.requestRate);
    double t = 0;
    for (double &a : arrival) {
      a = t;
      t += gap(random);
    }
  }
  const int64_t workers =
      o.maxConcurrency > 0 ? std::min(o.maxConcurrency, o.numPrompts) : o.numPrompts;
  std::vector<Outcome> outcomes(static_cast<size_t>(o.numPrompts));
  std::atomic<int64_t> next{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (int64_t i; (i = next++) < o.numPrompts;) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrival[i])));
        outcomes[i] = sendOne(o, (*prompts)[i]);
      }
    });
  for (std::thread &t : threads)
    t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();

  int64_t ok = 0, inputTokens = 0, outputTokens = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  std::string firstError;
  for (const Outcome &r : outcomes) {
    if (!r.ok) {
      if (firstError.empty())
        firstError = r.error;
      continue;
    }
    ++ok;
    inputTokens += r.promptTokens;
    outputTokens += r.outputTokens;
    ttft.push_back(r.ttft * 1000);
    e2e.push_back(r.e2e * 1000);
    if (r.outputTokens > 1)
      tpot.push_back((r.e2e - r.ttft) * 1000 / static_cast<double>(r.outputTokens - 1));
    for (double x : r.itl)
      itl.push_back(x * 1000);
  }
  Json result = {{"successful_requests", ok},
                 {"failed_requests", o.numPrompts - ok},
                 {"duration_s", duration},
                 {"total_input_tokens", inputTokens},
                 {"total_output_tokens", outputTokens},
                 {"request_throughput", ok / duration},
                 {"output_throughput", outputTokens / duration},
                 {"total_token_throughput", (inputTokens + outputTokens) / duration},
                 {"max_concurrency", workers},
                 {"request_rate", std::isfinite(o.requestRate) ? Json(o.requestRate) : Json("inf")}};
  auto stats = [&](const char *name, const std::vector<double> &v) {
    result[std::string("mean_") + name + "_ms"] = mean(v);
    result[std::string("median_") + name + "_ms"] = percentile(v, 50);
    result[std::string("p99_") + name + "_ms"] = percentile(v, 99);
  };
  stats("ttft", ttft);
  stats("tpot", tpot);
  stats("itl", itl);
  stats("e2el", e2e);
  if (!firstError.empty())
    result["first_error"] = firstError;
  if (o.json) {
    std::printf("%s\n", result.dump(2).c_str());
  } else {
    auto line = [](const char *label, double value, int decimals) {
      std::printf("%-40s %.*f\n", label, decimals, value);
    };
    std::printf("============ Serving Benchmark Result ============\n");
    std::printf("%-40s %lld\n", "Successful requests:", static_cast<long long>(ok));
    line("Benchmark duration (s):", duration, 2);
    std::printf("%-40s %lld\n", "Total input tokens:", static_cast<long long>(inputTokens));
    std::printf("%-40s %lld\n", "Total generated tokens:", static_cast<long long>(outputTokens));
    line("Request throughput (req/s):", ok / duration, 2);
    line("Output token throughput (tok/s):", outputTokens / duration, 2);
    line("Total Token throughput (tok/s):", (inputTokens + outputTokens) / duration, 2);
    const char *titles[] = {"Time to First Token", "Time per Output Token (excl. 1st token)",
                            "Inter-token Latency"};
    const char *keys[] = {"ttft", "tpot", "itl"};
    const char *labels[] = {"TTFT", "TPOT", "ITL"};
    for (int k = 0; k < 3; ++k) {
      std::printf("%s\n", (std::string(std::max<int>(0, (48 - static_cast<int>(std::strlen(titles[k]))) / 2), '-') +
                           titles[k] +
                           std::string(std::max<int>(0, (49 - static_cast<int>(std::strlen(titles[k]))) / 2), '-'))
                              .c_str());
      for (const char *stat : {"mean", "median", "p99"}) {
        std::string label = std::string(stat == std::string("mean") ? "Mean" :
                                         stat == std::string("median") ? "Median" : "P99") +
                            " " + labels[k] + " (ms):";
        line(label.c_str(), result[std::string(stat) + "_" + keys[k] + "_ms"].get<double>(), 2);
      }
    }
    std::printf("==================================================\n");
    if (!firstError.empty())
      std::printf("first error: %s\n", firstError.c_str());
  }
  return ok == o.numPrompts ? 0 : 1;
}
#endif

} // namespace

void registerBenchServeCommand(CLI::App &app, int &exitCode) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App *cmd = app.add_subcommand(
      "bench-serve", "Load-test an OpenAI-compatible server (as `vllm bench serve`)");
  cmd->add_option("--base-url", o->baseUrl, "Server URL (default http://127.0.0.1:8000)");
  cmd->add_option("--model", o->model, "Model name (default: the server's first model)");
  cmd->add_option("--api-key", o->apiKey, "Sent as 'Authorization: Bearer KEY'");
  cmd->add_option("--num-prompts", o->numPrompts, "Requests to send (default 100)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--max-concurrency", o->maxConcurrency,
                  "Requests in flight at most (default: no limit)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 16));
  cmd->add_option("--request-rate", o->requestRate,
                  "Requests per second, Poisson arrivals (default inf: all at once)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--random-input-len", o->randomInputLen,
                  "Random prompt tokens per request, after the shared prefix (default 128)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  cmd->add_option("--random-output-len", o->randomOutputLen,
                  "Tokens to generate per request (default 128)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--shared-prefix-len", o->sharedPrefixLen,
                  "Token ids every random prompt starts with (default 0)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  cmd->add_option("--random-vocab-size", o->randomVocab,
                  "Random prompt ids are drawn from [10, N) (default 500)")
      ->check(CLI::Range(int64_t(11), int64_t(1) << 30));
  cmd->add_option("--prompts", o->promptsFile, "Text prompts, one per line (instead of random ids)");
  cmd->add_option("--seed", o->seed, "Seed of the random prompts and arrivals (default 0)");
  cmd->add_flag("--json", o->json, "Print the results as one JSON object");
  cmd->callback([o, &exitCode] {
    if (o->randomInputLen + o->sharedPrefixLen == 0 && o->promptsFile.empty()) {
      exitCode = cli::fail("--random-input-len and --shared-prefix-len are both 0: the prompts "
                           "would be empty");
      return;
    }
#if LLMC_HAVE_SERVER
    exitCode = runBenchServe(*o);
#else
    exitCode = cli::fail("this llmrun was built without cpp-httplib (libcpp-httplib-dev)");
#endif
  });
}

} // namespace llmc
