#include "cpu/read_bandwidth.h"

#include "cpu/isa.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llmc::cpu {
namespace {

// Streams per thread, and how far ahead each is prefetched: 4 streams with a
// 256-byte prefetch read fastest of 1-16 streams and 0-2048 bytes on Zen 3
// (docs/perf.md); the decode GEMV reads 4 runs of rows, as many.
constexpr size_t kStreams = 4, kLine = 64, kAhead = 256;
// Pieces of the buffer per thread (see measureReadBandwidth).
constexpr size_t kPiecesPerThread = 8;

// Sums `lines` 64-byte lines of each of kStreams streams, `stride` bytes apart.
uint64_t sumStreamsScalar(const char *p, size_t lines, size_t stride) {
  uint64_t sums[kStreams] = {};
  for (size_t i = 0; i < lines * kLine; i += kLine)
    for (size_t s = 0; s < kStreams; ++s) {
      const uint64_t *line = reinterpret_cast<const uint64_t *>(p + s * stride + i);
      for (size_t w = 0; w < kLine / sizeof(uint64_t); ++w)
        sums[s] += line[w];
    }
  uint64_t total = 0;
  for (uint64_t s : sums)
    total += s;
  return total;
}

#if defined(__x86_64__)
// Two 32-byte loads per line and stream; p and stride are 64-byte aligned.
__attribute__((target("avx2"))) uint64_t sumStreamsAvx2(const char *p, size_t lines,
                                                        size_t stride) {
  __m256i sums[kStreams];
  for (__m256i &s : sums)
    s = _mm256_setzero_si256();
  for (size_t i = 0; i < lines * kLine; i += kLine)
#pragma GCC unroll 4
    for (size_t s = 0; s < kStreams; ++s) {
      const char *line = p + s * stride + i;
      _mm_prefetch(line + kAhead, _MM_HINT_T0);
      const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i *>(line));
      const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i *>(line + 32));
      sums[s] = _mm256_add_epi64(sums[s], _mm256_add_epi64(a, b));
    }
  __m256i total =
      _mm256_add_epi64(_mm256_add_epi64(sums[0], sums[1]), _mm256_add_epi64(sums[2], sums[3]));
  // The lanes wrap (the sum only keeps the loads alive): add them unsigned,
  // since a signed overflow of the extracted long longs is undefined.
  return static_cast<uint64_t>(_mm256_extract_epi64(total, 0)) +
         static_cast<uint64_t>(_mm256_extract_epi64(total, 1)) +
         static_cast<uint64_t>(_mm256_extract_epi64(total, 2)) +
         static_cast<uint64_t>(_mm256_extract_epi64(total, 3));
}
#endif

uint64_t sumStreams(const char *p, size_t lines, size_t stride) {
#if defined(__x86_64__)
  if (activeIsa() != Isa::Scalar) // AVX-512 CPUs run the AVX2 loop too
    return sumStreamsAvx2(p, lines, stride);
#endif
  return sumStreamsScalar(p, lines, stride);
}

} // namespace

Expected<ReadBandwidthProbe> ReadBandwidthProbe::create(ThreadPool &pool,
                                                        const ReadBandwidthOptions &options) {
  const size_t threads = static_cast<size_t>(pool.numThreads());
  // One slice per thread, kStreams runs of whole lines each.
  const size_t linesPerStream = options.bytes / (threads * kStreams * kLine);
  if (linesPerStream == 0)
    return Status::error("read bandwidth probe: buffer of " + std::to_string(options.bytes) +
                         " bytes is below one 64-byte line per stream (" +
                         std::to_string(kStreams) + " per thread, " + std::to_string(threads) +
                         " threads): give at least " + std::to_string(threads * kStreams * kLine) +
                         " bytes");
  if (options.trials < 1)
    return Status::error("read bandwidth probe: trials is " + std::to_string(options.trials) +
                         ", must be at least 1");
  ReadBandwidthProbe probe;
  // Each thread's share in up to kPiecesPerThread pieces of kStreams runs,
  // claimed from the pool as the GEMV's row chunks are: a thread that starts
  // late or reads slower takes fewer, so the figure is what a balanced split
  // reads, not the slower thread's rate times the thread count.
  probe.pieces_ = threads * std::min(kPiecesPerThread, linesPerStream);
  probe.lines_ = options.bytes / (probe.pieces_ * kStreams * kLine); // per stream of a piece
  probe.trials_ = options.trials;
  const size_t piece = kStreams * probe.lines_ * kLine;
  // kAhead bytes past the end are prefetched, never read: allocated anyway.
  probe.allocated_ = probe.pieces_ * piece + kAhead;
  probe.buffer_.reset(static_cast<char *>(std::aligned_alloc(kLine, probe.allocated_)));
  if (!probe.buffer_)
    return Status::error("read bandwidth probe: cannot allocate " +
                         std::to_string(probe.allocated_) + " bytes");
  char *data = probe.buffer_.get();
  pool.parallelFor(static_cast<int64_t>(probe.pieces_), [&](int64_t b, int64_t e) {
    std::memset(data + b * piece, 1, (e - b) * piece);
  });
  std::memset(data + probe.pieces_ * piece, 0, kAhead);
  return probe;
}

Expected<double> ReadBandwidthProbe::measure(ThreadPool &pool) const {
  const size_t stride = lines_ * kLine, piece = kStreams * stride;
  const char *data = buffer_.get();
  std::atomic<uint64_t> total{0};
  double best = 0.0;
  for (int trial = 0; trial < trials_; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallelFor(static_cast<int64_t>(pieces_), [&](int64_t b, int64_t e) {
      uint64_t sum = 0;
      for (int64_t i = b; i < e; ++i)
        sum += sumStreams(data + i * piece, lines_, stride);
      total += sum;
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(pieces_ * piece) / seconds / 1e9);
  }
  // The sums are used, so the loads stay: every byte is 1 (the tail 0).
  if (total.load() == 0)
    return Status::error("read bandwidth probe: the buffer read back as zeros");
  return best;
}

Expected<double> measureReadBandwidth(ThreadPool &pool, const ReadBandwidthOptions &options) {
  Expected<ReadBandwidthProbe> probe = ReadBandwidthProbe::create(pool, options);
  if (!probe)
    return probe.status();
  return probe->measure(pool);
}

} // namespace llmc::cpu
