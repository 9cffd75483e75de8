// Not a test: the time of gptqQuantize on one layer of the 110M model's
// shapes (q_proj 768 x 768, gate_proj 2048 x 768, down_proj 768 x 2048),
// with and without the scale refit (docs/quantization.md). Random weights
// and a random positive definite H: the work does not depend on the values.
// Process CPU time is the figure to compare on a shared machine.
//   bench_gptq [threads]
#include "quantize/gptq.h"

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  llmc::ThreadPool pool(threads);
  struct Shape {
    const char *name;
    int64_t rows, cols;
  };
  for (Shape s : {Shape{"q_proj", 768, 768}, Shape{"gate_proj", 2048, 768},
                  Shape{"down_proj", 768, 2048}}) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(s.rows * s.cols), x(256 * s.cols), h(s.cols * s.cols, 0.0f);
    for (float &v : w)
      v = 0.02f * normal(rng);
    for (float &v : x)
      v = normal(rng);
    for (int64_t t = 0; t < 256; ++t) // X^T X of 256 rows, plus the identity
      for (int64_t i = 0; i < s.cols; ++i)
        for (int64_t j = 0; j < s.cols; ++j)
          h[i * s.cols + j] += x[t * s.cols + i] * x[t * s.cols + j] + (i == j ? 1.0f : 0.0f) / 256;
    for (bool refit : {false, true}) {
      llmc::quant::GptqOptions options;
      options.groupSize = 64;
      options.refitScales = refit;
      const auto start = std::chrono::steady_clock::now();
      const std::clock_t cpuStart = std::clock();
      auto q = llmc::quant::gptqQuantize(pool, w.data(), s.rows, s.cols, h, options);
      const double cpu = static_cast<double>(std::clock() - cpuStart) / CLOCKS_PER_SEC;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!q.isOk()) {
        std::fprintf(stderr, "error: %s\n", q.message().c_str());
        return 1;
      }
      std::printf("%-9s %5lld x %5lld, %d threads, refit %-3s: %.3f s CPU, %.3f s wall\n",
                  s.name, static_cast<long long>(s.rows), static_cast<long long>(s.cols), threads,
                  refit ? "on" : "off", cpu, seconds);
    }
  }
  return 0;
}
