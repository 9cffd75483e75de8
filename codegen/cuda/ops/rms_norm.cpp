// Norm: RMSNorm over rows of the hidden width (Gemma's (offset + gamma)
// scale), one block per row.
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

Expected<KernelInstance> rmsNormKernel(const StepView &v) {
  DType a = v.dtype(v.output()), w = v.weightDType(0);
  int64_t hidden = v.output().width;
  const fb::NormParamsT &p = *v.step.params.AsNormParams();
  if (p.kind != fb::NormKind::Rms || p.bias || p.group_width != 0)
    return unsupported(v, "only whole-row RMSNorm without bias");
  float eps = static_cast<float>(p.eps);
  const float offset = static_cast<float>(p.offset);
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(ceilDiv(hidden, 8), 32), 32, 1024));
  KernelInstance k;
  k.name = "llmc_rms_norm_" + std::string(tag(a)) + "_w" + tag(w) + "_h" + str(hidden) + "_eps" +
           floatTag(eps) + (offset != 0.0f ? "_off" + floatTag(offset) : "");
  k.source = translationUnit(
      k.name, "RMSNorm hidden " + str(hidden), "elementwise.cuh", "", threads, "StepArgs",
      "llmc::dev::rmsNorm<" + std::string(deviceType(a)) + ", " + deviceType(w) + ", " +
          str(hidden) + ", " + str(threads) + ">(args, " + floatLiteral(eps) +
          (offset != 0.0f ? ", " + floatLiteral(offset) : "") + ")");
  perRowGrid(k.launch, threads);
  return k;
}

} // namespace llmc::cuda::ops
