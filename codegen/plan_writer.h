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
#include <cstdio>
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

// The file a plan is written to before it is renamed onto its path: created
// exclusively (O_CREAT | O_EXCL | O_NOFOLLOW) under a unique hidden name in
// the output's folder, so a planted file or symlink is never written
// through. Removed when destroyed uncommitted, and on SIGINT/SIGTERM while it
// exists (a handler unlinks it, then the signal takes its usual course).
class TemporaryPlanFile {
public:
  static Expected<TemporaryPlanFile> create(const std::string &target);
  TemporaryPlanFile(TemporaryPlanFile &&other) noexcept;
  TemporaryPlanFile &operator=(TemporaryPlanFile &&) = delete;
  ~TemporaryPlanFile();

  FILE *file() const { return file_; }
  const std::string &path() const { return temporary_; }
  // Flushes, syncs and closes the file, then renames it onto the target.
  Status commit();

private:
  TemporaryPlanFile(std::string target, std::string temporary, FILE *file);
  void arm();
  void disarm();

  std::string target_, temporary_;
  FILE *file_ = nullptr;
  bool armed_ = false;      // removed on destruction
  bool registered_ = false; // known to the signal handler
};

// Writes the plan to a TemporaryPlanFile beside `path` and renames it onto
// `path` only when every byte is written and synced: a failed, interrupted
// or disk-full write never leaves a partial plan at `path`.
Expected<WriteSummary> writePlan(const std::string &path, PlanContents &contents,
                                 const WriteProgress &progress = nullptr);

// Converts `count` elements between F32, F16 and BF16 (round to nearest even).
Status convertElements(const uint8_t *src, DType srcType, uint8_t *dst, DType dstType,
                       uint64_t count);

} // namespace llmc
