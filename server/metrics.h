// GET /metrics: Prometheus text exposition (format 0.0.4) with vLLM's metric
// names under the `llmc:` prefix. Gauges and counters come from the
// scheduler (serving::SchedulerStats); the latency histograms are recorded
// here, by the HTTP layer, from each request's token events.
#pragma once

#include "serving/scheduler.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace llmc::server {

// A cumulative histogram over fixed upper bounds (seconds), thread-safe.
class Histogram {
public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // `name_bucket{le=...}`, `name_sum`, `name_count` lines, with HELP and TYPE.
  void render(const std::string &name, const std::string &help, std::string &out) const;
  int64_t count() const;

private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<int64_t> counts_; // per bucket, not cumulative; last is +Inf
  double sum_ = 0.0;
  int64_t total_ = 0;
};

class ServerMetrics {
public:
  ServerMetrics();

  Histogram timeToFirstToken;
  Histogram interTokenLatency;
  Histogram e2eLatency;
  std::atomic<int64_t> successStop{0}, successLength{0}, successAbort{0}, successError{0};
  std::atomic<int64_t> rejected{0}; // answered with an HTTP error

  // Every metric, in the exposition format. modelName labels each sample.
  std::string render(const serving::SchedulerStats &stats, const std::string &modelName) const;
};

} // namespace llmc::server
