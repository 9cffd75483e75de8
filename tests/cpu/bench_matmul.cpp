// Microbenchmark (not a test): decode GEMV throughput (T = 1) against the
// machine's memory bandwidth. Usage: bench_matmul [max threads, default 2]
//
// "hot" reuses one weight matrix (it may sit in cache); "cold" cycles through
// copies spanning 1 GiB, so every pass streams from DRAM as decode does.
#include "cpu/isa.h"
#include "cpu/matmul.h"
#include "cpu/read_bandwidth.h"
#include "kernels/common/half.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using llmc::DType;
using llmc::ThreadPool;
using Clock = std::chrono::steady_clock;

constexpr size_t kGiB = size_t(1) << 30;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Runs `fn` (which touches `bytes` bytes) in 5 trials of at least 0.1 s and
// returns the best GB/s: the machine is shared, the best trial is the least
// disturbed one.
template <typename Fn> double measure(size_t bytes, const Fn &fn) {
  fn(); // warm up
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    int iterations = 0;
    auto start = Clock::now();
    do {
      fn();
      ++iterations;
    } while (seconds(start) < 0.1);
    best = std::max(best, static_cast<double>(bytes) * iterations / seconds(start) / 1e9);
  }
  return best;
}

// read: the probe llmrun bench reports (cpu/read_bandwidth.h; its own 1 GiB).
void memoryBandwidth(ThreadPool &pool, char *buffer, double &read, double &copy) {
  llmc::Expected<double> probe = llmc::cpu::measureReadBandwidth(pool);
  read = probe ? *probe : 0.0;
  // Copy the first half onto the second: 512 MiB read + 512 MiB written.
  copy = measure(kGiB, [&] {
    pool.parallelFor(
        kGiB / 2,
        [&](int64_t b, int64_t e) { std::memcpy(buffer + kGiB / 2 + b, buffer + b, e - b); },
        1 << 22);
  });
}

struct Shape {
  int64_t n, k;
};

// GB/s of weights read by y = x W^T at T = 1, from one matrix ("hot") and
// cycling through the copies that fill `pool` ("cold").
void gemv(ThreadPool &threads, char *weightPool, Shape s, DType dtype, double &hot, double &cold) {
  const size_t bytes = static_cast<size_t>(s.n * s.k) * llmc::dtypeSize(dtype);
  const size_t copies = kGiB / bytes;
  std::vector<float> x(s.k, 0.5f), y(s.n);
  auto run = [&](size_t copy) {
    llmc::cpu::WeightMatrix w{weightPool + copy * bytes, dtype, s.n, s.k};
    llmc::cpu::matmul(threads, x.data(), 1, w, nullptr, 0.0f, y.data());
  };
  hot = measure(bytes, [&] { run(0); });
  size_t next = 0;
  cold = measure(bytes * copies, [&] {
    for (size_t c = 0; c < copies; ++c)
      run(next++ % copies);
  });
}

} // namespace

int main(int argc, char **argv) {
  int maxThreads = argc > 1 ? std::atoi(argv[1]) : 2;
  char *buffer = static_cast<char *>(std::aligned_alloc(64, kGiB));
  if (buffer == nullptr) {
    std::fprintf(stderr, "error: cannot allocate 1 GiB\n");
    return 1;
  }
  // Small finite values in every dtype (0x3c00 is 1.0 in f16, ~0.0078 in bf16).
  for (size_t i = 0; i < kGiB / 2; ++i)
    reinterpret_cast<uint16_t *>(buffer)[i] = 0x3c00;
  std::printf("isa: %s\n", llmc::cpu::isaName(llmc::cpu::activeIsa()));
  std::printf("%-28s %8s %10s %10s %8s\n", "case", "threads", "hot GB/s", "cold GB/s", "% bw");
  for (int t = 1; t <= maxThreads; ++t) {
    ThreadPool pool(t);
    double read = 0, copy = 0;
    memoryBandwidth(pool, buffer, read, copy);
    std::printf("%-28s %8d %10s %10.1f\n", "memory read 1 GiB", t, "", read);
    std::printf("%-28s %8d %10s %10.1f\n", "memory copy 512 MiB (r+w)", t, "", copy);
    // The 110M's QKV, down projection and LM head (rows of 768 and 2048
    // columns: short rows are where the GEMV's streams matter), and a 4096^2.
    for (Shape s : {Shape{2304, 768}, Shape{768, 2048}, Shape{32000, 768}, Shape{4096, 4096}})
      for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
        double hot = 0, cold = 0;
        gemv(pool, buffer, s, dtype, hot, cold);
        char name[64];
        std::snprintf(name, sizeof(name), "gemv %lldx%lld %s", static_cast<long long>(s.n),
                      static_cast<long long>(s.k), llmc::dtypeName(dtype).data());
        std::printf("%-28s %8d %10.1f %10.1f %7.0f%%\n", name, t, hot, cold, 100 * cold / read);
      }
  }
  std::free(buffer);
  return 0;
}
