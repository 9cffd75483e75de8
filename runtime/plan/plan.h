// Loading an engine plan: map the file, verify everything once (header,
// checksums, FlatBuffer structure, tensor table, programs, kernel
// references), then hand out trusted views. After open() succeeds the hot
// path does no more checks.
#pragma once

#include "schema/engine_generated.h"
#include "support/dtype.h"
#include "support/mapped_file.h"
#include "support/status.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

struct PlanLoadOptions {
  // Recompute the weight-section checksum (reads every weight byte once).
  bool verifyWeights = true;
  // Check the metadata checksum. Only the fuzzer turns this off, to reach the
  // structural checks behind it with mutated inputs.
  bool verifyMetadataChecksum = true;
};

class Plan {
public:
  // Maps and validates `path`. Errors name the file and what is wrong.
  static Expected<Plan> open(const std::string &path, PlanLoadOptions options = {});
  // Validates a copy of a plan image held in memory (the run fuzzer's entry);
  // `name` stands for the path in errors.
  static Expected<Plan> fromImage(const uint8_t *data, uint64_t size, const std::string &name,
                                  PlanLoadOptions options = {});

  // Validates a copy of a plan's metadata FlatBuffer alone, every check but
  // the header's and the weight section's: a plan whose tensors' bytes live
  // elsewhere (tensorData() is null; LoadedWeights::fromViews supplies them).
  // The compiler's calibration runs such in-memory plans.
  static Expected<Plan> fromMetadata(const uint8_t *data, uint64_t size, const std::string &name);

  const fb::Plan &meta() const { return *meta_; }
  const std::string &path() const { return path_; }
  uint64_t fileSize() const { return image_ ? imageSize_ : file_.size(); }
  uint64_t metadataSize() const { return metadataSize_; }
  uint64_t weightsSize() const { return weightsSize_; }
  // The weight section as stored (weightsSize() bytes; empty for synthetic plans).
  const uint8_t *weightSection() const { return weights_; }

  // The stored bytes of tensor `index` (nullptr for synthetic tensors and
  // for a plan from metadata).
  const uint8_t *tensorData(uint32_t index) const;
  // Gives back the memory of stored bytes the process no longer reads
  // (MappedFile::releasePages; returns the bytes given back); no-op for a
  // plan held in memory.
  uint64_t releasePages(const void *data, uint64_t bytes) const {
    return file_.releasePages(data, bytes);
  }
  // Finds a tensor by name; -1 when absent.
  int findTensor(const std::string &name) const;
  // The program for (target, phase), or nullptr.
  const fb::Program *program(fb::Target target, fb::Phase phase) const;
  // The program for (target, phase) that runs a step of `tokens` rows: the
  // one with the smallest max_tokens >= tokens, else the one for any T.
  const fb::Program *program(fb::Target target, fb::Phase phase, int64_t tokens) const;
  // The kernel module of a GPU target, or nullptr.
  const fb::KernelModule *module(fb::Target target) const;

private:
  struct FreeImage {
    void operator()(uint8_t *p) const { std::free(p); }
  };

  std::string path_;
  MappedFile file_;
  std::unique_ptr<uint8_t, FreeImage> image_; // fromImage's copy, page-aligned
  uint64_t imageSize_ = 0;
  const fb::Plan *meta_ = nullptr;
  const uint8_t *weights_ = nullptr;
  uint64_t metadataSize_ = 0;
  uint64_t weightsSize_ = 0;
};

// Validates a whole plan image in memory (the fuzzed entry point).
// `name` prefixes errors. On success, *meta points into `data`.
Status validatePlanImage(const uint8_t *data, uint64_t size, const std::string &name,
                         const PlanLoadOptions &options, const fb::Plan **meta);

// Bytes a synthetic plan's tensors take once generated (0 for real weights).
uint64_t syntheticWeightBytes(const fb::Plan &plan);

// Host memory this process may use: the machine's physical memory, or less
// when an address-space or data rlimit is lower. What a plan asks for at load
// (generated weights, the KV cache) is measured against it before any of it
// is allocated.
uint64_t usableHostMemoryBytes();

// One thing that takes host memory, for checkHostMemory's message.
struct MemoryDemand {
  std::string what; // e.g. "synthetic weights"
  uint64_t bytes;
};
// Fails, naming `name`, every demand, their sum and `limit`, when the sum
// exceeds `limit` (or 2^64).
Status checkHostMemory(const std::string &name, const std::vector<MemoryDemand> &demands,
                       uint64_t limit);

// Each layer's attention window (0: a global layer), from the attention
// steps of the plan's first program (every program attends alike), for the KV
// cache's block release (kv/window_retention.h). One entry per model layer;
// a layer without an attention step reads as global.
std::vector<int32_t> attentionWindows(const fb::Plan &plan);

// The synthetic-init kinds of the three int4 parts (Q4Weight, Q4Scales,
// Q4Zeros), generated per (row, group) rather than per element.
bool isSyntheticQ4(fb::SyntheticKind kind);

} // namespace llmc
