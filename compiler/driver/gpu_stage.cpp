#include "driver/gpu_stage.h"

#ifdef LLMC_HAVE_CUDA_CODEGEN
#include "cuda/gpu_programs.h"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

namespace llmc {

bool gpuCodegenAvailable() {
#ifdef LLMC_HAVE_CUDA_CODEGEN
  return true;
#else
  return false;
#endif
}

Expected<TargetSelection> parseTargets(const std::string &list) {
  TargetSelection selection;
  if (list.empty()) {
    selection.byDefault = true;
    if (gpuCodegenAvailable())
      selection.gpu = {fb::Target::Sm90a, fb::Target::Ptx};
    return selection;
  }
  selection.cpu = false;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    fb::Target target;
    if (name == "cpu") {
      selection.cpu = true;
      continue;
    } else if (name == "sm_90a") {
      target = fb::Target::Sm90a;
    } else if (name == "ptx") {
      target = fb::Target::Ptx;
    } else {
      return Status::error("--target: unknown target '" + name + "' (valid: cpu, sm_90a, ptx)");
    }
    if (!gpuCodegenAvailable())
      return Status::error("--target " + name + ": this llmc was built without the CUDA " +
                           "toolkit (NVRTC), so it can only build the cpu target");
    if (std::find(selection.gpu.begin(), selection.gpu.end(), target) == selection.gpu.end())
      selection.gpu.push_back(target);
  }
  if (!selection.cpu && selection.gpu.empty())
    return Status::error("--target: no target given (valid: cpu, sm_90a, ptx)");
  return selection;
}

Status runGpuStage(const TargetSelection &targets, PlanContents &contents,
                   const BuildOptions &options, const BuildReporter &reporter) {
  auto start = std::chrono::steady_clock::now();
  std::string detail = "cpu only";
#ifdef LLMC_HAVE_CUDA_CODEGEN
  if (!targets.gpu.empty()) {
    cuda::GpuBuildOptions gpu;
    gpu.targets = targets.gpu;
    gpu.compile.threads = options.jobs;
    gpu.compile.progress = reporter.compileProgress;
    gpu.warning = reporter.warning;
    gpu.verbose = reporter.verbose;
    gpu.skipUnsupported = targets.byDefault;
    cuda::GpuBuildSummary summary;
    LLMC_RETURN_IF_ERROR(cuda::addGpuTargets(contents, gpu, &summary));
    std::ostringstream s;
    if (!summary.skipped.empty()) {
      reporter.warning("no GPU targets in this plan: " + summary.skipped +
                       " (pass --target to make this an error)");
      s << "GPU targets skipped";
    } else {
      s << summary.kernels << " kernels x " << targets.gpu.size() << " targets ("
        << summary.compiled << " compiled, the rest cached), " << summary.programs
        << " GPU programs, modules " << summary.moduleBytes / 1024 << " KiB";
    }
    detail = s.str();
  }
#endif
  if (!targets.cpu) {
    auto &programs = contents.meta.programs;
    programs.erase(std::remove_if(programs.begin(), programs.end(),
                                  [](const auto &p) { return p->target == fb::Target::Cpu; }),
                   programs.end());
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  char line[512];
  std::snprintf(line, sizeof(line), "stage %-8s %8.1f ms  %s", "codegen", ms, detail.c_str());
  reporter.info(line);
  return Status::ok();
}

} // namespace llmc
