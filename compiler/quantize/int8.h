// Symmetric int8 quantization of float matrices (W8A16, `--quantize int8`)
// into the plan layout of runtime/kernels/common/q8_layout.h: per output
// channel (G = 0) or per group of G columns of a row, scale = max|w| / 127,
// q = round(w / scale) (half to even). With f16 scales, q is computed with
// the stored (f16-rounded) scale, so dequantizing the stored values gives
// exactly what fakeQuantizeQ8 returns, and every weight is within half a
// step of its float value.
#pragma once

#include "kernels/common/q8_layout.h"
#include "plan_writer.h"
#include "support/status.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmc::quant {

struct Q8Tensor {
  int64_t rows = 0, cols = 0, groupSize = 0; // groupSize 0: per output channel
  bool halfScales = false;                   // scales stored as F16 (else F32)
  std::vector<int8_t> qweight;               // [rows, hd::q8RowBytes(cols)]
  std::vector<float> scales;                 // [rows, groups] when !halfScales
  std::vector<uint16_t> halfScaleBits;       // [rows, groups] when halfScales
  const void *scaleData() const {
    return halfScales ? static_cast<const void *>(halfScaleBits.data())
                      : static_cast<const void *>(scales.data());
  }
};

// Quantizes w [rows, cols] (row-major f32), rows in parallel. Fails, naming
// `name`, for a bad group size, or for f16 scales a group whose scale
// exceeds f16's range (|w| above ~8.3e6: use f32 scales). A group holding
// NaN or Inf stores zeros with a NaN scale (its outputs are NaN).
Expected<Q8Tensor> quantizeQ8(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                              int64_t groupSize, bool halfScales, const std::string &name);

// w [rows, cols] quantized and dequantized into out [rows, cols] (out may
// equal w), as quantizeQ8 then dequantizeQ8 would give.
Status fakeQuantizeQ8(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                      int64_t groupSize, bool halfScales, float *out, const std::string &name);

// The stored tensor dequantized: [rows, cols] f32.
std::vector<float> dequantizeQ8(const Q8Tensor &q);

// `--quantize int8`: after lowering, every Linear step's dense matrix (a
// tensor no other kind of step reads: a tied embedding stays float) becomes
// int8, qweight in place of the float tensor and its scales appended (f32
// per output channel for G = 0, else f16 per group); the steps get
// LinearParams.weights = Q8 and group_size G. The fusion passes ran on the
// float IR, so fused q/k/v and gate/up matrices are quantized whole (rows
// are independent: the same as quantizing each part). The new bytes live in
// `storage` until the plan is written. Returns the count of matrices.
// `selected`, when given, picks the matrices by tensor name (a fused one is
// named "q+k+v", quantize/mixed.h's --mixed plans) and may fail; the others
// stay float.
using Q8Selection = std::function<Expected<bool>(const std::string &tensorName)>;
Expected<int> quantizePlanLinearsQ8(ThreadPool &pool, PlanContents &plan, int64_t groupSize,
                                    std::vector<std::vector<uint8_t>> &storage,
                                    const Q8Selection &selected = nullptr);

} // namespace llmc::quant
