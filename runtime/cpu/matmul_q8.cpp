#include "cpu/matmul_q8.h"

#include "cpu/isa.h"
#include "kernels/common/q8_layout.h"

#include <algorithm>
#include <string>

namespace llmc::cpu {
namespace {

using RowsFn = void (*)(const detail::Q8Problem &, int64_t, int64_t);

// Chunks of whole 4-row tiles with at least ~32 KiB of int8 weights each,
// so that small layers do not pay for waking the pool.
int64_t rowGrain(const Q8Matrix &w, int64_t tokens) {
  const int64_t rowBytes = hd::q8RowBytes(w.cols);
  const int64_t grain = (32 * 1024 / (rowBytes * std::max<int64_t>(1, tokens / 4)) + 3) / 4 * 4;
  return std::max<int64_t>(grain, 4);
}

} // namespace

Status checkWeight(const Q8Matrix &w, std::string_view name) {
  std::string where = "int8 weight '" + std::string(name) + "'";
  if (w.qweight == nullptr || w.scales == nullptr)
    return Status::error(where + ": no data");
  if (w.rows <= 0 || w.cols <= 0)
    return Status::error(where + ": shape [" + std::to_string(w.rows) + ", " +
                         std::to_string(w.cols) + "] must have positive dimensions");
  if (!hd::q8ValidGroupSize(w.groupSize))
    return Status::error(where + ": group size " + std::to_string(w.groupSize) +
                         " is not 0 (per output channel) or a positive multiple of 32");
  return Status::ok();
}

void matmulQ8(ThreadPool &pool, const float *x, int64_t tokens, const Q8Matrix &w,
              const float *bias, float beta, float *y) {
  if (tokens <= 0)
    return;
  const detail::Q8Problem problem{x, tokens, w, bias, beta, y};
  RowsFn rows = detail::matmulQ8RowsScalar;
#if defined(__x86_64__)
  // AVX-512 machines too: the AVX2 kernel's 4 prefetched row runs read 2x
  // the AVX-512 kernel's GB/s on a Sapphire Rapids Xeon (docs/perf.md,
  // "AVX-512 prefill GEMM"), which was therefore removed.
  if (activeIsa() == Isa::Avx2 || activeIsa() == Isa::Avx512)
    rows = detail::matmulQ8RowsAvx2;
#endif
#if defined(__aarch64__)
  if (activeIsa() == Isa::Neon)
    rows = detail::matmulQ8RowsNeon;
#endif
  pool.parallelFor(w.rows, [&](int64_t b, int64_t e) { rows(problem, b, e); },
                   rowGrain(w, tokens));
}

namespace detail {

float q8Scale(const Q8Matrix &w, int64_t n, int64_t g) {
  const int64_t groups = hd::q8NumGroups(w.cols, w.groupSize);
  return w.halfScales ? hd::f16ToF32(static_cast<const uint16_t *>(w.scales)[n * groups + g])
                      : static_cast<const float *>(w.scales)[n * groups + g];
}

// The reference: one row and token at a time, four partial sums.
void matmulQ8RowsScalar(const Q8Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t k = p.w.cols, rowBytes = hd::q8RowBytes(k);
  const int64_t width = hd::q8GroupColumns(k, p.w.groupSize);
  const int64_t groups = hd::q8NumGroups(k, p.w.groupSize);
  for (int64_t n = rowBegin; n < rowEnd; ++n) {
    const int8_t *q = p.w.qweight + n * rowBytes;
    for (int64_t t = 0; t < p.tokens; ++t) {
      const float *xt = p.x + t * k;
      float s[4] = {0, 0, 0, 0};
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = q8Scale(p.w, n, g);
        for (int64_t c = g * width; c < std::min(k, (g + 1) * width); ++c)
          s[c % 4] += (static_cast<float>(q[c]) * scale) * xt[c];
      }
      storeQ8Output(p, t, n, (s[0] + s[1]) + (s[2] + s[3]));
    }
  }
}

} // namespace detail
} // namespace llmc::cpu
