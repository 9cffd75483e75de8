// The `codegen` stage of `llmc build`: CUDA kernels for the GPU targets
// (codegen/cuda), after the CPU programs are lowered. Which targets a plan
// carries is --target's comma-separated list of cpu, sm_90a and ptx; the
// default is cpu plus both GPU targets when this llmc has NVRTC.
#pragma once

#include "driver/build.h"
#include "plan_writer.h"

#include <string>
#include <vector>

namespace llmc {

struct TargetSelection {
  bool cpu = true;
  std::vector<fb::Target> gpu; // Sm90a, Ptx
  bool byDefault = false;      // no --target: GPU targets are added where possible
};

// True when this llmc was built with the CUDA toolkit (NVRTC).
bool gpuCodegenAvailable();

// Parses --target ("" = the default). Errors name the bad entry and list
// the valid ones; asking for a GPU target without NVRTC is an error.
Expected<TargetSelection> parseTargets(const std::string &list);

// Adds the GPU programs and modules to `contents`, and drops the CPU
// programs when the CPU target was not selected. Reports compile progress,
// spills (warnings) and a summary line.
Status runGpuStage(const TargetSelection &targets, PlanContents &contents,
                   const BuildOptions &options, const BuildReporter &reporter);

} // namespace llmc
