// Microbenchmark (not a test): cpu::pagedAttention alone on one layer of the
// 110M Llama's shape (12 heads of 64, block size 16) and a GQA shape (32
// query heads over 8 kv heads of 64, Llama-3.2-1B's), timed by the calling
// thread's CPU time with one thread, so other processes on a loaded machine
// disturb it much less than wall time. Usage: bench_attention_cputime
// [context, default 512] [KV cache type f32 | f16, default f32]
//
// "prefill": one step of `context` rows (positions 0 .. context - 1, the
// cache written by the step itself); "decode": one row at position context
// - 1 over a full cache. Prints ms per call, best of 7 trials of >= 0.05 s.
#include "cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

namespace {

using namespace llmc;

double threadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Shape {
  const char *name;
  int32_t heads, kvHeads, headDim;
};

// Best ms per pagedAttention call of `rows` rows ending at position context - 1.
double measure(ThreadPool &pool, const Shape &s, int64_t context, int64_t rows, kv::KvDtype dtype) {
  const int32_t blockSize = 16, blocks = static_cast<int32_t>(context / blockSize + 2);
  auto cache = kv::KvCache::create({1, blocks, blockSize, s.kvHeads, s.headDim, dtype});
  if (!cache.isOk()) {
    std::fprintf(stderr, "error: %s\n", cache.message().c_str());
    std::exit(1);
  }
  std::vector<int32_t> table(blocks - 1);
  for (int32_t b = 0; b + 1 < blocks; ++b)
    table[b] = b + 1;
  const int64_t qWidth = int64_t{s.heads} * s.headDim, kvWidth = int64_t{s.kvHeads} * s.headDim;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  auto randoms = [&](int64_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = normal(rng);
    return v;
  };
  // Fill the whole cache once (a prefill of `context` rows), then time `rows`.
  auto run = [&](int64_t n, const std::vector<float> &q, const std::vector<float> &k,
                 const std::vector<float> &v, std::vector<float> &out) {
    std::vector<int32_t> positions(n);
    for (int64_t t = 0; t < n; ++t)
      positions[t] = static_cast<int32_t>(context - n + t);
    cpu::AttentionSequence seq{0, n, table.data()};
    cpu::AttentionBatch b{q.data(),         qWidth, k.data(), kvWidth, v.data(), kvWidth,
                          out.data(),       qWidth, positions.data(), &seq, 1,    s.heads,
                          1.0f / std::sqrt(static_cast<float>(s.headDim))};
    cpu::pagedAttention(pool, b, cache->layer(0));
  };
  const std::vector<float> q = randoms(context * qWidth), k = randoms(context * kvWidth),
                           v = randoms(context * kvWidth);
  std::vector<float> out(context * qWidth);
  run(context, q, k, v, out);
  double best = 1e30;
  for (int trial = 0; trial < 7; ++trial) {
    int64_t calls = 0;
    const double start = threadSeconds();
    double spent = 0;
    do {
      run(rows, q, k, v, out);
      ++calls;
      spent = threadSeconds() - start;
    } while (spent < 0.05);
    best = std::min(best, spent / static_cast<double>(calls) * 1e3);
  }
  return best;
}

} // namespace

int main(int argc, char **argv) {
  const int64_t context = argc > 1 ? std::atoll(argv[1]) : 512;
  auto dtype = kv::parseKvDtype(argc > 2 ? argv[2] : "f32", "the KV cache type");
  if (context < 1 || context > (1 << 20) || !dtype.isOk()) {
    std::fprintf(stderr, "error: usage: bench_attention_cputime [context, 1 .. 1048576] "
                         "[f32 | f16]\n");
    return 1;
  }
  ThreadPool pool(1);
  std::printf("%-22s %8s %5s %14s %14s\n", "shape", "context", "kv", "prefill ms", "decode ms");
  for (const Shape &s : {Shape{"110M 12 x 64", 12, 12, 64}, Shape{"1B 32/8 x 64", 32, 8, 64}})
    std::printf("%-22s %8lld %5s %14.3f %14.4f\n", s.name, static_cast<long long>(context),
                kv::kvDtypeName(*dtype), measure(pool, s, context, context, *dtype),
                measure(pool, s, context, 1, *dtype));
  return 0;
}
