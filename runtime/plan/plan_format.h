// The engine plan file: one mmap-able file, data only (loading a plan never
// runs code from it). Byte layout, all integers little-endian:
//
//   offset  size  field
//   0       8     magic "LLMCPLAN"
//   8       4     u32 format version (kPlanFormatVersion, 3)
//   12      4     u32 header size in bytes (64)
//   16      8     u64 metadata offset (64: right after the header)
//   24      8     u64 metadata size: a FlatBuffer, runtime/schema/engine.fbs,
//                 file identifier "LLMC"
//   32      8     u64 weight section offset (multiple of kPlanWeightAlignment,
//                 at or after the end of the metadata)
//   40      8     u64 weight section size; offset + size == file size
//   48      8     u64 FNV-1a 64 checksum of the metadata bytes
//   56      8     u64 XXH3-64 checksum of the weight section (0: not computed;
//                 plan/checksum.h; format version 1 had FNV-1a over 64-bit words)
//
// Between the metadata and the weight section: zero padding. Every tensor
// starts at a multiple of kPlanWeightAlignment within the weight section, so
// the CPU backend uses weights in place and the CUDA backend uploads the whole
// section with one copy. docs/engine-format.md is the long form of this.
#pragma once

#include "support/align.h"

#include <cstdint>
#include <cstring>

namespace llmc {

constexpr char kPlanMagic[8] = {'L', 'L', 'M', 'C', 'P', 'L', 'A', 'N'};
// 3: Step.params, named parameter tables per op kind (runtime/schema/engine.fbs);
// 2: the positional int_params/float_params with an XXH3-64 weight checksum;
// 1: the same with FNV-1a over 64-bit words. Older versions are refused.
constexpr uint32_t kPlanFormatVersion = 3;
// The first llmc release that writes kPlanFormatVersion (the rebuild hint).
constexpr char kPlanFormatLlmcVersion[] = "0.1.0";
constexpr uint64_t kPlanWeightAlignment = 256;
// The longest sequence a plan may declare (model.max_seq_len): the loader
// refuses more, so `llmc build` refuses to write such a plan.
constexpr int64_t kMaxPlanSeqLen = int64_t(1) << 24;

struct PlanFileHeader {
  char magic[8];
  uint32_t formatVersion;
  uint32_t headerSize;
  uint64_t metadataOffset;
  uint64_t metadataSize;
  uint64_t weightsOffset;
  uint64_t weightsSize;
  uint64_t metadataChecksum;
  uint64_t weightsChecksum;
};
static_assert(sizeof(PlanFileHeader) == 64, "the plan header is 64 bytes on disk");

// FNV-1a, 64 bit: small, dependency-free, good enough to catch corruption
// (not an integrity guarantee against an adversary).
inline uint64_t fnv1a64(const uint8_t *data, uint64_t size, uint64_t hash = 0xcbf29ce484222325ull) {
  for (uint64_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

} // namespace llmc
