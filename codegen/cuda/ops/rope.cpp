// Rope: in place on [T, heads * D], or heads from a column of a wider buffer
// (q or k of a packed qkv buffer), with the step's RoPE spec (ops.h ropeSpec:
// partial rotary, interleaved pairs, every scaling kind).
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

Expected<KernelInstance> ropeKernel(const StepView &v) {
  DType a = v.dtype(v.output());
  const fb::RopeStepParamsT &p = *v.step.params.AsRopeStepParams();
  int64_t heads = p.heads, dim = p.head_dim;
  int64_t column = p.column;
  int64_t stride = v.output().width;
  bool columns = column != 0 || stride != heads * dim; // a slice of a wider buffer
  KernelInstance k;
  std::string hashTag;
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(heads * dim / 2, 32), 32, 256));
  k.name = "llmc_rope_" + std::string(tag(a)) + "_heads" + str(heads) + "_d" + str(dim) +
           (columns ? "_w" + str(stride) + "_c" + str(column) : "");
  LLMC_ASSIGN_OR_RETURN(std::string spec, ropeSpec(v, *p.rope, dim, "RopeSpec", &hashTag));
  k.name += "_f" + hashTag;
  k.source = translationUnit(
      k.name,
      "RoPE " + str(heads) + " heads of " + str(dim) + " from column " + str(column) + " of " +
          str(stride) + ", theta " + std::to_string(p.rope->theta),
      "elementwise.cuh", spec, threads, "StepArgs",
      "llmc::dev::rope<" + std::string(deviceType(a)) + ", RopeSpec, " + str(heads) + ", " +
          str(dim) + ", " + str(stride) + ", " + str(column) + ", " + str(threads) + ">(args)");
  perRowGrid(k.launch, threads);
  return k;
}

} // namespace llmc::cuda::ops
