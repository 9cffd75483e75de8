// The serving core, in vLLM v1's vocabulary: requests wait, run, and finish
// or are aborted; each step() is one iteration that builds ONE engine step.
//
// An iteration:
//   1. applies the aborts asked since the last one (their blocks return to
//      the pool at once);
//   2. schedules every running request's next tokens first (a decode token,
//      or the next chunk of a prefill that did not fit last time), then
//      admits waiting requests in arrival order (a preempted request goes
//      back to the front) while the token budget (maxNumBatchedTokens) and
//      the sequence cap (maxNumSeqs) allow: a prompt longer than the budget
//      left is cut into chunks (chunked prefill), so a long prompt never
//      stalls running decodes; with prefix caching, a request whose leading
//      full blocks another request admitted in the same step computes waits
//      one step and attaches them from the cache then;
//   3. makes the KV pool hold the step: when it cannot, the most recently
//      admitted running request is preempted by recompute (its blocks are
//      freed; it is requeued at the front with its prompt + generated tokens
//      and its sampler state, so its output is the same as if it had never
//      been preempted), and scheduling is retried;
//   4. runs the step (Engine::run, one output row per request whose prompt is
//      complete after the step), samples each row with the request's own
//      sampler (sampling::Sampler: penalties, min_tokens, logprobs), and
//      checks the token-level stop conditions (EOS ids unless ignoreEos,
//      stop ids, maxTokens, max_seq_len, minTokens);
//   5. frees the blocks of every request that finished.
//
// Prefix caching (on by default): at admission a request's full prompt
// blocks are looked up in the engine's block pool by chained hash and shared
// (kv/block_pool.h); a request never depends on another's presence for its
// output, only on the same KV values.
//
// Single-threaded: the caller drives step(); ServingLoop wraps it with a
// thread for the HTTP server.
#pragma once

#include "engine/engine.h"
#include "engine/step.h"
#include "serving/request.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

namespace llmc::serving {

struct SchedulerConfig {
  int64_t maxNumBatchedTokens = 2048; // tokens per engine step (decode + prefill chunks), >= 1
  int64_t maxNumSeqs = 256;           // running requests at most, >= 1
  bool prefixCaching = true;
};

// Counters for /metrics. Token counters only grow.
struct SchedulerStats {
  int64_t running = 0;
  int64_t waiting = 0;
  double kvUsage = 0.0;      // 0..1: allocated blocks (not free, not evictable) / usable blocks
  int64_t prefixQueries = 0; // prompt tokens looked up in the prefix cache
  int64_t prefixHits = 0;    // of those, tokens found
  int64_t preemptions = 0;
  int64_t promptTokens = 0;     // prompt tokens of requests admitted (once per request)
  int64_t generationTokens = 0; // tokens emitted
  int64_t finished = 0;         // requests that ended with stop or length
  int64_t aborted = 0;
};

class Scheduler {
public:
  // The engine must outlive the scheduler; the scheduler owns every
  // sequence it creates and releases them. Fails naming a bad config field.
  static Expected<std::unique_ptr<Scheduler>> create(Engine &engine, const SchedulerConfig &config);
  ~Scheduler();

  // Whether `params` can be served, as the message of a 400: an empty prompt,
  // an id outside the vocabulary, a parameter out of range (naming the
  // field), prompt + maxTokens over the plan's max_seq_len, or more KV than
  // the whole pool holds. Reads only constants: safe from any thread.
  Status validate(const RequestParams &params) const;

  // Validates and queues a request (waiting). Its sampler is seeded now.
  Expected<RequestId> add(RequestParams params);

  // Asks for the request to end with reason Abort at the next step()
  // boundary (its event comes from that step). Unknown or finished ids are
  // ignored.
  void abort(RequestId id);

  // One iteration (above). Returns the events of this step, in request
  // order. An engine failure finishes every running request with reason
  // Error (and returns the events); the scheduler stays usable.
  std::vector<TokenEvent> step();

  // Whether step() has anything to do (running, waiting or aborts pending).
  bool hasWork() const;
  SchedulerStats stats() const;
  const SchedulerConfig &config() const { return config_; }
  Engine &engine() { return *engine_; }

  // Ids of the running and waiting requests, in schedule order (tests).
  std::vector<RequestId> runningIds() const;
  std::vector<RequestId> waitingIds() const;
  // Tokens the last step() ran, and per request how many (tests).
  int64_t lastStepTokens() const { return lastStepTokens_; }

private:
  struct Request;
  Scheduler(Engine &engine, const SchedulerConfig &config);

  void applyAborts(std::vector<TokenEvent> &events);
  struct Scheduled {
    Request *request;
    int64_t numTokens;
  };
  std::vector<Scheduled> schedule();
  void admit(Request &request);
  bool waitsForSharedPrefix(const Request &request,
                            const std::vector<const Request *> &computing) const;
  void preempt(Request &request);
  void finish(Request &request, FinishReason reason, std::vector<TokenEvent> &events,
              TokenEvent event);
  void emit(Request &request, const StepOutput &out, size_t row, std::vector<TokenEvent> &events);
  void scorePromptToken(Request &request, const StepOutput &out, size_t row);
  int64_t blocksFor(int64_t tokens) const;

  Engine *engine_ = nullptr;
  SchedulerConfig config_;
  std::map<RequestId, std::unique_ptr<Request>> requests_;
  std::deque<Request *> waiting_;
  std::vector<Request *> running_; // in admission order
  std::vector<RequestId> abortsPending_;
  RequestId nextId_ = 1;
  int64_t admissions_ = 0;
  SchedulerStats counters_;
  int64_t lastStepTokens_ = 0;
  std::vector<int64_t> eosIds_;
  int64_t usableBlocks_ = 0;
};

} // namespace llmc::serving
