// Views of weights as the CPU kernels read them: in place (mmap'd from the
// plan), in F32, F16 or BF16, converted to f32 on the fly.
#pragma once

#include "kernels/common/half.h"
#include "support/dtype.h"
#include "support/status.h"

#include <cstdint>
#include <string_view>

namespace llmc::cpu {

// A bf16 matrix's rows in 12 bits a weight, losslessly (cpu/bf16_coded.h
// lays them out): a view. table null: none.
struct CodedBf16 {
  const uint8_t *table = nullptr;
  const uint8_t *steps = nullptr;
  const uint32_t *exceptionBegin = nullptr;
  const uint32_t *exceptionStep = nullptr;
  const uint8_t *exceptionHigh = nullptr;
};

// A row-major [rows, cols] matrix, as Hugging Face stores linear weights:
// rows = output features N, cols = input features K. A BF16 matrix may
// also carry its rows coded (the decode kernels that read them do where
// cpu::codedBf16Used()); data stays readable either way.
struct WeightMatrix {
  const void *data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  CodedBf16 coded{};
};

// A weight vector [size] (norm scales).
struct WeightVector {
  const void *data = nullptr;
  DType dtype = DType::F32;
  int64_t size = 0;
};

// Kernels trust their weights; the loader calls these once per tensor.
// Errors name `name` and say what is wrong (dtype, null data, shape).
Status checkWeight(const WeightMatrix &w, std::string_view name);
Status checkWeight(const WeightVector &w, std::string_view name);

// Element i of a weight array as f32. dtype is F32, F16 or BF16.
inline float weightAt(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::F32:
    return static_cast<const float *>(data)[i];
  case DType::F16:
    return hd::f16ToF32(static_cast<const uint16_t *>(data)[i]);
  case DType::BF16:
    return hd::bf16ToF32(static_cast<const uint16_t *>(data)[i]);
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    break; // rejected by checkWeight
  }
  return 0.0f;
}

// Converts `count` elements starting at element `first` to f32 in out[count].
void weightsToF32(const void *data, DType dtype, int64_t first, int64_t count, float *out);

} // namespace llmc::cpu
