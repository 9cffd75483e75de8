// The C API's scheduler: serving::Scheduler (continuous batching, chunked
// prefill, preemption, prefix caching) over an engine handle, plus what the
// server adds above it per request: the streamed text (TextStream: whole
// UTF-8 pieces, stop strings held back and cut), and delivery of events to a
// callback or to a queue for llmc_scheduler_poll.
#include "capi_internal.h"

#include "generation/text_stream.h"
#include "serving/scheduler.h"

#include <deque>
#include <map>
#include <vector>

using namespace llmc;
using namespace llmc::capi;

namespace {

// An event with the storage its pointers point into.
struct OwnedEvent {
  llmc_request_event event{};
  std::string text;
  std::string error;
  // Points event.text / event.error at the strings (after any move).
  const llmc_request_event &view() {
    event.text = text.c_str();
    event.text_length = text.size();
    event.error = error.c_str();
    return event;
  }
};

struct Request {
  llmc_request_callback callback = nullptr;
  void *userData = nullptr;
  std::unique_ptr<generation::TextStream> text;
  int64_t minTokens = 0;
};

llmc_finish_reason toFinishReason(serving::FinishReason reason) {
  switch (reason) {
  case serving::FinishReason::Stop:
    return LLMC_FINISH_STOP;
  case serving::FinishReason::Length:
    return LLMC_FINISH_LENGTH;
  case serving::FinishReason::Error:
    return LLMC_FINISH_ERROR;
  case serving::FinishReason::None:
  case serving::FinishReason::Abort:
    break;
  }
  return LLMC_FINISH_CANCELLED;
}

} // namespace

struct llmc_scheduler {
  llmc_engine *engine = nullptr;
  std::unique_ptr<serving::Scheduler> scheduler;
  std::map<serving::RequestId, Request> requests; // live: not yet finished for the caller
  std::deque<OwnedEvent> queued;                  // of requests without a callback
  std::vector<OwnedEvent> polled;                 // what the last poll handed out
  bool inCallback = false;
  bool enginePrefixCaching = false; // the engine's setting before, restored at the end

  ~llmc_scheduler() {
    std::map<serving::RequestId, Request> live = std::move(requests);
    requests.clear(); // a callback's submit() lands here and is dropped with the rest
    for (auto &[id, request] : live)
      if (request.callback != nullptr) {
        OwnedEvent e;
        e.event.id = id;
        e.event.token = -1;
        e.event.finished = 1;
        e.event.finish_reason = LLMC_FINISH_CANCELLED;
        (void)request.callback(&e.view(), request.userData);
      }
    scheduler.reset(); // releases every sequence it holds
    engine->engine->setPrefixCaching(enginePrefixCaching);
    --engine->schedulers;
  }

  // Hands one event to its request's callback or queue; ends the request
  // for the caller when the event is final.
  void deliver(serving::RequestId id, Request &request, OwnedEvent owned) {
    const bool finished = owned.event.finished != 0;
    if (request.callback != nullptr) {
      inCallback = true;
      const int stop = request.callback(&owned.view(), request.userData);
      inCallback = false;
      if (stop != 0 && !finished)
        scheduler->abort(id);
    } else {
      queued.push_back(std::move(owned));
    }
    if (finished)
      requests.erase(id);
  }

  // One scheduler event: its token's text through the request's stream,
  // and the end of the request when a stop string completes or the
  // scheduler finished it.
  void handle(const serving::TokenEvent &e) {
    auto it = requests.find(e.id);
    if (it == requests.end())
      return; // a stop string already ended it; this is the scheduler's abort
    Request &request = it->second;
    OwnedEvent owned;
    llmc_request_event &c = owned.event;
    c.id = e.id;
    c.token = e.token;
    c.prompt_tokens = e.promptTokens;
    c.generated_tokens = e.generatedTokens;
    c.cached_prompt_tokens = e.cachedPromptTokens;
    bool stoppedByText = false;
    if (e.token >= 0) {
      generation::TextStream::Update update =
          request.text->push(e.token, e.generatedTokens >= request.minTokens);
      owned.text = std::move(update.text);
      stoppedByText = update.stopped;
    }
    if (stoppedByText) {
      c.finished = 1;
      c.finish_reason = LLMC_FINISH_STOP;
      if (!e.finished)
        scheduler->abort(e.id);
    } else if (e.finished) {
      c.finished = 1;
      c.finish_reason = toFinishReason(e.reason);
      owned.error = e.error;
      owned.text += request.text->finish(); // held back text; may complete a stop string
      if (request.text->stopped())
        c.finish_reason = LLMC_FINISH_STOP;
    }
    deliver(e.id, request, std::move(owned));
  }
};

extern "C" {

void llmc_scheduler_options_init(llmc_scheduler_options *options) {
  if (options == nullptr)
    return;
  *options = llmc_scheduler_options{};
  options->struct_size = sizeof(llmc_scheduler_options);
  serving::SchedulerConfig defaults;
  options->max_num_seqs = defaults.maxNumSeqs;
  options->max_num_batched_tokens = defaults.maxNumBatchedTokens;
  options->prefix_caching = defaults.prefixCaching ? 1 : 0;
}

llmc_status llmc_scheduler_create(llmc_engine *engine, const llmc_scheduler_options *given,
                                  llmc_scheduler **out) {
  const char *fn = "llmc_scheduler_create";
  return guarded(fn, [&]() -> llmc_status {
    if (engine == nullptr)
      return nullArgument(fn, "engine");
    if (out == nullptr)
      return nullArgument(fn, "scheduler");
    *out = nullptr;
    if (given != nullptr)
      if (llmc_status s = checkStructSize(fn, given->struct_size, sizeof(uint32_t) * 2); s)
        return s;
    if (engine->schedulers > 0)
      return fail(LLMC_STATUS_BUSY,
                  std::string(fn) + ": this engine already has a scheduler (one per engine)");
    llmc_scheduler_options o = withDefaults(given, llmc_scheduler_options_init);
    const bool enginePrefixCaching = engine->engine->prefixCaching();
    serving::SchedulerConfig config;
    config.maxNumSeqs = o.max_num_seqs;
    config.maxNumBatchedTokens = o.max_num_batched_tokens;
    config.prefixCaching = o.prefix_caching != 0;
    auto scheduler = serving::Scheduler::create(*engine->engine, config);
    if (!scheduler)
      return fromStatus(scheduler.status().withContext(fn), LLMC_STATUS_INVALID_ARGUMENT);
    auto handle = std::make_unique<llmc_scheduler>();
    handle->engine = engine;
    handle->enginePrefixCaching = enginePrefixCaching;
    handle->scheduler = std::move(*scheduler);
    ++engine->schedulers;
    *out = handle.release();
    return LLMC_STATUS_OK;
  });
}

void llmc_scheduler_destroy(llmc_scheduler *scheduler) {
  try {
    delete scheduler;
  } catch (...) {
    // Nothing may cross the C boundary; the memory is released either way.
  }
}

void llmc_request_params_init(llmc_request_params *params) {
  if (params == nullptr)
    return;
  *params = llmc_request_params{};
  params->struct_size = sizeof(llmc_request_params);
  params->add_special = 1;
  llmc_sampling_params_init(&params->sampling);
  params->max_tokens = 16;
}

llmc_status llmc_scheduler_submit(llmc_scheduler *handle, const llmc_request_params *given,
                                  llmc_request_callback callback, void *userData,
                                  llmc_request_id *id) {
  const char *fn = "llmc_scheduler_submit";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "scheduler");
    if (given == nullptr)
      return nullArgument(fn, "params");
    if (id == nullptr)
      return nullArgument(fn, "id");
    if (llmc_status s = checkStructSize(fn, given->struct_size, sizeof(uint32_t) * 2); s)
      return s;
    llmc_request_params p = withDefaults(given, llmc_request_params_init);
    const bool hasText = p.prompt != nullptr, hasIds = p.prompt_ids != nullptr;
    if (hasText == hasIds)
      return fail(LLMC_STATUS_INVALID_ARGUMENT,
                  std::string(fn) + ": give the prompt as text (prompt) or as ids (prompt_ids), "
                                    "exactly one of them");
    if ((p.stop_token_ids == nullptr && p.num_stop_token_ids > 0) ||
        (p.stop == nullptr && p.num_stop > 0))
      return fail(LLMC_STATUS_INVALID_ARGUMENT,
                  std::string(fn) + ": stop_token_ids or stop is NULL with a nonzero count");
    const Engine &engine = *handle->engine->engine;
    serving::RequestParams params;
    if (hasText)
      params.prompt = engine.tokenizer().encode(std::string_view(p.prompt, p.prompt_length),
                                                p.add_special != 0);
    else
      params.prompt.assign(p.prompt_ids, p.prompt_ids + p.num_prompt_ids);
    params.sampling = toSamplingParams(p.sampling);
    params.maxTokens = p.max_tokens;
    params.sampling.minTokens = p.min_tokens;
    params.ignoreEos = p.ignore_eos != 0;
    params.stopTokenIds.assign(p.stop_token_ids, p.stop_token_ids + p.num_stop_token_ids);
    params.sampling.presencePenalty = p.presence_penalty;
    params.sampling.frequencyPenalty = p.frequency_penalty;
    std::vector<std::string> stops;
    for (size_t i = 0; i < p.num_stop; ++i) {
      if (p.stop[i] == nullptr || p.stop[i][0] == '\0')
        return fail(LLMC_STATUS_INVALID_ARGUMENT,
                    std::string(fn) + ": stop[" + std::to_string(i) +
                        "] is NULL or empty; every stop string needs a character");
      stops.emplace_back(p.stop[i]);
    }
    Request request;
    request.callback = callback;
    request.userData = userData;
    request.minTokens = p.min_tokens;
    request.text = std::make_unique<generation::TextStream>(engine.tokenizer(), params.prompt,
                                                            std::move(stops));
    auto added = handle->scheduler->add(std::move(params));
    if (!added)
      return fromStatus(added.status().withContext(fn), LLMC_STATUS_INVALID_ARGUMENT);
    handle->requests.emplace(*added, std::move(request));
    *id = *added;
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_scheduler_cancel(llmc_scheduler *handle, llmc_request_id id) {
  const char *fn = "llmc_scheduler_cancel";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "scheduler");
    if (handle->requests.count(id) == 0)
      return fail(LLMC_STATUS_NOT_FOUND, std::string(fn) + ": no live request " +
                                             std::to_string(id) + " (unknown or finished)");
    handle->scheduler->abort(id);
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_scheduler_step(llmc_scheduler *handle, int32_t *hasWork) {
  const char *fn = "llmc_scheduler_step";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "scheduler");
    if (handle->inCallback)
      return fail(LLMC_STATUS_BUSY, std::string(fn) + ": called from a request callback");
    handle->polled.clear();
    for (const serving::TokenEvent &event : handle->scheduler->step())
      handle->handle(event);
    if (hasWork != nullptr)
      *hasWork = handle->scheduler->hasWork() ? 1 : 0;
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_scheduler_run(llmc_scheduler *handle) {
  const char *fn = "llmc_scheduler_run";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "scheduler");
    int32_t hasWork = handle->scheduler->hasWork() ? 1 : 0;
    while (hasWork != 0)
      if (llmc_status s = llmc_scheduler_step(handle, &hasWork); s)
        return s;
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_scheduler_poll(llmc_scheduler *handle, llmc_request_event *events,
                                size_t capacity, size_t *count) {
  const char *fn = "llmc_scheduler_poll";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "scheduler");
    if (count == nullptr)
      return nullArgument(fn, "count");
    if (events == nullptr && capacity > 0)
      return nullArgument(fn, "events");
    handle->polled.clear();
    const size_t n = std::min(capacity, handle->queued.size());
    handle->polled.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      handle->polled.push_back(std::move(handle->queued.front()));
      handle->queued.pop_front();
    }
    for (size_t i = 0; i < n; ++i)
      events[i] = handle->polled[i].view();
    *count = n;
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_scheduler_get_stats(const llmc_scheduler *handle, llmc_scheduler_stats *out) {
  const char *fn = "llmc_scheduler_get_stats";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "scheduler");
    if (out == nullptr)
      return nullArgument(fn, "stats");
    serving::SchedulerStats s = handle->scheduler->stats();
    *out = llmc_scheduler_stats{};
    out->running = s.running;
    out->waiting = s.waiting;
    out->kv_usage = s.kvUsage;
    out->prefix_query_tokens = s.prefixQueries;
    out->prefix_hit_tokens = s.prefixHits;
    out->preemptions = s.preemptions;
    out->prompt_tokens = s.promptTokens;
    out->generation_tokens = s.generationTokens;
    out->finished = s.finished;
    out->cancelled = s.aborted;
    return LLMC_STATUS_OK;
  });
}

} // extern "C"
