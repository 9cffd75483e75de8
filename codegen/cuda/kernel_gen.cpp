// kernelForStep: the checks every step's kernel shares, then the op's
// generator (codegen/cuda/ops/<op>.cpp) from one table of op kinds.
#include "cuda/kernel_gen.h"

#include "cuda/ops/ops.h"

namespace llmc::cuda {

namespace {

using Generator = Expected<KernelInstance> (*)(const ops::StepView &);

// The generator of every op kind (no default: a new kind fails to build
// until it has a line here).
Generator generatorFor(fb::OpKind op) {
  switch (op) {
  case fb::OpKind::Embedding:
    return ops::embeddingKernel;
  case fb::OpKind::Norm:
    return ops::rmsNormKernel;
  case fb::OpKind::Linear:
  case fb::OpKind::Logits:
  case fb::OpKind::LmHead:
    return ops::linearKernel;
  case fb::OpKind::Rope:
    return ops::ropeKernel;
  case fb::OpKind::Attention:
    return ops::attentionKernel;
  case fb::OpKind::Elementwise:
  case fb::OpKind::Activation:
    return ops::pointwiseKernel;
  }
  return nullptr;
}

// Float weights, but for the quantized parts (int4 qweight I32, scales/zeros
// F16; int8 qweight I8, scales F32/F16); an
// f32 output, or bf16 but for the logits.
Status checkDTypes(const ops::StepView &v) {
  const std::optional<ops::LinearForm> form = ops::linearForm(v.step);
  for (int i = 0; i < v.numWeights(); ++i)
    if (!(form && form->isQuantizedPart(i)) && !ops::isFloat(v.weightDType(i)))
      return ops::unsupported(v, "weight '" + v.weight(i).name + "' has dtype " +
                                     std::string(dtypeName(v.weightDType(i))));
  DType out = v.dtype(v.output());
  bool logits = v.step.op == fb::OpKind::Logits || v.step.op == fb::OpKind::LmHead;
  if (logits ? out != DType::F32 : (out != DType::F32 && out != DType::BF16))
    return ops::unsupported(v, "output dtype " + std::string(dtypeName(out)));
  return Status::ok();
}

} // namespace

const char *deviceType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float";
  case DType::F16:
    return "llmc::dev::f16";
  case DType::BF16:
    return "llmc::dev::bf16";
  default:
    return "unsupported_dtype";
  }
}

Expected<KernelInstance> kernelForStep(const fb::PlanT &plan, const fb::ProgramT &program,
                                       const fb::StepT &step, const ProgramShape &shape) {
  ops::StepView v{plan, program, step, shape};
  Generator generate = generatorFor(step.op);
  if (generate == nullptr)
    return ops::unsupported(v, "unknown op kind");
  LLMC_RETURN_IF_ERROR(checkDTypes(v));
  return generate(v);
}

} // namespace llmc::cuda
