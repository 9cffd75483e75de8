// The machine's read bandwidth from DRAM as the decode GEMV can use it: the
// ceiling `llmrun bench` and bench_matmul compare decode's weight-read rate
// against ("% of bandwidth").
//
// The threads read a buffer far larger than the last-level cache the way the
// decode GEMV reads weight rows (cpu/simd_avx2.cpp, streamedRows): several
// sequential streams at once, full-width vector loads, a software prefetch a
// few lines ahead in each stream; the buffer is cut into 8 pieces per thread,
// claimed from the pool as the GEMV's row chunks are. One stream of scalar
// loads per thread, as the probe before it did, reads at about two thirds of
// that on Zen 3 (docs/perf.md, "CPU decode GEMV and bandwidth probe"), so a
// GEMV could show more than 100% of it.
#pragma once

#include "support/status.h"
#include "support/thread_pool.h"

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace llmc::cpu {

struct ReadBandwidthOptions {
  // The buffer read by all threads together, 1 GiB: 32x the 32 MiB L3 of the
  // Zen 3 this was measured on, so no trial is served from cache.
  size_t bytes = size_t(1) << 30;
  // Trials; the best is reported (on a shared machine the best trial is the
  // least disturbed one).
  int trials = 5;
};

// The probe with its buffer kept between measurements, for a caller that
// measures again and again (llmrun bench --paired-bandwidth: right before and
// after every timed run, since a shared host's bandwidth drifts between
// modes that last minutes). The buffer is filled once, here: its pages count
// in the process's resident set until the probe is destroyed.
class ReadBandwidthProbe {
public:
  // Errors: bytes below one 64-byte line per stream per thread of `pool`
  // (the number and the minimum named), trials below 1, or no memory.
  static Expected<ReadBandwidthProbe> create(ThreadPool &pool,
                                             const ReadBandwidthOptions &options = {});

  // GB/s (1e9 bytes per second of wall time) of pool's threads reading the
  // buffer, the best of the options' trials; pool has the thread count the
  // probe was created for. Error: the buffer read back as zeros.
  Expected<double> measure(ThreadPool &pool) const;

  // Bytes allocated (and resident once created).
  size_t allocatedBytes() const { return allocated_; }

private:
  struct FreeDeleter {
    void operator()(char *p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> buffer_;
  size_t pieces_ = 0, lines_ = 0, allocated_ = 0;
  int trials_ = 0;
};

// GB/s of pool's threads reading options.bytes, the best of options.trials
// (ReadBandwidthProbe, its buffer allocated for the call). Errors: create's.
Expected<double> measureReadBandwidth(ThreadPool &pool, const ReadBandwidthOptions &options = {});

} // namespace llmc::cpu
