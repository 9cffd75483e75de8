// Microbenchmark (not a test): what a parallelFor costs the decode loop.
// Usage: bench_thread_pool [max threads, default 2]
//
// dispatch: an empty parallelFor (64 one-element units) issued back to back,
//   median of 200 batches of 100 calls: wake-up, claims and the final wait.
// after sleep: the same call 2 ms after the previous one (workers asleep),
//   median of 200.
// decode-like: 60 parallelFors per "token" (the ~60 steps of a 110M decode
//   step), each 64 units of fixed arithmetic (tens of us in all), median
//   token time of 40 tokens, and the speed-up over 1 thread. On a loaded
//   machine (workers descheduled) a pool that waits for its workers falls
//   behind here.
#include "support/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::time_point since) {
  return std::chrono::duration<double, std::micro>(Clock::now() - since).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A fixed amount of dependent arithmetic per unit (not optimized away).
volatile double gSink = 0;
void work(int64_t units) {
  double x = 1.0;
  for (int64_t i = 0; i < units * 500; ++i)
    x = x * 1.0000001 + 1e-9;
  gSink = x;
}

} // namespace

int main(int argc, char **argv) {
  const int maxThreads = argc > 1 ? std::atoi(argv[1]) : 2;
  std::printf("threads | dispatch us | after 2 ms sleep us | decode-like token ms | vs 1 thread\n");
  double oneThread = 0;
  for (int threads = 1; threads <= maxThreads; ++threads) {
    llmc::ThreadPool pool(threads);
    auto empty = [](int64_t, int64_t) {};
    std::vector<double> batches;
    for (int b = 0; b < 200; ++b) {
      const auto start = Clock::now();
      for (int i = 0; i < 100; ++i)
        pool.parallelFor(64, empty);
      batches.push_back(micros(start) / 100);
    }
    std::vector<double> afterSleep;
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const auto start = Clock::now();
      pool.parallelFor(64, empty);
      afterSleep.push_back(micros(start));
    }
    std::vector<double> tokens;
    for (int token = 0; token < 40; ++token) {
      const auto start = Clock::now();
      for (int step = 0; step < 60; ++step)
        pool.parallelFor(64, [](int64_t b, int64_t e) { work(e - b); });
      tokens.push_back(micros(start) / 1000);
    }
    const double token = median(tokens);
    if (threads == 1)
      oneThread = token;
    std::printf("%7d | %11.2f | %19.2f | %20.3f | %.2fx\n", threads, median(batches),
                median(afterSleep), token, oneThread / token);
  }
  return 0;
}
