// Round-to-nearest int4 quantization of float matrices into the plan layout
// (runtime/kernels/common/q4_layout.h), as AWQ's pseudo_quantize_tensor with
// zero points, per row and group of G columns; the rule is in
// runtime/kernels/common/q4_rtn.h (shared with the synthetic int4 weights
// the runtimes generate). Unlike AWQ, the range always includes 0 (as
// PyTorch's observers do): a group of equal values, such as a ragged last
// group of one column, would otherwise dequantize to about 1e-5 whatever its
// value; now every value is within half a step and 0 is exact.
// The f16 scale is what q and zero are computed with, so dequantizing the
// stored values gives exactly what fakeQuantize returns.
#pragma once

#include "kernels/common/q4_rtn.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <vector>

namespace llmc::quant {

struct Q4Tensor {
  int64_t rows = 0, cols = 0, groupSize = 0;
  std::vector<uint32_t> qweight; // [rows, q4WordsPerRow(cols)]
  std::vector<uint16_t> scales;  // [rows, groups] f16
  std::vector<uint16_t> zeros;   // [rows, groups] f16
};

// Quantizes w [rows, cols] (row-major f32), rows in parallel.
Q4Tensor quantizeQ4(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                    int64_t groupSize);

// The coding of one group w[0 .. count) (q4_rtn.h: the range includes 0).
hd::Q4Code codeGroup(const float *w, int64_t count);

// w[i] for i < count, quantized as one group and dequantized back into out
// (out may equal w).
void fakeQuantizeGroup(const float *w, int64_t count, float *out);

// Every group of a row [cols], quantized and dequantized into out.
void fakeQuantizeRow(const float *w, int64_t cols, int64_t groupSize, float *out);

// The stored tensor dequantized: [rows, cols] f32.
std::vector<float> dequantizeQ4(const Q4Tensor &q);

} // namespace llmc::quant
