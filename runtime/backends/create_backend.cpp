// createBackend (engine/backend.h): the one place that knows every backend,
// so that engine/ includes no backend and the backends include no engine.
#include "engine/backend.h"

#include "cpu/backend/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "engine/engine_options.h"

namespace llmc {
namespace {

bool hasGpuPrograms(const Plan &plan) {
  for (const fb::Program *p : *plan.meta().programs())
    if (p->target() != fb::Target::Cpu)
      return true;
  return false;
}

} // namespace

Expected<std::unique_ptr<Backend>> createBackend(const Plan &plan, const EngineOptions &options,
                                                 std::string *notice) {
  if (options.device != "cpu" && options.device != "cuda" && options.device != "auto")
    return Status::error("device '" + options.device + "' is unknown (valid: auto, cpu, cuda)");
  if (options.device != "cpu") {
    Status why = Status::ok();
    if (!hasGpuPrograms(plan)) {
      why = Status::error(plan.path() + " has no GPU programs (built with --target cpu)");
    } else {
      auto gpu = cuda::CudaBackend::create(plan, options);
      if (gpu)
        return std::unique_ptr<Backend>(std::move(*gpu));
      why = gpu.status();
    }
    if (options.device == "cuda")
      return why.withContext("--device cuda");
    if (plan.program(fb::Target::Cpu, fb::Phase::Prefill) == nullptr)
      return why.withContext(plan.path() + " has no CPU program to fall back to");
    if (notice != nullptr)
      *notice = "no usable GPU (" + why.message() + "); running on the CPU";
  }
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> cpu, CpuBackend::create(plan, options));
  return std::unique_ptr<Backend>(std::move(cpu));
}

} // namespace llmc
