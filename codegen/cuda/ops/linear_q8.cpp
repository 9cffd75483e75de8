// The int8 linear layer's kernels (linear_q8.cuh, W8A16): decode programs
// get one tile of all their tokens (T <= maxTokens), the others tiles of 16
// tokens over grid.y. The step-independent part: what the kernel is
// specialized for comes in a Q8LinearShape (ops.h), filled from the step.
#include "cuda/ops/ops.h"

#include "kernels/common/q8_layout.h"

namespace llmc::cuda::ops {

Expected<KernelInstance> q8LinearKernel(const Q8LinearShape &s) {
  if (!hd::q8ValidGroupSize(s.groupSize))
    return Status::error("no CUDA kernel for an int8 linear: group size " + str(s.groupSize) +
                         " is not 0 (per output channel) or a positive multiple of 32");
  if (s.n <= 0 || s.k <= 0 || s.n > INT32_MAX / 4 || s.k > INT32_MAX / 4)
    return Status::error("no CUDA kernel for an int8 linear of shape [" + str(s.n) + ", " +
                         str(s.k) + "]");
  const bool tiled = s.maxTokens <= 0;
  const int64_t tmax = tiled ? 16 : s.maxTokens, warps = 4,
                rows = tmax <= 4 && !s.gated ? 2 : 1;
  // The fused forms' names as the other linear families have them.
  const std::string family = std::string(s.norm ? "norm_" : "") + "linear_" +
                             (s.gated ? "swiglu_" : "") + "q8_";
  const std::string fused =
      (s.norm ? "_eps" + floatTag(s.eps) + (s.gammaOffset != 0.0f ? "_off" + floatTag(s.gammaOffset)
                                                                   : "") +
                    (s.gammaType != DType::F32 ? std::string("_g") + tag(s.gammaType) : "")
              : "") +
      (s.gated && s.gate != 0 ? "_gate" + str(s.gate) : "");
  // The scale only when set: kernels of models without one stay as they were.
  const std::string scaleArg = s.outScale != 1.0f ? ", " + floatLiteral(s.outScale) : "";
  KernelInstance k;
  k.name = "llmc_" + family + std::string(tiled ? "tiles" : "gemv") + "_" + tag(s.activation) +
           "_wq8g" + str(s.groupSize) + (s.halfScales ? "h" : "") +
           (s.output != s.activation ? std::string("_o") + tag(s.output) : "") + "_n" + str(s.n) +
           "_k" + str(s.k) + "_t" + str(tmax) + (s.bias ? std::string("_bias") + tag(s.biasType) : "") +
           (s.accumulate ? "_acc" : "") + fused +
           (s.outScale != 1.0f ? "_os" + floatTag(s.outScale) : "");
  k.source = translationUnit(
      k.name,
      std::string(s.norm ? "RMSNorm + " : "") + "int8 Linear [" + str(s.n) + ", " + str(s.k) +
          "]" + (s.gated ? " gated" : "") + ", " +
          (tiled ? "tiles of 16 tokens" : "decode GEMV for T <= " + str(tmax)),
      "linear_q8.cuh", "", static_cast<int>(warps * 32), "StepArgs",
      "llmc::dev::linearQ8<" + std::string(deviceType(s.activation)) + ", " +
          deviceType(s.output) + ", " + deviceType(s.bias ? s.biasType : DType::F32) + ", " +
          (s.halfScales ? "llmc::dev::f16" : "float") + ", " + str(s.n) + ", " + str(s.k) + ", " +
          str(s.groupSize) + ", " + str(tmax) + ", " + str(rows) + ", " + str(warps) + ", " +
          bool01(tiled) + ", " + bool01(s.accumulate) + ", " + bool01(s.bias) +
          (s.norm || s.gated
               ? ", " + bool01(s.norm) + ", " + bool01(s.gated) + ", " + str(s.gate) + ", " +
                     deviceType(s.gammaType) + ">(args, " + floatLiteral(s.eps) + ", " +
                     floatLiteral(s.gammaOffset) + scaleArg + ")"
               : ">(args" + (s.outScale != 1.0f ? ", 0.0f, 0.0f" + scaleArg : "") + ")"));
  k.launch.block = {static_cast<uint32_t>(warps * 32), 1, 1};
  k.launch.grid = {static_cast<uint32_t>(ceilDiv(s.n, warps * rows)), 1, 1};
  if (tiled) {
    k.launch.tokenAxis = 2;
    k.launch.tokensPerBlock = static_cast<uint32_t>(tmax);
  }
  return k;
}

} // namespace llmc::cuda::ops
