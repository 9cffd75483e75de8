#include "cuda/gpu_programs.h"

#include "memory_planner.h"
#include "plan/plan.h"

#include <algorithm>
#include <map>

namespace llmc::cuda {
namespace {

// The distinct kernel instances of a plan, in first-use order.
class InstanceTable {
public:
  // The index of `kernel`'s function; the same name must mean the same source.
  Expected<int> add(KernelInstance kernel) {
    auto it = index_.find(kernel.name);
    if (it != index_.end()) {
      if (kernels_[it->second].source != kernel.source)
        return Status::error("internal: two different kernels named '" + kernel.name + "'");
      return it->second;
    }
    int index = static_cast<int>(kernels_.size());
    index_[kernel.name] = index;
    kernels_.push_back(std::move(kernel));
    return index;
  }
  const std::vector<KernelInstance> &kernels() const { return kernels_; }

private:
  std::map<std::string, int> index_;
  std::vector<KernelInstance> kernels_;
};

// Activation buffers take the GPU dtype; token ids stay I32 and the logits F32.
void retypeBuffers(fb::ProgramT &program, DType activation) {
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    fb::BufferT &buffer = *program.buffers[b];
    if (static_cast<int>(b) == program.token_buffer || static_cast<int>(b) == program.logits_buffer)
      continue;
    if (buffer.dtype == fb::DType::F32)
      buffer.dtype = static_cast<fb::DType>(activation);
  }
}

// Lays the buffers out again for their (possibly smaller) dtypes, with the
// lifetimes the steps give: first write to last use; the token buffer is
// live from the start, the logits buffer to the end.
void replanMemory(fb::ProgramT &program) {
  const int numSteps = static_cast<int>(program.steps.size());
  std::vector<BufferLifetime> lifetimes(program.buffers.size());
  std::vector<bool> seen(program.buffers.size(), false);
  auto touch = [&](int buffer, int step) {
    BufferLifetime &l = lifetimes[buffer];
    if (!seen[buffer]) {
      seen[buffer] = true;
      l.firstStep = l.lastStep = step;
    }
    l.firstStep = std::min(l.firstStep, step);
    l.lastStep = std::max(l.lastStep, step);
  };
  touch(program.token_buffer, -1);
  for (int s = 0; s < numSteps; ++s) {
    for (int b : program.steps[s]->inputs)
      touch(b, s);
    for (int b : program.steps[s]->outputs)
      touch(b, s);
  }
  touch(program.logits_buffer, numSteps);
  for (size_t b = 0; b < program.buffers.size(); ++b)
    lifetimes[b].bytesPerToken = static_cast<uint64_t>(program.buffers[b]->width) *
                                 dtypeSize(static_cast<DType>(program.buffers[b]->dtype));
  MemoryPlan memory = planMemory(lifetimes);
  for (size_t b = 0; b < program.buffers.size(); ++b)
    program.buffers[b]->offset_per_token = memory.offsetPerToken[b];
  program.arena_bytes_per_token = memory.arenaBytesPerToken;
}

struct Variant {
  fb::Phase phase;
  int64_t maxTokens;
};

std::vector<Variant> programVariants() {
  std::vector<Variant> variants = {{fb::Phase::Prefill, 0}};
  for (int64_t bucket : decodeBuckets())
    variants.push_back({fb::Phase::Decode, bucket});
  variants.push_back({fb::Phase::Decode, 0});
  return variants;
}

// The library form of a plain bf16 Linear step in a program for any T
// (engine.fbs, LibraryGemm): the runtime may hand its GEMM to cuBLASLt.
// Fused kinds and int4 weights keep their own kernels only, and so do the
// decode buckets (GEMVs, captured in CUDA graphs). An output_scale becomes
// alpha, except beside a bias: the library adds the bias after alpha, the
// step scales it too.
std::unique_ptr<fb::LibraryGemmT> libraryGemm(const fb::PlanT &plan, const fb::ProgramT &program,
                                              const fb::StepT &step) {
  const fb::LinearParamsT *p = step.params.AsLinearParams();
  if (program.max_tokens != 0 || p == nullptr || p->prologue != nullptr || p->gated ||
      p->activation != fb::ActivationKind::None || p->weights != fb::WeightFormat::Dense ||
      (p->output_scale != 1.0f && p->bias))
    return nullptr;
  const fb::BufferT &x = *program.buffers.at(step.inputs.at(0));
  const fb::BufferT &y = *program.buffers.at(step.outputs.at(0));
  const fb::TensorT &w = *plan.tensors.at(step.weights.at(0));
  const bool bias = p->bias;
  if (x.dtype != fb::DType::BF16 || y.dtype != fb::DType::BF16 || w.dtype != fb::DType::BF16 ||
      (bias && plan.tensors.at(step.weights[1])->dtype != fb::DType::F32))
    return nullptr;
  auto gemm = std::make_unique<fb::LibraryGemmT>();
  gemm->n = w.shape.at(0);
  gemm->k = w.shape.at(1);
  gemm->lda = gemm->k;
  gemm->ldb = x.width;
  gemm->ldc = y.width;
  gemm->beta = p->accumulate ? 1.0f : 0.0f;
  gemm->bias = bias;
  gemm->alpha = p->output_scale;
  return gemm;
}

// One GPU program (target left as Cpu: filled in per target later).
Expected<std::unique_ptr<fb::ProgramT>> buildProgram(const fb::PlanT &plan, const fb::ProgramT &cpu,
                                                     const Variant &v, DType activation,
                                                     InstanceTable &table) {
  auto program = std::make_unique<fb::ProgramT>(cpu);
  program->phase = v.phase;
  program->max_tokens = v.maxTokens;
  retypeBuffers(*program, activation);
  replanMemory(*program);
  ProgramShape shape;
  shape.activation = activation;
  shape.maxTokens = v.maxTokens;
  shape.decode = v.phase == fb::Phase::Decode;
  for (size_t s = 0; s < program->steps.size(); ++s) {
    fb::StepT &step = *program->steps[s];
    auto kernel = kernelForStep(plan, *program, step, shape);
    if (!kernel)
      return kernel.status().withContext(std::string(fb::EnumNamePhase(v.phase)) + " step " +
                                         std::to_string(s));
    const LaunchShape launch = kernel->launch;
    LLMC_ASSIGN_OR_RETURN(step.kernel, table.add(std::move(*kernel)));
    step.grid.assign(launch.grid.begin(), launch.grid.end());
    step.block.assign(launch.block.begin(), launch.block.end());
    step.shared_bytes = launch.sharedBytes;
    step.grid_token_axis = launch.tokenAxis;
    step.tokens_per_block = launch.tokensPerBlock;
    step.workspace_bytes_per_token = launch.workspaceBytesPerToken;
    step.counters_per_token = launch.countersPerToken;
    step.library_gemm = libraryGemm(plan, *program, step);
  }
  return program;
}

// True when the plan has int4 parts the runtime generates.
bool hasSyntheticQ4(const fb::PlanT &plan) {
  for (const auto &t : plan.tensors)
    if (t->synthetic && isSyntheticQ4(t->synthetic->kind))
      return true;
  return false;
}

} // namespace

const std::vector<int64_t> &decodeBuckets() {
  static const std::vector<int64_t> buckets = {1, 2, 4, 8, 16};
  return buckets;
}

DType gpuActivationDType(DType weightDType) {
  return weightDType == DType::F32 ? DType::F32 : DType::BF16;
}

Status addGpuTargets(PlanContents &contents, const GpuBuildOptions &options,
                     GpuBuildSummary *summary) {
  if (options.targets.empty())
    return Status::ok();
  fb::PlanT &plan = contents.meta;
  const fb::ProgramT *cpu = nullptr;
  for (const auto &p : plan.programs)
    if (p->target == fb::Target::Cpu && p->phase == fb::Phase::Prefill)
      cpu = p.get();
  if (cpu == nullptr)
    return Status::error("GPU codegen: the lowered plan has no CPU prefill program to start from");
  DType activation = gpuActivationDType(static_cast<DType>(plan.weight_dtype));

  InstanceTable table;
  std::vector<std::unique_ptr<fb::ProgramT>> programs;
  for (const Variant &v : programVariants()) {
    auto program = buildProgram(plan, *cpu, v, activation, table);
    if (!program && options.skipUnsupported) {
      if (summary != nullptr)
        summary->skipped = program.message();
      return Status::ok(); // nothing added yet
    }
    if (!program)
      return program.status();
    programs.push_back(std::move(*program));
  }
  // Kernels the runtime calls by name: weight generation and greedy sampling.
  for (DType d : {DType::F32, DType::F16, DType::BF16})
    LLMC_RETURN_IF_ERROR(table.add(syntheticFillKernel(d)).status());
  if (hasSyntheticQ4(plan))
    LLMC_RETURN_IF_ERROR(table.add(syntheticFillQ4Kernel()).status());
  LLMC_RETURN_IF_ERROR(table.add(argmaxKernel()).status());
  LLMC_RETURN_IF_ERROR(table.add(topKKernel()).status());

  GpuBuildSummary local;
  local.kernels = table.kernels().size();
  for (fb::Target target : options.targets) {
    LLMC_ASSIGN_OR_RETURN(std::vector<CompiledKernel> compiled,
                          compileKernels(table.kernels(), target, options.compile));
    for (const CompiledKernel &k : compiled) {
      local.compiled += k.fromCache ? 0 : 1;
      if (k.usage.spills() && options.warning)
        options.warning("kernel " + k.name + " spills registers on " + fb::EnumNameTarget(target) +
                        ": " + std::to_string(k.usage.spillStoreBytes) + " bytes stored, " +
                        std::to_string(k.usage.spillLoadBytes) + " bytes loaded (" +
                        std::to_string(k.usage.registers) + " registers)");
      if (options.verbose && k.usage.registers >= 0)
        options.verbose(k.name + ": " + std::to_string(k.usage.registers) + " registers, " +
                        std::to_string(k.usage.stackBytes) + " bytes stack" +
                        (k.fromCache ? " (cached)" : ""));
    }
    LLMC_ASSIGN_OR_RETURN(std::vector<uint8_t> image, linkModule(compiled, target));
    auto module = std::make_unique<fb::KernelModuleT>();
    module->target = target;
    module->image = std::move(image);
    module->cuda_version = nvrtcVersionNumber();
    for (const KernelInstance &k : table.kernels())
      module->functions.push_back(k.name);
    local.moduleBytes += module->image.size();
    plan.modules.push_back(std::move(module));
    for (const auto &program : programs) {
      auto copy = std::make_unique<fb::ProgramT>(*program);
      copy->target = target;
      plan.programs.push_back(std::move(copy));
      ++local.programs;
    }
  }
  if (summary != nullptr)
    *summary = local;
  return Status::ok();
}

} // namespace llmc::cuda
