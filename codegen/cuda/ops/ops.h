// The per-op CUDA kernel generators behind kernelForStep (cuda/kernel_gen.h),
// one file per op family, and what they share: a view of the step with its
// buffers and weights, name/literal helpers, the translation-unit wrapper.
// Internal to codegen/cuda: nothing outside includes it.
#pragma once

#include "cuda/kernel_gen.h"
#include "ops/op_table.h"
#include "plan/plan.h"

#include <initializer_list>
#include <optional>
#include <string>

namespace llmc::cuda::ops {

constexpr int kSmCount = 132; // H100/H200 SXM: split work until the grid covers this twice

// One step of one program, with what its generator reads.
struct StepView {
  const fb::PlanT &plan;
  const fb::ProgramT &program;
  const fb::StepT &step;
  const ProgramShape &shape;

  const fb::BufferT &buffer(int index) const { return *program.buffers.at(index); }
  const fb::BufferT &input(int i) const { return buffer(step.inputs.at(i)); }
  const fb::BufferT &output() const { return buffer(step.outputs.at(0)); }
  const fb::TensorT &weight(int i) const { return *plan.tensors.at(step.weights.at(i)); }
  int numWeights() const { return static_cast<int>(step.weights.size()); }
  DType dtype(const fb::BufferT &b) const { return static_cast<DType>(b.dtype); }
  DType weightDType(int i) const { return static_cast<DType>(weight(i).dtype); }
  std::string op() const { return llmc::ops::opName(step.op); }
};

// "no CUDA kernel for <op>: <why>".
Status unsupported(const StepView &v, const std::string &why);

// --- Names and literals of generated sources. ---
std::string str(int64_t v);
int64_t roundUp(int64_t v, int64_t multiple);
int64_t ceilDiv(int64_t a, int64_t b);
const char *tag(DType dtype); // the short dtype tag of kernel names: f32, f16, bf16
bool isFloat(DType t);
std::string floatLiteral(float v); // exact (hex float) C++ literal
std::string floatTag(float v);     // the bits in hex, for kernel names
std::string bool01(bool b);        // "true" / "false"
// The largest number of elements per vector access: at most 16 bytes of
// every dtype in `sizes`, and dividing `count`.
int vectorWidth(int64_t count, std::initializer_list<size_t> sizes);

// One translation unit: a header comment, the include of the family's
// template, extra declarations and an entry point `name` taking one
// llmc::abi::<argsType> and forwarding to `call`.
std::string translationUnit(const std::string &name, const std::string &summary,
                            const std::string &header, const std::string &declarations, int threads,
                            const std::string &argsType, const std::string &call);

// Grid axis x covers the rows, `rowsPerBlock` per block.
void perRowGrid(LaunchShape &l, uint32_t threads, uint32_t rowsPerBlock = 1);

// The step's RoPE (its RopeParams: theta, rotary_dim, pair layout,
// scaling) as a spec struct named `name` for the kernels (kernels/rope.cuh):
// its inverse frequencies computed exactly as the CPU backend computes them
// and baked in as __device__ tables (two for longrope; dynamic NTK past its
// original length computes them on the device from the pass's length), its
// attention factor; *hashTag gets a short hash of it for kernel names, so
// each distinct RopeParams gets its own kernels.
Expected<std::string> ropeSpec(const StepView &v, const fb::RopeParamsT &rope, int64_t dim,
                               const std::string &name, std::string *hashTag);

// --- The linear family's forms (linear.cpp). ---
enum LinearFlag : unsigned {
  kNorm = 1u << 0,       // RMSNorm prologue: the weights start with gamma[K]
  kSwiGlu = 1u << 1,     // gated epilogue: W stacks the gate rows, then the up rows
  kGather = 1u << 2,     // the rows of StepArgs::logitRows only (Logits, LmHead)
  kInt4 = 1u << 3,       // W is int4: qweight, scales, zeros (kernels/common/q4_layout.h)
  kAccumulate = 1u << 4, // out += ... (LinearParams.accumulate)
  kBias = 1u << 5,       // a bias[N] follows W (LinearParams.bias)
  kInt8 = 1u << 6,       // W is int8: qweight, scales (kernels/common/q8_layout.h)
};

// A Linear, Logits or LmHead step as the kernels see it, from its
// parameter table (ops::linearOperands' weight order).
struct LinearForm {
  const char *family; // kernel name prefix, e.g. "norm_linear_q4"
  unsigned flags;     // LinearFlag

  bool has(LinearFlag f) const { return (flags & f) != 0; }
  int matrix() const { return has(kNorm) ? 1 : 0; }              // weight index of W / qweight
  int matrixWeights() const { return has(kInt4) ? 3 : has(kInt8) ? 2 : 1; } // W, or its parts
  int bias() const { return matrix() + matrixWeights(); }        // weight index of the bias
  bool isQuantizedPart(int weight) const { // int4 qweight, scales, zeros; int8 qweight, scales
    return (has(kInt4) || has(kInt8)) && weight >= matrix() && weight < bias();
  }
};

// The form of a Linear, Logits or LmHead step; nullopt for every other kind.
std::optional<LinearForm> linearForm(const fb::StepT &step);

// --- The int8 linear layer (linear_q8.cpp, W8A16: kernels/common/q8_layout.h). ---
struct Q8LinearShape {
  int64_t n = 0, k = 0;       // y[T, N] = x[T, K] . W^T
  int64_t groupSize = 0;      // 0: a scale per output channel; else a multiple of 32
  bool halfScales = false;    // f16 scales (else f32)
  DType activation = DType::F32, output = DType::F32;
  bool bias = false;          // weights: qweight, scales (, bias)
  DType biasType = DType::F32;
  bool accumulate = false;    // out += ...
  float outScale = 1.0f;      // LinearParams.output_scale: out (+)= outScale * (x . W^T + bias)
  int64_t maxTokens = 0;      // decode programs: T <= maxTokens; 0: any T (tiles of 16)
  // The fused forms (LinearParams): an RMSNorm prologue (weights gamma,
  // qweight, scales), a gated epilogue (qweight [2N, .]: gate rows, then up).
  bool norm = false;
  DType gammaType = DType::F32;
  float eps = 0.0f, gammaOffset = 0.0f;
  bool gated = false;
  int64_t gate = 0; // kernels/common/activations.h GateKind
};
Expected<KernelInstance> q8LinearKernel(const Q8LinearShape &s);

// --- The generators, one per op family. ---
Expected<KernelInstance> embeddingKernel(const StepView &v); // embedding.cpp
Expected<KernelInstance> rmsNormKernel(const StepView &v);   // rms_norm.cpp: Norm (RMS, Layer)
Expected<KernelInstance> ropeKernel(const StepView &v);      // rope.cpp
Expected<KernelInstance> pointwiseKernel(const StepView &v); // pointwise.cpp: Elementwise, Activation
Expected<KernelInstance> linearKernel(const StepView &v);    // linear.cpp: Linear, Logits, LmHead
Expected<KernelInstance> attentionKernel(const StepView &v); // attention.cpp

} // namespace llmc::cuda::ops
