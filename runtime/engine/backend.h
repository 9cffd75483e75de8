// Where an Engine's steps run. The engine keeps what is the same on every
// device (the plan, the tokenizer, sequences and their block tables); a
// backend owns the weights, the KV cache storage and its block pool, and the
// executors of the plan's programs for its target.
//   CpuBackend (cpu/backend/cpu_backend.h): the plan's CPU programs, in place on
//     the mapped weights;
//   CudaBackend (cuda/cuda_backend.h): its sm_90a or ptx programs on one GPU.
#pragma once

#include "engine/step.h"
#include "kv/block_pool.h"
#include "plan/plan.h"
#include "support/status.h"

#include <memory>
#include <string>

namespace llmc {

struct EngineOptions;

class Backend {
public:
  virtual ~Backend() = default;

  // One line for the user: the backend, device and target.
  virtual std::string description() const = 0;
  // The pool of the KV cache's blocks; sequences' block tables index it.
  virtual kv::BlockPool &blockPool() = 0;
  virtual int32_t blockSize() const = 0;
  // CPU threads the backend computes with (0 for a GPU backend).
  virtual int threads() const = 0;
  // Bytes of KV cache storage, and of weights generated in host memory at
  // load (synthetic plans on the CPU).
  virtual uint64_t kvCacheBytes() const = 0;
  virtual uint64_t generatedWeightBytes() const = 0;
  // Bytes of the plan's mapping given back at load because the backend
  // holds those weights in another layout (the CPU's int4 panels).
  virtual uint64_t releasedPlanBytes() const { return 0; }
  // Bytes a decode step streams of plan tensor `index`, whose plan bytes
  // are `planBytes`: fewer where the backend holds it in a smaller exact
  // layout (the CPU's coded bf16 head).
  virtual uint64_t streamedWeightBytes(uint32_t index, uint64_t planBytes) const {
    return planBytes;
  }
  // A GPU backend's measured device-memory copy bandwidth in GB/s (bytes
  // read + written per second), the ceiling of memory-bound decode; 0 for
  // the CPU (llmrun bench measures host memory itself).
  virtual Expected<double> memoryBandwidthGBs() { return 0.0; }

  // Runs one batch step (engine/step.h) and fills `out`, which the caller
  // has reset() for input.outputs.size() rows: for each output row either
  // its requested kind, or its logits in its place (out.filled says which).
  // Host logits stay valid until the next run().
  virtual Status run(const StepInput &input, StepOutput &out) = 0;
};

// The backend EngineOptions::device asks for: "cpu", "cuda" (an error when
// no GPU can run the plan) or "auto" (CUDA when it can, else the CPU, with
// *notice saying why in one line).
Expected<std::unique_ptr<Backend>> createBackend(const Plan &plan, const EngineOptions &options,
                                                 std::string *notice);

} // namespace llmc
