// CUDA C++ source generation: one kernel instance per program step,
// specialized for its shapes, dtypes and tile sizes (template arguments, so
// compile-time constants). An instance is a small translation unit that
// includes a kernel family's template (codegen/cuda/kernels/*.cuh) and
// defines one extern "C" entry point whose name carries the specialization
// key, e.g. llmc_linear_gemv_bf16_n4096_k4096_t1. Equal names mean equal
// sources, so a plan's instances deduplicate by name.
//
// Families: embedding gather, RMSNorm, RoPE, linear (decode GEMV with
// split-K, prefill GEMM on tensor cores or FMA; bias and residual epilogues),
// paged attention (flash-decoding for decode, tiled for prefill; GQA), the
// point-wise ops, logits (the linear kernels with a row gather, f32 out),
// argmax and the synthetic-weight fill, one generator per file under
// codegen/cuda/ops/ (ops.h: what they share, and the linear kinds' forms in
// one table). The calling convention is runtime/cuda/kernel_abi.h.
#pragma once

#include "schema/engine_generated.h"
#include "support/dtype.h"
#include "support/status.h"

#include <array>
#include <cstdint>
#include <string>

namespace llmc::cuda {

// How a step launches its kernel; these land in the plan's Step fields of
// the same names (engine.fbs).
struct LaunchShape {
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t sharedBytes = 0; // dynamic shared memory
  uint8_t tokenAxis = 0;    // grid axis scaled by ceil(rows / tokensPerBlock); 0: none
  uint32_t tokensPerBlock = 0;
  uint64_t workspaceBytesPerToken = 0;
  uint64_t countersPerToken = 0;
};

struct KernelInstance {
  std::string name;   // the entry point; carries the specialization key
  std::string source; // a complete CUDA C++ translation unit
  LaunchShape launch;
};

// What a step's kernel is specialized for besides the step itself.
struct ProgramShape {
  DType activation = DType::F32; // activation buffers (F32 or BF16)
  int64_t maxTokens = 0;         // rows per step at most; 0: any (prefill-style kernels)
  bool decode = false;           // one new token per sequence (flash-decoding attention)
};

// The kernel of one step of a GPU program. Fails, naming the op and the
// reason, for a step no kernel family covers (e.g. an unsupported dtype).
Expected<KernelInstance> kernelForStep(const fb::PlanT &plan, const fb::ProgramT &program,
                                       const fb::StepT &step, const ProgramShape &shape);

// Kernels the runtime launches by name, outside the programs.
KernelInstance syntheticFillKernel(DType dtype); // llmc_synthetic_fill_<dtype>
KernelInstance argmaxKernel();                   // llmc_argmax_f32
KernelInstance topKKernel();                     // llmc_topk_f32
// The int4 parts of synthetic plans (SyntheticKind Q4*): llmc_synthetic_fill_q4.
KernelInstance syntheticFillQ4Kernel();

// Name of the synthetic fill kernel for `dtype` (F32, F16 or BF16).
std::string syntheticFillKernelName(DType dtype);

// The C++ element type of a dtype in the kernel templates.
const char *deviceType(DType dtype);

} // namespace llmc::cuda
