// The point-wise ops over rows (Elementwise Add, Mul; Activation Silu,
// GeluTanh, GeluErf, Relu, and each of them gated: SwiGLU, GeGLU, ReGLU):
// one template, the op as a template argument, vector accesses of up to 16
// bytes.
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

namespace {

struct PointwiseOp {
  const char *functor; // llmc::dev::Pointwise::<functor> (elementwise.cuh)
  const char *name;    // in the kernel name
};

Expected<PointwiseOp> elementwiseOp(const StepView &v, const fb::ElementwiseParamsT &p) {
  switch (p.op) {
  case fb::ElementwiseOp::Add:
    return PointwiseOp{"Add", "add"};
  case fb::ElementwiseOp::Mul:
    return PointwiseOp{"Mul", "mul"};
  }
  return unsupported(v, "unknown elementwise op");
}

Expected<PointwiseOp> activationOp(const StepView &v, const fb::ActivationParamsT &p) {
  if (p.gated) {
    switch (p.activation) {
    case fb::ActivationKind::Silu:
      return PointwiseOp{"SwiGlu", "swiglu"};
    case fb::ActivationKind::GeluTanh:
      return PointwiseOp{"GeGluTanh", "geglu_tanh"};
    case fb::ActivationKind::GeluErf:
      return PointwiseOp{"GeGluErf", "geglu_erf"};
    case fb::ActivationKind::Relu:
      return PointwiseOp{"ReGlu", "reglu"};
    case fb::ActivationKind::None:
      break;
    }
    return unsupported(v, std::string("a gated ") + fb::EnumNameActivationKind(p.activation) +
                              " step");
  }
  switch (p.activation) {
  case fb::ActivationKind::Silu:
    return PointwiseOp{"Silu", "silu"};
  case fb::ActivationKind::GeluTanh:
    return PointwiseOp{"GeluTanh", "gelu_tanh"};
  case fb::ActivationKind::GeluErf:
    return PointwiseOp{"GeluErf", "gelu_erf"};
  case fb::ActivationKind::Relu:
    return PointwiseOp{"Relu", "relu"};
  case fb::ActivationKind::None:
    break;
  }
  return unsupported(v, std::string("activation ") + fb::EnumNameActivationKind(p.activation));
}

Expected<PointwiseOp> pointwiseOp(const StepView &v) {
  if (const fb::ElementwiseParamsT *p = v.step.params.AsElementwiseParams())
    return elementwiseOp(v, *p);
  if (const fb::ActivationParamsT *p = v.step.params.AsActivationParams())
    return activationOp(v, *p);
  return unsupported(v, "not a point-wise op");
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
