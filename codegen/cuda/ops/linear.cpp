// The linear family (gemv.cuh, gemm.cuh): y[T, N] (+)= x[T, K] . W[N, K]^T
// with the fused forms of engine.fbs: an RMSNorm prologue, a gated (SwiGLU,
// GeGLU) epilogue, a bias, output scale and residual epilogue, the logits row
// gather, int4 weights. Decode programs (few rows) get a GEMV, the others a GEMM.
#include "cuda/ops/ops.h"
#include "ops/operands.h"

#include <array>

namespace llmc::cuda::ops {

namespace {

// The kernel family (name prefix) of each combination of a Linear's
// prologue, gating and int4 weights: the names the kernels always had.
const char *linearFamily(bool norm, bool gated, bool int4) {
  static const char *const kFamilies[2][2][2] = {
      {{"linear", "linear_q4"}, {"linear_swiglu", "linear_swiglu_q4"}},
      {{"norm_linear", "norm_linear_q4"}, {"norm_linear_swiglu", "norm_linear_swiglu_q4"}}};
  return kFamilies[norm][gated][int4];
}

// The kinds' norm (a Linear's prologue, an LmHead's final norm), or null.
const fb::NormParamsT *normOf(const fb::StepT &step) {
  if (const fb::LinearParamsT *p = step.params.AsLinearParams())
    return p->prologue.get();
  if (const fb::LogitsParamsT *p = step.params.AsLogitsParams())
    return p->norm.get();
  return nullptr;
}

// What the kernels do not run: refused at build time, naming the field.
Status checkSupported(const StepView &v) {
  if (const fb::NormParamsT *n = normOf(v.step))
    if (n->kind != fb::NormKind::Rms || n->bias || n->group_width != 0)
      return unsupported(v, "only whole-row RMSNorm prologues without bias");
  if (const fb::LinearParamsT *p = v.step.params.AsLinearParams()) {
    if (!p->gated && p->activation != fb::ActivationKind::None)
      return unsupported(v, "an activation without gating");
    if (p->gated && (p->bias || p->accumulate))
      return unsupported(v, "a gated linear with a bias or residual");
    if (p->activation == fb::ActivationKind::Relu)
      return unsupported(v, "Relu");
  }
  if (const fb::LogitsParamsT *p = v.step.params.AsLogitsParams())
    if (v.step.op == fb::OpKind::LmHead && (p->scale != 1.0 || p->bias))
      return unsupported(v, "an LmHead with a logit scale or bias");
  return Status::ok();
}

// What one linear step's kernel is specialized for, from the step.
struct LinearSpec {
  const LinearForm &f;
  DType a, w, out, g, b;  // activation, weight, output, gamma, bias dtypes
  int64_t n, kDim, group; // outputs, reduction length, int4 group size (0: float weights)
  bool accumulate, bias;
  float eps, gammaOffset, softcap;
  float outScale;       // Logits' scale, a Linear's output_scale (1: none): times the
                        // product and its bias, before the soft-cap and the residual add
  int64_t gate;         // kernels/common/activations.h GateKind; 0: silu
  std::string suffix;   // kernel name: bias, accumulate, eps, offset, softcap, scale, gate
  std::string dtypes;   // kernel name: activation, weight and output dtypes
  std::string summary;  // the source's header comment
  std::string types;    // template arguments TA, TW, TO, TB, TG
  std::string gateArg;  // ", GATE" when not silu
  std::string flags;    // template arguments ACCUM, BIAS, GATHER, NORM, SWIGLU [, GATE]
  std::string epsArg;   // run-time arguments eps [, offset [, softcap]]
};

Expected<LinearSpec> linearSpec(const StepView &v, const LinearForm &f) {
  const bool norm = f.has(kNorm), swiglu = f.has(kSwiGlu), q4 = f.has(kInt4);
  const int64_t kDim = v.input(0).width;
  const int64_t n = q4 ? v.output().width : v.weight(f.matrix()).shape.at(0) / (swiglu ? 2 : 1);
  const bool bias = f.has(kBias);
  const fb::LinearParamsT *linear = v.step.params.AsLinearParams();
  const fb::LogitsParamsT *logits = v.step.params.AsLogitsParams();
  const fb::NormParamsT *normParams = normOf(v.step);
  LinearSpec s{f,
               v.dtype(v.input(0)),
               v.weightDType(f.matrix()),
               v.dtype(v.output()),
               norm ? v.weightDType(0) : DType::F32,
               bias ? v.weightDType(f.bias()) : DType::F32,
               n,
               kDim,
               q4 ? linear->group_size : 0,
               f.has(kAccumulate),
               bias,
               norm ? static_cast<float>(normParams->eps) : 0.0f,
               norm ? static_cast<float>(normParams->offset) : 0.0f,
               logits ? static_cast<float>(logits->softcap) : 0.0f,
               logits ? static_cast<float>(logits->scale) : linear->output_scale,
               swiglu ? static_cast<int64_t>(llmc::ops::gateKind(linear->activation)) : 0,
               {}, {}, {}, {}, {}, {}, {}};
  if (n > INT32_MAX / 4 || kDim > INT32_MAX / 4)
    return unsupported(v, "shape [" + str(n) + ", " + str(kDim) + "] too large");
  if (q4 && (s.group <= 0 || s.group % 32 != 0))
    return unsupported(v, "int4 group size " + str(s.group) + " is not a multiple of 32");
  s.suffix = std::string(bias ? std::string("_bias") + tag(s.b) : "") +
             (s.accumulate ? "_acc" : "") + (norm ? "_eps" + floatTag(s.eps) : "") +
             (s.gammaOffset != 0.0f ? "_off" + floatTag(s.gammaOffset) : "") +
             (s.softcap != 0.0f ? "_cap" + floatTag(s.softcap) : "") +
             (s.outScale != 1.0f ? (logits ? "_ls" : "_os") + floatTag(s.outScale) : "") +
             (s.gate != 0 ? "_gate" + str(s.gate) : "");
  s.dtypes = std::string(tag(s.a)) +
             (q4         ? "_wq4g" + str(s.group)
              : s.w != s.a ? std::string("_w") + tag(s.w)
                           : "") +
             (s.out != s.a ? std::string("_o") + tag(s.out) : "");
  s.summary = std::string(llmc::ops::opName(v.step.op)) + " [" + str(n) + ", " + str(kDim) +
              "], " + (q4 ? "int4" : tag(s.w)) + " weights";
  const std::string weightType = q4 ? "float" : deviceType(s.w);
  s.types = std::string(deviceType(s.a)) + ", " + weightType + ", " + deviceType(s.out) + ", " +
            deviceType(s.b) + ", " + deviceType(s.g);
  // GATE only when not silu, the run-time offset, softcap and logit scale
  // only when set: kernels of models without them stay as they were.
  s.gateArg = s.gate != 0 ? ", " + str(s.gate) : "";
  s.flags = bool01(s.accumulate) + ", " + bool01(bias) + ", " + bool01(f.has(kGather)) + ", " +
            bool01(norm) + ", " + bool01(swiglu) + s.gateArg;
  const bool scaled = s.outScale != 1.0f;
  s.epsArg = floatLiteral(s.eps) +
             (s.gammaOffset != 0.0f || s.softcap != 0.0f || scaled
                  ? ", " + floatLiteral(s.gammaOffset)
                  : "") +
             (s.softcap != 0.0f || scaled ? ", " + floatLiteral(s.softcap) : "") +
             (scaled ? ", " + floatLiteral(s.outScale) : "");
  return s;
}

// Decode with int4 weights: gemvQ4, whole 32-column loads, no split-K.
KernelInstance int4Gemv(const StepView &v, const LinearSpec &s) {
  const int64_t tmax = v.shape.maxTokens, warps = 4,
                rows = tmax <= 4 && !s.f.has(kSwiGlu) ? 2 : 1;
  KernelInstance k;
  k.name = "llmc_" + std::string(s.f.family) + "_gemv_" + s.dtypes + "_n" + str(s.n) + "_k" +
           str(s.kDim) + "_t" + str(tmax) + s.suffix;
  k.source = translationUnit(
      k.name, s.summary + ", decode GEMV for T <= " + str(tmax), "gemv.cuh", "",
      static_cast<int>(warps * 32), "StepArgs",
      "llmc::dev::gemvQ4<" + std::string(deviceType(s.a)) + ", " + deviceType(s.out) + ", " +
          deviceType(s.b) + ", " + deviceType(s.g) + ", " + str(s.n) + ", " + str(s.kDim) + ", " +
          str(s.group) + ", " + str(tmax) + ", " + str(rows) + ", " + str(warps) + ", " +
          bool01(s.accumulate) + ", " + bool01(s.bias) + ", " + bool01(s.f.has(kNorm)) + ", " +
          bool01(s.f.has(kSwiGlu)) + s.gateArg + ">(args, " + floatLiteral(s.eps) +
          (s.gammaOffset != 0.0f || s.outScale != 1.0f ? ", " + floatLiteral(s.gammaOffset) : "") +
          (s.outScale != 1.0f ? ", " + floatLiteral(s.outScale) : "") + ")");
  k.launch.block = {static_cast<uint32_t>(warps * 32), 1, 1};
  k.launch.grid = {static_cast<uint32_t>(ceilDiv(s.n, warps * rows)), 1, 1};
  return k;
}

// Decode with float weights: gemv, split-K until the grid covers the SMs twice.
KernelInstance floatGemv(const StepView &v, const LinearSpec &s) {
  // 16-byte weight loads (gamma, f32, comes in as many 16-byte pieces),
  // UNROLL x WR of them per lane in flight: 4 KB per warp at T = 1 without
  // a norm, else 2 KB for T <= 4 (more costs the registers that keep the
  // grid in one wave: 107 instead of 61 for the norm forms at T = 1).
  const bool norm = s.f.has(kNorm), swiglu = s.f.has(kSwiGlu);
  const int64_t tmax = v.shape.maxTokens, warps = 4, rows = swiglu ? 1 : 2;
  const int unroll = tmax == 1 && !norm ? 4 : tmax <= 4 ? 2 : 1;
  int vec = vectorWidth(s.kDim, {dtypeSize(s.a), dtypeSize(s.w)});
  int64_t blocks = ceilDiv(s.n, warps * rows), splitK = 1;
  while (blocks * splitK < 2 * kSmCount && splitK < 16 && (s.kDim / vec) % (2 * splitK) == 0 &&
         (s.kDim / vec) / (2 * splitK) >= 32 * unroll)
    splitK *= 2;
  KernelInstance k;
  k.name = "llmc_" + std::string(s.f.family) + "_gemv_" + s.dtypes + "_n" + str(s.n) + "_k" +
           str(s.kDim) + "_t" + str(tmax) + (splitK > 1 ? "_s" + str(splitK) : "") + s.suffix;
  k.source = translationUnit(k.name, s.summary + ", decode GEMV for T <= " + str(tmax), "gemv.cuh",
                             "", static_cast<int>(warps * 32), "StepArgs",
                             "llmc::dev::gemv<" + s.types + ", " + str(s.n) + ", " + str(s.kDim) +
                                 ", " + str(tmax) + ", " + str(rows) + ", " + str(warps) + ", " +
                                 str(splitK) + ", " + str(vec) + ", " + str(unroll) + ", " +
                                 s.flags + ">(args, " + s.epsArg + ")");
  k.launch.block = {static_cast<uint32_t>(warps * 32), 1, 1};
  k.launch.grid = {static_cast<uint32_t>(blocks), static_cast<uint32_t>(splitK), 1};
  if (splitK > 1) {
    int64_t weightRows = swiglu ? 2 * s.n : s.n;
    k.launch.workspaceBytesPerToken =
        static_cast<uint64_t>((splitK * weightRows + blocks * splitK) * 4);
    k.launch.countersPerToken = static_cast<uint64_t>(blocks);
  }
  return k;
}

// Any number of rows: tensor cores for bf16 activations with bf16 weights,
// or int4 ones dequantized to bf16 as the tile loads them; else FMA.
KernelInstance gemm(const LinearSpec &s) {
  const bool q4 = s.f.has(kInt4);
  bool mma = s.a == DType::BF16 && (q4 || s.w == DType::BF16) && s.kDim % 8 == 0 &&
             (!s.f.has(kNorm) || s.g == DType::F32);
  int tile = mma ? 128 : 64;
  int outCols = s.f.has(kSwiGlu) ? tile / 2 : tile;
  KernelInstance k;
  k.name = "llmc_" + std::string(s.f.family) + "_gemm_" + (mma ? "mma_" : "fma_") + s.dtypes +
           "_n" + str(s.n) + "_k" + str(s.kDim) + s.suffix;
  std::string call = mma ? "llmc::dev::gemmMma<" + std::string(deviceType(s.out)) + ", " +
                               deviceType(s.b) + ", " + deviceType(s.g) + ", " + str(s.n) + ", " +
                               str(s.kDim) + ", " + str(s.group) + ", " + s.flags + ">(args, " +
                               s.epsArg + ")"
                         : "llmc::dev::gemmFma<" + s.types + ", " + str(s.n) + ", " +
                               str(s.kDim) + ", " + str(s.group) + ", " + s.flags + ">(args, " +
                               s.epsArg + ")";
  k.source = translationUnit(k.name, s.summary + (mma ? ", tensor-core GEMM" : ", FMA GEMM"),
                             "gemm.cuh", "", 256, "StepArgs", call);
  k.launch.block = {256, 1, 1};
  k.launch.grid = {static_cast<uint32_t>(ceilDiv(s.n, outCols)), 1, 1};
  k.launch.tokenAxis = 2;
  k.launch.tokensPerBlock = static_cast<uint32_t>(tile);
  return k;
}

} // namespace

std::optional<LinearForm> linearForm(const fb::StepT &step) {
  if (const fb::LinearParamsT *p = step.params.AsLinearParams()) {
    const bool norm = p->prologue != nullptr, q4 = p->weights == fb::WeightFormat::Q4;
    const bool q8 = p->weights == fb::WeightFormat::Q8;
    return LinearForm{linearFamily(norm, p->gated, q4),
                      (norm ? kNorm : 0u) | (p->gated ? kSwiGlu : 0u) | (q4 ? kInt4 : 0u) |
                          (q8 ? kInt8 : 0u) | (p->accumulate ? kAccumulate : 0u) |
                          (p->bias ? kBias : 0u)};
  }
  if (const fb::LogitsParamsT *p = step.params.AsLogitsParams()) {
    const bool head = step.op == fb::OpKind::LmHead;
    return LinearForm{head ? "lm_head" : "logits",
                      (head ? kNorm | kGather : kGather) | (p->bias ? kBias : 0u)};
  }
  return std::nullopt;
}

// An int8 (W8A16) Linear: linear_q8.cpp's kernel for the step's shape and
// fused form (weights (gamma,) qweight, scales (, bias)).
Expected<KernelInstance> int8Linear(const StepView &v, const LinearForm &f) {
  const fb::LinearParamsT &p = *v.step.params.AsLinearParams();
  Q8LinearShape s;
  s.n = v.output().width;
  s.k = v.input(0).width;
  s.groupSize = p.group_size;
  const DType scales = v.weightDType(f.matrix() + 1);
  if (v.weightDType(f.matrix()) != DType::I8 || (scales != DType::F32 && scales != DType::F16))
    return unsupported(v, "int8 weights need an I8 qweight and F32 or F16 scales");
  s.halfScales = scales == DType::F16;
  s.activation = v.dtype(v.input(0));
  s.output = v.dtype(v.output());
  s.bias = f.has(kBias);
  s.biasType = s.bias ? v.weightDType(f.bias()) : DType::F32;
  s.accumulate = f.has(kAccumulate);
  s.outScale = p.output_scale;
  s.maxTokens = v.shape.maxTokens;
  if (const fb::NormParamsT *n = p.prologue.get()) {
    s.norm = true;
    s.gammaType = v.weightDType(0);
    s.eps = static_cast<float>(n->eps);
    s.gammaOffset = static_cast<float>(n->offset);
  }
  s.gated = p.gated;
  s.gate = p.gated ? static_cast<int64_t>(llmc::ops::gateKind(p.activation)) : 0;
  auto k = q8LinearKernel(s);
  if (!k)
    return unsupported(v, k.message());
  return k;
}

Expected<KernelInstance> linearKernel(const StepView &v) {
  const std::optional<LinearForm> f = linearForm(v.step);
  if (!f)
    return unsupported(v, "not a linear-family op");
  LLMC_RETURN_IF_ERROR(checkSupported(v));
  if (f->has(kInt8))
    return int8Linear(v, *f);
  LLMC_ASSIGN_OR_RETURN(LinearSpec s, linearSpec(v, *f));
  if (v.shape.maxTokens > 0)
    return f->has(kInt4) ? int4Gemv(v, s) : floatGemv(v, s);
  return gemm(s);
}

} // namespace llmc::cuda::ops
