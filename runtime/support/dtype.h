// Element types shared by the compiler and the runtime. The numeric values
// are stored in engine plans: append only, never renumber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace llmc {

enum class DType : uint8_t {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  I8 = 3,
  U8 = 4,
  I32 = 5,
  I64 = 6,
};
constexpr int kNumDTypes = 7;

// Bytes per element.
constexpr size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I8:
  case DType::U8:
    return 1;
  case DType::I64:
    return 8;
  }
  return 0;
}

// The safetensors spelling: "F32", "F16", "BF16", "I8", "U8", "I32", "I64".
constexpr std::string_view dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return "?";
}

inline std::optional<DType> dtypeFromName(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtypeName(static_cast<DType>(i)) == name)
      return static_cast<DType>(i);
  return std::nullopt;
}

} // namespace llmc
