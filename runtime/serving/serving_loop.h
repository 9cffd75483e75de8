// The thread-safe front of the scheduler: one thread that owns a
// serving::Scheduler over an Engine and runs its iterations while there is
// work, sleeping otherwise. Any thread (the HTTP server's handlers) submits
// and cancels; events come back through each request's callback.
//
// Usage (the HTTP layer):
//   auto loop = ServingLoop::start(engine, config);        // after Engine::load
//   SubmitResult r = (*loop)->submit(params, [](const TokenEvent &e) { ... });
//   switch (r.status) { Accepted: r.id; InvalidRequest: 400 r.message;
//                       QueueFull: 503; ShuttingDown: 503 }
//   (*loop)->cancel(r.id);      // client gone, or a stop string matched
//   (*loop)->metrics();         // for GET /metrics
//   (*loop)->shutdown(ShutdownMode::Drain);  // SIGTERM
//
// Callbacks run ON THE LOOP THREAD, between iterations, in token order; they
// must be quick (hand the event to the connection's queue and return) and
// must not call shutdown(). They may call submit() and cancel(). After
// submit() returns Accepted, the callback is called with zero or more token
// events and then exactly one event with finished = true (stop, length,
// abort, or error), after which it is never called again and is destroyed.
// The callback may run before submit() returns.
#pragma once

#include "serving/scheduler.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace llmc::serving {

struct ServingConfig {
  SchedulerConfig scheduler;
  // Requests waiting for admission at most (submitted but not running);
  // submit() beyond it answers QueueFull. >= 1.
  int64_t maxWaiting = 1024;
  // shutdown(Drain) waits at most this long for in-flight requests, then
  // aborts what is left.
  double drainSeconds = 5.0;
};

enum class SubmitStatus : uint8_t {
  Accepted,
  InvalidRequest, // the request can never be served (message says why): HTTP 400
  QueueFull,      // the waiting queue is at maxWaiting: HTTP 503, retry later
  ShuttingDown,   // shutdown() was called: HTTP 503
};

struct SubmitResult {
  SubmitStatus status = SubmitStatus::Accepted;
  RequestId id = 0;    // when Accepted
  std::string message; // otherwise, for the error body
};

using EventCallback = std::function<void(const TokenEvent &event)>;

enum class ShutdownMode : uint8_t {
  Drain, // stop accepting, let in-flight requests finish (up to drainSeconds), abort the rest
  Abort, // stop accepting, abort every request now
};

class ServingLoop {
public:
  // Starts the loop thread. The engine must outlive the loop.
  static Expected<std::unique_ptr<ServingLoop>> start(Engine &engine, const ServingConfig &config);
  // shutdown(Abort) if not yet shut down.
  ~ServingLoop();

  // Queues a request; see SubmitStatus. Thread-safe.
  SubmitResult submit(RequestParams params, EventCallback callback);
  // Aborts a request at the next iteration boundary (its callback gets
  // reason Abort). Unknown or finished ids are ignored. Thread-safe.
  void cancel(RequestId id);
  // The scheduler's counters as of the last iteration, with submitted but
  // not yet admitted requests counted as waiting. Thread-safe.
  SchedulerStats metrics() const;
  // Stops accepting, ends every request (see ShutdownMode), joins the loop
  // thread. Returns within about drainSeconds + one iteration. Idempotent.
  // Not from a callback.
  void shutdown(ShutdownMode mode);

  const ServingConfig &config() const { return config_; }

private:
  struct Pending {
    RequestId id;
    RequestParams params;
  };
  ServingLoop(const ServingConfig &config, std::unique_ptr<Scheduler> scheduler);
  void run();
  void deliver(const std::vector<TokenEvent> &events);

  ServingConfig config_;
  std::unique_ptr<Scheduler> scheduler_; // touched only by the loop thread (and validate())
  // Loop thread only: the ids submit() handed out <-> the scheduler's.
  std::map<RequestId, RequestId> schedulerIds_, loopIds_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pending> inbox_;       // submitted, not yet given to the scheduler
  std::vector<RequestId> cancels_;   // asked, not yet given to the scheduler
  std::map<RequestId, EventCallback> callbacks_;
  SchedulerStats stats_;             // copied after each iteration
  RequestId nextId_ = 1;
  bool stopping_ = false;
  bool abortAll_ = false;
  std::thread thread_;
  std::mutex shutdownMutex_;
};

} // namespace llmc::serving
