// Norm: RMSNorm over rows of the hidden width (Gemma's (offset + gamma)
// scale) or over groups of its features (per-head q/k norms: Qwen3, OLMo2,
// Gemma 3), and LayerNorm with or without bias over rows or groups
// (layer_norm.cuh). One block per token row.
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

namespace {

int64_t elementCount(const fb::TensorT &t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  return n;
}

// Whole rows: one thread per 8 features, 32..1024; groups: one warp per
// group, up to 8 warps.
int normThreads(int64_t width, int64_t group) {
  if (group == width)
    return static_cast<int>(std::clamp<int64_t>(roundUp(ceilDiv(width, 8), 32), 32, 1024));
  return static_cast<int>(std::clamp<int64_t>(32 * (width / group), 32, 256));
}

std::string offsetTag(float offset) { return offset != 0.0f ? "_off" + floatTag(offset) : ""; }

Expected<KernelInstance> layerNormKernel(const StepView &v, const fb::NormParamsT &p) {
  DType a = v.dtype(v.output()), w = v.weightDType(0);
  const int64_t width = v.output().width, group = p.group_width > 0 ? p.group_width : width;
  if (p.bias && (v.numWeights() < 2 || v.weightDType(1) != w))
    return unsupported(v, "a LayerNorm bias of another dtype than its gamma");
  // Shared weights: gamma holds one value per feature of a group, every group alike.
  const bool shared = elementCount(v.weight(0)) == group && group != width;
  const float eps = static_cast<float>(p.eps), offset = static_cast<float>(p.offset);
  const int threads = normThreads(width, group);
  KernelInstance k;
  k.name = "llmc_layer_norm_" + std::string(tag(a)) + "_w" + tag(w) + "_h" + str(width) +
           (group != width ? "_g" + str(group) + (shared ? "s" : "") : "") +
           (p.bias ? "_bias" : "") + "_eps" + floatTag(eps) + offsetTag(offset);
  k.source = translationUnit(
      k.name,
      "LayerNorm hidden " + str(width) + (group != width ? " in groups of " + str(group) : "") +
          (p.bias ? ", with bias" : ""),
      "layer_norm.cuh", "", threads, "StepArgs",
      "llmc::dev::layerNorm<" + std::string(deviceType(a)) + ", " + deviceType(w) + ", " +
          str(width) + ", " + str(group) + ", " + bool01(shared) + ", " + bool01(p.bias) + ", " +
          str(threads) + ">(args, " + floatLiteral(eps) + ", " + floatLiteral(offset) + ")");
  perRowGrid(k.launch, threads);
  return k;
}

Expected<KernelInstance> rmsNormKernelOf(const StepView &v, const fb::NormParamsT &p) {
  DType a = v.dtype(v.output()), w = v.weightDType(0);
  const int64_t width = v.output().width, group = p.group_width > 0 ? p.group_width : width;
  if (p.bias)
    return unsupported(v, "an RMSNorm with a bias");
  const float eps = static_cast<float>(p.eps), offset = static_cast<float>(p.offset);
  const int threads = normThreads(width, group);
  KernelInstance k;
  k.name = "llmc_rms_norm_" + std::string(tag(a)) + "_w" + tag(w) + "_h" + str(width) +
           (group != width ? "_g" + str(group) : "") + "_eps" + floatTag(eps) + offsetTag(offset);
  // Whole rows keep the kernel they always had; groups (gamma of G values,
  // shared by every group, as the CPU's rows of G) are one warp each.
  const std::string call =
      group == width
          ? "llmc::dev::rmsNorm<" + std::string(deviceType(a)) + ", " + deviceType(w) + ", " +
                str(width) + ", " + str(threads) + ">(args, " + floatLiteral(eps) +
                (offset != 0.0f ? ", " + floatLiteral(offset) : "") + ")"
          : "llmc::dev::rmsNormGroups<" + std::string(deviceType(a)) + ", " + deviceType(w) +
                ", " + str(width) + ", " + str(group) + ", " + str(threads) + ">(args, " +
                floatLiteral(eps) + ", " + floatLiteral(offset) + ")";
  k.source = translationUnit(k.name,
                             "RMSNorm hidden " + str(width) +
                                 (group != width ? " in groups of " + str(group) : ""),
                             "elementwise.cuh", "", threads, "StepArgs", call);
  perRowGrid(k.launch, threads);
  return k;
}

} // namespace

Expected<KernelInstance> rmsNormKernel(const StepView &v) {
  const fb::NormParamsT &p = *v.step.params.AsNormParams();
  switch (p.kind) {
  case fb::NormKind::Rms:
    return rmsNormKernelOf(v, p);
  case fb::NormKind::Layer:
    return layerNormKernel(v, p);
  }
  return unsupported(v, std::string("norm kind ") + fb::EnumNameNormKind(p.kind));
}

} // namespace llmc::cuda::ops
