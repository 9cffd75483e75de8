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

// ThreadPool::ticket_: generation (32 bits) | chunk count (16) | next chunk (16).
constexpr uint64_t kMaxChunks = 0xffff;
constexpr uint64_t makeTicket(uint64_t generation, uint64_t chunks) {
  return (generation << 32) | (chunks << 16);
}
constexpr uint64_t ticketGeneration(uint64_t t) { return t >> 32; }
constexpr uint64_t ticketChunks(uint64_t t) { return (t >> 16) & kMaxChunks; }
constexpr uint64_t ticketNext(uint64_t t) { return t & kMaxChunks; }

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

void ThreadPool::runChunks(uint64_t generation) {
  bool outer = tInsideParallelFor;
  tInsideParallelFor = true;
  uint64_t t = ticket_.load(std::memory_order_acquire);
  while (ticketGeneration(t) == generation && ticketNext(t) < ticketChunks(t)) {
    // A successful claim keeps the job from completing, so its fields stay put.
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      continue;
    const int64_t c = static_cast<int64_t>(ticketNext(t));
    jobFn_(jobArg_, c * jobChunk_, std::min(jobSize_, (c + 1) * jobChunk_));
    if (chunksDone_.fetch_add(1) + 1 == static_cast<int64_t>(ticketChunks(t)) &&
        callerSleeping_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
    t = ticket_.load(std::memory_order_acquire);
  }
  tInsideParallelFor = outer;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  auto hasWork = [&] { return ticketGeneration(ticket_.load()) != seen || stop_.load(); };
  for (;;) {
    if (!spinUntil(hasWork)) {
      // Counted before the last look at ticket_ (both seq_cst): a caller
      // that publishes a job afterwards sees this sleeper and notifies.
      sleepers_.fetch_add(1);
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, hasWork);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load())
      return;
    seen = ticketGeneration(ticket_.load(std::memory_order_acquire));
    runChunks(seen);
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
  int64_t chunks = std::min<int64_t>(
      {units, 4 * static_cast<int64_t>(numThreads()), static_cast<int64_t>(kMaxChunks)});
  jobFn_ = chunkFn;
  jobArg_ = fn;
  jobSize_ = n;
  jobChunk_ = (units + chunks - 1) / chunks * grain;
  chunks = (n + jobChunk_ - 1) / jobChunk_;
  chunksDone_.store(0, std::memory_order_relaxed);
  // Spinning workers see the new ticket without a system call; the lock and
  // the notify are only for those asleep.
  const uint64_t generation = (ticketGeneration(ticket_.load()) + 1) & 0xffffffffu;
  ticket_.store(makeTicket(generation, static_cast<uint64_t>(chunks)));
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
  }
  runChunks(generation);
  // Only chunks that workers claimed can still be running.
  auto allDone = [&] { return chunksDone_.load() == chunks; };
  if (!spinUntil(allDone)) {
    callerSleeping_.store(true);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, allDone);
    callerSleeping_.store(false);
  }
}

} // namespace llmc
