// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers", ICLR 2023) into the int4 plan layout
// of q4_quantize.h.
//
// For a linear y = x W^T, W [rows, cols], with calibration inputs X
// [tokens, cols], the layer's output error ||X W^T - X Q^T||^2 is
// sum_rows (w - q)^T H (w - q), H = X^T X. GPTQ quantizes one column k at a
// time (in every row) and moves the rounding error onto the columns not yet
// quantized, weighted by the inverse Hessian:
//   U = upper Cholesky factor of (H + damp I)^-1      (H^-1 = U^T U)
//   err = (w[k] - q[k]) / U[k][k]
//   w[j] -= err * U[k][j]   for j > k
// Columns go in blocks (lazy batch updates): inside a block the updates
// touch the block only; the block's errors reach the later columns in one
// product E [rows, block] . U[block, later] when the block is done.
//
// Groups: the (row, group) scale and zero point are those of q4_rtn.h's rule
// computed on the group's weights when its first column comes up (after the
// errors of the earlier groups have been moved onto it). With rangeSearch
// (GPTQ's quantizer with mse=True) the range is first shrunk by the factor
// p in {1, 0.99, .., 0.81} whose rounding of the group has the smallest
// sum |w - q|^2.4. With act-order the
// columns go in order of decreasing H[k][k] (the inputs with the most
// energy first); groups still cover contiguous columns, as the plan layout
// requires, so their codings are fixed from the unquantized weights before
// the first column ("static groups").
//
// Scale refit (refitScales): once a row's values 0..15 are fixed, each
// group's scale is re-solved, zero point kept (the plan stores integral
// zeros), to minimize the row's output error (w - d)^T (H + damp I) (w - d)
// against the row's original weights w, d the dequantized row, one group at
// a time with the others held (one pass in column order). A new scale is
// kept only when its f16 rounding lowers that error, so the refit never
// raises the layer's error on the calibration inputs.
#pragma once

#include "quantize/q4_quantize.h"
#include "support/status.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <vector>

namespace llmc::quant {

struct GptqOptions {
  int64_t groupSize = 128;
  bool actOrder = false;
  double dampening = 0.01;  // added to H's diagonal: this times its mean
  bool rangeSearch = true;  // per (row, group) range shrink, see below
  bool refitScales = true;  // per (row, group) scale refit under H after rounding, see above
  int64_t blockSize = 128;  // columns per lazy batch (rounded to whole groups)
};

// The packed int4 tensor of w [rows, cols] (row-major f32) with GPTQ's
// error compensation under `hessian` [cols, cols] (X^T X: any positive
// multiple, symmetric). Columns with H[k][k] == 0 (inputs that were always
// 0) are quantized as zeros. Fails when H is not symmetric positive
// semi-definite enough for the Cholesky factorization even after 10x, 100x
// and 1000x the dampening.
Expected<Q4Tensor> gptqQuantize(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                                const std::vector<float> &hessian, const GptqOptions &options);

// U, the upper Cholesky factor of (H + damp I)^-1 [n, n] row-major (the lower
// triangle is zero), for H [n, n] in double; damp = dampening * mean(diag H).
// Exposed for tests.
Expected<std::vector<double>> inverseHessianFactor(ThreadPool &pool, std::vector<double> hessian,
                                                   int64_t n, double dampening);

} // namespace llmc::quant
