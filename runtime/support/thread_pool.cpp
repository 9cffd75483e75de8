#include "support/thread_pool.h"

#include <algorithm>

#if defined(__linux__)
#include <sched.h>
#endif

namespace llmc {
namespace {

// True on threads that are running a parallelFor chunk: nested calls run inline.
thread_local bool tInsideParallelFor = false;

// About 100 us of spinning before a thread sleeps on a condition variable.
constexpr int kSpinIterations = 4000;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until pred() holds or the budget runs out. Yields now and then so
// that, when threads outnumber free cores, the thread being waited for runs.
template <typename Pred> bool spinUntil(const Pred &pred) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pred())
      return true;
    if (i % 64 == 63)
      std::this_thread::yield();
    else
      cpuRelax();
  }
  return pred();
}

} // namespace

int availableCores() {
#if defined(__linux__)
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0)
    return std::max(1, CPU_COUNT(&mask));
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int numThreads) {
  if (numThreads <= 0)
    numThreads = availableCores();
  workers_.reserve(numThreads - 1);
  for (int i = 1; i < numThreads; ++i)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

void ThreadPool::runChunks() {
  bool outer = tInsideParallelFor;
  tInsideParallelFor = true;
  for (int64_t c = nextChunk_.fetch_add(1); c < jobChunks_; c = nextChunk_.fetch_add(1))
    jobFn_(jobArg_, c * jobChunk_, std::min(jobSize_, (c + 1) * jobChunk_));
  tInsideParallelFor = outer;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  auto hasWork = [&] { return generation_.load() != seen || stop_.load(); };
  for (;;) {
    if (!spinUntil(hasWork)) {
      // Counted before the last look at generation_ (both seq_cst): a caller
      // that bumps it afterwards sees this sleeper and notifies.
      sleepers_.fetch_add(1);
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, hasWork);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load())
      return;
    seen = generation_.load(std::memory_order_acquire);
    runChunks();
    if (workersBusy_.fetch_sub(1) == 1 && callerSleeping_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n, int64_t grain, ChunkFn chunkFn, const void *fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || n <= grain || tInsideParallelFor) {
    chunkFn(fn, 0, n);
    return;
  }
  std::lock_guard<std::mutex> call(callMutex_);
  // A few chunks per thread balance uneven progress (threads share cores).
  int64_t units = (n + grain - 1) / grain;
  int64_t chunks = std::min<int64_t>(units, 4 * static_cast<int64_t>(numThreads()));
  jobFn_ = chunkFn;
  jobArg_ = fn;
  jobSize_ = n;
  jobChunk_ = (units + chunks - 1) / chunks * grain;
  jobChunks_ = (n + jobChunk_ - 1) / jobChunk_;
  nextChunk_.store(0, std::memory_order_relaxed);
  workersBusy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  // Spinning workers see the new generation without a system call; the lock
  // and the notify are only for those asleep.
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
  }
  runChunks();
  auto allDone = [&] { return workersBusy_.load() == 0; };
  if (!spinUntil(allDone)) {
    callerSleeping_.store(true);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, allDone);
    callerSleeping_.store(false);
  }
}

} // namespace llmc
