// Lays out activation buffers in one arena, once, at build time. Each buffer
// is [T, width] with T known only at run time, so sizes and offsets are per
// token: buffer b lives at offset(b) * T. Buffers whose lifetimes (first
// definition to last use, in step order) do not overlap share bytes.
#pragma once

#include <cstdint>
#include <vector>

namespace llmc {

struct BufferLifetime {
  uint64_t bytesPerToken = 0;
  int firstStep = 0; // step that writes it (-1: written before the first step)
  int lastStep = 0;  // last step that reads or writes it
};

struct MemoryPlan {
  std::vector<uint64_t> offsetPerToken; // one per buffer
  uint64_t arenaBytesPerToken = 0;
};

// First-fit in order of definition; offsets aligned to `alignment` bytes
// per token. A buffer never shares bytes with one whose lifetime overlaps
// its own (the output of a step never aliases that step's inputs).
MemoryPlan planMemory(const std::vector<BufferLifetime> &buffers, uint64_t alignment = 64);

} // namespace llmc
