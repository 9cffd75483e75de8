// The linear layer: y[T, N] = x[T, K] . W[N, K]^T (+ bias[N]) (+ y).
//
// Decode (T = 1..8) is a memory-bound GEMV: every weight row is streamed once
// for all T tokens, rows are split over the thread pool. Prefill (large T)
// tiles tokens so that a block of weight rows kept in L2 serves every token
// tile. Accumulation is f32; weights are F32, F16 or BF16, read in place.
#pragma once

#include "cpu/weights.h"
#include "support/thread_pool.h"

namespace llmc::cpu {

// x: [tokens, w.cols] row-major; bias: [w.rows] or null; y: [tokens, w.rows].
// beta 0 overwrites y; beta 1 adds to it (a fused residual). x and y must not
// overlap. w passed checkWeight.
void matmul(ThreadPool &pool, const float *x, int64_t tokens, const WeightMatrix &w,
            const float *bias, float beta, float *y);

// x[tokens, w.cols] in the token tiles of the prefill GEMM that runs on w's
// dtype (detail::packTokenTiles, or detail::packBf16TokenTiles for bf16
// weights where cpu::x86Bf16Active()), packed by the pool into a buffer of
// the calling thread that its next call reuses; null where the active ISA has
// no packed GEMM or the tokens are too few for it. Callers that run several
// GEMMs on one x (matmulSwiglu) pack it once and pass it in
// MatmulProblem::xTiles.
const void *prefillTokenTiles(ThreadPool &pool, const float *x, int64_t tokens,
                              const WeightMatrix &w);

} // namespace llmc::cpu
