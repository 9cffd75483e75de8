// The kernels the runtime launches by name, outside the programs: the
// synthetic-weight fills, argmax and top-k over logits rows.
#include "cuda/kernel_abi.h"
#include "cuda/ops/ops.h"

namespace llmc::cuda {

using ops::tag;
using ops::translationUnit;

std::string syntheticFillKernelName(DType dtype) {
  return std::string("llmc_synthetic_fill_") + tag(dtype);
}

KernelInstance syntheticFillKernel(DType dtype) {
  KernelInstance k;
  k.name = syntheticFillKernelName(dtype);
  k.source =
      translationUnit(k.name, std::string("synthetic weights, ") + tag(dtype), "elementwise.cuh",
                      "", 256, "SyntheticFillArgs",
                      "llmc::dev::syntheticFill<" + std::string(deviceType(dtype)) + ">(args)");
  k.launch.block = {256, 1, 1};
  return k;
}

KernelInstance syntheticFillQ4Kernel() {
  KernelInstance k;
  k.name = abi::kSyntheticFillQ4Kernel;
  k.source = translationUnit(k.name, "synthetic int4 weights (RTN coding)", "elementwise.cuh", "",
                             256, "SyntheticFillArgs", "llmc::dev::syntheticFillQ4(args)");
  k.launch.block = {256, 1, 1};
  return k;
}

KernelInstance topKKernel() {
  KernelInstance k;
  k.name = abi::kTopKKernel;
  k.source =
      translationUnit(k.name, "top-k sampling candidates of f32 logits rows", "elementwise.cuh", "",
                      1024, "TopKArgs", "llmc::dev::topKRows<1024>(args)");
  k.launch.block = {1024, 1, 1};
  return k;
}

KernelInstance argmaxKernel() {
  KernelInstance k;
  k.name = "llmc_argmax_f32";
  k.source = translationUnit(k.name, "argmax over f32 logits rows", "elementwise.cuh", "", 1024,
                             "ArgmaxArgs", "llmc::dev::argmaxRows<1024>(args)");
  k.launch.block = {1024, 1, 1};
  return k;
}

} // namespace llmc::cuda
