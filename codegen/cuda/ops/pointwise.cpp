// The point-wise ops over rows (Add, Mul, Silu, SwiGlu, Gelu): one template,
// the op as a template argument, vector accesses of up to 16 bytes.
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

namespace {

struct PointwiseOp {
  const char *functor; // llmc::dev::Pointwise::<functor> (elementwise.cuh)
  const char *name;    // in the kernel name
};

Expected<PointwiseOp> pointwiseOp(const StepView &v) {
  switch (v.step.op) {
  case fb::OpKind::Add:
    return PointwiseOp{"Add", "add"};
  case fb::OpKind::Mul:
    return PointwiseOp{"Mul", "mul"};
  case fb::OpKind::Silu:
    return PointwiseOp{"Silu", "silu"};
  case fb::OpKind::SwiGlu:
    return PointwiseOp{"SwiGlu", "swiglu"};
  case fb::OpKind::Gelu:
    return v.step.int_params.at(0) == 1 ? PointwiseOp{"GeluTanh", "gelu_tanh"}
                                        : PointwiseOp{"GeluErf", "gelu_erf"};
  default:
    return unsupported(v, "not a point-wise op");
  }
}

} // namespace

Expected<KernelInstance> pointwiseKernel(const StepView &v) {
  LLMC_ASSIGN_OR_RETURN(PointwiseOp op, pointwiseOp(v));
  DType a = v.dtype(v.output());
  int64_t width = v.output().width;
  int vec = vectorWidth(width, {dtypeSize(a)});
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(width / vec, 32), 32, 256));
  KernelInstance k;
  k.name = "llmc_" + std::string(op.name) + "_" + tag(a) + "_w" + str(width);
  k.source = translationUnit(k.name, std::string(op.functor) + " over rows of " + str(width),
                             "elementwise.cuh", "", threads, "StepArgs",
                             "llmc::dev::pointwiseRows<llmc::dev::Pointwise::" +
                                 std::string(op.functor) + ", " + deviceType(a) + ", " +
                                 str(width) + ", " + str(vec) + ", " + str(threads) + ">(args)");
  perRowGrid(k.launch, threads);
  return k;
}

} // namespace llmc::cuda::ops
