// Adds the GPU targets to lowered plan contents: from the CPU programs it
// derives, per target (sm_90a, ptx),
//   - a prefill program (any T; GEMM and tiled attention),
//   - decode programs for T <= 1, 2, 4, 8, 16 (GEMV specialized for the
//     bucket, flash-decoding attention), and one for any T (GEMM),
// with bf16 activations for bf16/f16 plans (f32 for f32 plans), a memory
// plan redone for those dtypes, and each step's kernel and launch shape;
// then compiles every distinct kernel instance and stores one module per
// target (plus the synthetic-fill and argmax kernels the runtime calls).
#pragma once

#include "cuda/nvrtc_compiler.h"
#include "plan_writer.h"

#include <functional>
#include <string>
#include <vector>

namespace llmc::cuda {

struct GpuBuildOptions {
  std::vector<fb::Target> targets; // Sm90a and/or Ptx
  CompileOptions compile;
  // Non-fatal findings (a kernel that spills registers), one line each.
  std::function<void(const std::string &line)> warning;
  // Per-kernel details (registers, cache hits) for -v.
  std::function<void(const std::string &line)> verbose;
  // A step no kernel family covers (a new op kind, an unsupported dtype):
  // false fails the build; true adds no GPU target and says why in
  // GpuBuildSummary::skipped (the default target list does this).
  bool skipUnsupported = false;
};

struct GpuBuildSummary {
  size_t kernels = 0;       // distinct instances per target
  size_t compiled = 0;      // compilations run (all targets), the rest came from the cache
  size_t programs = 0;      // GPU programs added (all targets)
  uint64_t moduleBytes = 0; // all targets
  std::string skipped;      // why no GPU target was added ("" when they were)
};

// The decode buckets: a decode program per bucket (T <= bucket) plus one
// for any T.
const std::vector<int64_t> &decodeBuckets();

// The activation dtype of the GPU programs of a plan whose matrices are
// `weightDType`: BF16 for 16-bit plans, F32 for f32 plans.
DType gpuActivationDType(DType weightDType);

Status addGpuTargets(PlanContents &contents, const GpuBuildOptions &options,
                     GpuBuildSummary *summary = nullptr);

} // namespace llmc::cuda
