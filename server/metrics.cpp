#include "server/metrics.h"

#include <cmath>
#include <cstdio>

namespace llmc::server {
namespace {

std::string formatValue(double value) {
  if (std::isinf(value))
    return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

// Label values escape backslash, double quote and newline.
std::string escapeLabel(const std::string &value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::string &out, const std::string &name, const char *type, const std::string &help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

} // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  if (std::isnan(value))
    return;
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket])
    ++bucket;
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++total_;
}

int64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

void Histogram::render(const std::string &name, const std::string &help,
                       std::string &out) const {
  // The caller's label set is spliced in front of `le`: name{model_name="..",le=".."}.
  std::lock_guard<std::mutex> lock(mutex_);
  size_t brace = name.find('{');
  std::string base = name.substr(0, brace);
  std::string labels = brace == std::string::npos ? "" : name.substr(brace + 1, name.size() - brace - 2);
  std::string sep = labels.empty() ? "" : ",";
  header(out, base, "histogram", help);
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    std::string le = i < bounds_.size() ? formatValue(bounds_[i]) : "+Inf";
    out += base + "_bucket{" + labels + sep + "le=\"" + le + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  std::string braced = labels.empty() ? "" : "{" + labels + "}";
  out += base + "_sum" + braced + " " + formatValue(sum_) + "\n";
  out += base + "_count" + braced + " " + std::to_string(total_) + "\n";
}

ServerMetrics::ServerMetrics()
    : timeToFirstToken({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                        2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      interTokenLatency({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                         0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0}),
      e2eLatency({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                  120.0, 240.0, 480.0}) {}

std::string ServerMetrics::render(const serving::SchedulerStats &stats,
                                  const std::string &modelName) const {
  std::string out;
  const std::string label = "{model_name=\"" + escapeLabel(modelName) + "\"}";
  auto gauge = [&](const char *name, double value, const char *help) {
    header(out, std::string("llmc:") + name, "gauge", help);
    out += std::string("llmc:") + name + label + " " + formatValue(value) + "\n";
  };
  auto counter = [&](const char *name, double value, const char *help) {
    header(out, std::string("llmc:") + name, "counter", help);
    out += std::string("llmc:") + name + label + " " + formatValue(value) + "\n";
  };
  gauge("num_requests_running", static_cast<double>(stats.running),
        "Requests in the running batch.");
  gauge("num_requests_waiting", static_cast<double>(stats.waiting),
        "Requests waiting for admission.");
  gauge("kv_cache_usage_perc", stats.kvUsage, "KV-cache usage: 1 means every block is in use.");
  counter("prefix_cache_queries_total", static_cast<double>(stats.prefixQueries),
          "Prompt tokens looked up in the prefix cache.");
  counter("prefix_cache_hits_total", static_cast<double>(stats.prefixHits),
          "Prompt tokens found in the prefix cache.");
  counter("num_preemptions_total", static_cast<double>(stats.preemptions),
          "Requests preempted (recomputed later) for lack of KV blocks.");
  counter("prompt_tokens_total", static_cast<double>(stats.promptTokens),
          "Prompt tokens of admitted requests.");
  counter("generation_tokens_total", static_cast<double>(stats.generationTokens),
          "Generated tokens.");
  const std::string success = "llmc:request_success_total";
  header(out, success, "counter", "Requests that finished, by finish reason.");
  auto reason = [&](const char *name, int64_t value) {
    out += success + "{model_name=\"" + escapeLabel(modelName) + "\",finished_reason=\"" + name +
           "\"} " + std::to_string(value) + "\n";
  };
  reason("stop", successStop.load());
  reason("length", successLength.load());
  reason("abort", successAbort.load());
  reason("error", successError.load());
  counter("request_rejected_total", static_cast<double>(rejected.load()),
          "Requests answered with an HTTP error (4xx, 5xx).");
  timeToFirstToken.render("llmc:time_to_first_token_seconds" + label,
                          "Time from receiving a request to its first token.", out);
  interTokenLatency.render("llmc:inter_token_latency_seconds" + label,
                           "Time between consecutive tokens of a request.", out);
  e2eLatency.render("llmc:e2e_request_latency_seconds" + label,
                    "Time from receiving a request to its last token.", out);
  return out;
}

} // namespace llmc::server
