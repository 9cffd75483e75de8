// Microbenchmark (not a test): int4 GEMV/GEMM (matmul_q4.h) against the f32
// and bf16 GEMV on the same shapes, weights cycled through copies spanning
// 512 MiB so that decode reads them from DRAM. Reports the best of 5 trials
// of 0.1 s in weights (millions of N x K elements) per second, and packed
// GB/s for int4. Usage: bench_matmul_q4 [threads, default 2]
#include "cpu/isa.h"
#include "cpu/matmul.h"
#include "cpu/matmul_q4.h"
#include "kernels/common/q4_layout.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

using llmc::DType;
using llmc::ThreadPool;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Best calls per second of fn(i) over 5 trials of 0.1 s; i counts calls.
template <typename Fn> double callsPerSecond(const Fn &fn) {
  fn(0);
  double best = 0;
  int64_t call = 1;
  for (int trial = 0; trial < 5; ++trial) {
    int iterations = 0;
    auto start = Clock::now();
    do {
      fn(call++);
      ++iterations;
    } while (seconds(start) < 0.1);
    best = std::max(best, iterations / seconds(start));
  }
  return best;
}

constexpr size_t kSpanBytes = size_t(512) << 20;

void benchShape(ThreadPool &pool, int64_t n, int64_t k, int64_t tokens) {
  std::mt19937 rng(1);
  std::vector<float> x(tokens * k, 0.5f), y(tokens * n);
  const double weights = static_cast<double>(n) * k;
  // f32 and bf16.
  for (DType dtype : {DType::F32, DType::BF16}) {
    size_t bytes = n * k * llmc::dtypeSize(dtype);
    size_t copies = std::max<size_t>(1, kSpanBytes / bytes);
    std::vector<uint8_t> data(copies * bytes, 0);
    double rate = callsPerSecond([&](int64_t i) {
      llmc::cpu::WeightMatrix w{data.data() + (i % copies) * bytes, dtype, n, k};
      llmc::cpu::matmul(pool, x.data(), tokens, w, nullptr, 0.0f, y.data());
    });
    std::printf("%-5s N=%-6lld K=%-6lld T=%-3lld %8.0f Mweights/s %6.2f GB/s\n",
                dtype == DType::F32 ? "f32" : "bf16", static_cast<long long>(n),
                static_cast<long long>(k), static_cast<long long>(tokens),
                rate * weights * tokens / 1e6, rate * bytes / 1e9);
  }
  for (llmc::cpu::Isa isa : {llmc::cpu::Isa::Avx2, llmc::cpu::Isa::Avx512})
    for (int64_t group : {32, 128}) {
      if (!llmc::cpu::setIsaForTesting(isa))
        continue;
      int64_t words = llmc::hd::q4WordsPerRow(k), groups = llmc::hd::q4NumGroups(k, group);
      const int64_t zeroBytes = llmc::cpu::q4ZeroRowBytes(groups);
      size_t bytes = n * words * 4 + n * groups * 2 + n * zeroBytes;
      size_t copies = std::max<size_t>(1, kSpanBytes / bytes);
      std::vector<uint32_t> q(copies * n * words);
      for (uint32_t &v : q)
        v = static_cast<uint32_t>(rng());
      std::vector<uint16_t> s(copies * n * groups, 0x2000);
      std::vector<uint8_t> z(copies * n * zeroBytes, 0x88); // zero points 8
      double rate = callsPerSecond([&](int64_t i) {
        size_t c = i % copies;
        llmc::cpu::Q4Matrix w{q.data() + c * n * words,
                              s.data() + c * n * groups,
                              z.data() + c * n * zeroBytes,
                              n,
                              k,
                              group};
        llmc::cpu::matmulQ4(pool, x.data(), tokens, w, nullptr, 0.0f, y.data());
      });
      std::printf("q4g%-3lld %-6s N=%-6lld K=%-6lld T=%-3lld %8.0f Mweights/s %6.2f GB/s\n",
                  static_cast<long long>(group), llmc::cpu::isaName(isa), static_cast<long long>(n),
                  static_cast<long long>(k), static_cast<long long>(tokens),
                  rate * weights * tokens / 1e6, rate * bytes / 1e9);
    }
}

} // namespace

int main(int argc, char **argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ThreadPool pool(threads);
  std::printf("threads %d\n", threads);
  for (int64_t tokens : {1, 2, 16})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 768}, {4096, 4096}})
      benchShape(pool, n, k, tokens);
  return 0;
}
