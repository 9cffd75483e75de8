// Microbenchmark (not a test): decode GEMV throughput (T = 1) against the
// machine's memory bandwidth. Usage: bench_matmul [max threads, default 2]
//
// "hot" reuses one weight matrix (it may sit in cache); "cold" cycles through
// copies spanning 1 GiB, so every pass streams from DRAM as decode does.
#include "cpu/isa.h"
#include "cpu/matmul.h"
#include "kernels/common/half.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// Sums n 64-bit words (n a multiple of 4 * kStreams) read as kStreams
// sequential streams at once: one stream per core underuses the memory
// system (a GEMV tile also streams several weight rows at once).
constexpr size_t kStreams = 8;

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sumWords(const uint64_t *p, size_t n) {
  const size_t length = n / kStreams;
  __m256i sums[kStreams];
  for (__m256i &s : sums)
    s = _mm256_setzero_si256();
  for (size_t i = 0; i + 4 <= length; i += 4)
    for (size_t s = 0; s < kStreams; ++s)
      sums[s] = _mm256_add_epi64(
          sums[s], _mm256_load_si256(reinterpret_cast<const __m256i *>(p + s * length + i)));
  __m256i total = _mm256_setzero_si256();
  for (__m256i s : sums)
    total = _mm256_add_epi64(total, s);
  return static_cast<uint64_t>(_mm256_extract_epi64(total, 0) + _mm256_extract_epi64(total, 3));
}
#else
uint64_t sumWords(const uint64_t *p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i)
    s += p[i];
  return s;
}
#endif

volatile uint64_t gSink;

void memoryBandwidth(ThreadPool &pool, char *buffer, double &read, double &copy) {
  const size_t words = kGiB / 8;
  const uint64_t *data = reinterpret_cast<const uint64_t *>(buffer);
  read = measure(kGiB, [&] {
    pool.parallelFor(
        words,
        [&](int64_t b, int64_t e) { gSink = sumWords(data + b, static_cast<size_t>(e - b)); },
        1 << 20);
  });
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
    for (Shape s : {Shape{768, 2048}, Shape{4096, 4096}})
      for (DType dtype : {DType::F32, DType::BF16}) {
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
