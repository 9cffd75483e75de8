#include "cpu/matmul.h"

#include "cpu/simd.h"

namespace llmc::cpu {

void matmul(ThreadPool &pool, const float *x, int64_t tokens, const WeightMatrix &w,
            const float *bias, float beta, float *y) {
  if (tokens <= 0)
    return;
  const detail::MatmulProblem problem{x, tokens, w, bias, beta, y};
  const detail::IsaOps &ops = detail::activeOps();
  // Chunks of whole 4-row tiles, and at least ~64 KiB of weights each so
  // that small layers do not pay for waking the pool.
  const int64_t rowBytes = w.cols * static_cast<int64_t>(dtypeSize(w.dtype));
  int64_t grain = (64 * 1024 / (rowBytes * tokens) + 3) / 4 * 4;
  pool.parallelFor(
      w.rows, [&](int64_t begin, int64_t end) { ops.matmulRows(problem, begin, end); },
      grain < 4 ? 4 : grain);
}

} // namespace llmc::cpu
