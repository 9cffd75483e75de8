// Writes an engine plan file (layout: runtime/plan/plan_format.h): header,
// FlatBuffer metadata, then the weight section, streaming each tensor from
// its source (mmap'd safetensors) and converting its dtype on the way. The
// file is written under a temporary name and renamed at the end, so a failed
// or interrupted build never leaves a half-written plan behind.
#pragma once

#include "schema/engine_generated.h"
#include "support/dtype.h"
#include "support/status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmc {

// Where a plan tensor's bytes come from. data == nullptr and no parts: a
// synthetic tensor (no bytes stored; the runtime generates it from its
// SyntheticInit).
struct WeightSource {
  const uint8_t *data = nullptr;
  DType dtype = DType::F32; // dtype of `data`
  uint64_t elements = 0;
  // A tensor stored as the concatenation of several sources, one after the
  // other (fused q/k/v or gate/up weights: their rows stacked); data is
  // then null and `elements` their sum.
  std::vector<WeightSource> parts;
};

struct PlanContents {
  fb::PlanT meta; // tensors[i].offset and .size are filled in by writePlan
  std::vector<WeightSource> sources; // one per meta.tensors entry
};

// Called as weight bytes are written: (bytes done, bytes total).
using WriteProgress = std::function<void(uint64_t done, uint64_t total)>;

struct WriteSummary {
  uint64_t fileSize = 0;
  uint64_t metadataSize = 0;
  uint64_t weightsSize = 0;
};

Expected<WriteSummary> writePlan(const std::string &path, PlanContents &contents,
                                 const WriteProgress &progress = nullptr);

// Converts `count` elements between F32, F16 and BF16 (round to nearest even).
Status convertElements(const uint8_t *src, DType srcType, uint8_t *dst, DType dstType,
                       uint64_t count);

} // namespace llmc
