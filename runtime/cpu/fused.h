// CPU kernels of the fused op kinds (engine.fbs, passes/Fuse*.cpp): GEMMs
// with an RMSNorm prologue or a SwiGLU epilogue, and the LM head's greedy
// argmax. Each gives the same f32 values as the unfused kernels in sequence
// (rmsNorm, matmul, swiglu, argmax): the products are the same dot products,
// only where intermediates live changes.
#pragma once

#include "cpu/matmul_q4.h"
#include "cpu/weights.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <vector>

namespace llmc::cpu {

// normOffset: the RMSNorm's (offset + gamma) (cpu/kernels.h rmsNorm); gateKind:
// the gated activation (kernels/common/activations.h GateKind, 0: silu).

// y (+)= rmsNorm(x) . W^T (+ bias), x [tokens, w.cols], y [tokens, w.rows];
// beta 0 or 1 as for matmul. The normalized rows go to `scratch` (grown to
// tokens x w.cols): a decode step's rows stay in cache between the prologue
// and the GEMM instead of making a round trip through the activation arena.
void rmsNormMatmul(ThreadPool &pool, const float *x, int64_t tokens, const WeightVector &gamma,
                   float eps, const WeightMatrix &w, const float *bias, float beta, float *y,
                   std::vector<float> &scratch, float normOffset = 0.0f);

// The SwiGLU GEMM: w = [gate; up] is [2I, K]; y [tokens, I] =
// silu(x . gate^T) * (x . up^T). Each thread computes a block of gate rows
// and the matching up rows into its own small tile and combines them there;
// the [tokens, 2I] product is never stored.
void matmulSwiglu(ThreadPool &pool, const float *x, int64_t tokens, const WeightMatrix &w,
                  float *y, int gateKind = 0);

// matmulSwiglu of rmsNorm(x), the normalized rows in `scratch` as for
// rmsNormMatmul.
void rmsNormMatmulSwiglu(ThreadPool &pool, const float *x, int64_t tokens,
                         const WeightVector &gamma, float eps, const WeightMatrix &w, float *y,
                         std::vector<float> &scratch, float normOffset = 0.0f, int gateKind = 0);

// The int4 SwiGLU GEMM (engine.fbs LinearSwiGluQ4): w = [gate; up] is
// [2I, K]; the gate and up products go to `products` ([2, tokens, I]) and
// then through swiglu, the same calls as the unfused steps make (so the
// results are bit-identical; the CPU's int4 GEMM is not the bottleneck a
// fused epilogue would remove). One token takes one matmulQ4 call over the
// stacked rows (its output row is [2, 1, I]): the same bits.
void matmulSwigluQ4(ThreadPool &pool, const float *x, int64_t tokens, const Q4Matrix &w, float *y,
                    std::vector<float> &products, int gateKind = 0);

// ids[r] = argmax_v x[r] . w[v] for rows r of x [rows, w.cols]: the first
// largest logit (ties), NaN never wins, 0 when no logit exceeds -inf, as
// argmax() over the logits. Threads take blocks of vocabulary rows; only
// one (value, index) per block and row is kept, never the [rows, V] logits.
void matmulArgmax(ThreadPool &pool, const float *x, int64_t rows, const WeightMatrix &w,
                  int32_t *ids);

} // namespace llmc::cpu
