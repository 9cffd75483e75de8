// A fixed pool of worker threads for data-parallel kernels.
//
// parallelFor splits [0, n) into contiguous chunks that the workers and the
// calling thread claim from one shared ticket. A call allocates nothing: the
// function is passed by reference through a type-erased pointer. Workers spin
// briefly between calls (decode runs kernels back to back) and then sleep.
// The caller waits for the chunks, not for the workers: when a worker is not
// running (more threads than free cores), the caller takes its chunks and
// returns without waiting for it to be scheduled; a worker that wakes late
// finds the job's chunks all claimed and goes back to waiting.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace llmc {

// The cores this process may run on (its sched_getaffinity mask; a container
// or `taskset` limits it below the machine's count), at least 1.
int availableCores();

class ThreadPool {
public:
  // `numThreads` counts the calling thread, so 1 runs everything inline;
  // 0 means availableCores().
  explicit ThreadPool(int numThreads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int numThreads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each at least
  // `grain` long (except the last) and starting at a multiple of `grain`;
  // returns when all are done. Runs inline when n <= grain, when the pool
  // has one thread, or when called from inside another parallelFor.
  // Calls from several threads at once are serialized.
  template <typename Fn> void parallelFor(int64_t n, const Fn &fn, int64_t grain = 1) {
    run(
        n, grain, [](const void *f, int64_t b, int64_t e) { (*static_cast<const Fn *>(f))(b, e); },
        &fn);
  }

private:
  using ChunkFn = void (*)(const void *fn, int64_t begin, int64_t end);

  void run(int64_t n, int64_t grain, ChunkFn chunkFn, const void *fn);
  void workerLoop();
  // Claims and runs chunks of the job of `generation` until none is left.
  void runChunks(uint64_t generation);

  std::vector<std::thread> workers_;
  std::mutex callMutex_; // one parallelFor at a time

  // The current job; written by the caller while no chunk of the previous
  // job is unclaimed or running, before it publishes the new ticket.
  ChunkFn jobFn_ = nullptr;
  const void *jobArg_ = nullptr;
  int64_t jobSize_ = 0;
  int64_t jobChunk_ = 0;
  // The job's generation, chunk count and next unclaimed chunk in one word
  // (ticket.h layout in thread_pool.cpp): claiming a chunk is one CAS that
  // fails when the job is another, so a late worker never runs a stale job.
  alignas(64) std::atomic<uint64_t> ticket_{0};
  alignas(64) std::atomic<int64_t> chunksDone_{0};

  alignas(64) std::atomic<int> sleepers_{0}; // workers blocked on wake_
  std::atomic<bool> callerSleeping_{false}; // the caller blocked on done_
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_; // workers wait for a new generation
  std::condition_variable done_; // the caller waits for chunksDone_ == the job's chunks
};

} // namespace llmc
