// Microbenchmark (not a test): the int4 linear layer (matmulQ4) on the 110M
// Llama's shapes, timed by the calling thread's CPU time with one thread, so
// that other processes on a loaded machine disturb it much less than wall
// time. Usage: bench_q4_cputime [tokens, default 1] [group size, default 32]
// [int8] [1b] [panels]; with "panels", the matrices in 16-row panels too
// (cpu/q4_panels.h), as the loader lays them out on AVX-512 VNNI machines;
// with "int8", the int8 layer (matmulQ8, a scale per output
// channel: an LM head of --quantize-lm-head=int8) on the same shapes instead;
// with "1b", the shapes of the 1B Llama (Llama-3.2-1B: hidden 2048, 8 KV
// heads of 64, intermediate 8192, vocab 32000) instead of the 110M's, and
// 256 x 2048, whose 288 KiB stay in L2 (the kernel's compute alone);
// with "ksweep", 16.8 M weights as rows of K = 2048, 4096, 8192 and 16384
// instead (the 1B's down projection is 2048 x 8192): a 16-row panel of K =
// 8192 is 74 KiB, which pushes x out of L1 between two panels
// (docs/perf.md, "Long int4 panels").
//
// "l2" reuses one matrix; "dram" cycles through copies spanning 256 MiB, as
// a decode step streams its weights. Prints G weights (x tokens) per CPU
// second, best of 7 trials. LLMC_BENCH_ISA=avx2 runs the AVX2 kernels on an
// AVX-512 machine (bench_isa.h).
#include "bench_isa.h"
#include "cpu/matmul_q4.h"
#include "cpu/matmul_q8.h"
#include "cpu/q4_panels.h"
#include "kernels/common/half.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/q8_layout.h"
#include "support/align.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

namespace {

using llmc::ThreadPool;
using llmc::cpu::Q4Matrix;

double threadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Copies of one random [n, k] matrix in the plan layout, back to back.
struct Copies {
  int64_t n, k, g, count;
  std::vector<llmc::hd::u32> words;
  std::vector<uint16_t> scales;
  std::vector<uint8_t> zeros; // packed, as the runtime loads them
  // With "panels": each copy's, as the loader adds them, on 2 MiB pages
  // where the kernel allows (as LoadedWeights::allocate).
  std::unique_ptr<uint8_t, decltype(&std::free)> panels{nullptr, &std::free};

  Copies(int64_t rows, int64_t cols, int64_t group, size_t budget, bool withPanels)
      : n(rows), k(cols), g(group) {
    const int64_t w = llmc::hd::q4WordsPerRow(k), groups = llmc::hd::q4NumGroups(k, g);
    const int64_t zeroBytes = llmc::cpu::q4ZeroRowBytes(groups);
    const size_t bytes = static_cast<size_t>(n * (4 * w + 2 * groups + zeroBytes));
    count = std::max<int64_t>(1, static_cast<int64_t>(budget / bytes));
    std::mt19937 rng(7);
    words.resize(count * n * w);
    for (auto &v : words)
      v = rng();
    for (int64_t i = 0; i < count * n * groups; ++i)
      scales.push_back(llmc::hd::f32ToF16(0.01f + 0.001f * static_cast<float>(i % 7)));
    for (int64_t i = 0; i < count * n * zeroBytes; ++i)
      zeros.push_back(static_cast<uint8_t>(i % 256));
    if (!withPanels)
      return;
    const int64_t panelBytes = llmc::cpu::q4PanelBytes(n, k, g);
    const uint64_t hugePage = uint64_t{2} << 20,
                   allocated = llmc::alignUp(static_cast<uint64_t>(count * panelBytes), hugePage);
    panels.reset(static_cast<uint8_t *>(std::aligned_alloc(hugePage, allocated)));
    if (!panels) {
      std::fprintf(stderr, "error: cannot allocate %llu bytes of panels\n",
                   static_cast<unsigned long long>(allocated));
      std::exit(1);
    }
    madvise(panels.get(), allocated, MADV_HUGEPAGE); // advice: failure is harmless
    ThreadPool pool(1);
    for (int64_t c = 0; c < count; ++c)
      llmc::cpu::buildQ4Panels(pool, matrix(c), panels.get() + c * panelBytes);
  }
  Q4Matrix matrix(int64_t c) const {
    const int64_t w = llmc::hd::q4WordsPerRow(k), groups = llmc::hd::q4NumGroups(k, g);
    return {words.data() + c * n * w,
            scales.data() + c * n * groups,
            zeros.data() + c * n * llmc::cpu::q4ZeroRowBytes(groups),
            n,
            k,
            g,
            panels ? panels.get() + c * llmc::cpu::q4PanelBytes(n, k, g) : nullptr};
  }
};

// Copies of one random int8 [n, k] matrix, a f32 scale per row.
struct Int8Copies {
  int64_t n, k, count;
  std::vector<int8_t> values;
  std::vector<float> scales;

  Int8Copies(int64_t rows, int64_t cols, size_t budget) : n(rows), k(cols) {
    const int64_t rowBytes = llmc::hd::q8RowBytes(k);
    count = std::max<int64_t>(1, static_cast<int64_t>(budget / size_t(n * (rowBytes + 4))));
    std::mt19937 rng(7);
    values.resize(count * n * rowBytes);
    for (auto &v : values)
      v = static_cast<int8_t>(rng() % 255 - 127);
    for (int64_t i = 0; i < count * n; ++i)
      scales.push_back(0.001f + 0.0001f * static_cast<float>(i % 7));
  }
  llmc::cpu::Q8Matrix matrix(int64_t c) const {
    return {values.data() + c * n * llmc::hd::q8RowBytes(k), scales.data() + c * n, false, n, k, 0};
  }
};

void multiply(ThreadPool &pool, const float *x, int64_t tokens, const Copies &m, int64_t c,
              float *y) {
  llmc::cpu::matmulQ4(pool, x, tokens, m.matrix(c), nullptr, 0.0f, y);
}
void multiply(ThreadPool &pool, const float *x, int64_t tokens, const Int8Copies &m, int64_t c,
              float *y) {
  llmc::cpu::matmulQ8(pool, x, tokens, m.matrix(c), nullptr, 0.0f, y);
}

// Best G weight-token products per CPU second over 7 trials of >= 0.05 s.
template <typename Matrices>
double measure(ThreadPool &pool, const Matrices &m, int64_t tokens, bool cycle) {
  std::vector<float> x(tokens * m.k), y(tokens * m.n);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float &v : x)
    v = normal(rng);
  int64_t next = 0;
  auto once = [&] { multiply(pool, x.data(), tokens, m, cycle ? next++ % m.count : 0, y.data()); };
  once();
  double best = 0;
  for (int trial = 0; trial < 7; ++trial) {
    int64_t calls = 0;
    const double start = threadSeconds();
    double spent = 0;
    do {
      once();
      ++calls;
      spent = threadSeconds() - start;
    } while (spent < 0.05);
    best = std::max(best, static_cast<double>(calls * m.n * m.k * tokens) / spent / 1e9);
  }
  return best;
}

} // namespace

int main(int argc, char **argv) {
  if (!llmc::bench::applyBenchIsa())
    return 1;
  const int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 1;
  const int64_t group = argc > 2 ? std::atoll(argv[2]) : 32;
  bool int8 = false, oneB = false, panels = false, kSweep = false;
  for (int i = 3; i < argc; ++i) {
    int8 = int8 || std::string(argv[i]) == "int8";
    oneB = oneB || std::string(argv[i]) == "1b";
    panels = panels || std::string(argv[i]) == "panels";
    kSweep = kSweep || std::string(argv[i]) == "ksweep";
  }
  if (tokens < 1 || !llmc::hd::q4ValidGroupSize(group)) {
    std::fprintf(stderr, "error: usage: bench_q4_cputime [tokens >= 1] [group size, 32k] [int8] "
                         "[1b | ksweep] [panels]\n");
    return 1;
  }
  ThreadPool pool(1);
  struct Shape {
    int64_t n, k;
  };
  std::printf("%-14s %6s %4s %12s %12s\n", "N x K", "tokens", "G", "l2 Gw/s", "dram Gw/s");
  const std::vector<Shape> shapes =
      kSweep ? std::vector<Shape>{{8192, 2048}, {4096, 4096}, {2048, 8192}, {1024, 16384}}
      : oneB ? std::vector<Shape>{{3072, 2048}, {2048, 2048},  {16384, 2048},
                                  {2048, 8192}, {32000, 2048}, {256, 2048}}
             : std::vector<Shape>{{2304, 768}, {768, 768}, {4096, 768}, {768, 2048}, {32000, 768}};
  for (Shape s : shapes) {
    double l2 = 0.0, dram = 0.0;
    if (int8) {
      const Int8Copies hot(s.n, s.k, 0), cold(s.n, s.k, size_t(256) << 20);
      l2 = measure(pool, hot, tokens, false);
      dram = tokens <= 8 ? measure(pool, cold, tokens, true) : 0.0;
    } else {
      const Copies hot(s.n, s.k, group, 0, panels),
          cold(s.n, s.k, group, size_t(256) << 20, panels);
      l2 = measure(pool, hot, tokens, false);
      dram = tokens <= 8 ? measure(pool, cold, tokens, true) : 0.0;
    }
    std::printf("%5lld x %-6lld %6lld %4lld %12.2f %12.2f\n", static_cast<long long>(s.n),
                static_cast<long long>(s.k), static_cast<long long>(tokens),
                static_cast<long long>(group), l2, dram);
  }
  return 0;
}
