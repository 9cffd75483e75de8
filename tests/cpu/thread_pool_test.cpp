#include "support/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace llmc {
namespace {

// Every index in [0, n) is visited exactly once, in chunks aligned to grain.
void expectCoversOnce(ThreadPool &pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(n);
  std::atomic<bool> misaligned{false};
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        if (begin % grain != 0 || end <= begin)
          misaligned = true;
        for (int64_t i = begin; i < end; ++i)
          hits[i].fetch_add(1);
      },
      grain);
  EXPECT_FALSE(misaligned.load()) << "n " << n << " grain " << grain;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[i].load(), 1) << "n " << n << " grain " << grain << " i " << i;
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.numThreads(), threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 4097})
      for (int64_t grain : {1, 4, 16, 5000})
        expectCoversOnce(pool, n, grain);
  }
}

TEST(ThreadPool, DefaultUsesTheHardware) {
  ThreadPool pool;
  EXPECT_GE(pool.numThreads(), 1);
  EXPECT_EQ(pool.numThreads(), availableCores());
  EXPECT_LE(availableCores(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

// Gaps longer than the spin put the workers (and, with a slow chunk, the
// caller) to sleep: every call must still wake them and return, whether
// they sleep or spin when it starts.
TEST(ThreadPool, CallsAfterTheWorkersSleptAndWhileTheyFallAsleep) {
  ThreadPool pool(3);
  for (int call = 0; call < 40; ++call) {
    std::this_thread::sleep_for(std::chrono::microseconds(call % 2 ? 3000 : 50 * call));
    std::atomic<int64_t> sum{0};
    pool.parallelFor(
        64,
        [&](int64_t begin, int64_t end) {
          if (begin == 0 && call % 5 == 0) // the others finish long before
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          for (int64_t i = begin; i < end; ++i)
            sum.fetch_add(i);
        },
        4);
    ASSERT_EQ(sum.load(), 64 * 63 / 2) << "call " << call;
  }
}

TEST(ThreadPool, UsesSeveralThreadsForLargeJobs) {
  ThreadPool pool(3);
  std::mutex mutex;
  std::vector<std::thread::id> ids;
  for (int attempt = 0; attempt < 50; ++attempt)
    pool.parallelFor(
        3000,
        [&](int64_t, int64_t) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          std::lock_guard<std::mutex> lock(mutex);
          ids.push_back(std::this_thread::get_id());
        },
        1);
  std::sort(ids.begin(), ids.end());
  EXPECT_GT(std::unique(ids.begin(), ids.end()) - ids.begin(), 1);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallelFor(8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::thread::id outer = std::this_thread::get_id();
      pool.parallelFor(100, [&](int64_t b, int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        total += e - b;
      });
    }
  });
  EXPECT_EQ(total.load(), 800);
}

TEST(ThreadPool, ManyBackToBackCallsAndConcurrentCallers) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  auto work = [&] {
    for (int call = 0; call < 2000; ++call)
      pool.parallelFor(
          64,
          [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i)
              sum += i;
          },
          4);
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(sum.load(), 2 * 2000 * (63 * 64 / 2));
}

// The caller returns once every chunk is done, without waiting for workers
// that claimed none (with more threads than cores some are not running). A
// worker that wakes late must then find nothing to claim: no chunk of a call
// may run after that call returned, nor twice, nor with another call's
// bounds. Many short calls of varying sizes, more threads than cores.
TEST(ThreadPool, LateWorkersNeverRunAFinishedCall) {
  const int threads = std::max(4, 2 * availableCores());
  ThreadPool pool(threads);
  std::atomic<int> lateChunks{0}, badSums{0};
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 1 + call % 97;
    std::atomic<bool> returned{false};
    std::atomic<int64_t> sum{0};
    pool.parallelFor(
        n,
        [&](int64_t begin, int64_t end) {
          if (returned.load())
            ++lateChunks;
          for (int64_t i = begin; i < end; ++i)
            sum += i + 1;
        },
        1 + call % 3);
    returned = true;
    if (sum.load() != n * (n + 1) / 2)
      ++badSums;
    if (call % 1000 == 999) // now and then let the workers fall asleep
      std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  EXPECT_EQ(lateChunks.load(), 0);
  EXPECT_EQ(badSums.load(), 0);
}

} // namespace
} // namespace llmc
