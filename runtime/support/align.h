// Rounding sizes and offsets up to a multiple of an alignment.
#pragma once

#include <cstdint>

namespace llmc {

inline uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace llmc
