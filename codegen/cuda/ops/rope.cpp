// Rope (in place on [T, heads * D]) and RopeColumns (heads from a column of
// a wider buffer), with the model's inverse frequencies as a __device__ table.
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

Expected<KernelInstance> ropeKernel(const StepView &v) {
  DType a = v.dtype(v.output());
  int64_t heads = v.step.int_params.at(0), dim = v.step.int_params.at(1);
  bool columns = v.step.op == fb::OpKind::RopeColumns;
  int64_t column = columns ? v.step.int_params.at(2) : 0;
  int64_t stride = v.output().width;
  KernelInstance k;
  std::string hashTag;
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(heads * dim / 2, 32), 32, 256));
  k.name = "llmc_rope_" + std::string(tag(a)) + "_heads" + str(heads) + "_d" + str(dim) +
           (columns ? "_w" + str(stride) + "_c" + str(column) : "");
  std::string table = invFreqTable(*v.plan.model, dim, "kInvFreq", &hashTag);
  k.name += "_f" + hashTag;
  k.source = translationUnit(
      k.name,
      "RoPE " + str(heads) + " heads of " + str(dim) + " from column " + str(column) + " of " +
          str(stride) + ", theta " + std::to_string(v.plan.model->rope_theta),
      "elementwise.cuh", table, threads, "StepArgs",
      "llmc::dev::rope<" + std::string(deviceType(a)) + ", " + str(heads) + ", " + str(dim) + ", " +
          str(stride) + ", " + str(column) + ", " + str(threads) + ">(args, kInvFreq)");
  perRowGrid(k.launch, threads);
  return k;
}

} // namespace llmc::cuda::ops
