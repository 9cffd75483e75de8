// Microbenchmark (not a test): prefill GEMM GFLOP/s against the machine's
// FMA peak, and the thread pool's cost per parallelFor.
// Usage: [LLMC_BENCH_ISA=avx2] bench_gemm [max threads, default 2] [tokens, default 512]
//        [--pool | DTYPE... shape=TEXT]
// (--pool: only the FMA peak and the thread pool; DTYPEs, e.g. f16 bf16: only
// those weight dtypes, default f32 f16 bf16; shape=TEXT: only the shapes whose
// name holds TEXT, e.g. shape=swiglu)
//
// The FMA peak is measured, not taken from a data sheet: each thread runs
// independent chains of f32 FMAs on registers (enough chains to cover the
// FMA latency on both pipes), 8 lanes (16 flops per FMA instruction), or 16
// where the active ISA is AVX-512. Where bf16 weights take vdpbf16ps
// (cpu::x86Bf16Active; LLMC_BENCH_BF16DOT=0 turns it off), their peak is
// that instruction's, measured the same way.
#include "bench_isa.h"
#include "cpu/fused.h"
#include "cpu/isa.h"
#include "cpu/matmul.h"
#include "kernels/common/half.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using llmc::DType;
using llmc::ThreadPool;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double cpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Rates of `work` units per call of fn: per wall second, and per CPU second of
// the process divided by its threads (what each core does while it runs,
// which other programs on a shared machine disturb much less).
struct Rate {
  double wall, cpu;
};

// Best of 5 trials of at least 0.2 s each: the least disturbed ones.
template <typename Fn> Rate bestRate(double work, int threads, const Fn &fn) {
  fn(); // warm up
  Rate best{0, 0};
  for (int trial = 0; trial < 5; ++trial) {
    int iterations = 0;
    auto start = Clock::now();
    const double cpuStart = cpuSeconds();
    do {
      fn();
      ++iterations;
    } while (seconds(start) < 0.2);
    best.wall = std::max(best.wall, work * iterations / seconds(start));
    best.cpu = std::max(best.cpu, work * iterations * threads / (cpuSeconds() - cpuStart));
  }
  return best;
}

volatile float gSink;

#if defined(__x86_64__)
// 12 chains x 8 lanes x 2 flops per iteration step.
__attribute__((target("avx2,fma"))) void fmaChains(int64_t steps) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i)
    acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t s = 0; s < steps; ++s)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i)
      acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i)
    sum = _mm256_add_ps(sum, acc[i]);
  gSink = _mm256_cvtss_f32(sum);
}
constexpr double kFlopsPerStep = 12 * 8 * 2;

// The same on 16-lane registers, for a machine whose active ISA is AVX-512
// (its GEMM kernel runs 512-bit FMAs): 12 chains x 16 lanes x 2 flops per
// step, counted as two 8-lane steps.
__attribute__((target("avx512f"))) void fmaChains512(int64_t steps) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i)
    acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t s = 0; s < steps / 2; ++s)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i)
      acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 sum = acc[0];
  for (int i = 1; i < 12; ++i)
    sum = _mm512_add_ps(sum, acc[i]);
  gSink = _mm512_reduce_add_ps(sum);
}

void fmaChainsOfTheActiveIsa(int64_t steps) {
  if (llmc::cpu::activeIsa() == llmc::cpu::Isa::Avx512)
    fmaChains512(steps);
  else
    fmaChains(steps);
}

// The same with vdpbf16ps (the bf16 dot-product kernels' instruction, 32
// multiply-adds each): 12 chains x 32 x 2 flops per step, counted as four
// 8-lane FMA steps.
__attribute__((target("avx512f,avx512bf16"))) void dpbf16Chains(int64_t steps) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i)
    acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.999f), _mm512_set1_ps(0.999f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (int64_t s = 0; s < steps / 4; ++s)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 sum = acc[0];
  for (int i = 1; i < 12; ++i)
    sum = _mm512_add_ps(sum, acc[i]);
  gSink = _mm512_reduce_add_ps(sum);
}
bool hasDpbf16Peak() { return llmc::cpu::x86Bf16Active(); }
#else
void fmaChains(int64_t steps) {
  float acc = 1;
  for (int64_t s = 0; s < steps; ++s)
    acc = acc * 0.999f + 1e-4f;
  gSink = acc;
}
void fmaChainsOfTheActiveIsa(int64_t steps) { fmaChains(steps); }
void dpbf16Chains(int64_t) {}
bool hasDpbf16Peak() { return false; }
constexpr double kFlopsPerStep = 2;
#endif

template <typename Chains> Rate peakGflops(ThreadPool &pool, const Chains &chains) {
  constexpr int64_t kSteps = 1 << 22;
  const int threads = pool.numThreads();
  Rate r = bestRate(kFlopsPerStep * kSteps * threads, threads,
                    [&] { pool.parallelFor(threads, [&](int64_t, int64_t) { chains(kSteps); }); });
  return {r.wall / 1e9, r.cpu / 1e9};
}

Rate fmaPeakGflops(ThreadPool &pool) { return peakGflops(pool, fmaChainsOfTheActiveIsa); }

struct Shape {
  const char *name;
  int64_t n, k;
  bool swiglu = false; // n stacked gate and up rows through cpu::matmulSwiglu
};

// cpu::matmul (or, for a swiglu shape, cpu::matmulSwiglu), what the engine runs.
Rate gemmGflops(ThreadPool &pool, Shape s, DType dtype, int64_t tokens, float beta) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> half(s.n * s.k);
  std::vector<float> full(s.n * s.k), x(tokens * s.k), y(tokens * s.n);
  for (int64_t i = 0; i < s.n * s.k; ++i) {
    full[i] = dist(rng) * 0.02f;
    half[i] = dtype == DType::F16 ? llmc::hd::f32ToF16(full[i]) : llmc::hd::f32ToBf16(full[i]);
  }
  for (float &v : x)
    v = dist(rng);
  llmc::cpu::WeightMatrix w{dtype == DType::F32 ? static_cast<const void *>(full.data())
                                                : static_cast<const void *>(half.data()),
                            dtype, s.n, s.k};
  const double flops = 2.0 * tokens * s.n * s.k;
  Rate r = bestRate(flops, pool.numThreads(), [&] {
    if (s.swiglu)
      llmc::cpu::matmulSwiglu(pool, x.data(), tokens, w, y.data());
    else
      llmc::cpu::matmul(pool, x.data(), tokens, w, nullptr, beta, y.data());
  });
  return {r.wall / 1e9, r.cpu / 1e9};
}

// Microseconds per parallelFor of `threads` one-element chunks doing nothing:
// the wake-up of the workers and the barrier at the end.
double dispatchMicros(ThreadPool &pool) {
  const int64_t n = pool.numThreads();
  return 1e6 / bestRate(1.0, 1, [&] { pool.parallelFor(n, [](int64_t, int64_t) {}); }).wall;
}

// Median microseconds of a parallelFor as above issued 2 ms after the last:
// the workers have stopped spinning and sleep, so this is a wake-up from
// the kernel plus the barrier.
double dispatchAfterSleepMicros(ThreadPool &pool) {
  const int64_t n = pool.numThreads();
  std::vector<double> micros;
  for (int i = 0; i < 101; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    auto start = Clock::now();
    pool.parallelFor(n, [](int64_t, int64_t) {});
    micros.push_back(1e6 * seconds(start));
  }
  std::nth_element(micros.begin(), micros.begin() + 50, micros.end());
  return micros[50];
}

} // namespace

int main(int argc, char **argv) {
  const int maxThreads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 512;
  const bool poolOnly = argc > 3 && std::string(argv[3]) == "--pool";
  std::vector<DType> dtypes;
  std::string shapeFilter; // shape=TEXT: only the shapes whose name holds TEXT
  for (int i = poolOnly ? argc : 3; i < argc; ++i) {
    const std::string name = argv[i];
    if (name.rfind("shape=", 0) == 0) {
      shapeFilter = name.substr(6);
    } else if (name == "f32" || name == "f16" || name == "bf16") {
      dtypes.push_back(name == "f32" ? DType::F32 : name == "f16" ? DType::F16 : DType::BF16);
    } else {
      std::fprintf(
          stderr,
          "error: unknown argument '%s' (a weight dtype: f32, f16 or bf16; or shape=TEXT)\n",
          argv[i]);
      return 1;
    }
  }
  if (dtypes.empty())
    dtypes = {DType::F32, DType::F16, DType::BF16};
  if (maxThreads < 1 || tokens < 1) {
    std::fprintf(stderr, "error: usage: bench_gemm [max threads >= 1] [tokens >= 1]\n");
    return 1;
  }
  if (!llmc::bench::applyBenchIsa())
    return 1;
  std::printf("isa: %s, tokens: %lld\n", llmc::cpu::isaName(llmc::cpu::activeIsa()),
              static_cast<long long>(tokens));
  // N x K: the 110M Llama's projections (q/k/v/o, the fused gate+up, down)
  // and the 1B's (q/o, k/v, gate or up, down, and a square 2048); "swiglu":
  // the fused gate and up projections with the gate (cpu::matmulSwiglu, the
  // largest share of a Llama prefill), N = both matrices' rows.
  const Shape shapes[] = {{"768x768", 768, 768},
                          {"2048x768", 2048, 768},
                          {"4096x768", 4096, 768},
                          {"768x2048", 768, 2048},
                          {"2048x2048", 2048, 2048},
                          {"512x2048", 512, 2048},
                          {"8192x2048", 8192, 2048},
                          {"2048x8192", 2048, 8192},
                          {"swiglu 4096x768", 4096, 768, true},
                          {"swiglu 16384x2048", 16384, 2048, true}};
  for (int t = 1; t <= maxThreads; ++t) {
    ThreadPool pool(t);
    const Rate peak = fmaPeakGflops(pool);
    std::printf("threads %d: FMA peak %.1f GFLOP/s (%.1f per CPU second x threads), parallelFor "
                "%.2f us back to back, %.1f us after 2 ms idle\n",
                t, peak.wall, peak.cpu, dispatchMicros(pool), dispatchAfterSleepMicros(pool));
    // bf16 weights under the bf16 dot-product kernels: against vdpbf16ps's peak.
    Rate bf16Peak = peak;
    if (hasDpbf16Peak()) {
      bf16Peak = peakGflops(pool, dpbf16Chains);
      std::printf("threads %d: vdpbf16ps peak %.1f GFLOP/s (%.1f per CPU second x threads), the "
                  "peak of bf16 weights\n",
                  t, bf16Peak.wall, bf16Peak.cpu);
    }
    if (poolOnly)
      continue;
    for (const Shape &s : shapes)
      for (DType dtype : dtypes) {
        if (std::string(s.name).find(shapeFilter) == std::string::npos)
          continue;
        const Rate gflops = gemmGflops(pool, s, dtype, tokens, 0.0f);
        const Rate &of = dtype == DType::BF16 ? bf16Peak : peak;
        std::printf(
            "  matmul %-17s %-5s %7.1f GFLOP/s %5.1f%% of peak | by CPU time %7.1f %5.1f%%\n",
            s.name, llmc::dtypeName(dtype).data(), gflops.wall, 100 * gflops.wall / of.wall,
            gflops.cpu, 100 * gflops.cpu / of.cpu);
      }
  }
  return 0;
}
