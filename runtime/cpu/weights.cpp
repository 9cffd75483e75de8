#include "cpu/weights.h"

#include <string>

namespace llmc::cpu {
namespace {

Status checkCommon(const void *data, DType dtype, std::string_view name) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    return Status::error("weight '" + std::string(name) + "': dtype " +
                         std::string(dtypeName(dtype)) +
                         " is not supported by the CPU kernels (expected F32, F16 or BF16)");
  if (data == nullptr)
    return Status::error("weight '" + std::string(name) + "': no data");
  return Status::ok();
}

} // namespace

Status checkWeight(const WeightMatrix &w, std::string_view name) {
  LLMC_RETURN_IF_ERROR(checkCommon(w.data, w.dtype, name));
  if (w.rows <= 0 || w.cols <= 0)
    return Status::error("weight '" + std::string(name) + "': shape [" + std::to_string(w.rows) +
                         ", " + std::to_string(w.cols) + "] must have positive dimensions");
  return Status::ok();
}

Status checkWeight(const WeightVector &w, std::string_view name) {
  LLMC_RETURN_IF_ERROR(checkCommon(w.data, w.dtype, name));
  if (w.size <= 0)
    return Status::error("weight '" + std::string(name) + "': size " + std::to_string(w.size) +
                         " must be positive");
  return Status::ok();
}

void weightsToF32(const void *data, DType dtype, int64_t first, int64_t count, float *out) {
  switch (dtype) {
  case DType::F32: {
    const float *src = static_cast<const float *>(data) + first;
    for (int64_t i = 0; i < count; ++i)
      out[i] = src[i];
    return;
  }
  case DType::F16: {
    const uint16_t *src = static_cast<const uint16_t *>(data) + first;
    for (int64_t i = 0; i < count; ++i)
      out[i] = hd::f16ToF32(src[i]);
    return;
  }
  case DType::BF16: {
    const uint16_t *src = static_cast<const uint16_t *>(data) + first;
    for (int64_t i = 0; i < count; ++i)
      out[i] = hd::bf16ToF32(src[i]);
    return;
  }
  case DType::I8:
  case DType::U8:
  case DType::I32:
  case DType::I64:
    return; // rejected by checkWeight
  }
}

} // namespace llmc::cpu
