#include "serving/serving_loop.h"

#include <chrono>

namespace llmc::serving {

using Clock = std::chrono::steady_clock;

Expected<std::unique_ptr<ServingLoop>> ServingLoop::start(Engine &engine,
                                                          const ServingConfig &config) {
  if (config.maxWaiting < 1)
    return Status::error("max waiting requests is " + std::to_string(config.maxWaiting) +
                         "; expected an integer >= 1");
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler,
                        Scheduler::create(engine, config.scheduler));
  std::unique_ptr<ServingLoop> loop(new ServingLoop(config, std::move(scheduler)));
  loop->stats_ = loop->scheduler_->stats();
  loop->thread_ = std::thread([raw = loop.get()] { raw->run(); });
  return loop;
}

ServingLoop::ServingLoop(const ServingConfig &config, std::unique_ptr<Scheduler> scheduler)
    : config_(config), scheduler_(std::move(scheduler)) {}

ServingLoop::~ServingLoop() { shutdown(ShutdownMode::Abort); }

SubmitResult ServingLoop::submit(RequestParams params, EventCallback callback) {
  SubmitResult result;
  Status valid = scheduler_->validate(params); // constants only: no lock needed
  if (!valid) {
    result.status = SubmitStatus::InvalidRequest;
    result.message = valid.message();
    return result;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) {
    result.status = SubmitStatus::ShuttingDown;
    result.message = "the server is shutting down";
    return result;
  }
  if (static_cast<int64_t>(inbox_.size()) + stats_.waiting >= config_.maxWaiting) {
    result.status = SubmitStatus::QueueFull;
    result.message =
        "too many requests waiting (" + std::to_string(config_.maxWaiting) + "); retry later";
    return result;
  }
  result.id = nextId_++;
  callbacks_.emplace(result.id, std::move(callback));
  inbox_.push_back({result.id, std::move(params)});
  wake_.notify_one();
  return result;
}

void ServingLoop::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancels_.push_back(id);
  wake_.notify_one();
}

SchedulerStats ServingLoop::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SchedulerStats s = stats_;
  s.waiting += static_cast<int64_t>(inbox_.size());
  return s;
}

void ServingLoop::shutdown(ShutdownMode mode) {
  std::lock_guard<std::mutex> once(shutdownMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (mode == ShutdownMode::Abort)
      abortAll_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable())
    thread_.join();
}

void ServingLoop::deliver(const std::vector<TokenEvent> &events) {
  for (const TokenEvent &e : events) {
    EventCallback callback;
    auto ids = loopIds_.find(e.id);
    if (ids == loopIds_.end())
      continue;
    const RequestId loopId = ids->second;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = callbacks_.find(loopId);
      if (it == callbacks_.end())
        continue;
      callback = it->second;
      if (e.finished)
        callbacks_.erase(it);
    }
    if (e.finished) {
      schedulerIds_.erase(loopId);
      loopIds_.erase(ids);
    }
    TokenEvent forCaller = e;
    forCaller.id = loopId;
    try {
      callback(forCaller);
    } catch (...) { // a callback must not take the loop down: end its request
      if (!e.finished)
        scheduler_->abort(e.id);
    }
  }
}

void ServingLoop::run() {
  Clock::time_point drainDeadline{};
  bool draining = false;
  for (;;) {
    std::vector<Pending> inbox;
    std::vector<RequestId> cancels;
    bool abortAll = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return !inbox_.empty() || !cancels_.empty() || stopping_ || scheduler_->hasWork();
      });
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      // Until the step below refreshes stats_, the requests taken from the
      // inbox still count against maxWaiting (submit reads inbox + waiting).
      stats_.waiting += static_cast<int64_t>(inbox.size());
      if (stopping_ && !draining) {
        draining = true;
        drainDeadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.drainSeconds));
      }
      abortAll = abortAll_ || (draining && Clock::now() >= drainDeadline);
    }
    std::vector<TokenEvent> rejected;
    for (Pending &p : inbox) {
      auto id = scheduler_->add(std::move(p.params));
      if (id) {
        schedulerIds_[p.id] = *id;
        loopIds_[*id] = p.id;
        continue;
      }
      // validate() passed at submit, so only a changed engine gets here.
      TokenEvent event;
      event.id = p.id;
      event.finished = true;
      event.reason = FinishReason::Error;
      event.error = id.message();
      EventCallback callback;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        callback = std::move(callbacks_[p.id]);
        callbacks_.erase(p.id);
      }
      if (callback)
        callback(event);
    }
    for (RequestId id : cancels) {
      auto it = schedulerIds_.find(id);
      if (it != schedulerIds_.end())
        scheduler_->abort(it->second);
    }
    if (abortAll)
      for (auto &[loopId, schedulerId] : schedulerIds_)
        scheduler_->abort(schedulerId);
    std::vector<TokenEvent> events;
    if (scheduler_->hasWork())
      events = scheduler_->step();
    bool done = false;
    { // the counters first, so that a client that sees its last event sees them updated
      std::lock_guard<std::mutex> lock(mutex_);
      stats_ = scheduler_->stats();
      done = draining && inbox_.empty() && !scheduler_->hasWork();
    }
    deliver(events);
    if (done)
      return;
  }
}

} // namespace llmc::serving
